"""The modules compiled from their Python source (:mod:`t3._compiled`): built and used after
``pip install -e .``; one built from another version of its source (or with no record of it) is
skipped for the source, with a warning;
``T3_ENGINE=python`` runs every module from source; setup.py compiles exactly the listed modules.
(Their results equal the source's: the same code; the docs records and the oracle tests run on them.)"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from t3 import _compiled

ROOT = Path(__file__).resolve().parents[1]
FORCED_PYTHON = os.environ.get("T3_ENGINE") == "python"


def test_setup_compiles_the_listed_modules():
    spec = importlib.util.spec_from_file_location("t3_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # (setup() runs only as __main__)
    assert mod.compiled() == list(_compiled.COMPILED)
    for m in _compiled.COMPILED:
        assert (ROOT / "src" / (m.replace(".", "/") + ".py")).is_file(), m


def test_the_listed_modules_run_compiled():
    if FORCED_PYTHON:
        pytest.skip("T3_ENGINE=python")
    for m in _compiled.COMPILED:
        importlib.import_module(m)
    assert _compiled.compiled_modules() == list(_compiled.COMPILED), (
        "compiled modules missing or stale: `pip install -e .` builds them (it needs a C compiler)"
    )


def _listed(monkeypatch) -> None:
    """t3.ficco.space (the module _fake stands for) in COMPILED, whatever the build compiles."""
    monkeypatch.setattr(_compiled, "COMPILED", ("t3.ficco.space",))
    monkeypatch.setattr(_compiled, "NOT_COMPILED", ())


def _fake(tmp_path: Path, digest: str | None) -> tuple[Path, Path]:
    """A source, a compiled file beside it and, unless None, the digest the build would write."""
    src = tmp_path / "space.py"
    built = tmp_path / f"space{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    src.write_text("X = 1\n")
    built.write_bytes(b"")
    if digest is not None:
        _compiled.digest_path(built).write_text(digest + "\n")
    return src, built


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_module_compiled_from_its_source_is_left_to_the_usual_import(tmp_path, monkeypatch):
    _listed(monkeypatch)
    monkeypatch.delenv("T3_ENGINE", raising=False)
    src, built = _fake(tmp_path, _sha("X = 1\n"))
    # the modification times do not count, the content does
    os.utime(built, ns=(0, 10**9))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compiled.SourceWhenStale().find_spec("t3.ficco.space", [str(tmp_path)]) is None


@pytest.mark.parametrize(
    ("digest", "why"),
    [(_sha("X = 2\n"), "built from another version of space.py"), (None, "no record of its source")],
)
def test_a_stale_compiled_module_runs_from_source_with_a_warning(tmp_path, monkeypatch, digest, why):
    _listed(monkeypatch)
    monkeypatch.delenv("T3_ENGINE", raising=False)
    src, _ = _fake(tmp_path, digest)
    with pytest.warns(RuntimeWarning, match=why):
        spec = _compiled.SourceWhenStale().find_spec("t3.ficco.space", [str(tmp_path)])
    assert spec is not None and spec.origin == str(src)
    # a module not in the list is never redirected
    assert _compiled.SourceWhenStale().find_spec("t3.ficco.other", [str(tmp_path)]) is None


def test_the_build_records_the_digest_of_each_installed_source():
    if FORCED_PYTHON:
        pytest.skip("T3_ENGINE=python")
    for m in _compiled.COMPILED:
        mod = importlib.import_module(m)
        built = Path(mod.__file__)
        src = built.with_name(m.rpartition(".")[2] + ".py")
        assert (
            _compiled.digest_path(built).read_text().strip() == hashlib.sha256(src.read_bytes()).hexdigest()
        )


def test_t3_engine_python_runs_every_module_from_source(tmp_path, monkeypatch):
    _listed(monkeypatch)
    monkeypatch.setenv("T3_ENGINE", "python")
    src, _ = _fake(tmp_path, _sha("X = 1\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = _compiled.SourceWhenStale().find_spec("t3.ficco.space", [str(tmp_path)])
    assert spec is not None and spec.origin == str(src)
    code = "import t3.experiments.reproduce_ficco; from t3._compiled import compiled_modules; print(compiled_modules())"
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "T3_ENGINE": "python"},
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stderr
