"""The README's set-up commands and the CI script agree: CI runs exactly the README's test command (in a
fresh virtual environment made the way the README says), so a green CI means the README works."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quiet_free(cmd: str) -> str:
    return re.sub(r"\s+", " ", cmd.replace(" -q", "")).strip()


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = next(
        line.strip() for line in readme.splitlines() if line.strip().startswith("pip install torch")
    )
    assert "python -m pytest" in test_cmd
    ci_cmds = [_quiet_free(line) for line in ci.splitlines() if line.startswith("pip install")]
    assert ci_cmds == [_quiet_free(test_cmd)]
    venv = next(line.strip() for line in readme.splitlines() if line.strip().startswith("python3 -m venv"))
    assert "python3 -m venv .venv-ci" in ci and ". .venv-ci/bin/activate" in ci
    assert venv.startswith("python3 -m venv .venv && . .venv/bin/activate")
