"""The software tile tracker on its own: readiness, abort, and progress-bounded waiting."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("torch")

from t3.runtime.producer import tile_grid  # noqa: E402
from t3.runtime.tracker import TileTracker, TrackerAborted  # noqa: E402


def test_region_ready_only_when_all_its_tiles_counted() -> None:
    tr = TileTracker([2, 3])
    tr.add(1)
    tr.add(1)
    assert not tr.ready(1)
    tr.add(1)
    assert tr.ready(1) and not tr.ready(0)
    with pytest.raises(RuntimeError, match="more tiles"):
        tr.add(1)


def test_wait_wakes_on_completion_from_another_thread() -> None:
    tr = TileTracker([4])
    t = threading.Thread(target=lambda: [tr.add(0) for _ in range(4)])
    t.start()
    tr.wait(0, timeout=30.0, what="test")
    t.join(timeout=30)
    assert tr.ready(0)


def test_abort_wakes_waiter_and_stops_producer() -> None:
    tr = TileTracker([1])
    threading.Timer(0.05, lambda: tr.abort(RuntimeError("peer gone"))).start()
    with pytest.raises(TrackerAborted, match="peer gone"):
        tr.wait(0, timeout=30.0, what="test")
    with pytest.raises(TrackerAborted):
        tr.add(0)


def test_wait_without_progress_times_out() -> None:
    tr = TileTracker([1])
    with pytest.raises(TimeoutError, match="no progress"):
        tr.wait(0, timeout=0.2, what="test")


def test_progress_elsewhere_extends_the_wait() -> None:
    # region 1 becomes ready only after region 0's 6 tiles, each 0.25 s apart: 1.75 s in all, far
    # beyond the 1 s timeout, but there is progress all the time
    tr = TileTracker([6, 1])
    stop = threading.Event()

    def produce() -> None:
        for _ in range(6):
            if stop.wait(0.25):
                return
            tr.add(0)
        tr.add(1)

    t = threading.Thread(target=produce)
    t.start()
    try:
        tr.wait(1, timeout=1.0, what="test")
    finally:
        stop.set()
        t.join(timeout=30)
    assert tr.ready(1)


@pytest.mark.parametrize(
    ("rows", "cols", "bm", "bn"), [(10, 7, 3, 4), (8, 8, 8, 8), (5, 5, 256, 256), (1, 9, 1, 2)]
)
def test_tile_grid_covers_block_exactly_once(rows: int, cols: int, bm: int, bn: int) -> None:
    seen = [[0] * cols for _ in range(rows)]
    for t in tile_grid(rows, cols, bm, bn):
        assert 0 < t.rows <= bm and 0 < t.cols <= bn
        for i in range(t.r0, t.r1):
            for j in range(t.c0, t.c1):
                seen[i][j] += 1
    assert all(v == 1 for row in seen for v in row)
