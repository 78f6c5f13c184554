"""Where the quoted numbers come from.

*Live* sources are recomputed every time the blocks are generated or checked (seconds): the T3
reproduction, single ``t3 run`` records, ``t3 validate``, script output. *Recorded* sources take
minutes (the FiCCO reproduction, the selector ceiling benchmark): their key figures are stored in
``docs/data/<name>.json`` together with a fingerprint of the model code and data that produced them
(:mod:`t3.docs.fingerprint`); blocks are rendered from the record, and ``--check`` fails when the
record's fingerprint differs from the current code's (the record is then stale: rerun its command).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from t3.docs.fingerprint import MODEL_PACKAGES, differences, fingerprint
from t3.errors import T3Error


class SourceError(T3Error):
    """A source cannot be read or produced."""


@dataclass(frozen=True)
class Recorded:
    """A source whose key figures are recorded in ``docs/data/<name>.json``."""

    name: str
    command: str  # the command whose output is recorded, as a reader would run it
    entries: tuple[str, ...]  # modules (or scripts) whose model code the figures depend on
    data_files: tuple[str, ...]  # data files read (relative to the repository root)
    make: Callable[[Context, Path | None], dict]  # (context, output of the command or None: run it)
    packages: tuple[str, ...] = MODEL_PACKAGES  # imported packages whose code counts

    def path(self, root: Path) -> Path:
        return root / "docs" / "data" / f"{self.name}.json"


class Context:
    """Caches every source for one generation or check."""

    def __init__(self, root: Path, workers: int | None = None, t3_results: Path | None = None) -> None:
        self.root = root
        self.workers = workers
        self.t3_results = t3_results
        self._runs: dict[str, dict] = {}
        self._records: dict[str, dict] = {}

    # -- live sources ----------------------------------------------------------------------------
    @cached_property
    def t3_doc(self) -> dict[str, Any]:
        """The ``t3 reproduce t3`` document (the paper's evaluation on ``paper-80cu``)."""
        if self.t3_results is not None:
            f = self.t3_results / "t3.json"
            if not f.is_file():
                raise SourceError(f"--t3-results: no t3.json in {self.t3_results}")
            return json.loads(f.read_text())
        from t3.experiments.reproduce_t3 import Plan, reproduce

        return reproduce(Plan(), workers=self.workers, progress=False)

    def run(self, **kw: Any) -> dict[str, Any]:
        """A ``t3 run`` record (``t3.api.run``), cached by its arguments."""
        from t3.api import run

        k = json.dumps(kw, sort_keys=True)
        if k not in self._runs:
            self._runs[k] = run(**kw)
        return self._runs[k]

    @cached_property
    def validation(self) -> tuple[list, list]:
        """``t3 validate`` on the whole dataset: (outcomes, summary)."""
        from t3.validation import load_dataset, run, summarize

        outcomes = run(load_dataset())
        return outcomes, summarize(outcomes)

    def script_output(self, script: str, args: tuple[str, ...] = (), drop: str | None = None) -> str:
        """Standard output of ``python <script> <args>`` run from the repository root (``drop``: a
        regular expression of lines to leave out, such as a wall time)."""
        env = dict(os.environ, PYTHONPATH=str(self.root / "src"))
        p = subprocess.run([sys.executable, script, *args], cwd=self.root, env=env, capture_output=True,
                           text=True, timeout=1200)  # fmt: skip
        if p.returncode != 0:
            raise SourceError(f"{script} exited with status {p.returncode}: {p.stderr.strip()[-500:]}")
        lines = p.stdout.splitlines()
        if drop:
            lines = [x for x in lines if not re.search(drop, x)]
        return "\n".join(lines).strip("\n")

    def call_output(self, fn: Callable[[], Any]) -> str:
        buf = io.StringIO()
        with redirect_stdout(buf):
            fn()
        return buf.getvalue().strip("\n")

    # -- recorded sources ------------------------------------------------------------------------
    def record(self, spec: Recorded) -> dict[str, Any]:
        if spec.name not in self._records:
            f = spec.path(self.root)
            if not f.is_file():
                raise SourceError(f"{f.relative_to(self.root)} is missing: record it with "
                                  f"`python -m t3.docs --record {spec.name}`")  # fmt: skip
            self._records[spec.name] = json.loads(f.read_text())
        return self._records[spec.name]["data"]

    def make_record(self, spec: Recorded, given: Path | None) -> dict[str, Any]:
        """Produce the record of ``spec`` (from ``given``, the command's output, or by running the
        command) and keep it for rendering; :func:`write_record` stores it."""
        from t3.provenance import version

        data = spec.make(self, given)
        rec = {
            "name": spec.name,
            "command": spec.command,
            "t3_version": version(),
            "note": "key figures quoted by README.md and docs/*.md; written by `python -m t3.docs --record "
            f"{spec.name}`; the fingerprint is that of the code and data that produced them",
            "fingerprint": fingerprint(self.root, spec.entries, spec.data_files, spec.packages),
            "data": data,
        }
        self._records[spec.name] = rec
        return rec

    def stale_record(self, spec: Recorded) -> list[str]:
        """Why the stored record of ``spec`` no longer describes the current code (empty: fresh)."""
        f = spec.path(self.root)
        if not f.is_file():
            return [f"{f.relative_to(self.root)} is missing"]
        rec = json.loads(f.read_text())
        return differences(
            rec["fingerprint"], fingerprint(self.root, spec.entries, spec.data_files, spec.packages)
        )


def write_record(root: Path, spec: Recorded, rec: dict[str, Any]) -> None:
    f = spec.path(root)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(rec, indent=1, sort_keys=True, allow_nan=False) + "\n")


def temp_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="t3-docs-"))
