"""Modules compiled by ``pip install`` (Cython, from their unchanged Python source; ``setup.py``
lists them): the same code and the same results, faster. Beside each compiled file the build writes
the sha256 of the source it compiled (``<compiled file>.sha256``); a compiled module is used only
while its source still has that digest. Otherwise (the source was edited or checked out since the
build, or the digest is missing) the module runs from source, with a warning, so an edit always
counts. ``T3_ENGINE=python`` runs every module from source (and the engine in Python:
:mod:`t3.sim.engine`)."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from pathlib import Path

# (the list setup.py compiles by Cython from the .py; t3.sim._native, the engine's core, has a Cython
# source of its own and is always built). Empty: no Python module pays for its compilation (below).
COMPILED: tuple[str, ...] = ()

# Modules that were compiled by Cython from their .py and are not any more: none saves CPU time that can
# be measured on the main job (`t3 reproduce t3`) or the tests, and compiling them cost 190-213 s of CPU
# time (9 to 37 s each), four fifths of `pip install -e .` (267 s of CPU, 6 min on 2 shared cores).
# benchmarks/bench_compile.py, CPU time (user + sys) on 2 cores shared with other work (load 1.6-3):
# `t3 reproduce t3 --workers 1` took 15.2 s with all of them and the core compiled, 19.2 s with none,
# 13.9-17.4 s with one of them (two runs of the same case differ by 2-3 s); `--quick`, 3 runs each:
# 3.3 s with none, 3.0-4.8 s with one, 3.5 s with all; a sample of the tests (tests/ficco, test_engine,
# test_t3_mechanism, test_schedule_reuse) took 53.3 s from source, 53.2 s with all of them compiled but
# not the core, 40.5 s with the core too: the core (8-9 s to compile) pays on the tests alone, they do
# not. What they do save is on FiCCO explorations and very large GEMM plans, measured A/B with the ten
# compiled (an older build's files) against from source, interleaved, user CPU time, same machine and load:
# `t3 reproduce ficco --limit 12 --workers 1` 60.1 / 63.0 s compiled, 72.8 / 87.8 s from source (about 25 %
# slower); `t3 run --tokens 4000000 --force` 6.2 / 7.0 s against 7.7 / 8.4 s; `t3 ficco explore` 1.9 / 2.3 s
# against 2.2 / 2.3 s. Their compilation (190-213 s of CPU) is repaid after about ten such FiCCO
# reproductions, not by the main job or the tests, so they stay uncompiled; a user who sweeps FiCCO
# schedules for hours is the case for compiling them again (add them back to COMPILED).
# (A compiled file of one of these left by an older build is never used: SourceWhenStale imports
# the source, and the next build removes it.)
NOT_COMPILED = (
    "t3.sim.schedule",
    "t3.schedules.base",
    "t3.schedules.ficco",
    "t3.ops.gemm",
    "t3.ops.collectives",
    "t3.ficco.space",
    "t3.ficco.losses",
    "t3.ficco.pipeline",
    "t3.ficco.select",
    "t3.ficco.learned",
)


def engine_env() -> str:
    """``T3_ENGINE`` as the project reads it: stripped, in lower case (``Python`` is ``python``)."""
    return os.environ.get("T3_ENGINE", "").strip().lower()


class SourceWhenStale(importlib.abc.MetaPathFinder):
    """Imports a module of :data:`COMPILED` from its ``.py`` when its compiled file was built from
    another source (or its digest is missing), or when ``T3_ENGINE=python``; otherwise leaves the import
    to the usual finders (which prefer the compiled file). A module of :data:`NOT_COMPILED` always
    comes from its ``.py``, even where an older build left a compiled file beside it."""

    def find_spec(self, name, path, target=None):
        if not path or (name not in COMPILED and name not in NOT_COMPILED):
            return None
        leaf = name.rpartition(".")[2]
        for d in path:
            src = Path(d) / f"{leaf}.py"
            if not src.is_file():
                continue
            built = [
                p for s in importlib.machinery.EXTENSION_SUFFIXES if (p := Path(d) / f"{leaf}{s}").is_file()
            ]
            if not built:
                return None
            if name in NOT_COMPILED:  # (left by an older build: its source is what runs now)
                return importlib.util.spec_from_file_location(name, src)
            if engine_env() != "python":
                why = stale(built[0], src)
                if why is None:
                    return None
                warnings.warn(
                    f"{built[0].name} {why}: {name} runs from source (slower, same results); rebuild it "
                    "with `pip install -e .`",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return importlib.util.spec_from_file_location(name, src)
        return None


def digest_path(built: Path) -> Path:
    """Where the build writes the sha256 of the source a compiled file was built from."""
    return built.with_name(built.name + ".sha256")


def source_digest(src: Path) -> str:
    """The digest the build records for a source (its sha256, hex)."""
    return hashlib.sha256(src.read_bytes()).hexdigest()


def stale(built: Path, src: Path) -> str | None:
    """Why the compiled file ``built`` does not stand for ``src`` (None: it does)."""
    try:
        want = digest_path(built).read_text().strip()
    except OSError:
        return f"has no record of its source ({digest_path(built).name} missing)"
    if source_digest(src) != want:
        return f"was built from another version of {src.name}"
    return None


def install() -> None:
    """Put :class:`SourceWhenStale` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, SourceWhenStale) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceWhenStale())


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED` that run compiled in this process (imported ones only)."""
    out = []
    for m in COMPILED:
        mod = sys.modules.get(m)
        if mod is not None and not str(getattr(mod, "__file__", "")).endswith(".py"):
            out.append(m)
    return out
