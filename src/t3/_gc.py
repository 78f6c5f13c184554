"""The cycle collector's setting for t3's own processes (the ``t3`` command and its pool workers).

A simulation allocates many short-lived objects and the process keeps long-lived caches (GEMM plans,
built schedules, fillings, signatures). With CPython's default thresholds ``(700, 10, 10)`` the older
generations are collected every 7,000 and 70,000 allocations and each such collection walks those
caches again (``python benchmarks/bench_reproduce.py --gc`` times ``t3 reproduce t3`` with both
settings, interleaved: 1.1-1.4x faster with the one below on a 2-core machine). The youngest generation keeps
its default, so the cyclic garbage of a simulation is still collected young; the older ones are
collected a hundred times less often. Library callers keep their own setting: only the command sets it.
"""

from __future__ import annotations

import gc

# (youngest: CPython's default; older two: every 1,000 collections of the one below instead of 10)
THRESHOLDS = (700, 1000, 1000)


def tune() -> None:
    """Set :data:`THRESHOLDS` for this process (children forked later inherit it)."""
    gc.set_threshold(*THRESHOLDS)
