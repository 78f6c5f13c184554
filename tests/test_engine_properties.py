"""Laws of the fluid engine on random DAGs (hypothesis)."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from t3.sim import Engine
from t3.sim.schedule import Op, Resource, Schedule


@st.composite
def dags(draw):
    n_res = draw(st.integers(1, 3))
    caps = [draw(st.floats(0.5, 10.0)) for _ in range(n_res)]
    n = draw(st.integers(1, 12))
    ops = []
    for i in range(n):
        k = draw(st.integers(1, n_res))
        rs = draw(st.lists(st.integers(0, n_res - 1), min_size=k, max_size=k, unique=True))
        demands = sorted((r, draw(st.floats(0.1, 20.0))) for r in rs)
        deps = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
        delay = draw(st.sampled_from([0.0, 0.0, 0.25]))
        ops.append(Op(i, 0, i, "x", "c", demands, [], delay, deps, {}, draw(st.integers(0, 1))))
    res = [Resource(f"r{j}", c, "hbm", 0) for j, c in enumerate(caps)]
    return Schedule("p", ops, res, 2, [0, 1])


def _solo(op, caps):
    return op.delay_s + max(a / caps[r] for r, a in op.demands)


@settings(max_examples=150, deadline=None)
@given(dags())
def test_makespan_bounds(s):
    r = Engine().run(s)
    caps = [x.capacity for x in s.resources]
    # lower bound 1: no resource serves more than its capacity
    for j, c in enumerate(caps):
        work = sum(a for op in s.ops for rr, a in op.demands if rr == j)
        assert r.makespan >= work / c * (1 - 1e-9)
    # lower bound 2: the critical path of solo durations
    finish = []
    for op in s.ops:
        finish.append(max((finish[d] for d in op.deps), default=0.0) + _solo(op, caps))
    assert r.makespan >= max(finish) * (1 - 1e-9)
    # upper bound: running everything one after the other
    assert r.makespan <= sum(_solo(op, caps) for op in s.ops) * (1 + 1e-9)
    # every op starts after its dependencies end, and lasts at least its solo time
    for op in s.ops:
        for d in op.deps:
            assert r.start[op.id] >= r.end[d] - 1e-12
        assert r.end[op.id] - r.start[op.id] >= _solo(op, caps) * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(dags(), st.integers(0, 10_000))
def test_deterministic_and_order_independent_without_jitter(s, seed):
    a = Engine().run(s)
    b = Engine().run(s)
    assert a.start == b.start and a.end == b.end
    c = Engine(seed=seed).run(s)
    assert math.isclose(a.makespan, c.makespan, rel_tol=1e-9, abs_tol=1e-12)
