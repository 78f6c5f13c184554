"""Two shortcuts of the engine's per-op preparation and per-event grouping, each against an oracle.

* Ops made by :meth:`ScheduleBuilder.add_like` name the op they copy (``Op.like``); the engine then
  reuses that op's static rate, signature and preparation. Oracle: the same schedule with every
  ``like`` cleared (each op prepared from its own fields) gives the same result, bit for bit.
* :meth:`Allocator._groups` answers "one group" at once when a resource is named by every active op.
  Oracle: connected components of the ops (two ops joined when they name a common resource), by
  brute-force closure.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import t3.sim.engine as engine
from t3.config.hardware import load_hardware
from t3.errors import ScheduleError
from t3.ficco.space import FiccoOperator, enumerate_space
from t3.schedules.ficco import ficco_schedule
from t3.sim.engine import Allocator, Engine
from t3.sim.schedule import Op, Policy, ScheduleBuilder


def _cases():
    out = []
    for hwn, fop in (
        ("h100-8", FiccoOperator("gemm-rs", 4096, 4096, 1024)),
        ("mi300x-8", FiccoOperator("ag-gemm", 4096, 2048, 4096)),
        ("h100-8", FiccoOperator("moe", 2048, 2048, 1024, skew=0.5)),
    ):
        hw = load_hardware(hwn)
        out += [(fop, hw, ax) for ax in enumerate_space(fop, hw)[0] if ax.g > 1][::11]
    return out


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[1].name}-{c[0].op}-{c[2].name}")
def test_copies_give_what_ops_prepared_one_by_one_give(case):
    fop, hw, ax = case
    sched = ficco_schedule(fop, hw, ax)
    assert any(op.like >= 0 for op in sched.ops)  # the schedule has copies (else this checks nothing)
    _assert_runs_as_ops_prepared_one_by_one(sched)


def _assert_runs_as_ops_prepared_one_by_one(sched):
    """The schedule runs as the same schedule with every ``like`` cleared (each op prepared from its own
    fields), bit for bit."""
    plain = copy.deepcopy(sched)
    for op in plain.ops:
        op.like = -1
    engine._FILLS.clear()  # (process-wide fillings, keyed by signatures: each run computes its own)
    b = Engine().run(plain)
    engine._FILLS.clear()
    a = Engine().run(sched)
    assert (a.makespan, a.start, a.end) == (b.makespan, b.start, b.end)


def test_a_copy_names_an_earlier_op_with_the_same_asks():
    hw = load_hardware("h100-8")
    b = ScheduleBuilder("t", hw, 8, symmetric=False)
    op = b.add(0, "x", kind="send", cat="rs", work=[(b.hbm(0), 8.0)], window=4.0)
    c1 = b.add_like(op, 1, "y")
    c2 = b.add_like(c1, 2, "z")
    assert c1.like == op.id and c2.like == op.id  # always the first op, never a chain
    for c in (c1, c2):
        assert (c.demands, c.caps, c.prio, c.writes, c.window) == (
            op.demands,
            op.caps,
            op.prio,
            op.writes,
            op.window,
        )


def test_add_like_refuses_an_op_of_another_builder():
    hw = load_hardware("h100-8")
    b1, b2 = ScheduleBuilder("a", hw, 8), ScheduleBuilder("b", hw, 8)
    b2.add(0, "first", kind="x", cat="gemm", work=[(b2.hbm(0), 1.0)])
    op = b1.add(0, "x", kind="x", cat="gemm", work=[(b1.cu(0), 1.0)])
    with pytest.raises(ScheduleError, match="not an op of this builder"):
        b2.add_like(op, 0, "y")


def _components(rsets: list[set[int]]) -> list[list[int]]:
    """Brute force: grow each group until no other op shares a resource with it."""
    left = list(range(len(rsets)))
    out = []
    while left:
        group, res = [left[0]], set(rsets[left[0]])
        changed = True
        while changed:
            changed = False
            for p in left:
                if p not in group and rsets[p] & res:
                    group.append(p)
                    res |= rsets[p]
                    changed = True
        out.append(sorted(group))
        left = [p for p in left if p not in group]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sets(st.integers(0, 7), min_size=1, max_size=3), min_size=1, max_size=14), st.randoms())
def test_groups_are_the_connected_components(rsets, rnd):
    ops = [Op(i, 0, i, "x", "c", sorted((r, 1.0) for r in rs), [], 0.0, [], {}) for i, rs in enumerate(rsets)]
    alloc = Allocator(ops, [1.0] * len(ops), [1.0] * 8, [Policy()] * 8, [None] * 8)
    active = list(range(len(ops)))
    rnd.shuffle(active)
    got = alloc._groups(active)
    # each group keeps the order of ``active``; together they are the active ops, once each
    pos = {i: k for k, i in enumerate(active)}
    assert all(g == sorted(g, key=pos.get) for g in got)
    assert sorted(i for g in got for i in g) == sorted(active)
    assert sorted(sorted(g) for g in got) == sorted(_components(rsets))


@pytest.mark.parametrize("hwn,tp", [("gb200-nvl72", 72), ("h100-8", 8)])
def test_t3_updates_over_the_same_resources_share_one_op(hwn, tp):
    """T3's updates (remote stores, DMAs) are keyed by the resources they use, not by their receiver: in
    symmetric mode on a switch every receiver's update runs on GPU 0's port, NMC and DMA engines, so one
    template serves every receiver of a piece size. Each copy asks exactly what its template asks, and the
    schedule with every ``like`` cleared gives the same result, bit for bit."""
    from t3.schedules import RunOptions
    from t3.schedules.t3 import T3Builder
    from t3.workload import sublayer_operator
    from t3.workload.models import ModelSpec

    model = ModelSpec(name="tp72", hidden=9216, layers=80, heads=72, ffn=36864, tokens=9216)
    hw = load_hardware(hwn, {"nmc.present": True})
    sched = T3Builder("t3", sublayer_operator(model, "fc2", tp), hw, RunOptions(), mca=False).build()
    updates = [o for o in sched.ops if o.kind in ("dma", "remote-store")]
    templates = [o for o in updates if o.like < 0]
    asks = {(o.kind, tuple(o.demands)) for o in updates}
    assert len(templates) == len(asks) < len(updates)  # one template per distinct ask, not per receiver
    fields = (
        "kind",
        "demands",
        "caps",
        "delay_s",
        "traffic",
        "prio",
        "acquire",
        "release",
        "writes",
        "window",
    )
    for o in updates:
        if o.like >= 0:
            t = sched.ops[o.like]
            assert [getattr(o, f) for f in fields] == [getattr(t, f) for f in fields]
    _assert_runs_as_ops_prepared_one_by_one(sched)
