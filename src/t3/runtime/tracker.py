"""Software tile tracker: the analogue of T3's hardware tracker.

The producer reports every finished tile of a region; when a region's count reaches its
expected number of tiles the region is *ready* and whoever waits for it (the communication
thread for GEMM -> collective, the GEMM loop for all-gather -> GEMM) is woken. A failure on
either side aborts the tracker so that the other side stops waiting at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence


class TrackerAborted(RuntimeError):
    """Raised to a waiter when the other side of the tracker failed."""


class TileTracker:
    def __init__(self, expected: Sequence[int]) -> None:
        if any(e < 1 for e in expected):
            raise ValueError("expected: every region needs at least one tile")
        self._expected = list(expected)
        self._count = [0] * len(expected)
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._added = 0  # tiles counted so far: waiting is bounded by time without progress
        self.wait_s = 0.0  # time spent blocked in wait(), summed over waiters

    @property
    def regions(self) -> int:
        return len(self._expected)

    def add(self, region: int, tiles: int = 1) -> None:
        """Count ``tiles`` finished tiles of ``region``; wake waiters when it becomes ready."""
        with self._cond:
            if self._error is not None:
                raise TrackerAborted(f"stopped because the other side failed: {self._error}")
            self._count[region] += tiles
            self._added += tiles
            if self._count[region] > self._expected[region]:
                raise RuntimeError(
                    f"tracker: region {region} got more tiles than its {self._expected[region]}"
                )
            if self._count[region] == self._expected[region]:
                self._cond.notify_all()

    def ready(self, region: int) -> bool:
        with self._cond:
            return self._count[region] == self._expected[region]

    def abort(self, error: BaseException) -> None:
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()

    def wait(self, region: int, timeout: float, what: str) -> None:
        """Block until ``region`` is ready; raise if the tracker is aborted or no tile at all was
        counted for ``timeout`` seconds (a long GEMM that makes progress never times out)."""
        t0 = time.perf_counter()
        deadline = t0 + timeout
        with self._cond:
            seen = self._added
            while self._count[region] < self._expected[region]:
                if self._error is not None:
                    raise TrackerAborted(f"{what}: stopped because the other side failed: {self._error}")
                now = time.perf_counter()
                if self._added != seen:
                    seen, deadline = self._added, now + timeout
                left = deadline - now
                if left <= 0:
                    raise TimeoutError(f"{what}: region {region} not ready, no progress for {timeout:.1f} s")
                self._cond.wait(min(left, 0.05 + timeout / 10))
            self.wait_s += time.perf_counter() - t0
