"""Provenance of an output: which t3 (version, git commit), which hardware (content hash), which command.

Every JSON, Parquet and report output of the ``t3`` command records :func:`provenance`. The git commit
is read only when the imported package sits in a git checkout that tracks it (an installed wheel, or
a package inside some other repository, has none: ``None``), with ``-dirty`` appended when tracked
files differ from the commit. The hardware hash is the sha256 of the canonical JSON of the resolved
hardware (preset plus overrides), so two outputs were made on the same machine model exactly when
their hashes are equal, whatever the preset was called.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

_command: list[str] | None = None


def set_command(argv: list[str]) -> None:
    """Record the command line of this process (the ``t3`` entry point calls it with its arguments)."""
    global _command
    # (an argument that is not valid text, a file name's undecodable bytes, is kept escaped: the command is
    # written into JSON and Parquet metadata, which take UTF-8 only)
    _command = ["t3", *(a.encode("utf-8", "backslashreplace").decode("utf-8") for a in argv)]


def command() -> str:
    """This process's command line, shell-quoted (``t3 run --tp 8``)."""
    argv = _command if _command is not None else [Path(sys.argv[0]).name or "python", *sys.argv[1:]]
    return shlex.join(argv)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None


@cache
def git_commit() -> str | None:
    """The commit of the git checkout the ``t3`` package was imported from (``-dirty`` if tracked
    files changed), or ``None`` (not a checkout, git missing, or any failure)."""
    pkg = Path(__file__).resolve().parent
    tracked = _git(["ls-files", "--error-unmatch", "__init__.py"], pkg)
    if tracked is None or tracked.returncode != 0:
        return None
    head = _git(["rev-parse", "HEAD"], pkg)
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return None
    dirty = _git(["diff", "--quiet", "HEAD", "--"], pkg)
    return head.stdout.strip() + ("-dirty" if dirty is not None and dirty.returncode == 1 else "")


def version() -> str:
    import t3

    return t3.__version__


def hardware_hash(hw: Any) -> str:
    """sha256 of the canonical JSON of a resolved :class:`t3.config.hardware.Hardware`."""
    text = json.dumps(hw.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def run_fields() -> dict[str, Any]:
    """The fields that do not depend on the hardware: version, commit, command line."""
    return {"t3_version": version(), "git_commit": git_commit(), "command": command()}


def provenance(hardware: Any = None) -> dict[str, Any]:
    """``{t3_version, git_commit, command, hardware_sha256}``; ``hardware`` is one resolved Hardware,
    or a ``{name: Hardware}`` mapping (outputs made on several presets: one hash each)."""
    out = run_fields()
    if isinstance(hardware, dict):
        out["hardware_sha256"] = {k: hardware_hash(v) for k, v in hardware.items()}
    elif hardware is not None:
        out["hardware_sha256"] = hardware_hash(hardware)
    return out
