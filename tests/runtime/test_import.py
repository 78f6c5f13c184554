"""`import t3` stays free of torch; `import t3.runtime` without torch says how to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _py(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_import_t3_does_not_import_torch() -> None:
    r = _py("import sys, t3; assert 'torch' not in sys.modules, 'torch imported'")
    assert r.returncode == 0, r.stderr


def test_runtime_without_torch_says_how_to_install() -> None:
    r = _py("import sys; sys.modules['torch'] = None\nimport t3.runtime")
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "pip install torch==2.13.0" in r.stderr, r.stderr
