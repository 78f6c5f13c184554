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
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from t3.errors import SimulationError
from t3.sim.schedule import Op, Schedule

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
    ``names``), ``"delay"`` (an op waits forever), ``"overflow"`` (the time left overflows: rates on
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
    under any legal interleaving. With the defaults the engine is fully deterministic."""

    def __init__(self, *, trace: bool = False, seed: int | None = None, jitter: float = 0.0):
        self.trace = trace
        self.rng = random.Random(seed) if seed is not None else None
        self.jitter = jitter

    def run(self, sched: Schedule) -> Result:
        ops = sched.ops
        res = sched.resources
        n = len(ops)
        cap = [r.capacity for r in res]
        policies = [r.policy for r in res]
        indeg = [len(op.deps) for op in ops]
        children: list[list[int]] = [[] for _ in range(n)]
        for op in ops:
            for d in op.deps:
                children[d].append(op.id)
        # static per-op maximum rate (fraction of the op per second)
        xmax = [0.0] * n
        for op in ops:
            x = math.inf
            for r, a in op.demands:
                x = min(x, cap[r] / a)
            dem = dict(op.demands)
            for r, c in op.caps:
                if r in dem:
                    x = min(x, c / dem[r])
            xmax[op.id] = x
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
        levels: list[list[tuple[float, int]]] | None = [[] for _ in range(ns)] if self.trace else None

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

        def drain() -> None:
            for q in queues:
                while q and fits(q[0]):
                    i = q.popleft()
                    s0 = ops[i].acquire[0][0]
                    wait_s[s0] += now - since.pop(i)
                    take(i)
                    work.append((0, i))

        work: list[tuple[int, int]] = [
            (0, i) for i in range(n) if indeg[i] == 0
        ]  # (0=begin|1=enter|2=finish, id)
        if rng:
            rng.shuffle(work)

        def process() -> bool:
            nonlocal seq
            changed = False
            while work:
                what, i = work.pop(0)
                op: Op = ops[i]
                if what == 0:
                    if op.acquire and not granted[i]:
                        s0 = op.acquire[0][0]
                        if any(queues[s] for s, _ in op.acquire) or not fits(i):
                            queues[s0].append(i)
                            since[i] = now
                            waits[s0] += 1
                            continue
                        take(i)
                    start[i] = now
                    if op.on_start is not None:
                        op.on_start()
                    d = op.delay_s
                    if d > 0:
                        if jitter:
                            d *= 1.0 + jitter * rng.random() if rng else 1.0 + jitter
                        heapq.heappush(heap, (now + d, seq, i))
                        seq += 1
                    else:
                        work.append((1, i))
                elif what == 1:
                    if op.demands:
                        active.append(i)
                        changed = True
                    else:
                        work.append((2, i))
                else:
                    end[i] = now
                    if op.on_finish is not None:
                        op.on_finish()
                    if op.release:
                        for s, u in op.release:
                            held[s] -= u
                            if levels is not None:
                                levels[s].append((now, held[s]))
                        drain()
                    new = []
                    for c in children[i]:
                        indeg[c] -= 1
                        if indeg[c] == 0:
                            new.append((0, c))
                    if rng:
                        rng.shuffle(new)
                    work.extend(new)
            return changed

        dirty = process()
        while active or heap:
            if dirty and active:
                self._allocate(active, ops, xmax, cap, policies, rate)
                dirty = False
            dt = math.inf
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
            if dt == math.inf:
                raise _stall(now, active, heap, ops, res, rate)
            if usage is not None and dt > 0:
                snap: dict[tuple[int, str], float] = {}
                for i in active:
                    c = ops[i].cat
                    for r, a in ops[i].demands:
                        snap[(r, c)] = snap.get((r, c), 0.0) + rate[i] * a
                usage.append((now, t_next, snap))
            done = []
            keep = []
            for i in active:
                remaining[i] -= rate[i] * dt
                if remaining[i] <= _EPS:
                    done.append(i)
                else:
                    keep.append(i)
            now = t_next
            events += 1
            if done:
                active[:] = keep
                if rng:
                    rng.shuffle(done)
                work.extend((2, i) for i in done)
            while heap and heap[0][0] <= now:
                work.append((1, heapq.heappop(heap)[2]))
            process()
            dirty = True
        if any(math.isnan(e) for e in end):
            raise _unfinished(ops, end, queues, sems, held)
        meta: dict = {}
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
        """Progressive filling by priority level; writes ``rate`` for every active op."""
        levels = sorted({ops[i].prio for i in active})
        used: dict[int, float] = {}
        # demand (at maximum rates) of the levels below the current one, per resource
        lower: dict[int, float] = {}
        if len(levels) > 1:
            for i in active:
                if ops[i].prio != levels[0]:
                    for r, a in ops[i].demands:
                        lower[r] = lower.get(r, 0.0) + xmax[i] * a
        for lvl in levels:
            group = [i for i in active if ops[i].prio == lvl]
            if lvl != levels[0]:
                for i in group:
                    for r, a in ops[i].demands:
                        lower[r] -= xmax[i] * a
            avail: dict[int, float] = {}
            for i in group:
                for r, _ in ops[i].demands:
                    if r not in avail:
                        rem = cap[r] - used.get(r, 0.0)
                        low = lower.get(r, 0.0)
                        avail[r] = policies[r].available(
                            cap[r], rem, lvl, low if low > 1e-12 * cap[r] else 0.0
                        )
            t = 0.0
            unfrozen = group
            while unfrozen:
                load: dict[int, float] = {}
                for i in unfrozen:
                    x = xmax[i]
                    for r, a in ops[i].demands:
                        load[r] = load.get(r, 0.0) + x * a
                step = 1.0 - t
                for r, ld in load.items():
                    s = avail[r] / ld
                    if s < step:
                        step = s
                if step < 0:
                    step = 0.0
                t += step
                sat = set()
                for r, ld in load.items():
                    avail[r] -= step * ld
                    if avail[r] <= 1e-12 * cap[r]:
                        sat.add(r)
                if t >= 1.0 - 1e-12:
                    for i in unfrozen:
                        rate[i] = xmax[i] * t
                    break
                nxt = []
                for i in unfrozen:
                    if any(r in sat for r, _ in ops[i].demands):
                        rate[i] = xmax[i] * t
                    else:
                        nxt.append(i)
                unfrozen = nxt
            for i in group:
                for r, a in ops[i].demands:
                    used[r] = used.get(r, 0.0) + rate[i] * a
