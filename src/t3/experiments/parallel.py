"""Run many independent simulation points, in order, on a local process pool, with a progress bar.

This is the minimal executor every experiment uses (reproductions, FiCCO scenarios); ``t3 sweep``
builds its resumable store and other executors on the same ``run_point`` contract.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def progress_bar(disable: bool = False, transient: bool = False) -> Progress:
    """The progress bar of every long command: on stderr (so stdout and JSON output stay clean, and the
    bar shows when stdout is redirected), items done, elapsed time, ETA."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True), disable=disable,
        transient=transient,
    )  # fmt: skip


def pmap(
    fn: Callable[[T], R], items: Sequence[T] | Iterable[T], *, workers: int | None = None,
    desc: str = "points", progress: bool = True, chunksize: int | None = None,
) -> list[R]:  # fmt: skip
    """``[fn(x) for x in items]`` on ``workers`` processes (1 = in this process), results in input order.

    ``fn`` must be a module-level function (picklable). Deterministic: the output does not depend on
    the number of workers.
    """
    items = list(items)
    workers = default_workers() if workers is None else workers
    with progress_bar(disable=not progress) as bar:
        task = bar.add_task(desc, total=len(items))
        if workers <= 1 or len(items) <= 1:
            out = []
            for x in items:
                out.append(fn(x))
                bar.advance(task)
            return out
        cs = chunksize or max(1, len(items) // (workers * 8))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            out = []
            for r in pool.map(fn, items, chunksize=cs):
                out.append(r)
                bar.advance(task)
            return out


def run_point(point: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point: keys of :func:`t3.api.run` (``model, tp, sublayer, config, hardware, tokens,
    hw_overrides``) plus ``options`` (fields of :class:`t3.schedules.RunOptions`). Returns the record."""
    from t3.api import run
    from t3.schedules import RunOptions

    p = dict(point)
    opts = RunOptions(**p.pop("options", {}))
    return run(**p, options=opts)
