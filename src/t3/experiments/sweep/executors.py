"""Executors: run batches of points and hand back results as they finish (not in order).

- :class:`InProcess` (``--workers 1``): in this process, one point after the other;
- :class:`LocalPool` (default): a local process pool (``concurrent.futures``); a worker that dies
  (killed, out of memory) breaks the pool: the pool is restarted and the points that were in flight
  are retried one at a time with nothing else running, so a point that kills its worker again is
  identified exactly and recorded as an error, and no other point is lost;
- :class:`DaskExecutor` (``--executor dask``): a ``dask.distributed`` client on a ``LocalCluster``
  (no ``--scheduler``) or on a running scheduler at an address (optional extra ``dist``). Dask
  itself reschedules the tasks of a lost worker.

Every executor calls :func:`run_batch` (module-level, picklable) and yields lists of per-point results
(``{"i", "status", "error", "outputs", "elapsed_s", "worker"}``). Results do not depend on the executor.

Ctrl-C (:func:`deferred_interrupt`): while a sweep runs, SIGINT only sets a flag, and the executors
raise ``KeyboardInterrupt`` at one known point (:func:`check_stop`, between batches), never inside the
pool's machinery or a journal write; a second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from t3.errors import ConfigError
from t3.experiments.sweep.store import RECORD_COLUMN

Batch = list[tuple[int, dict[str, Any]]]  # (task-local index, run_point dict)
Result = dict[str, Any]

EXECUTORS = ("local", "dask")

_STOP = threading.Event()  # set by SIGINT while deferred_interrupt() is in force


class deferred_interrupt:  # noqa: N801 (a context manager used like a function)
    """While in force (in the main thread only), Ctrl-C sets a flag that :func:`check_stop` turns into a
    ``KeyboardInterrupt`` at a known point; a second Ctrl-C before that raises at once."""

    def __enter__(self) -> None:
        self._prev = None
        _STOP.clear()
        if threading.current_thread() is threading.main_thread():
            self._prev = signal.signal(signal.SIGINT, self._on_sigint)

    @staticmethod
    def _on_sigint(signum: int, frame: Any) -> None:
        if _STOP.is_set():
            raise KeyboardInterrupt
        _STOP.set()

    def __exit__(self, *exc: Any) -> None:
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
        _STOP.clear()


def check_stop() -> None:
    """Raise ``KeyboardInterrupt`` here if Ctrl-C was pressed (:class:`deferred_interrupt`)."""
    if _STOP.is_set():
        _STOP.clear()
        raise KeyboardInterrupt


def run_one(i: int, point: dict[str, Any]) -> Result:
    """Simulate one point; a failure becomes an error result (one line: exception type and message)."""
    from t3.experiments.sweep.spec import run_resolved

    t0 = time.perf_counter()
    outputs = None
    try:
        rec = run_resolved(point)
        outputs = output_columns(rec)  # flattened here, in parallel, not in the parent
        status, error = "ok", None
    except Exception as err:  # noqa: BLE001 - any failure of one point is recorded, the sweep goes on
        msg = " ".join(str(err).split())
        status, error = "error", f"{type(err).__name__}: {msg}" if msg else type(err).__name__
    return {
        "i": i,
        "status": status,
        "error": error,
        "outputs": outputs,
        "elapsed_s": time.perf_counter() - t0,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


IDENTITY = ("model", "tp", "sublayer", "config", "hardware", "tokens")  # also input columns


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def output_columns(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's output columns: nested dicts flattened to dotted names (``breakdown_s.gemm``), the
    input echo (model, tp, ...) left out, and the whole record as canonical JSON."""
    out = _flatten({k: v for k, v in rec.items() if k not in IDENTITY})
    out[RECORD_COLUMN] = json.dumps(rec, sort_keys=True)
    return out


def run_batch(batch: Batch) -> list[Result]:
    return [run_one(i, p) for i, p in batch]


def failed(batch: Batch, error: str) -> list[Result]:
    return [
        {"i": i, "status": "error", "error": error, "outputs": None, "elapsed_s": 0.0, "worker": None}
        for i, _ in batch
    ]


def _noop() -> None:
    pass


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group; only the parent handles it (flush, compact, exit)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a pool worker outlives a parent killed with SIGKILL; exit when the parent is gone
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="t3-parent-watch").start()


class InProcess:
    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = 1

    def map_unordered(self, batches: Sequence[Batch]) -> Iterator[list[Result]]:
        for b in batches:
            check_stop()
            yield run_batch(b)

    def close(self) -> None:
        pass


class LocalPool:
    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_init)
        # start the workers now, before the progress bar's thread exists (fork with threads is unsafe)
        pool.submit(_noop).result()
        return pool

    def map_unordered(self, batches: Sequence[Batch]) -> Iterator[list[Result]]:
        queue: deque[Batch] = deque(batches)
        suspects: deque[tuple[int, dict[str, Any]]] = deque()  # in flight when a worker died
        window = 4 * self.workers
        if self._pool is None:
            self._pool = self._new_pool()
        running: dict[Future, Batch] = {}
        while queue or suspects or running:
            if suspects and not running:
                # quarantine: one suspect at a time, nothing else in flight, so a death names its point
                pt = suspects.popleft()
                try:
                    yield self._pool.submit(run_batch, [pt]).result()
                except BrokenProcessPool:
                    self._restart()
                    yield failed([pt], "WorkerLost: the worker process died while running this point")
                continue
            check_stop()
            while queue and not suspects and len(running) < window:
                b = queue.popleft()
                running[self._pool.submit(run_batch, b)] = b
            done, _ = wait(
                running, timeout=0.1, return_when=FIRST_COMPLETED
            )  # (a Ctrl-C is seen within 0.1 s)
            broken = False
            for f in done:
                b = running.pop(f)
                try:
                    yield f.result()
                except BrokenProcessPool:
                    broken = True
                    suspects.extend(b)
            if broken:  # the pool is unusable: every batch still in flight is lost too
                for b in running.values():
                    suspects.extend(b)
                running.clear()
                self._restart()

    def _restart(self) -> None:
        assert self._pool is not None
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()

    def close(self) -> None:
        if self._pool is not None:
            # wait for the (short) batches in flight: a pool abandoned with wait=False races the
            # interpreter's exit (its management thread writes to a closed pipe after Ctrl-C)
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskExecutor:
    name = "dask"

    def __init__(self, workers: int, scheduler: str | None = None, processes: bool = True) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ConfigError(
                "--executor dask: dask.distributed is not installed (install the 'dist' extra: pip install 't3[dist]')"
            ) from None
        self._cluster = None
        if scheduler:
            try:
                self._client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError) as err:
                raise ConfigError(f"--scheduler: cannot connect to '{scheduler}': {err}") from None
        else:
            self._cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=None,
            )  # fmt: skip
            self._client = Client(self._cluster)
        self.workers = len(self._client.scheduler_info().get("workers", {})) or workers

    def map_unordered(self, batches: Sequence[Batch]) -> Iterator[list[Result]]:
        from dask.distributed import as_completed

        pending = deque(batches)
        window = max(8, 4 * self.workers)
        futures = {}
        ac = as_completed()
        while pending and len(futures) < window:
            b = pending.popleft()
            f = self._client.submit(run_batch, b, pure=False)
            futures[f.key] = b
            ac.add(f)
        for f in ac:
            b = futures.pop(f.key)
            try:
                res = f.result()
            except Exception as err:  # noqa: BLE001 - e.g. KilledWorker after repeated worker deaths
                res = failed(b, f"{type(err).__name__}: {' '.join(str(err).split())}")
            f.release()
            yield res
            if pending:
                nb = pending.popleft()
                nf = self._client.submit(run_batch, nb, pure=False)
                futures[nf.key] = nb
                ac.add(nf)

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


MAX_WORKERS = 256  # one process each; more overflowed the pool's C int or exhausted the process table


def check_executor(kind: str, workers: int | None, scheduler: str | None = None) -> None:
    """Reject bad executor arguments (one-line error naming the option) before any work."""
    if kind not in EXECUTORS:
        raise ConfigError(f"--executor: unknown executor '{kind}' (available: {', '.join(EXECUTORS)})")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers: must be >= 1, got {workers}")
    if workers is not None and workers > MAX_WORKERS:
        raise ConfigError(f"--workers: must be <= {MAX_WORKERS} (one process each), got {workers}")
    if scheduler and kind != "dask":
        raise ConfigError("--scheduler: only valid with --executor dask")


def make_executor(kind: str, workers: int | None, scheduler: str | None = None, **kw: Any):
    from t3.experiments.parallel import default_workers

    check_executor(kind, workers, scheduler)
    n = default_workers() if workers is None else workers
    if kind == "dask":
        return DaskExecutor(n, scheduler, **kw)
    return InProcess() if n == 1 else LocalPool(n)
