"""Block dispatch (:attr:`t3.sim.schedule.Op.admit` / :attr:`~t3.sim.schedule.Op.fills`, declared by
:meth:`ScheduleBuilder.kernel`): a kernel launched while an earlier kernel's blocks fill the CUs begins
when they no longer do, in launch order. Checked against closed forms on hand-made schedules, against
the same schedules without the declaration, and through the builder on a preset."""

from __future__ import annotations

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ScheduleError
from t3.sim.engine import Engine
from t3.sim.schedule import Op, Policy, Resource, Schedule, ScheduleBuilder

CUS = 100.0


def _op(i, key, work, deps=(), *, cap=CUS, res=0, admit=-1, fills=-1, delay=0.0):
    op = Op(i, 0, key, "k", "gemm", [(res, work)], [(res, cap)] if cap else [], delay, list(deps), {})
    op.admit, op.fills = admit, fills
    return op


def _sched(ops, held=0.0):
    res = [Resource("cu", CUS, "cu", 0)]
    if held:
        res.append(Resource("part", held, "cu-part", 0, Policy(), None, 0))
    return Schedule("dispatch", ops, res, 1, [0])


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("wa,wb", [(200.0, 50.0), (30.0, 300.0)])
def test_a_kernel_launched_after_a_filling_one_begins_at_its_end(native, wa, wb):
    # A fills every CU (a persistent GEMM) and was launched first; B, launched at the same instant after
    # it, gets no CU until A ends: serial, wa / C then wb / C
    ops = [_op(0, "a", wa, admit=0, fills=0), _op(1, "b", wb, admit=0)]
    r = Engine(native=native).run(_sched(ops))
    assert r.start[1] == pytest.approx(wa / CUS, rel=1e-12)
    assert r.end[1] == pytest.approx((wa + wb) / CUS, rel=1e-12)
    assert r.meta["dispatch"] == {"waits": 1, "wait_s": pytest.approx(wa / CUS, rel=1e-12)}
    # undeclared: the two share the CUs from time 0 (the fluid model), the same total work
    plain = [_op(0, "a", wa), _op(1, "b", wb)]
    p = Engine(native=native).run(_sched(plain))
    assert p.start[1] == 0.0
    assert p.makespan == pytest.approx(r.makespan, rel=1e-12)
    assert p.end[0] == pytest.approx(min(2 * wa, wa + wb) / CUS, rel=1e-12)  # half the CUs while both run


@pytest.mark.parametrize("held", [10.0, 40.0])
def test_a_kernel_holding_cus_launched_first_leaves_the_rest_to_the_filling_one(held):
    # B holds `held` CUs (an exclusive partition) and was launched first: A, launched after it, runs on
    # the rest at once (launch order decides, not the declaration's kind)
    kernel_s = 1.0
    ops = [
        _op(0, "b", held * kernel_s, res=1, cap=0, admit=0),
        _op(1, "a", 1000.0, admit=0, fills=0),
    ]
    r = Engine().run(_sched(ops, held))
    assert r.start[1] == 0.0
    done = (CUS - held) * kernel_s
    assert r.end[1] == pytest.approx(kernel_s + (1000.0 - done) / CUS, rel=1e-12)
    assert "dispatch" not in r.meta


def test_the_filling_kernel_first_delays_the_holding_one_to_its_end():
    held = 10.0
    ops = [_op(0, "a", 1000.0, admit=0, fills=0), _op(1, "b", held * 1.0, res=1, cap=0, admit=0)]
    r = Engine().run(_sched(ops, held))
    assert r.end[0] == pytest.approx(10.0, rel=1e-12)  # the whole pool: nothing held before its end
    assert r.start[1] == pytest.approx(10.0, rel=1e-12)
    assert r.end[1] == pytest.approx(11.0, rel=1e-12)


def test_no_kernel_slips_in_between_two_waves_of_a_filling_kernel():
    # A is two ops in a chain (two waves of one kernel, both filling): B begins after the second,
    # not in the instant between them
    ops = [
        _op(0, "a0", 100.0, admit=0, fills=0),
        _op(1, "a1", 100.0, [0], fills=0),
        _op(2, "b", 100.0, admit=0),
    ]
    r = Engine().run(_sched(ops))
    assert r.start[2] == pytest.approx(2.0, rel=1e-12)
    # a last wave that does not fill (its blocks are all dispatched: CUs free as they end) lets it in
    ops = [_op(0, "a0", 100.0, admit=0, fills=0), _op(1, "a1", 100.0, [0]), _op(2, "b", 100.0, admit=0)]
    r = Engine().run(_sched(ops))
    assert r.start[2] == pytest.approx(1.0, rel=1e-12)
    assert r.end[2] == pytest.approx(3.0, rel=1e-12)  # a1 and b share the CUs: 200 CU-s from t = 1


def test_waiting_kernels_begin_in_launch_order_one_filler_at_a_time():
    # A fills; B (fills) and C wait; at A's end B begins and fills, so C waits for B's end too
    ops = [
        _op(0, "a", 100.0, admit=0, fills=0),
        _op(1, "b", 200.0, admit=0, fills=0),
        _op(2, "c", 50.0, admit=0),
    ]
    r = Engine().run(_sched(ops))
    assert (r.start[1], r.start[2]) == pytest.approx((1.0, 3.0), rel=1e-12)
    assert r.meta["dispatch"]["waits"] == 2
    # a waiting kernel that does not fill lets the next one in at the same instant (first come, first
    # served, but nothing holds the second back)
    ops = [
        _op(0, "a", 100.0, admit=0, fills=0),
        _op(1, "b", 50.0, admit=0),
        _op(2, "c", 50.0, admit=0),
    ]
    r = Engine().run(_sched(ops))
    assert r.start[1] == r.start[2] == pytest.approx(1.0, rel=1e-12)


def test_a_kernel_launched_later_waits_behind_earlier_waiting_ones():
    # B waits for A; C becomes ready later, while B still waits, and queues behind B
    ops = [
        _op(0, "a", 300.0, admit=0, fills=0),
        _op(1, "b", 100.0, admit=0, fills=0),
        _op(2, "t", 0.0, cap=0, delay=1.0),
        _op(3, "c", 100.0, [2], admit=0),
    ]
    ops[2].demands = []
    r = Engine().run(_sched(ops))
    assert r.start[1] == pytest.approx(3.0, rel=1e-12)
    assert r.start[3] == pytest.approx(4.0, rel=1e-12)


def test_the_builder_declares_a_kernel_and_refuses_an_unknown_op():
    hw = load_hardware("h200-8")
    b = ScheduleBuilder("k", hw, 2)
    cu = b.cu(0)
    b.add(0, "g0", kind="k", cat="gemm", work=[(cu, 132.0)], caps=[(cu, 132.0)])
    b.add(0, "g1", kind="k", cat="gemm", work=[(cu, 132.0)], caps=[(cu, 132.0)], deps=[(0, "g0")])
    b.add(0, "c", kind="k", cat="a2a", work=[(cu, 13.2)], caps=[(cu, 132.0)])
    b.kernel(0, "g0", fills=["g0", "g1"])
    b.kernel(0, "c")
    r = Engine().run(b.build())
    assert r.start[2] == pytest.approx(2.0, rel=1e-12)
    assert r.end[2] == pytest.approx(2.1, rel=1e-12)
    with pytest.raises(ScheduleError, match="unknown op"):
        b.kernel(0, "nope")
