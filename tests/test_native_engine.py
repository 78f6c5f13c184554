"""The compiled engine core (:mod:`t3.sim._native`) against its oracle, the Python engine: the same
start and end of every op, makespan and event count, bit for bit, on random schedules (memory
resources with turnaround and loaded latency, closed streams, priority levels, caps, delays,
semaphores, memory-controller arbitration) and on the FiCCO, T3 and T3-MCA schedules in every mode; the schedules it does not cover run in Python; a deadlock is named
as the Python engine names it; the installed core is built from the current source."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import t3.sim.engine as engine
from t3.config.hardware import load_hardware
from t3.ficco.space import FiccoOperator, enumerate_space
from t3.hardware.mca import McaPolicy
from t3.schedules.ficco import ficco_schedule
from t3.sim.engine import DeadlockError, Engine
from t3.sim.memory import HbmTiming
from t3.sim.schedule import Op, Policy, Resource, Schedule, Semaphore

FORCED_PYTHON = os.environ.get("T3_ENGINE") == "python"
needs_native = pytest.mark.skipif(FORCED_PYTHON, reason="T3_ENGINE=python: the compiled core is off")


def test_the_compiled_core_is_built_from_the_current_source():
    if FORCED_PYTHON:
        pytest.skip("T3_ENGINE=python")
    assert engine._native is not None, (
        "the compiled engine core (t3.sim._native) is not built or is stale: `pip install -e .` builds it "
        "(it needs a C compiler)"
    )
    import hashlib
    from pathlib import Path

    src = Path(engine.__file__).with_name("_native.pyx")
    assert engine._native.SOURCE_SHA256 == hashlib.sha256(src.read_bytes()).hexdigest()[:16]


def _both(sched: Schedule):
    """(Python run, compiled run), each with the process-wide fillings cleared (else the second
    would read the first's fillings instead of computing its own)."""
    engine._FILLS.clear()
    a = Engine(native=False).run(sched)
    engine._FILLS.clear()
    b = Engine().run(sched)
    return a, b


def _both_or_deadlock(sched: Schedule):
    """:func:`_both`, or None when the Python engine names a deadlock (semaphore units given back by an
    op that waits, through its dependencies, for them): the compiled run then names the same one."""
    try:
        engine._FILLS.clear()
        Engine(native=False).run(sched)
    except DeadlockError as e:
        with pytest.raises(DeadlockError) as got:
            Engine().run(sched)
        assert (str(got.value), got.value.kind, got.value.names) == (str(e), e.kind, e.names)
        return None
    return _both(sched)


def _same(a, b) -> None:
    assert b.events == a.events
    assert b.makespan == a.makespan
    assert b.start == a.start  # lists of floats: equal element by element (NaN never appears: all ran)
    assert b.end == a.end


@st.composite
def schedules(draw, dispatch: bool = False, sems: bool = False, mca: bool = False, ties: bool = False):
    """Random schedules; ``ties``: capacities and amounts from a few round values, so that ops often
    finish and become ready at the same instant (the events a seed shuffles)."""
    amount = st.sampled_from([1.0, 2.0, 4.0]) if ties else st.floats(0.1, 20.0)
    n_res = draw(st.integers(1, 4))
    res = []
    for r in range(n_res):
        cap = draw(st.sampled_from([1.0, 2.0]) if ties else st.floats(0.5, 10.0))
        timing = None
        if draw(st.booleans()):  # a memory: turnaround, loaded latency
            timing = HbmTiming(
                draw(st.floats(0.0, 2.0)), draw(st.floats(0.01, 0.5)), draw(st.floats(0.0, 0.5)),
                queue_entries=draw(st.sampled_from([1, 4, 64])), channels=draw(st.sampled_from([1, 2])),
                entry_bytes=draw(st.sampled_from([1, 8])),
            )  # fmt: skip
        policy = Policy()
        if mca and timing is not None and draw(st.integers(0, 3)):  # arbitration: gate and starvation share
            policy = McaPolicy(draw(st.floats(0.0, 1.0)), draw(st.floats(0.0, 0.5)), timing)
        res.append(Resource(f"r{r}", cap, "hbm" if timing else "cu", 0, policy, timing))
    semaphores = (
        [Semaphore(f"s{k}", draw(st.integers(1, 3)), 0) for k in range(draw(st.integers(1, 2)))]
        if sems
        else []
    )
    n = draw(st.integers(1, 14))
    ops = []
    for i in range(n):
        k = draw(st.integers(1, n_res))
        rs = draw(st.lists(st.integers(0, n_res - 1), min_size=k, max_size=k, unique=True))
        demands = sorted((r, draw(amount)) for r in rs)
        writes = [(r, a * draw(st.sampled_from([0.0, 0.3, 1.0]))) for r, a in demands if res[r].timing]
        writes = [(r, w) for r, w in writes if w > 0]
        caps = [(demands[0][0], draw(st.floats(0.2, 5.0)))] if draw(st.integers(0, 3)) == 0 else []
        deps = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
        delay = draw(st.sampled_from([0.0, 0.0, 0.25]))
        window = draw(st.sampled_from([0.0, 0.0, 0.5, 3.0]))
        ops.append(Op(i, 0, i, "x", "c", demands, caps, delay, deps, {}, draw(st.integers(0, 2)),
                      writes=writes, window=window))  # fmt: skip
        if dispatch:  # block dispatch on one or two CU pools (any resource serves as the pool)
            ops[-1].admit = draw(st.sampled_from([-1, -1, 0, n_res - 1]))
            ops[-1].fills = draw(st.sampled_from([-1, -1, 0, n_res - 1]))
    if semaphores:  # units taken by some ops, given back by themselves or by a later op that needs them
        # (and takes none: a giver never waits, so nothing waits forever)
        takers = set()
        for op in ops:
            if op.id in takers or not draw(st.booleans()):
                continue
            k = draw(st.integers(0, len(semaphores) - 1))
            u = draw(st.integers(1, semaphores[k].capacity + 1))  # (more than the capacity: runs alone)
            op.acquire = [(k, u)]
            takers.add(op.id)
            later = [o for o in ops[op.id + 1 :] if o.id not in takers and not o.acquire]
            giver = draw(st.sampled_from([op, *later]))
            if giver is not op:
                giver.deps = sorted({*giver.deps, op.id})
            giver.release = [*giver.release, (k, u)]
            takers.add(giver.id)
    return Schedule("random", ops, res, 1, [0], semaphores=semaphores)


@needs_native
@settings(max_examples=300, deadline=None)
@given(schedules())
def test_random_schedules_bit_for_bit(sched):
    a, b = _both(sched)
    assert sched.__dict__["_engine_static"][5] is not None  # the compiled core ran it
    _same(a, b)


@needs_native
@settings(max_examples=300, deadline=None)
@given(schedules(dispatch=True))
def test_random_schedules_with_block_dispatch_bit_for_bit(sched):
    a, b = _both(sched)
    assert sched.__dict__["_engine_static"][5] is not None
    _same(a, b)
    assert b.meta == a.meta  # the dispatch waits and their total time, or nothing where none waited


@needs_native
@settings(max_examples=300, deadline=None)
@given(schedules(sems=True, dispatch=True))
def test_random_schedules_with_semaphores_bit_for_bit(sched):
    _same_or_same_deadlock(sched)


def _same_or_same_deadlock(sched: Schedule) -> None:
    """The compiled core ran ``sched`` and matched the Python engine: times, events and meta (per
    semaphore its peak, waits and their total time; the dispatch waits), or the same deadlock."""
    both = _both_or_deadlock(sched)
    assert sched.__dict__["_engine_static"][5] is not None
    if both is not None:
        a, b = both
        _same(a, b)
        assert b.meta == a.meta


@needs_native
@settings(max_examples=300, deadline=None)
@given(schedules(mca=True, sems=True))
def test_random_schedules_with_memory_arbitration_bit_for_bit(sched):
    _same_or_same_deadlock(sched)


@needs_native
@settings(max_examples=200, deadline=None)
@given(
    schedules(sems=True, dispatch=True, mca=True, ties=True),
    st.integers(0, 2**16),
    st.sampled_from([0.0, 0.3, 2.0]),
)
def test_seeded_jittered_and_traced_runs_bit_for_bit(sched, seed, jitter):
    """A seed (shuffled simultaneous events) and jitter (stretched delays) draw the same random stream at
    the same points in both engines; a trace gives the same usage snapshots and semaphore levels."""
    engine._FILLS.clear()
    try:
        a = Engine(native=False, seed=seed, jitter=jitter, trace=True).run(sched)
    except DeadlockError as e:
        with pytest.raises(DeadlockError) as got:
            Engine(seed=seed, jitter=jitter, trace=True).run(sched)
        assert (str(got.value), got.value.kind) == (str(e), e.kind)
        return
    engine._FILLS.clear()
    b = Engine(seed=seed, jitter=jitter, trace=True).run(sched)
    assert sched.__dict__["_engine_static"][5] is not None
    _same(a, b)
    assert b.meta == a.meta and b.usage == a.usage
    # and without the trace: the same times
    engine._FILLS.clear()
    c = Engine(seed=seed, jitter=jitter).run(sched)
    _same(a, c)
    assert c.usage is None


@needs_native
@settings(max_examples=60, deadline=None)
@given(schedules(), st.integers(6, 20))
def test_many_independent_groups_bit_for_bit(sched, copies):
    """Copies of one random schedule side by side on their own resources: the events split the active
    ops into groups (each filled and memoised on its own) in both engines."""
    ops, res = [], []
    for c in range(copies):
        base, nres = len(ops), len(res)
        res += [Resource(f"{r.name}.{c}", r.capacity, r.kind, 0, r.policy, r.timing) for r in sched.resources]
        for op in sched.ops:
            ops.append(Op(base + op.id, 0, (c, op.key), op.kind, op.cat, [(r + nres, a) for r, a in op.demands],
                          [(r + nres, x) for r, x in op.caps], op.delay_s * (1 + 0.1 * c),
                          [base + d for d in op.deps], {}, op.prio, writes=[(r + nres, w) for r, w in op.writes],
                          window=op.window))  # fmt: skip
    a, b = _both(Schedule("groups", ops, res, 1, [0]))
    _same(a, b)


def _ficco_cases():
    out = []
    for hwn, fop in (
        ("h100-8", FiccoOperator("gemm-rs", 8192, 4096, 1792)),
        ("mi300x-8", FiccoOperator("ag-gemm", 8192, 3584, 4096)),
        ("mi300x-8", FiccoOperator("moe", 4096, 2048, 1024)),
        ("h100-8", FiccoOperator("moe", 2048, 2048, 1024, skew=0.5)),
    ):
        hw = load_hardware(hwn)
        out += [(fop, hw, ax) for ax in enumerate_space(fop, hw)[0]][::7]
    return out


@needs_native
@pytest.mark.parametrize(
    "case", _ficco_cases(), ids=lambda c: f"{c[1].name}-{c[0].op}-{c[0].skew}-{c[2].name}"
)
def test_ficco_schedules_bit_for_bit_in_every_mode(case):
    fop, hw, ax = case
    for mode in ("full", "ideal", "ideal-own", "comm"):
        sched = ficco_schedule(fop, hw, ax, mode)
        a, b = _both(sched)
        assert sched.__dict__["_engine_static"][5] is not None
        _same(a, b)


def _t3_schedules(cfg: str, model: str, tp: int, sublayer: str, symmetric: bool) -> list[Schedule]:
    """The schedules a T3 configuration simulates for one sublayer (caught on their way to the engine)."""
    from t3.schedules import RunOptions, get_config
    from t3.workload import get_model, sublayer_operator

    seen: list[Schedule] = []
    orig = Engine.run

    def catch(self, sched):
        seen.append(sched)
        return orig(self, sched)

    Engine.run = catch
    try:
        op = sublayer_operator(get_model(model), sublayer, tp)
        get_config(cfg).run(op, load_hardware("paper-80cu"), RunOptions(symmetric=symmetric))
    finally:
        Engine.run = orig
    return seen


@needs_native
@pytest.mark.parametrize("cfg", ["t3", "t3-mca"])
@pytest.mark.parametrize(
    "case", [("t-nlg", 8, "fc2", True), ("gpt-3", 32, "ip-bwd", True), ("t-nlg", 16, "op", False)]
)
def test_t3_schedules_bit_for_bit(cfg, case):
    """T3's tracker (semaphores) and T3-MCA's arbitration run in the compiled core, with the Python
    engine's results and semaphore statistics."""
    scheds = _t3_schedules(cfg, *case)
    assert scheds
    for sched in scheds:
        a, b = _both(sched)
        assert sched.__dict__["_engine_static"][5] is not None
        _same(a, b)
        assert b.meta == a.meta


class _Halves(Policy):
    """A policy other than the default: the compiled core leaves such schedules to Python."""

    name = "halves"

    def available(self, capacity, remaining, level, lower_demand):
        return 0.5 * remaining if level else remaining


def test_schedules_it_does_not_cover_run_in_python():
    res = [Resource("r", 2.0, "cu", 0, _Halves())]
    ops = [
        Op(0, 0, 0, "x", "c", [(0, 1.0)], [], 0.0, [], {}, 0),
        Op(1, 0, 1, "x", "c", [(0, 1.0)], [], 0.0, [], {}, 1),
    ]
    sched = Schedule("policy", ops, res, 1, [0])
    r = Engine().run(sched)
    assert sched.__dict__["_engine_static"][5] is None
    assert r.makespan == Engine(native=False).run(sched).makespan
    # callbacks are called (by the Python loop)
    seen = []
    ops = [Op(0, 0, 0, "x", "c", [(0, 1.0)], [], 0.0, [], {}, 0, on_finish=lambda: seen.append(1))]
    sched = Schedule("callback", ops, [Resource("r", 1.0, "cu", 0)], 1, [0])
    Engine().run(sched)
    assert seen == [1] and sched.__dict__["_engine_static"][5] is None


def test_a_deadlock_is_named_as_the_python_engine_names_it():
    # an op whose delay never ends, after one that runs
    res = [Resource("ok", 1.0, "cu", 0)]
    ops = [
        Op(0, 0, "a", "x", "c", [(0, 1.0)], [], 0.0, [], {}),
        Op(1, 0, "b", "x", "c", [(0, 1.0)], [], math.inf, [0], {}),
    ]
    msgs = []
    for native in (False, True):
        with pytest.raises(DeadlockError) as e:
            Engine(native=native).run(Schedule("stuck", list(ops), res, 1, [0]))
        msgs.append((str(e.value), e.value.kind, e.value.names))
    assert msgs[0] == msgs[1]


def test_engine_choice_is_checked():
    """A bad T3_ENGINE is refused before any simulation (not at import: `import t3` works and says nothing),
    as one line by the command; the value's case does not matter."""
    code = "import t3.sim.engine as e; from t3 import api; api.gemm(64, 64, 64)"
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "T3_ENGINE": "fast"},
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode != 0 and "T3_ENGINE" in p.stderr and "'fast'" in p.stderr
    p = subprocess.run([sys.executable, "-m", "t3", "--version"], env={**os.environ, "T3_ENGINE": "fast"},
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: T3_ENGINE: must be 'python' or 'native' (any case; or unset), got 'fast'"
    ]
    p = subprocess.run([sys.executable, "-c", "import t3.sim.engine as e; print(e._native)"],
                       env={**os.environ, "T3_ENGINE": " Python "}, capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "None"
    p = subprocess.run([sys.executable, "-c", "import t3.sim.engine as e; print(e._native)"],
                       env={**os.environ, "T3_ENGINE": "python"}, capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "None"
