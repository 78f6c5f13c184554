"""The memory model's closed forms (t3.sim.memory) and the engine's use of them."""

from __future__ import annotations

import math

import pytest

from t3.config.hardware import load_hardware
from t3.sim.engine import Engine
from t3.sim.memory import HbmTiming
from t3.sim.schedule import ScheduleBuilder

T = HbmTiming(turnaround=0.6, latency_s=400e-9, service_s=8e-9)


def test_turnaround_costs_nothing_for_pure_streams_and_most_at_half():
    assert T.eta(0.0) == 1.0 and T.eta(1.0) == 1.0
    assert T.eta(0.5) == pytest.approx(1 / (1 + 0.6 * 0.5))
    assert T.eta(0.25) == pytest.approx(T.eta(0.75))
    xs = [i / 20 for i in range(11)]
    assert all(T.eta(a) > T.eta(b) for a, b in zip(xs, xs[1:], strict=False))


def test_latency_grows_with_load_and_inverts():
    rhos = [0.0, 0.2, 0.5, 0.8, 0.95, 0.99]
    lats = [T.latency(r) for r in rhos]
    assert lats[0] == pytest.approx(400e-9)
    assert all(a < b for a, b in zip(lats, lats[1:], strict=False))
    assert T.latency(1.0) == math.inf
    for r in rhos:
        assert T.rho_at(T.latency(r)) == pytest.approx(r, abs=1e-12)
    # M/D/1: at rho = 0.5 a request waits half a service time
    assert T.latency(0.5) - T.latency_s == pytest.approx(T.service_s / 2)


def _hw(**hbm):
    base = {"hbm.turnaround": 0.6, "hbm.latency_s": 400e-9, "hbm.service_s": 8e-9, "hbm.efficiency": 1.0}
    base.update({f"hbm.{k}": v for k, v in hbm.items()})
    return load_hardware("paper-80cu").with_overrides(base)


def _run(hw, specs):
    """specs: (key, read bytes, write bytes, window) ops on GPU 0's HBM, all starting at t=0."""
    b = ScheduleBuilder("mem", hw, 2, symmetric=True)
    for key, rd, wr, win in specs:
        b.add(0, key, kind="x", cat="x", work=[(b.hbm(0), rd), (b.hbm_w(0), wr)], window=win)
    res = Engine().run(b.build())
    return {op.key: res.end[op.id] for op in res.schedule.ops}


def test_pure_read_and_pure_write_streams_run_at_full_rate():
    hw = _hw(latency_s=0.0)  # no window limit: only the turnaround acts
    c = hw.hbm.effective_Bps
    t = _run(hw, [("r", 1e9, 0.0, 0.0)])
    assert t["r"] == pytest.approx(1e9 / c, rel=1e-9)
    t = _run(hw, [("w", 0.0, 1e9, 0.0)])
    assert t["w"] == pytest.approx(1e9 / c, rel=1e-9)


def test_mixed_read_write_stream_loses_the_turnaround():
    hw = _hw(latency_s=0.0)
    c = hw.hbm.effective_Bps
    t = _run(hw, [("rw", 0.5e9, 0.5e9, 0.0)])
    assert t["rw"] == pytest.approx(1e9 / (c * T.eta(0.5)), rel=1e-6)
    # two pure streams of opposite direction together form the same mix
    t = _run(hw, [("r", 0.5e9, 0.0, 0.0), ("w", 0.0, 0.5e9, 0.0)])
    assert max(t.values()) == pytest.approx(1e9 / (c * T.eta(0.5)), rel=1e-6)


def test_a_closed_stream_alone_moves_window_over_loaded_latency():
    hw = _hw()
    c = hw.hbm.effective_Bps
    w = 200e3  # bytes in flight: W / L0 = 0.5 TB/s < C, so the window limits
    t = _run(hw, [("r", 1e9, 0.0, w)])
    x = 1e9 / t["r"]
    # closed form: X = W / L(X / C), solved independently by fixed-point iteration
    y = w / T.latency_s
    for _ in range(200):
        y = 0.5 * y + 0.5 * w / T.latency(y / c)
    assert x == pytest.approx(y, rel=1e-6)
    assert x < w / T.latency_s  # slower than the unloaded window rate: its own queueing


def test_saturated_memory_is_shared_in_proportion_to_bytes_in_flight():
    hw = _hw()
    # both windows far above what the memory can serve: at saturation shares follow the windows
    t = _run(hw, [("a", 1e9, 0.0, 4e6), ("b", 1e9, 0.0, 1e6)])
    c = hw.hbm.effective_Bps

    def served(window: float) -> float:  # closed form: X = W / L(X / C), by bisection
        lo, hi = 0.0, c
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if window / T.latency(mid / c) > mid else (lo, mid)
        return lo

    both, alone = served(5e6), served(1e6)
    assert both > 0.99 * c  # saturated
    # while both run, a moves 4x the bytes of b (equal latency, Little's law)
    assert t["a"] == pytest.approx(1e9 / (0.8 * both), rel=1e-6)
    assert t["b"] == pytest.approx(t["a"] + (1e9 - 0.2 * both * t["a"]) / alone, rel=1e-6)


def test_an_open_stream_keeps_its_pace_while_memory_keeps_up():
    hw = _hw()
    b = ScheduleBuilder("mem", hw, 2, symmetric=True)
    link = b.path(0, 1)
    b.add(0, "upd", kind="x", cat="x", work=[(b.hbm_w(0), 1e8)] + [(r, 1e8) for r in link])
    b.add(0, "gemm", kind="x", cat="x", work=[(b.hbm(0), 1e8)], window=2e6)
    res = Engine().run(b.build())
    end = {op.key: res.end[op.id] for op in res.schedule.ops}
    assert end["upd"] == pytest.approx(1e8 / hw.link.bandwidth_Bps, rel=1e-6)
