"""Deterministic discrete-event engine with fluid sharing of resources.

Between two events every running op progresses at a constant rate; an event is an op finishing its
delay or its work. At each event the rates are recomputed by *progressive filling*, level by
priority level: all ops of a level grow their rate in proportion to their own maximum rate
(demand-proportional sharing, the behaviour of a first-come queue fed by several streams) until a
resource saturates; ops on a saturated resource freeze; the rest keep growing. A resource's
:class:`~t3.sim.schedule.Policy` decides how much of its capacity each priority level may use
(that is where memory-controller arbitration plugs in); it is told how much the lower levels active
on the resource would use.

The engine knows nothing of GEMMs or collectives: only ops, amounts, resources and dependencies.
Cost is O(events x active ops), independent of the bytes moved.

Counting semaphores (:class:`~t3.sim.schedule.Semaphore`) model finite tables and buffers: a ready op
that must ``acquire`` units waits (first come, first served) until they are free, then starts; units
come back when an op that releases them finishes. ``Result.meta["semaphores"]`` reports, per
semaphore, the peak units held, the number of ops that had to wait and their total waiting time.

Block dispatch (:meth:`~t3.sim.schedule.ScheduleBuilder.kernel`): a kernel declared on a GPU's CUs
(``Op.admit``) begins only when no op filling them (``Op.fills``) is in progress, in launch order, first
come first served; a waiting kernel is let in once the instant's other work is done (a filling kernel's
next wave has begun by then). ``Result.meta["dispatch"]`` reports how many kernels waited and for how
long in all (both engines).
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
import os
import random
from collections import deque
from dataclasses import dataclass, field

from t3.errors import SimulationError
from t3.sim.schedule import Op, Policy, Schedule

_EPS = 1e-9  # an op whose remaining fraction of work is below this is finished


@dataclass
class Result:
    schedule: Schedule
    start: list[float]
    end: list[float]
    makespan: float
    events: int
    usage: list[tuple[float, float, dict[tuple[int, str], float]]] | None = (
        None  # (t0, t1, {(res, cat): rate})
    )
    meta: dict = field(default_factory=dict)

    def span(self, cat: str, gpu: int | None = None) -> tuple[float, float] | None:
        """(first start, last end) of ops of category ``cat`` (optionally on one GPU)."""
        lo, hi = math.inf, -math.inf
        for op in self.schedule.ops:
            if op.cat == cat and (gpu is None or op.gpu == gpu):
                lo = min(lo, self.start[op.id])
                hi = max(hi, self.end[op.id])
        return None if lo == math.inf else (lo, hi)

    def busy(self, cat: str, gpu: int | None = None) -> float:
        s = self.span(cat, gpu)
        return 0.0 if s is None else s[1] - s[0]


class DeadlockError(SimulationError):
    """The schedule cannot finish. ``kind`` says why: ``"resource"`` (running ops get no share of
    ``names``), ``"delay"`` (an op waits forever), ``"dispatch"`` (kernels wait forever for the CUs
    ``names``), ``"overflow"`` (the time left overflows: rates on
    ``names`` too small for double precision), ``"semaphore"`` (ops wait forever for units of the
    semaphores ``names``) or ``"dependency"`` (ops never became ready); the message names them."""

    def __init__(self, message: str, kind: str = "", names: tuple[str, ...] = ()):
        super().__init__(message)
        self.kind, self.names = kind, names


def _op_names(ops: list[Op], ids) -> str:
    ids = list(ids)
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return ", ".join(f"{ops[i].gpu}:{ops[i].key}" for i in ids[:5]) + more


def _stall(now: float, active: list[int], heap: list, ops: list[Op], res, rate: list[float]) -> DeadlockError:
    """The deadlock of a time step that cannot end: name the resources the stuck ops get no share of
    (saturated, or held back by their policy), or the ops whose delay never ends."""
    stuck = [i for i in active if rate[i] <= 0]
    if not stuck:
        ids = [i for t, _, i in heap if t == math.inf]
        if ids:
            return DeadlockError(
                f"no progress possible at t={now:.3e}s: ops wait forever (infinite delay): {_op_names(ops, ids)}",
                "delay", (),
            )  # fmt: skip
        names = tuple(sorted({res[r].name for i in active for r, _ in ops[i].demands}))
        return DeadlockError(
            f"no progress possible at t={now:.3e}s: the time left of the running ops is not finite (rates "
            f"too small for double precision on {', '.join(names)}: an extreme hardware value?); "
            f"ops: {_op_names(ops, active)}",
            "overflow", names,
        )  # fmt: skip
    use: dict[int, float] = {}
    for i in active:
        for r, a in ops[i].demands:
            use[r] = use.get(r, 0.0) + rate[i] * a
    demanded = sorted({r for i in stuck for r, _ in ops[i].demands})
    full = [r for r in demanded if use.get(r, 0.0) >= res[r].capacity * (1 - 1e-9)]
    names = tuple(res[r].name for r in (full or demanded))
    why = "saturated by other ops" if full else "held back by its arbitration policy"
    return DeadlockError(
        f"no progress possible at t={now:.3e}s: resource {', '.join(names)} gives the ops that need it "
        f"no share ({why}); starved ops: {_op_names(ops, stuck)}",
        "resource", names,
    )  # fmt: skip


def _unfinished(ops: list[Op], end: list[float], queues, sems, held: list[int]) -> DeadlockError:
    """The deadlock of a run that ended with unfinished ops: the semaphores they wait for, or a cycle."""
    waiting = [(s, list(q)) for s, q in enumerate(queues) if q]
    if waiting:
        names = tuple(sems[s].name for s, _ in waiting)
        detail = "; ".join(
            f"{sems[s].name} ({held[s]} of {sems[s].capacity} units held, never released; "
            f"{len(q)} ops waiting: {_op_names(ops, q)})"
            for s, q in waiting
        )
        return DeadlockError(f"ops wait forever for semaphore units: {detail}", "semaphore", names)
    missing = [op.id for op in ops if math.isnan(end[op.id])]
    return DeadlockError(
        f"ops never became ready (dependency cycle?): {_op_names(ops, missing)}", "dependency", ()
    )


class Engine:
    """Runs schedules. ``seed`` randomises the order of simultaneous events and ``jitter`` stretches
    every delay by a random factor in [1, 1 + jitter): both exist to test that schedules are correct
    under any legal interleaving. With the defaults the engine is fully deterministic.

    The compiled core (:mod:`t3.sim._native`, built by ``pip install``) runs the schedules it covers
    (the default and the MCA resource policies, semaphores, priority levels, block dispatch, traces,
    seeds and jitter; no callbacks: the functional mode runs here): the same arithmetic and the same
    random draws in the same order, so the same result bit for bit, several times faster.
    ``native=False`` (or ``T3_ENGINE=python`` for the whole process) runs the Python loop below."""

    def __init__(
        self, *, trace: bool = False, seed: int | None = None, jitter: float = 0.0, native: bool = True
    ):
        self.trace = trace
        self.native = native
        self.rng = random.Random(seed) if seed is not None else None
        self.jitter = jitter

    def run(self, sched: Schedule) -> Result:
        if _ENGINE_ERROR is not None:
            check_engine()
        ops = sched.ops
        res = sched.resources
        n = len(ops)
        inf = math.inf
        static = sched.__dict__.get("_engine_static")
        if static is None:
            static = sched.__dict__["_engine_static"] = _static(sched)
        nat = static[5]
        if nat is not None and self.native:
            state = self.rng.getstate() if self.rng is not None else None
            out = _native.run(nat, _FILLS, self.rng, self.jitter, (sched, _snapshot) if self.trace else None)
            if out is not None:  # (None: it cannot finish; the Python loop below names the deadlock)
                start, end, events, waits, wait_s, sem, usage, levels = out
                meta = {"dispatch": {"waits": waits, "wait_s": wait_s}} if waits else {}
                if sem is not None:
                    meta["semaphores"] = {
                        sm.name: {"capacity": sm.capacity, "peak": pk, "waits": sw, "wait_s": ss}
                        for sm, pk, sw, ss in zip(sched.semaphores, *sem, strict=True)
                    }
                    if levels is not None:
                        meta["semaphore_levels"] = {
                            sm.name: lv for sm, lv in zip(sched.semaphores, levels, strict=True)
                        }
                return Result(sched, start, end, max(end, default=0.0), events, usage, meta)
            if state is not None:  # the Python loop draws the same stream again
                self.rng.setstate(state)
        if static[0] is None:  # prepared for the compiled core only: the Python loop's part now
            static = sched.__dict__["_engine_static"] = (*_static(sched, native=False)[:5], nat)
        cap, children, xmax, first, alloc, _ = static
        indeg = [len(op.deps) for op in ops]
        start = [math.nan] * n
        end = [math.nan] * n
        remaining = [1.0] * n
        rate = [0.0] * n
        active: list[int] = []
        heap: list[tuple[float, int, int]] = []
        seq = 0
        now = 0.0
        events = 0
        usage: list | None = [] if self.trace else None
        rng = self.rng
        jitter = self.jitter
        sems = sched.semaphores
        ns = len(sems)
        held = [0] * ns
        peak = [0] * ns
        waits = [0] * ns
        wait_s = [0.0] * ns
        queues: list[deque[int]] = [deque() for _ in range(ns)]
        since: dict[int, float] = {}
        granted = [False] * n
        # exclusive partitions (Resource.parent): ops in progress on each, and the capacity they hold
        excl = static_holds(sched)
        inuse = [0] * len(res) if excl is not None else None
        reserved = [0.0] * len(res) if excl is not None else None
        held_changed = False
        levels: list[list[tuple[float, int]]] | None = [[] for _ in range(ns)] if self.trace else None
        # block dispatch (Op.admit / Op.fills): per CU pool, the ops in progress that fill it and the
        # kernels waiting, in launch order, for it to have free CUs
        filling: dict[int, int] = {}
        admitq: dict[int, deque[int]] = {}
        admitted = [False] * n if has_dispatch(sched) else None
        adm_since: dict[int, float] = {}
        adm_waits = [0, 0.0]  # kernels that waited, their total wait (s)

        def fits(i: int) -> bool:
            return all(held[s] == 0 or held[s] + u <= sems[s].capacity for s, u in ops[i].acquire)

        def take(i: int) -> None:
            granted[i] = True
            for s, u in ops[i].acquire:
                held[s] += u
                if held[s] > peak[s]:
                    peak[s] = held[s]
                if levels is not None:
                    levels[s].append((now, held[s]))

        # work items: (op id << 2) | what, what: 0 = begin, 1 = enter (delay over), 2 = finish
        def drain() -> None:
            for q in queues:
                while q and fits(q[0]):
                    i = q.popleft()
                    s0 = ops[i].acquire[0][0]
                    wait_s[s0] += now - since.pop(i)
                    take(i)
                    push(i << 2)

        first = list(first)
        if rng:
            rng.shuffle(first)
        work: deque[int] = deque(first)
        pop, push = work.popleft, work.append
        heappush, heappop = heapq.heappush, heapq.heappop

        def process() -> bool:
            nonlocal seq, held_changed
            changed = False
            while True:
                while work:
                    w = pop()
                    i = w >> 2
                    what = w & 3
                    op: Op = ops[i]
                    if what == 0:
                        if admitted is not None and op.admit >= 0 and not admitted[i]:
                            p = op.admit
                            if filling.get(p, 0) or admitq.get(p):
                                admitq.setdefault(p, deque()).append(i)
                                adm_since[i] = now
                                adm_waits[0] += 1
                                continue
                            admitted[i] = True
                        if op.acquire and not granted[i]:
                            s0 = op.acquire[0][0]
                            if any(queues[s] for s, _ in op.acquire) or not fits(i):
                                queues[s0].append(i)
                                since[i] = now
                                waits[s0] += 1
                                continue
                            take(i)
                        start[i] = now
                        if admitted is not None and op.fills >= 0:
                            filling[op.fills] = filling.get(op.fills, 0) + 1
                        if excl is not None and excl[i]:
                            for r in excl[i]:
                                inuse[r] += 1
                                if inuse[r] == 1:
                                    reserved[res[r].parent] += res[r].capacity
                                    held_changed = changed = True
                        if op.on_start is not None:
                            op.on_start()
                        d = op.delay_s
                        if d > 0:
                            if jitter:
                                d *= 1.0 + jitter * rng.random() if rng else 1.0 + jitter
                            heappush(heap, (now + d, seq, i))
                            seq += 1
                        else:
                            push(w | 1)
                    elif what == 1:
                        if op.demands:
                            active.append(i)
                            changed = True
                        else:
                            push(w | 2)
                    else:
                        end[i] = now
                        if admitted is not None and op.fills >= 0:
                            filling[op.fills] -= 1
                        if excl is not None and excl[i]:
                            for r in excl[i]:
                                inuse[r] -= 1
                                if inuse[r] == 0:
                                    reserved[res[r].parent] -= res[r].capacity
                                    held_changed = changed = True
                        if op.on_finish is not None:
                            op.on_finish()
                        if op.release:
                            for s, u in op.release:
                                held[s] -= u
                                if levels is not None:
                                    levels[s].append((now, held[s]))
                            drain()
                        kids = children[i]
                        if kids is None:
                            continue
                        if rng:
                            new = []
                            for c in kids:
                                indeg[c] -= 1
                                if indeg[c] == 0:
                                    new.append(c << 2)
                            rng.shuffle(new)
                            work.extend(new)
                        else:
                            for c in kids:
                                indeg[c] -= 1
                                if indeg[c] == 0:
                                    push(c << 2)
                if not (admitq and admit_next()):
                    return changed
                changed = True

        def admit_next() -> bool:
            """Once the instant's work is done (a kernel's next wave has begun), the first waiting kernel
            of a CU pool no op fills any more begins; one at a time, since it may fill the pool itself."""
            for p in sorted(admitq):  # pools in index order
                q = admitq[p]
                if q and not filling.get(p, 0):
                    i = q.popleft()
                    admitted[i] = True
                    adm_waits[1] += now - adm_since.pop(i)
                    push(i << 2)
                    return True
            return False

        allocator = alloc.fresh()
        allocate = allocator.allocate
        dirty = process()
        while active or heap:
            if dirty and active:
                if held_changed:
                    allocator.hold(reserved)
                    held_changed = False
                allocate(active, rate)
            dirty = False
            dt = inf
            for i in active:
                ri = rate[i]
                if ri > 0:
                    t = remaining[i] / ri
                    if t < dt:
                        dt = t
            t_next = now + dt
            if heap and heap[0][0] < t_next:
                t_next = heap[0][0]
                dt = t_next - now
            if dt == inf:
                raise _stall(now, active, heap, ops, res, rate)
            if usage is not None and dt > 0:
                usage.append((now, t_next, _snapshot(active, ops, res, rate)))
            done = []
            keep = []
            for i in active:
                left = remaining[i] - rate[i] * dt
                remaining[i] = left
                if left <= _EPS:
                    done.append(i)
                else:
                    keep.append(i)
            now = t_next
            events += 1
            if done:
                active[:] = keep
                if rng:
                    rng.shuffle(done)
                for i in done:
                    push(i << 2 | 2)
                dirty = True
            while heap and heap[0][0] <= now:
                push(heappop(heap)[2] << 2 | 1)
            if work and process():
                dirty = True
        if any(math.isnan(e) for e in end):
            waiting = [i for q in admitq.values() for i in q]
            if waiting:
                raise DeadlockError(
                    f"kernels wait forever for free CUs (an op filling their CUs never finishes): "
                    f"{_op_names(ops, waiting)}", "dispatch", tuple(res[p].name for p, q in admitq.items() if q),
                )  # fmt: skip
            raise _unfinished(ops, end, queues, sems, held)
        meta: dict = {}
        if adm_waits[0]:
            meta["dispatch"] = {"waits": adm_waits[0], "wait_s": adm_waits[1]}
        if ns:
            meta["semaphores"] = {
                sm.name: {"capacity": sm.capacity, "peak": peak[k], "waits": waits[k], "wait_s": wait_s[k]}
                for k, sm in enumerate(sems)
            }
            if levels is not None:
                meta["semaphore_levels"] = {sm.name: levels[k] for k, sm in enumerate(sems)}
        return Result(sched, start, end, max(end, default=0.0), events, usage, meta)

    @staticmethod
    def _allocate(active, ops, xmax, cap, policies, rate) -> None:
        """Progressive filling of ``active`` ops without memory timing (kept for callers that share
        plain resources: every op grows in proportion to its maximum rate)."""
        Allocator(ops, xmax, cap, policies, [None] * len(cap)).allocate(active, rate)


def _static(sched: Schedule, native: bool = True) -> tuple:
    """What a run of ``sched`` needs that depends on the schedule only: capacities, children of every
    op, static maximum rates, the ops ready at time 0 (work items), an allocator whose per-op
    preparation is shared by every run (a schedule is not modified once run), and the compiled core's
    preparation (None where it does not run the schedule). When the core covers the schedule (and
    ``native``), only its preparation is made (the other items are None until a Python run needs them)."""
    nat = None
    if native and _native is not None:
        pols = [_compiled(r.policy) for r in sched.resources]
        if None not in pols:
            nat = _native.prepare(sched, pols, _SIGS, _SIG_NUMBERS, _RKEYS, _RKEY_NUMBERS)
            if nat is not None:
                return None, None, None, None, None, nat
    ops, res = sched.ops, sched.resources
    n = len(ops)
    inf = math.inf
    cap = [r.capacity for r in res]
    children: list[list[int] | None] = [None] * n
    # static per-op maximum rate (fraction of the op per second)
    xmax = [0.0] * n
    for op in ops:
        oid = op.id
        for d in op.deps:
            kids = children[d]
            if kids is None:
                children[d] = [oid]
            else:
                kids.append(oid)
        like = op.like
        if like >= 0:  # a copy: the same demands and caps
            xmax[oid] = xmax[like]
            continue
        x = inf
        dem = op.demands
        for r, a in dem:
            v = cap[r] / a
            if v < x:
                x = v
        if op.caps:
            dd = dict(dem)
            for r, c in op.caps:
                if r in dd:
                    v = c / dd[r]
                    if v < x:
                        x = v
        xmax[oid] = x
    first = tuple(i << 2 for i, op in enumerate(ops) if not op.deps)
    alloc = Allocator(
        ops, xmax, cap, [r.policy for r in res], [r.timing for r in res], [op.like for op in ops]
    )
    return cap, children, xmax, first, alloc, nat


def static_holds(sched: Schedule) -> list[tuple[int, ...]] | None:
    """Per op, the exclusive partitions (:attr:`Resource.parent`) it names, or None when the schedule
    has none; derived once per schedule."""
    if "_holds" not in sched.__dict__:
        res = sched.resources
        if any(r.parent >= 0 for r in res):
            h = [tuple(r for r, _ in op.demands if res[r].parent >= 0) for op in sched.ops]
        else:
            h = None
        sched.__dict__["_holds"] = h
    return sched.__dict__["_holds"]


def has_dispatch(sched: Schedule) -> bool:
    """Whether an op of the schedule declares its block dispatch (``Op.admit`` / ``Op.fills``,
    :meth:`ScheduleBuilder.kernel`); derived once per schedule."""
    if "_dispatch" not in sched.__dict__:
        sched.__dict__["_dispatch"] = any(op.admit >= 0 or op.fills >= 0 for op in sched.ops)
    return sched.__dict__["_dispatch"]


def _snapshot(active, ops, res, rate) -> dict[tuple[int, str], float]:
    """Usage rates by (resource, category) of the active ops (memory: reads and writes apart)."""
    snap: dict[tuple[int, str], float] = {}
    for i in active:
        op = ops[i]
        c = op.cat
        wr = dict(op.writes) if op.writes else {}
        for r, a in op.demands:
            if res[r].timing is not None:  # memory: reads and writes apart
                w = wr.get(r, 0.0)
                if a > w:
                    k = (r, c + " read")
                    snap[k] = snap.get(k, 0.0) + rate[i] * (a - w)
                if w > 0:
                    k = (r, c + " write")
                    snap[k] = snap.get(k, 0.0) + rate[i] * w
            else:
                snap[(r, c)] = snap.get((r, c), 0.0) + rate[i] * a
    return snap


def _compiled(policy) -> tuple | None:
    """The policy as the compiled core knows it (:meth:`Policy.compiled`), None where it does not."""
    f = getattr(policy, "compiled", None)
    return f() if f is not None else None


def _plain(policy) -> bool:
    """The default policy (one pool, first come): its answers are known without calling it."""
    t = type(policy)
    return t.available is Policy.available and t.latency is Policy.latency


# process-wide: op contents -> signature numbers, and (resources, ordered signatures of the active ops)
# -> their rates (:meth:`Allocator._allocate_memo`)
_SIGS: dict[tuple, int] = {}
_SIG_NUMBERS = itertools.count()
_FILLS: dict[tuple, list[float]] = {}
_RKEYS: dict[tuple, int] = {}  # resources (capacity, memory timing) -> number
_RKEY_NUMBERS = itertools.count()

# active sets at least this large are split into groups that share no resource (below it, splitting
# costs more than it saves)
SPLIT_MIN = 6


def rounds_cap(u: float, c: float, tiles: float, width: float) -> float:
    """The CUs the last wave of a GEMM keeps busy on average when only ``c`` CUs are left (the rest held
    by a communication kernel): the GEMM has ``tiles`` thread blocks run ``width`` at a time, the wave
    the last ``u`` of them; a block runs on one CU from its start to its end, so on ``w = min(c, width)``
    CUs the GEMM ends after ``ceil(tiles / w)`` rounds of a block's time. Its earlier waves took
    ``(tiles - u) / w`` of them as a fluid (later blocks fill the CUs a round leaves), so the last wave has
    ``R = ceil(tiles / w) - (tiles - u) / w`` rounds and keeps ``u / R`` CUs busy (at most ``w``; one
    wave: ``u / ceil(u / w)``; nothing held: ``u``). The tail effect of a GEMM pushed out of its last
    round: the staircase ``t3 measure``'s held rows show on an H200 (``docs/validation.md``). No CU
    left: nothing runs."""
    w = c if c < width else width
    if w <= 0.0:
        return 0.0
    return u / (math.ceil(tiles / w - 1e-9) - (tiles - u) / w)


def cluster_cus(c: float, full: float, m: float) -> float:
    """The CUs a GEMM whose thread blocks run in clusters of ``m`` can use when another kernel holds
    ``full - c`` of the ``full`` CUs: a cluster's blocks are co-scheduled, one per CU of a slot of ``m``,
    so each held CU leaves the other ``m - 1`` CUs of its slot idle too: ``full - m (full - c)``, in whole
    clusters, at least 0 (``m`` = 1: ``c``). ``compute.cluster_ctas``; the steps of ``t3 measure``'s held
    rows (``docs/validation.md``)."""
    if m <= 1.0:
        return c
    v = full - m * (full - c)
    return m * math.floor(v / m + 1e-9) if v > 0.0 else 0.0


def _quant(op) -> tuple | None:
    """A GEMM wave's caps (:attr:`Op.rounds`) as (resource, units, its demand on the resource, the
    GEMM's tiles (0: a wave before the last), its wave width, CTAs per cluster), for :func:`rounds_cap`
    and :func:`cluster_cus`; None for any other op."""
    if not op.rounds or not op.caps:
        return None
    dd = dict(op.demands)
    q = tuple((r, c, dd[r], *op.rounds) for r, c in op.caps if r in dd and dd[r] > 0)
    return q or None


class Allocator:
    """Rates of the active ops at one event: progressive filling, priority level by priority level,
    then the memory model (:mod:`t3.sim.memory`) on every memory resource.

    Filling: every op grows in proportion to its maximum rate until it reaches its cap or a resource
    it uses saturates. A *closed* memory stream (an op with a ``window`` of bytes in flight reading
    a memory resource) is capped at ``window / latency`` there; its memory use is left out of the
    first filling, so streams paced from outside (open streams: updates arriving over a link) and
    everything else are placed first.

    Memory: the first filling's flows set every memory resource's write share (its capacity, through
    the read/write turnaround) and the loaded latency each priority level sees (the resource's
    :class:`Policy`). Where a closed stream would move more than its window allows at that latency, or
    the flows exceed the capacity, the latency is solved for (the closed streams' equilibrium with the
    queue: ``X_i = min(D_i, W_i / L)``, regula falsi), which caps them; then the filling runs once more
    with every demand. At saturation the closed streams thus share what is left in proportion to
    their windows (Little's law). Two fillings at most: deterministic and cheap.

    The rates are a function of what the active ops ask, not of their identity or of the history, so
    an allocation is memoised under the active ops' *signatures*: the waves of a GEMM and the chunks
    of a collective meet the same situations over and over."""

    def __init__(self, ops, xmax, cap, policies, timings, like=None):
        self.ops, self.xmax, self.cap, self.policies, self.timings = ops, xmax, cap, policies, timings
        self.cap_full = cap  # the resources' capacities; ``cap`` less what running ops hold (:meth:`hold`)
        self.hkey = None  # what running ops hold, as (resource, units) pairs; None: nothing
        self.like = like  # per op: the id of an earlier op it copies (Op.like), or -1; None: no copies
        n = len(ops)
        self.plain = [_plain(p) for p in policies]
        self.all_plain = all(self.plain)
        # per op, filled in by _prep on its first allocation
        self.dem: list = [None] * n
        self.prio: list = [None] * n
        self.window: list = [None] * n
        self.mem = {r for r, t in enumerate(timings) if t is not None}
        # prepared on an op's first allocation (:meth:`_prep`)
        self.ready = [False] * n
        self.uniq = [False] * n  # the op names each resource once
        # per op: (resource, maximum rate x amount), the load it puts on the resource at full speed
        self.xdem: list = [None] * n
        self.dem1: list = [None] * n  # demands of the first filling (closed streams' memory left out)
        self.xdem1: list = [None] * n
        self.cap0 = list(xmax)  # unloaded cap: the window at the unloaded latency
        self.memof: list[tuple | None] = [None] * n  # ((r, a, writes, closed), ...) on memory resources
        self.rset: list[set | None] = [None] * n  # per op: the resources it names (:meth:`_groups`)
        # per op: a GEMM wave's caps as (resource, units, demand on it, the GEMM's tiles or 0, its wave
        # width, CTAs per cluster): thread blocks of one CU each that end in whole rounds when CUs are held
        # (:func:`rounds_cap`), and lose whole cluster slots (:func:`cluster_cus`)
        self.quant: list[tuple | None] = [_quant(op) for op in ops]
        self._memo: dict = {}
        self._amemo: dict = {}
        # signatures are numbered process-wide (equal asks, equal numbers in every schedule), so that
        # allocations can be shared between schedules with the same resources (:data:`_FILLS`)
        sigs = _SIGS
        if len(sigs) > 1_000_000:
            sigs.clear()  # the numbering goes on: numbers held by live allocators are never reused
        sig = self.sig = []
        for i, op in enumerate(ops):
            if like is not None and like[i] >= 0:  # a copy of an earlier op (Op.like): the same asks
                sig.append(sig[like[i]])
                continue
            content = (op.prio, xmax[i], op.window, *op.demands, None, *op.writes)
            if op.rounds:
                content += (None, *op.rounds, *op.caps)
            s = sigs.get(content)
            if s is None:
                s = sigs[content] = next(_SIG_NUMBERS)
            sig.append(s)
        # the resources as the filling sees them (capacity, memory timing); None with a policy other
        # than the default one (its answers may depend on more than these)
        self.rkey = None
        if self.all_plain:
            res = tuple(zip(cap, timings, strict=True))
            rk = _RKEYS.get(res)
            if rk is None:
                if len(_RKEYS) > 10_000:
                    _RKEYS.clear()  # numbers go on: one held by a live allocator is never given again
                rk = _RKEYS[res] = next(_RKEY_NUMBERS)
            self.rkey = rk

    def fresh(self) -> Allocator:
        """An allocator for a new run of the same ops: the per-op preparation is shared, the
        memoised allocations and latencies start empty (they are kept within one run only)."""
        a = copy.copy(self)
        a._memo, a._amemo = {}, {}
        a.cap, a.hkey = a.cap_full, None
        return a

    def hold(self, reserved: list[float]) -> None:
        """Capacities less what exclusive partitions in use hold (:attr:`Resource.parent`; whole CUs, so the
        sums are exact):
        the fillings see ``capacity - reserved``, never below 0, and are memoised under what is held."""
        hk = tuple((r, u) for r, u in enumerate(reserved) if u)
        if not hk:
            self.cap, self.hkey = self.cap_full, None
            return
        cap = list(self.cap_full)
        for r, u in hk:
            c = cap[r] - u
            cap[r] = c if c > 0.0 else 0.0
        self.cap, self.hkey = cap, hk

    def _prep(self, i: int) -> None:
        # every field is computed first and stored with its final value, ``ready`` last: runs of one
        # schedule share this preparation, so a run must never see a half-prepared op
        like = self.like
        if like is not None:
            j = like[i]
            if j >= 0 and self.ready[j]:  # a copy of a prepared op (read-only fields: shared)
                self.dem[i], self.prio[i], self.window[i] = self.dem[j], self.prio[j], self.window[j]
                self.xdem[i], self.dem1[i], self.xdem1[i] = self.xdem[j], self.dem1[j], self.xdem1[j]
                self.uniq[i], self.cap0[i], self.memof[i] = self.uniq[j], self.cap0[j], self.memof[j]
                self.ready[i] = True
                return
        op, mem, timings = self.ops[i], self.mem, self.timings
        x = self.xmax[i]
        dem = op.demands
        xdem = [(r, x * a) for r, a in dem]
        dem1, xdem1 = dem, xdem
        cap0 = self.cap0[i]
        memof = None
        on_mem = False
        for r, _ in dem:
            if r in mem:
                on_mem = True
                break
        if on_mem:
            wr = dict(op.writes)
            parts = []
            closed_r = set()
            for r, a in dem:
                if r in mem:
                    closed = op.window > 0 and timings[r].latency_s > 0 and a - wr.get(r, 0.0) > 0
                    parts.append((r, a, wr.get(r, 0.0), closed))
                    if closed:  # the window bounds the reads; writes are posted
                        closed_r.add(r)
                        rd = a - wr.get(r, 0.0)
                        cap0 = min(cap0, op.window / (timings[r].latency_s * rd))
            memof = tuple(parts)
            if closed_r:
                dem1 = [(r, a) for r, a in dem if r not in closed_r]
                xdem1 = [(r, xa) for r, xa in xdem if r not in closed_r]
        self.dem[i] = dem
        self.prio[i] = op.prio
        self.window[i] = op.window
        self.xdem[i] = xdem
        self.dem1[i], self.xdem1[i] = dem1, xdem1
        self.uniq[i] = len({r for r, _ in dem}) == len(dem)
        self.cap0[i] = cap0
        self.memof[i] = memof
        self.ready[i] = True

    # ---- filling ------------------------------------------------------------------------------
    def _fill(self, active, capx, cap, rate, dem, xdem) -> None:
        # (no comprehensions or generator expressions here: each costs a function call)
        policies, xmax, prio, plain = self.policies, self.xmax, self.prio, self.plain
        if len(active) == 1 and self.uniq[active[0]]:
            # one op: the filling's first step, written out (the general loop below does the same
            # arithmetic); it ends there unless rounding leaves the op unfrozen
            i = active[0]
            lvl = prio[i]
            x = xmax[i]
            c = capx[i]
            step = 1.0
            if c < x:
                s = c / x
                if s < step:
                    step = s
            left = []
            for r, xa in xdem[i]:
                cr = cap[r]
                av = cr - 0.0 if plain[r] else policies[r].available(cr, cr - 0.0, lvl, 0.0)
                s = av / xa
                if s < step:
                    step = s
                left.append((av, xa, cr))
            if step < 0:
                step = 0.0
            t = 0.0 + step
            x *= t
            frozen = t >= 1.0 - 1e-12 or x >= c * (1 - 1e-12)
            if not frozen:
                for av, xa, cr in left:
                    if av - step * xa <= 1e-12 * cr:
                        frozen = True
                        break
            if frozen:
                rate[i] = c if x > c else x
                return
        groups: dict[int, list[int]] = {}
        for i in active:
            p = prio[i]
            g = groups.get(p)
            if g is None:
                groups[p] = [i]
            else:
                g.append(i)
        single = len(groups) == 1
        levels = sorted(groups) if not single else list(groups)
        first, last = levels[0], levels[-1]
        used: dict[int, float] = {}
        lower: dict[int, float] = {}
        policed = not self.all_plain
        if not single and policed:
            for i in active:
                if prio[i] != first:
                    for r, xa in xdem[i]:
                        lower[r] = lower.get(r, 0.0) + xa
        for lvl in levels:
            group = active if single else groups[lvl]
            if lvl != first and policed:
                for i in group:
                    for r, xa in xdem[i]:
                        lower[r] -= xa
            avail: dict[int, float] = {}
            lim: dict[int, float] = {}  # capped ops: the filling level at which they reach their cap
            for i in group:
                c = capx[i]
                x = xmax[i]
                if c < x:
                    lim[i] = c / x
                for r, _ in dem[i]:
                    if r not in avail:
                        c = cap[r]
                        if plain[r]:
                            avail[r] = c - used.get(r, 0.0)
                        else:
                            low = lower.get(r, 0.0)
                            avail[r] = policies[r].available(
                                c, c - used.get(r, 0.0), lvl, low if low > 1e-12 * c else 0.0
                            )
            t = 0.0
            unfrozen = group
            while unfrozen:
                load: dict[int, float] = {}
                step = 1.0 - t
                for i in unfrozen:
                    if i in lim:
                        s = lim[i] - t
                        if s < step:
                            step = s
                    for r, xa in xdem[i]:
                        if r in load:
                            load[r] += xa
                        else:
                            load[r] = xa  # (= 0.0 + xa: xa >= 0)
                for r, ld in load.items():
                    s = avail[r] / ld
                    if s < step:
                        step = s
                if step < 0:
                    step = 0.0
                t += step
                sat = None
                for r, ld in load.items():
                    left = avail[r] - step * ld
                    avail[r] = left
                    if left <= 1e-12 * cap[r]:
                        if sat is None:
                            sat = {r}
                        else:
                            sat.add(r)
                nxt = []
                if t >= 1.0 - 1e-12:
                    for i in unfrozen:
                        x = xmax[i] * t
                        c = capx[i]
                        rate[i] = c if x > c else x
                else:
                    for i in unfrozen:
                        x = xmax[i] * t
                        c = capx[i]
                        frozen = x >= c * (1 - 1e-12)
                        if not frozen and sat is not None:
                            for r, _ in dem[i]:
                                if r in sat:
                                    frozen = True
                                    break
                        if frozen:
                            rate[i] = c if x > c else x
                        else:
                            nxt.append(i)
                unfrozen = nxt
            if lvl != last:
                for i in group:
                    x = rate[i]
                    for r, a in dem[i]:
                        used[r] = used.get(r, 0.0) + x * a

    # ---- one event ----------------------------------------------------------------------------
    def allocate(self, active, rate) -> None:
        """Rates of the active ops: each group of ops that shares no resource with the others is
        filled on its own (the filling of one group never reads another's resources, so the rates are
        those of one filling of all), and memoised on its own signatures: on all GPUs, each GPU's
        ops meet the same situations again while the other GPUs' ops differ."""
        if len(active) >= SPLIT_MIN:
            groups = self._groups(active)
            if len(groups) > 1:
                for g in groups:
                    self._allocate_memo(g, rate)
                return
        self._allocate_memo(active, rate)

    def _groups(self, active) -> list[list[int]]:
        """The active ops split into groups that share no resource (union-find over resources), each
        in the order of ``active``."""
        ops = self.ops
        # one group when a resource of the first op is named by every op (in symmetric schedules
        # nearly every event: the ops all use the GPU's HBM)
        rset = self.rset
        for i in active:
            if rset[i] is None:
                rset[i] = {r for r, _ in ops[i].demands}
        for r in rset[active[0]]:
            for i in active:
                if r not in rset[i]:
                    break
            else:
                return [active]
        parent: dict[int, int] = {}
        for i in active:
            rs = ops[i].demands
            if not rs:
                continue
            r0 = rs[0][0]
            while r0 in parent and parent[r0] != r0:
                r0 = parent[r0]
            parent.setdefault(r0, r0)
            for r, _ in rs[1:]:
                while r in parent and parent[r] != r:
                    r = parent[r]
                if r != r0:
                    parent[r] = r0
        roots: dict[int, list[int]] = {}
        alone: list[list[int]] = []
        for i in active:
            rs = ops[i].demands
            if not rs:
                alone.append([i])
                continue
            r = rs[0][0]
            while parent[r] != r:
                r = parent[r]
            g = roots.get(r)
            if g is None:
                roots[r] = [i]
            else:
                g.append(i)
        return list(roots.values()) + alone

    def _allocate_memo(self, active, rate) -> None:
        sig = self.sig
        if len(active) == 1:
            key = sig[active[0]]
        elif len(active) == 2:
            a, b = sig[active[0]], sig[active[1]]
            key = (a, b) if a <= b else (b, a)
        else:
            key = tuple(sorted([sig[i] for i in active]))
        hk = self.hkey
        if hk is not None:
            key = (key, hk)
        hit = self._amemo.get(key)
        if hit is not None:
            for i in active:
                rate[i] = hit[sig[i]]
            return
        rk = self.rkey
        if rk is None:
            self._allocate(active, rate)
        else:
            # the filling is a pure function of the ordered asks and the resources: computed once per
            # process for every schedule that meets the same situation (same rates, bit for bit)
            fkey = (rk, *[sig[i] for i in active]) if hk is None else (rk, hk, *[sig[i] for i in active])
            got = _FILLS.get(fkey)
            if got is None:
                self._allocate(active, rate)
                if len(_FILLS) > 200_000:
                    _FILLS.clear()
                _FILLS[fkey] = [rate[i] for i in active]
            else:
                for i, x in zip(active, got, strict=True):
                    rate[i] = x
        if len(self._amemo) > 100_000:
            self._amemo.clear()
        self._amemo[key] = {sig[i]: rate[i] for i in active}

    def _allocate(self, active, rate) -> None:
        ready = self.ready
        for i in active:
            if not ready[i]:
                self._prep(i)
        cap0, memof = self.cap0, self.memof
        capx = {i: cap0[i] for i in active}
        if self.hkey is not None:  # CUs held: a GEMM's last wave ends in whole rounds (rounds_cap), a
            # clustered GEMM's waves lose whole cluster slots (cluster_cus)
            cap, full, quant = self.cap, self.cap_full, self.quant
            for i in active:
                q = quant[i]
                if q is not None:
                    for r, u, a, tiles, width, m in q:
                        c = cap[r]
                        if c < full[r]:
                            if m > 1.0:
                                c = cluster_cus(c, full[r], m)
                            v = (rounds_cap(u, c, tiles, width) if tiles else (u if u < c else c)) / a
                            if v < capx[i]:
                                capx[i] = v
        on_mem = [i for i in active if memof[i] is not None] if self.mem else []
        if not on_mem:
            self._fill(active, capx, self.cap, rate, self.dem, self.xdem)
            return
        cap = list(self.cap)
        timings = self.timings
        # the turnaround of the first filling: the write share of what the ops ask at their caps
        ask: dict[int, list[float]] = {}
        for i in on_mem:
            c = capx[i]
            for r, a, w, _ in memof[i]:
                acc = ask.get(r)
                if acc is None:
                    acc = ask[r] = [0.0, 0.0]
                acc[0] += c * a
                acc[1] += c * w
        eta = {}
        for r, (tot, wtot) in ask.items():
            eta[r] = timings[r].eta(wtot / tot) if tot > 0 else 1.0
            cap[r] = self.cap[r] * eta[r]
        self._fill(active, capx, cap, rate, self.dem1, self.xdem1)
        # the first filling's flows per memory resource: total, writes, by level, closed streams
        prio = self.prio
        flows: dict[int, tuple] = {}
        for i in on_mem:
            x = rate[i]
            lv = prio[i]
            for r, a, w, c in memof[i]:
                f = flows.get(r)
                if f is None:
                    f = flows[r] = [0.0, 0.0, {}, {}]
                f[0] += x * a
                f[1] += x * w
                by_level = f[2]
                by_level[lv] = by_level.get(lv, 0.0) + x * a
                if c:
                    f[3].setdefault(lv, []).append((i, a, a - w))
        again = False
        window = self.window
        for r in sorted(flows):
            flow, wflow, by_level, closed = flows[r]
            if flow <= 0:
                continue
            timing = timings[r]
            e = timing.eta(wflow / flow)
            if abs(e - eta[r]) > 1e-3 * eta[r]:
                eta[r] = e
                cap[r] = self.cap[r] * e
                again = True
            if not closed:
                continue
            policy = self.policies[r]
            over = flow > cap[r] * (1 + 1e-9)
            for lv in sorted(closed):
                lat = policy.latency(timing, cap[r], lv, by_level)
                if not over and all(rate[i] * rd <= window[i] / lat * (1 + 1e-6) for i, _, rd in closed[lv]):
                    continue
                lat = self._solve(r, lv, closed[lv], by_level, cap[r], rate)
                for i, _, rd in closed[lv]:
                    c = window[i] / (lat * rd)
                    if c < capx[i]:
                        capx[i] = c
                again = True
        # (when no memory saturated and no window bound, the first filling already holds: the closed
        # streams' memory use, left out of it, constrained nobody)
        if again:
            self._fill(active, capx, cap, rate, self.dem, self.xdem)

    def _solve(self, r, lv, group, by_level, cap, rate) -> float:
        """Latency at which the closed streams of level ``lv`` on memory ``r`` read what their windows
        allow (reads ``X_i = min(D_i, W_i / L)``, ``D_i`` their first-filling reads; their writes follow
        in proportion), the other flows held: the root of ``policy latency(flows(L)) - L``, which falls
        as ``L`` grows, by regula falsi (Illinois) in a bracket; memoised (periodic schedules meet the
        same situation wave after wave)."""
        timing, policy, ops = self.timings[r], self.policies[r], self.ops
        demand = tuple((ops[i].window, rate[i] * rd, a / rd) for i, a, rd in group)
        base = by_level[lv] - sum(rate[i] * a for i, a, _ in group)
        key = (r, lv, demand, base, cap, tuple(sorted(by_level.items())))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        flows = dict(by_level)

        def h(lat: float) -> float:
            flows[lv] = base + sum(min(d, w / lat) * k for w, d, k in demand)
            return policy.latency(timing, cap, lv, flows) - lat

        lo = timing.latency_s
        hlo = h(lo)
        if hlo <= 0:  # no queueing at the unloaded latency
            lat = lo
        else:
            hi, hhi = 2.0 * lo, h(2.0 * lo)
            for _ in range(200):
                if hhi < 0:
                    break
                lo, hlo = hi, hhi
                hi *= 2.0
                hhi = h(hi)
            if hhi == math.inf or hhi >= 0:
                lat = hi  # the other flows fill the memory: the closed streams barely move
            else:
                side = 0
                for _ in range(100):
                    x = (
                        (lo * hhi - hi * hlo) / (hhi - hlo)
                        if hhi != hlo and hlo != math.inf
                        else 0.5 * (lo + hi)
                    )
                    if not lo < x < hi:
                        x = 0.5 * (lo + hi)
                    hx = h(x)
                    if hx > 0:
                        lo, hlo = x, hx
                        if side == 1:
                            hhi *= 0.5
                        side = 1
                    else:
                        hi, hhi = x, hx
                        if side == -1:
                            hlo *= 0.5
                        side = -1
                    if hi - lo <= 1e-12 * hi:
                        break
                lat = hi
        if len(self._memo) > 100_000:
            self._memo.clear()
        self._memo[key] = lat
        return lat


def _load_native():
    """The compiled core (:mod:`t3.sim._native`), or None: ``T3_ENGINE=python``, not built, or built from
    another version of its source (then a warning says so: a stale core could differ from this engine;
    ``T3_ENGINE=native`` turns both into errors)."""
    import hashlib
    import warnings
    from pathlib import Path

    from t3._compiled import engine_env

    global _ENGINE_ERROR
    want = engine_env()
    if want not in ("", "python", "native"):
        _ENGINE_ERROR = (
            f"T3_ENGINE: must be 'python' or 'native' (any case; or unset), got {os.environ['T3_ENGINE']!r}"
        )
        return None
    if want == "python":
        return None
    try:
        from t3.sim import _native as nat
    except ImportError as err:
        if want == "native":
            _ENGINE_ERROR = f"T3_ENGINE=native: the compiled engine core is not built ({err})"
        return None
    src = Path(__file__).with_name("_native.pyx")
    if src.exists():
        sha = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
        built = getattr(nat, "SOURCE_SHA256", "")
        if built != sha:
            msg = (
                f"the compiled engine core was built from another version of {src.name} ({built or 'unknown'}, "
                f"the source is {sha}): rebuild it (pip install -e .)"
            )
            if want == "native":
                _ENGINE_ERROR = f"T3_ENGINE=native: {msg}"
                return None
            warnings.warn(f"{msg}; the Python engine runs meanwhile", RuntimeWarning, stacklevel=2)
            return None
    return nat


# an engine choice the environment asked for and that cannot be honoured (a bad T3_ENGINE, or
# T3_ENGINE=native without a current core): refused by check_engine() before any simulation, never at import
_ENGINE_ERROR: str | None = None
_native = _load_native()


def check_engine() -> None:
    """Refuse (:class:`t3.errors.ConfigError`, one line: bad input) an engine choice that cannot be
    honoured (``T3_ENGINE``); the ``t3`` command calls it before any work, :meth:`Engine.run` before any
    run."""
    if _ENGINE_ERROR is not None:
        from t3.errors import ConfigError

        raise ConfigError(_ENGINE_ERROR)


def _engine_env() -> str:
    from t3._compiled import engine_env

    return engine_env()


def engine_core() -> str:
    """Which engine runs the schedules it covers, in words (``t3 --version``)."""
    check_engine()
    if _native is not None:
        return "compiled core (t3.sim._native)"
    return "Python (compiled core " + (
        "off: T3_ENGINE=python)" if _engine_env() == "python" else "not built)"
    )
