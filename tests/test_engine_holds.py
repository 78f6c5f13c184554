"""Exclusive CU partitions (:attr:`t3.sim.schedule.Resource.parent`): while any op of a kernel that runs on
one is in progress, its CUs leave the GPU's pool. Checked against closed forms, against the Python engine
(the compiled core, bit for bit, on random schedules with holds), and through the schedule builder."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import t3.sim.engine as engine
from t3.config.hardware import load_hardware
from t3.errors import ScheduleError
from t3.sim.engine import Engine
from t3.sim.schedule import Op, Policy, Resource, Schedule, ScheduleBuilder

FORCED_PYTHON = os.environ.get("T3_ENGINE") == "python"


def _pool_and_kernel(cus: float, held: float, work: float, kernel_s: float, delay: float = 0.0):
    """A GEMM-like op wanting every CU (``work`` CU-seconds) beside a kernel of ``held`` exclusive CUs
    that is busy ``kernel_s`` seconds after a delay ``delay`` (its CU work on its partition alone)."""
    res = [Resource("cu", cus, "cu", 0), Resource("part", held, "cu-part", 0, Policy(), None, 0)]
    ops = [
        Op(0, 0, "gemm", "gemm", "gemm", [(0, work)], [(0, cus)], 0.0, [], {}),
        Op(1, 0, "comm", "comm", "rs", [(1, held * kernel_s)], [], delay, [], {}),
    ]
    return Schedule("holds", ops, res, 1, [0])


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("cus,held,work,kernel_s,delay", [(132, 20, 264.0, 1.0, 0.0), (80, 16, 40.0, 0.25, 0.1),
                                                          (10, 9, 50.0, 2.0, 0.5)])  # fmt: skip
def test_the_pool_loses_the_held_cus_while_the_kernel_runs(native, cus, held, work, kernel_s, delay):
    res = Engine(native=native).run(_pool_and_kernel(cus, held, work, kernel_s, delay))
    # closed form: the whole pool until the kernel starts (its delay counts: its blocks are resident),
    # cus - held while it runs, the whole pool after it
    hold_end = delay + kernel_s
    done = cus * 0.0 + (cus - held) * hold_end  # CU-seconds by the end of the hold
    expect = work / (cus - held) if work <= done else hold_end + (work - done) / cus
    assert res.end[0] == pytest.approx(expect, rel=1e-12)
    assert res.end[1] == pytest.approx(hold_end, rel=1e-12)


def test_a_non_exclusive_partition_shares_the_pool_in_proportion():
    """Without exclusivity the kernel's CU work is on the pool too (the filling shares it): the GEMM
    loses less than the held CUs while the kernel is link- or memory-bound."""
    cus, held = 132.0, 20.0
    res = [
        Resource("cu", cus, "cu", 0),
        Resource("part", held, "cu-part", 0),
        Resource("link", 1.0, "link", 0),
    ]
    ops = [
        Op(0, 0, "gemm", "gemm", "gemm", [(0, 264.0)], [(0, cus)], 0.0, [], {}),
        # a link-bound kernel: 1 s of link, 2 CU-seconds of work (2 CUs on average)
        Op(1, 0, "comm", "comm", "rs", [(0, 2.0), (1, 2.0), (2, 1.0)], [], 0.0, [], {}),
    ]
    r = Engine().run(Schedule("shared", ops, res, 1, [0]))
    assert r.end[0] < 264.0 / (cus - held)
    assert r.end[0] == pytest.approx((264.0 + 2.0) / cus, rel=1e-12)


def test_ops_of_one_kernel_hold_its_cus_once():
    """Two ops of one kernel in progress together hold the partition's CUs once, and a chain of them
    holds it without a gap."""
    cus, held = 100.0, 10.0
    res = [Resource("cu", cus, "cu", 0), Resource("part", held, "cu-part", 0, Policy(), None, 0)]
    ops = [
        Op(0, 0, "gemm", "gemm", "gemm", [(0, 180.0)], [(0, cus)], 0.0, [], {}),
        Op(1, 0, "a", "comm", "rs", [(1, 5.0)], [(1, 5.0)], 0.0, [], {}),
        Op(2, 0, "b", "comm", "rs", [(1, 5.0)], [(1, 5.0)], 0.0, [], {}),
        Op(3, 0, "c", "comm", "rs", [(1, 10.0)], [], 0.0, [1, 2], {}),
    ]
    r = Engine().run(Schedule("once", ops, res, 1, [0]))
    assert r.end[1] == r.end[2] == pytest.approx(1.0)
    assert r.end[3] == pytest.approx(2.0)
    assert r.end[0] == pytest.approx(2.0)  # 90 CUs for 2 s (10 held once, never 20, no gap)


def test_the_builder_declares_exclusive_partitions():
    hw = load_hardware("h100-8")
    b = ScheduleBuilder("x", hw, 8)
    p = b.partition(0, "k", 20, exclusive=True)
    assert b._res[p].parent == b.cu(0)
    assert b.partition(0, "k", 20, exclusive=True) == p
    with pytest.raises(ScheduleError, match="declared again"):
        b.partition(0, "k", 20)
    with pytest.raises(ScheduleError, match="whole number"):
        b.partition(0, "j", 2.5, exclusive=True)


@st.composite
def schedules_with_holds(draw):
    pool = float(draw(st.integers(2, 40)))
    res = [Resource("cu", pool, "cu", 0), Resource("hbm", draw(st.floats(0.5, 10.0)), "hbm", 0)]
    for k in range(draw(st.integers(1, 3))):
        held = float(draw(st.integers(1, int(pool))))
        res.append(Resource(f"part{k}", held, "cu-part", 0, Policy(), None, 0 if draw(st.booleans()) else -1))
    n = draw(st.integers(1, 12))
    ops = []
    for i in range(n):
        rs = draw(st.lists(st.integers(0, len(res) - 1), min_size=1, max_size=3, unique=True))
        demands = sorted((r, draw(st.floats(0.1, 20.0))) for r in rs)
        caps = [(demands[0][0], draw(st.floats(0.2, 5.0)))] if draw(st.integers(0, 3)) == 0 else []
        deps = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
        delay = draw(st.sampled_from([0.0, 0.0, 0.25]))
        # a GEMM wave: (tiles, 0 before the last wave; width; CTAs per cluster)
        rounds = (
            (float(draw(st.integers(0, 50))), float(draw(st.integers(1, 40))), float(draw(st.integers(1, 3))))
            if draw(st.booleans())
            else ()
        )
        ops.append(
            Op(i, 0, i, "x", "c", demands, caps, delay, deps, {}, draw(st.integers(0, 1)), rounds=rounds)
        )
    return Schedule("random-holds", ops, res, 1, [0])


@pytest.mark.skipif(FORCED_PYTHON, reason="T3_ENGINE=python: the compiled core is off")
@settings(max_examples=300, deadline=None)
@given(schedules_with_holds())
def test_random_schedules_with_holds_bit_for_bit(sched):
    engine._FILLS.clear()
    try:
        a = Engine(native=False).run(sched)
    except engine.DeadlockError:
        return  # a partition holding the whole pool beside an op on it alone: both engines refuse
    engine._FILLS.clear()
    b = Engine().run(sched)
    assert sched.__dict__["_engine_static"][5] is not None  # the compiled core ran it
    assert (b.events, b.makespan, b.start, b.end) == (a.events, a.makespan, a.start, a.end)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("cus,held,tiles,width,m", [(132, 3, 128, 132, 1), (132, 4, 132, 132, 1), (132, 20, 224, 132, 1),
                                                    (132, 24, 224, 132, 1), (80, 16, 900, 80, 1), (132, 66, 132, 132, 1),
                                                    (10, 9, 7, 10, 1), (132, 20, 300, 100, 1), (132, 40, 300, 100, 1),
                                                    (132, 2, 128, 132, 2), (132, 3, 128, 132, 2), (132, 12, 224, 132, 2),
                                                    (132, 16, 1664, 132, 2), (132, 32, 896, 132, 2), (80, 7, 900, 80, 4),
                                                    (132, 20, 300, 100, 2)])  # fmt: skip
def test_a_gemm_ends_in_whole_rounds_on_the_cus_left(native, cus, held, tiles, width, m):
    """Closed form: a GEMM of ``tiles`` one-CU blocks of 1 s each, run ``width`` at a time (its waves: ops
    of ``width`` blocks, the last one the rest, marked Op.rounds), beside a kernel holding ``held`` CUs for
    longer: on w = min(c, width) CUs the earlier waves take max(1, width / w) s each (fluid) and the last
    max(1, u / w, R) with R = ceil(tiles / w) - (tiles - u) / w, so the GEMM ends after ceil(tiles / w) s
    unless its last wave alone needs a whole round more; unmarked, max(1, u / w). c = cus - held, or with
    blocks in clusters of m (every wave marked) cus - m held rounded down to whole clusters: the steps
    of t3 measure's held rows (512x8192x8192's 128 blocks double from 3 held SMs, 1024x7168x8192's 224
    blocks take a third round from 12)."""
    res = [
        Resource("cu", float(cus), "cu", 0),
        Resource("part", float(held), "cu-part", 0, Policy(), None, 0),
    ]
    waves = [width] * ((tiles - 1) // width) + [tiles - width * ((tiles - 1) // width)]
    c = cus - held if m == 1 else m * ((cus - m * held) // m)
    free = min(c, width)
    for marked in (True, False):
        if m > 1 and not marked:
            continue  # (clusters are marked on every wave)
        ops = [Op(0, 0, "comm", "comm", "rs", [(1, held * 1000.0)], [], 0.0, [], {})]
        for i, u in enumerate(waves):
            last = i == len(waves) - 1
            mark = (
                (float(tiles) if last else 0.0, float(width), float(m)) if marked and (last or m > 1) else ()
            )
            ops.append(Op(i + 1, 0, f"w{i}", "gemm-compute", "gemm", [(0, float(u))], [(0, float(u))], 0.0,
                          [i] if i else [], {}, rounds=mark))  # fmt: skip
        r = Engine(native=native).run(Schedule("rounds", ops, res, 1, [0]))
        *body, u = waves
        before = sum(max(1.0, x / free) for x in body)
        rounds = math.ceil(tiles / free) - (tiles - u) / free
        expect = before + (max(1.0, u / free, rounds) if marked else max(1.0, u / free))
        if marked and free < width:
            assert expect == pytest.approx(max(math.ceil(tiles / free), (tiles - u) / free + 1))
        assert r.end[len(waves)] == pytest.approx(expect, rel=1e-12), marked


def test_cluster_cus_closed_form():
    from t3.sim.engine import cluster_cus

    assert cluster_cus(129.0, 132.0, 1.0) == 129.0  # no clusters: what the held CUs leave
    assert cluster_cus(129.0, 132.0, 2.0) == 126.0  # 3 held: 3 cluster slots of 2 CUs
    assert cluster_cus(120.0, 132.0, 2.0) == 108.0
    assert cluster_cus(73.0, 80.0, 4.0) == 52.0  # 80 - 4 x 7 = 52: 13 slots of 4
    assert cluster_cus(66.0, 132.0, 2.0) == 0.0  # every slot taken
    assert cluster_cus(0.0, 132.0, 2.0) == 0.0


def test_rounds_cap_closed_form():
    from t3.sim.engine import rounds_cap

    assert rounds_cap(128, 126, 128, 132) == pytest.approx(64.0)  # one wave, two rounds
    assert rounds_cap(92, 132, 224, 132) == pytest.approx(92.0)  # nothing held: the wave's own width
    assert rounds_cap(92, 100, 224, 132) == pytest.approx(92 / (3 - 132 / 100))
    assert rounds_cap(5, 0.0, 5, 10) == 0.0
