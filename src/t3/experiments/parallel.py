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


def _serve(conn: Any, module: str, inherited: list[Any]) -> None:
    """A :class:`WarmPool` process: import ``module`` at once, then run ``(function name, args)`` jobs
    received on ``conn`` until ``None`` comes or the pipe closes; each answer is ``(True, result)`` or
    ``(False, error text)``. ``inherited``: the parent's ends of its earlier processes' pipes, which
    the fork copied here; closed, so that those processes see the parent close them."""
    import importlib
    import signal
    import traceback

    for c in inherited:
        c.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        mod, failed = importlib.import_module(module), ""
    except Exception:  # noqa: BLE001 - every job answers with it
        mod, failed = None, traceback.format_exc()
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone
            return
        if job is None:  # no more jobs
            return
        name, args = job
        try:
            answer = (False, failed) if failed else (True, getattr(mod, name)(*args))
        except Exception:  # noqa: BLE001 - passed to the parent, which raises it
            answer = (False, traceback.format_exc())
        try:
            conn.send(answer)
        except OSError:  # the parent is gone or stopped listening
            return


class WarmPool:
    """Processes forked now that import ``module`` (e.g. the figures' matplotlib) while the caller goes
    on with other work; :meth:`map` later runs that module's functions on them, results in input order.

    It exists to take a slow import off the critical path: started before a single-threaded phase (a
    size guard, validation), the import runs on an otherwise idle core. No threads are created (pipes,
    one per process), so forking other pools afterwards stays safe. Where ``fork`` is not available the
    pool has no processes and :meth:`map` runs the functions in this process."""

    def __init__(self, module: str, workers: int) -> None:
        import multiprocessing as mp

        self.module = module
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        if workers <= 1 or "fork" not in mp.get_all_start_methods():
            return
        ctx = mp.get_context("fork")
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, module, list(self._conns)), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    def map(self, name: str, jobs: Sequence[tuple]) -> list[Any]:
        """``[module.name(*args) for args in jobs]``; jobs go to whichever process is free, in order."""
        import importlib
        from multiprocessing.connection import wait

        if not self._conns:
            fn = getattr(importlib.import_module(self.module), name)
            return [fn(*args) for args in jobs]
        out: list[Any] = [None] * len(jobs)
        todo = list(enumerate(jobs))[::-1]
        busy: dict[Any, int] = {}
        for c in self._conns:
            if todo:
                i, args = todo.pop()
                c.send((name, args))
                busy[c] = i
        while busy:
            for c in wait(list(busy)):
                i = busy.pop(c)
                try:
                    ok, value = c.recv()
                except EOFError:
                    raise RuntimeError(f"{self.module}.{name}: a worker process died") from None
                if not ok:
                    raise RuntimeError(f"{self.module}.{name} failed in a worker process:\n{value}")
                out[i] = value
                if todo:
                    j, args = todo.pop()
                    c.send((name, args))
                    busy[c] = j
        return out

    def close(self) -> None:
        """End the processes: each is told to stop (or finds its pipe closed) and returns."""
        for c in self._conns:
            try:
                c.send(None)
            except OSError:  # that process is gone already
                pass
            c.close()
        for p in self._procs:
            p.join()
        self._conns, self._procs = [], []

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
