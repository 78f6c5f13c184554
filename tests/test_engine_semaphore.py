"""Counting semaphores of the engine (finite tables / buffers) against hand-computed timelines."""

import pytest

from t3.config.hardware import load_hardware
from t3.sim import DeadlockError, Engine
from t3.sim.schedule import Op, Resource, Schedule, ScheduleBuilder, Semaphore


def _op(i, res, work=1.0, deps=(), acquire=(), release=()):
    return Op(
        i,
        0,
        i,
        "x",
        "rs",
        [(res, work)],
        [],
        0.0,
        list(deps),
        {},
        0,
        acquire=list(acquire),
        release=list(release),
    )


def _run(ops, caps, n_res=None):
    res = [Resource(f"r{k}", 1.0, "link", 0) for k in range(n_res or len(ops))]
    sems = [Semaphore(f"s{k}", c, 0) for k, c in enumerate(caps)]
    return Engine().run(Schedule("t", ops, res, 1, [0], {}, sems))


def test_capacity_one_serialises_independent_ops():
    # each op holds the only unit for its whole 1 s of work on its own resource
    ops = [_op(i, i, acquire=[(0, 1)], release=[(0, 1)]) for i in range(3)]
    r = _run(ops, [1])
    assert sorted(r.end) == pytest.approx([1.0, 2.0, 3.0])
    st = r.meta["semaphores"]["s0"]
    assert st["peak"] == 1 and st["waits"] == 2 and st["wait_s"] == pytest.approx(1.0 + 2.0)


def test_release_by_another_op():
    # op0 takes 2 of 3 units; op1 (after op0, 1 s) gives them back at t=2; op2 wants 2 -> starts at 2
    ops = [
        _op(0, 0, acquire=[(0, 2)]),
        _op(1, 1, deps=[0], release=[(0, 2)]),
        _op(2, 2, acquire=[(0, 2)], release=[(0, 2)]),
    ]
    r = _run(ops, [3])
    assert r.start[2] == pytest.approx(2.0) and r.end[2] == pytest.approx(3.0)
    assert r.meta["semaphores"]["s0"]["peak"] == 2


def test_first_come_first_served_blocks_later_small_requests():
    # op0 holds 2 of 2; op1 (asks 2) queues first, op2 (asks 1) after it: op2 may not overtake op1
    ops = [
        _op(0, 0, acquire=[(0, 2)], release=[(0, 2)]),
        _op(1, 1, acquire=[(0, 2)], release=[(0, 2)]),
        _op(2, 2, acquire=[(0, 1)], release=[(0, 1)]),
    ]
    r = _run(ops, [2])
    assert r.start[1] == pytest.approx(1.0) and r.start[2] == pytest.approx(2.0)


def test_oversize_request_runs_alone():
    ops = [_op(0, 0, acquire=[(0, 5)], release=[(0, 5)]), _op(1, 1, acquire=[(0, 1)], release=[(0, 1)])]
    r = _run(ops, [2])
    assert r.end[0] == pytest.approx(1.0) and r.start[1] == pytest.approx(1.0)


def test_units_never_released_is_a_deadlock():
    ops = [_op(0, 0, acquire=[(0, 1)]), _op(1, 1, deps=[0], acquire=[(0, 1)])]
    with pytest.raises(DeadlockError, match="semaphore"):
        _run(ops, [1])


def test_no_semaphores_no_meta():
    r = Engine().run(Schedule("t", [_op(0, 0)], [Resource("r", 1.0, "link", 0)], 1, [0]))
    assert "semaphores" not in r.meta


def test_builder_maps_semaphores_by_rotation():
    hw = load_hardware("paper-80cu")
    sym = ScheduleBuilder("s", hw, 4, symmetric=True)
    assert sym.semaphore(3, "tracker", 8) == sym.semaphore(0, "tracker", 8)
    full = ScheduleBuilder("f", hw, 4, symmetric=False)
    assert full.semaphore(3, "tracker", 8) != full.semaphore(0, "tracker", 8)
    with pytest.raises(Exception, match="capacity"):
        full.semaphore(1, "tracker", 0)


def test_seeded_runs_respect_capacity():
    # with shuffled simultaneous events the peak never exceeds the capacity
    ops = [_op(i, i, acquire=[(0, 1)], release=[(0, 1)]) for i in range(6)]
    for seed in range(5):
        res = [Resource(f"r{k}", 1.0, "link", 0) for k in range(6)]
        r = Engine(seed=seed, jitter=0.3).run(Schedule("t", ops, res, 1, [0], {}, [Semaphore("s", 2, 0)]))
        assert r.meta["semaphores"]["s"]["peak"] == 2
        assert r.makespan == pytest.approx(3.0)
