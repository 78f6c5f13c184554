"""A static pipeline model of a FiCCO schedule: its time from the operator's sizes, no engine.

The model never builds a schedule or runs :class:`t3.sim.engine.Engine`. It runs the GEMM pieces'
waves under the engine's sharing rule (so a piece alone, or two pieces on two streams, take exactly
what the engine says; on hardware, what profiling the piece kernels alone and in pairs gives) and
composes those with closed-form transfer times by a max-plus recurrence (a piece starts when its
data has arrived and its stream is free; a transfer step starts when its data is ready and the
previous step to the same peer is done). How
communication contends with the GEMMs is *estimated*, not simulated: the GEMM loses a CU kernel's
CUs, the GEMM's HBM bandwidth is cut by the communication's average HBM rate, and a
contention factor per (operation, topology, schedule), fitted on the training cases, scales the
result. :func:`ideal_s` estimates ``T_ideal`` of :mod:`t3.ficco.losses` (the schedule's own pieces,
communication on a private HBM and CU pool); :func:`shared_s` the time with the GPU shared;
:func:`select_pipeline` ranks every schedule by ``shared_s`` times its factor and runs the least.

Durations:

- GEMM pieces: each GEMM's static plan (:func:`t3.schedules.ficco.gemm_plan`: tile choice, waves)
  as the kernel runs it (:func:`t3.ops.gemm.add_gemm`): a launch, then per wave a load (its reads)
  and a compute (its CU work and output writes), the load of wave ``i + 1`` under the compute of
  wave ``i``; a K piece after the first first reads the output back. Concurrent loads and computes
  (one GEMM's double buffering, or two GEMMs on two streams) share the HBM and the CUs by
  demand-proportional progressive filling, the engine's rule (:func:`_share`). One stream: pieces
  back to back, each its alone time. Two streams: piece ``i`` waits for piece ``i - 2``; where
  the GPU dispatches blocks in launch order (``compute.dispatch``), a GEMM kernel waits for the CUs
  while the other stream's fills them (:class:`_Gate`), so the two streams' GEMMs take turns;
- a transfer step: fixed delay (link latency, DMA command overhead, kernel launch for a CU kernel)
  plus its bytes at the bottleneck rate of what the step's sends share: the links at their
  achievable rate (a mesh: one per peer; a switch: the GPU's port), the HBM (each GPU reads what it
  sends and writes what it receives), the communication kernel's CUs (a load and a store per byte at
  the per-CU rate), or the DMA engines (a command runs on one engine); a bulk collective is the
  library collective's own closed form (:func:`t3.ops.collectives.idle_time`);
- reductions: incremental ones (3 bytes of HBM per received byte, on the communication CUs) one at a
  time in landing order; batched ones (N reads + 1 write, all CUs) one kernel per step.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from t3.config.hardware import Hardware
from t3.errors import ScheduleError
from t3.ficco.space import Axes, FiccoOperator, check_fits, enumerate_space, parse_name
from t3.ops.collectives import Executor, choose, idle_time
from t3.ops.gemm import cus_beside
from t3.schedules.ficco import _unit_bytes, comm_cus, gemm_plan, plan_pieces, shape_of
from t3.sim.engine import Allocator
from t3.sim.schedule import Policy, hbm_timing
from t3.workload.sublayers import GemmShape


def gemm_alone_s(shape: GemmShape, hw: Hardware, cus: int, bw: float | None = None) -> float:
    """Time (s) of a GEMM alone on ``cus`` CUs (launch included) from its static plan."""
    return _alone_s(_job(shape, False, hw, cus, bw or hw.hbm.effective_Bps), _caps(hw, bw))


def _alone_s(job: _Job, caps: dict[str, float]) -> float:
    """Time (s) of one GEMM job alone (memoised: a job's specs already hold its HBM share): what
    :func:`_fluid` computes for it on one stream, its ops one after the other, each alone at the rate
    :func:`_share` gives it (the same additions in the same order)."""
    hit = _ALONE_T.get(id(job))
    if hit is None or hit[0] is not job:
        now = 0.0
        if job.acc is not None:
            now += 1.0 / _rates([job.acc], caps)[0]
        now += job.launch_s
        for load, body in job.waves:
            if load is not None:
                now += 1.0 / _rates([load], caps)[0]
            if body is not None:
                now += 1.0 / _rates([body], caps)[0]
        hit = _memo(_ALONE_T)[id(job)] = (job, now)
    return hit[1]


_ALONE_T: dict[int, tuple] = {}


def _memo(cache: dict) -> dict:
    """A memo table, emptied when it grows past 100 000 entries (a long sweep stays bounded)."""
    if len(cache) > 100_000:
        cache.clear()
    return cache


@dataclass(frozen=True)
class _Job:
    """One GEMM of a piece: the output read back first (a K piece after the first accumulates),
    the kernel launch, then its waves as (load, compute) op specs ``(maximum rate, {resource:
    amount})`` (:func:`t3.ops.gemm.add_gemm`)."""

    acc: tuple | None
    launch_s: float
    waves: tuple[tuple[tuple, tuple], ...]


def _job(shape: GemmShape, acc: bool, hw: Hardware, cus: int, bw: float) -> _Job:
    key = (id(hw), shape, acc, cus, bw)
    hit = _JOBS.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    waves = []
    plan = gemm_plan(shape, hw, cus=cus)
    for w in plan.waves:
        wb = sum(w.write_bytes.values())
        cu = w.compute_s * w.cus_used
        body = w.read_bytes - w.prologue_bytes + wb
        x = min(1.0 / w.compute_s, hw.compute.cus / cu, bw / body if body > 0 else math.inf)
        waves.append(
            (
                _spec(bw, {"hbm": w.prologue_bytes}, w.window_bytes),
                (x, _pos({"cu": cu, "hbm": body}), w.window_bytes, wb),
            )
        )
    ob = shape.out_bytes
    job = _Job(_spec(bw, {"hbm": ob}) if acc else None, plan.launch_s(hw), tuple(waves))
    _memo(_JOBS)[key] = (hw, job)
    return job


_JOBS: dict[tuple, tuple[Hardware, _Job]] = {}


def _pos(dem: dict[str, float]) -> dict[str, float]:
    return {r: a for r, a in dem.items() if a > 0}


def _spec(bw: float, dem: dict[str, float], window: float = 0.0) -> tuple | None:
    """An HBM-only read op ``(maximum rate, {resource: amount}, window, written bytes)`` (None when it
    moves nothing: it finishes at once)."""
    return (bw / dem["hbm"], dem, window, 0.0) if dem["hbm"] > 0 else None


def _caps(hw: Hardware, bw: float | None) -> dict:
    return {
        "hbm": bw or hw.hbm.effective_Bps, "cu": float(hw.compute.cus), "timing": hbm_timing(hw),
        "launch_order": hw.compute.dispatch == "launch_order",  # GEMM kernels take the CUs in turn
    }  # fmt: skip


def _caps_key(caps: dict) -> tuple:
    """What of ``caps`` the sharing and the streams depend on, as a memo key."""
    return caps["hbm"], caps["cu"], caps["timing"], caps["launch_order"]


_RESOURCES = ("hbm", "cu")
_POLICIES = (Policy(), Policy())  # one pool each, first come: what a schedule's HBM and CUs get


class _Op(NamedTuple):  # what the engine's Allocator reads of an op
    prio: int
    demands: list[tuple[int, float]]
    window: float
    writes: list[tuple[int, float]]
    caps: tuple = ()  # (none: the pipeline's ops are shares of whole kernels, never a GEMM's last wave)
    rounds: tuple = ()


def _share(ops: list[tuple], caps: dict) -> list[float]:
    """Rates (fraction of the op per second) of concurrent ops ``(maximum rate, {resource: amount},
    window, written bytes)``: the engine's own allocation (:class:`t3.sim.engine.Allocator`: progressive
    filling, then the memory model on the HBM), one priority level."""
    shim = [
        _Op(0, [(_RESOURCES.index(r), a) for r, a in dem.items()], win, [(0, wr)] if wr > 0 else [])
        for _, dem, win, wr in ops
    ]
    rate = [0.0] * len(ops)
    cap = [caps[r] for r in _RESOURCES]
    Allocator(shim, [x for x, *_ in ops], cap, _POLICIES, [caps["timing"], None]).allocate(
        list(range(len(ops))), rate
    )
    return rate


class _Gate:
    """Block dispatch in launch order (``compute.dispatch = "launch_order"``, as
    :func:`t3.ops.gemm.declare_kernel` declares a GEMM to the engine): a GEMM kernel begins only when
    no other fills the CUs, first come first served; it fills them from its launch to the end of its
    last wave."""

    def __init__(self) -> None:
        self.holder = None
        self.queue: list = []

    def enter(self, s) -> bool:
        """``s`` asks to begin its GEMM: True if it may (now, or once let in by :meth:`leave`)."""
        if self.holder is s:
            return True
        if self.holder is None and not self.queue:
            self.holder = s
            return True
        if s not in self.queue:
            self.queue.append(s)
        return False

    def leave(self, s) -> None:
        if self.holder is s:
            self.holder = self.queue.pop(0) if self.queue else None


class _Stream:
    """The pieces of one compute stream, run in order: a piece starts when its units have arrived
    and the stream's previous piece has ended; a GEMM runs its waves one after the other, each a
    prologue (its first K stages' reads) then a body (compute coupled to the remaining reads and the
    output writes), as :func:`t3.ops.gemm.add_gemm` builds them; with a ``gate``, its launch waits
    for the CUs (:class:`_Gate`)."""

    def __init__(self, items: list, ready, gate: _Gate | None = None):
        self.items, self.ready, self.gate = items, ready, gate
        self.p = 0  # piece
        self.j = -1  # job of the piece (-1: waiting for its units)
        self.stage = ""
        self.until = 0.0
        self.ends: list[float] = []
        self.op = None  # the op in flight: accumulation read, a wave's prologue or its body
        self.wave = 0
        self.phase = 0  # 0: prologue, 1: body

    def step(self, now: float) -> bool:
        """Take the transitions possible at ``now``; True if any."""
        if self.p == len(self.items):
            return False
        units, jobs = self.items[self.p]
        if self.j == -1:
            t = max((self.ready(u) for u in units), default=0.0)
            if t > now:
                self.until = t
                return False
            self.j, self.stage = 0, "acc"
            self.op = [jobs[0].acc, 1.0] if jobs[0].acc else None
            return True
        job = jobs[self.j]
        if self.stage == "acc":
            if self.op is not None or (self.gate is not None and not self.gate.enter(self)):
                return False
            self.stage, self.until = "launch", now + job.launch_s
            return True
        if self.stage == "launch":
            if now < self.until:
                return False
            self.stage, self.wave, self.phase, self.op = "waves", 0, 0, None
        if self.op is not None:
            return False
        if self.wave == len(job.waves):
            if self.gate is not None:
                self.gate.leave(self)
            self.j += 1
            if self.j == len(jobs):
                self.ends.append(now)
                self.p, self.j = self.p + 1, -1
            else:
                nxt = jobs[self.j]
                self.stage, self.op = "acc", ([nxt.acc, 1.0] if nxt.acc else None)
            return True
        spec = job.waves[self.wave][self.phase]
        if spec is None:
            self._advance()
        else:
            self.op = [spec, 1.0]
        return True

    def _advance(self) -> None:
        if self.phase == 0:
            self.phase = 1
        else:
            self.wave, self.phase = self.wave + 1, 0

    def active(self) -> list[list]:
        if self.p == len(self.items) or self.j == -1:
            return []
        if self.stage in ("acc", "waves"):
            return [self.op] if self.op else []
        return []

    def finish(self, op: list) -> None:
        self.op = None
        if self.stage == "waves":
            self._advance()

    def timer(self, now: float) -> float:
        if self.p < len(self.items) and (self.j == -1 or self.stage == "launch") and self.until > now:
            return self.until
        return math.inf


def _run_streams(items: list, ready, streams: int, caps: dict[str, float]) -> dict:
    """End time (s) of every unit's piece: piece ``i`` runs on stream ``i mod streams`` (it waits
    for its units and for piece ``i - streams``); concurrent ops share the HBM and the CUs by
    :func:`_share`. On one stream nothing runs concurrently: a piece takes its GEMMs' alone times."""
    if streams == 1:
        ends, free = [], 0.0
        for units, jobs in items:
            free = max(max((ready(u) for u in units), default=0.0), free)
            free += sum(_alone_s(j, caps) for j in jobs)
            ends.append(free)
        per_stream = [ends]
    else:
        gate = _Gate() if caps["launch_order"] else None
        ss = [_Stream(items[s::streams], ready, gate) for s in range(streams)]
        _fluid(ss, caps)
        per_stream = [s.ends for s in ss]
    done: dict = {}
    for s in range(streams):
        for (units, _), e in zip(items[s::streams], per_stream[s], strict=True):
            for u in units:
                done[u] = e
    return done


_RATES: dict[tuple, tuple] = {}  # the same concurrent ops recur: their shares, memoised


def _fluid(ss: list[_Stream], caps: dict[str, float]) -> None:
    """Runs the streams to their ends: between two events every active op progresses at the rate
    :func:`_share` gives it."""
    now = 0.0
    ckey = _caps_key(caps)
    gated = any(s.gate is not None for s in ss)
    while True:
        moved = True
        while moved:  # a stream's transitions depend on its own state and the time, and on the CUs' gate:
            moved = False  # a stream leaving it lets another in at the same instant (a second pass)
            for s in ss:
                while s.step(now):
                    moved = gated
        act = [(s, a) for s in ss for a in s.active()]
        nxt = min(s.timer(now) for s in ss)
        if not act:
            if nxt == math.inf:
                return
            now = nxt
            continue
        rates = _rates([a[0] for _, a in act], caps, ckey)
        dt = min(nxt - now, min(a[1] / r for (_, a), r in zip(act, rates, strict=True)))
        now += dt
        for (s, a), r in zip(act, rates, strict=True):
            a[1] -= dt * r
            if a[1] <= 1e-9:
                s.finish(a)


def _rates(specs: list, caps: dict, ckey: tuple | None = None) -> list[float]:
    """:func:`_share` of ``specs``, memoised by the specs' identity."""
    if ckey is None:
        ckey = _caps_key(caps)
    key = (ckey, *map(id, specs))
    hit = _RATES.get(key)
    if hit is None:
        # the entry holds the specs: while it exists, no other object can have their ids
        hit = _memo(_RATES)[key] = (specs, _share(specs, caps))
    return hit[1]


def pieces(fop: FiccoOperator, hw: Hardware, ax: Axes, cus: int, bw: float | None = None) -> list:
    """(units, GEMM jobs) of each compute piece on GPU 0 (symmetric operators); ``bw``: the HBM
    bandwidth the GEMM gets (default: all of it)."""
    bw = bw or hw.hbm.effective_Bps
    key = (fop, ax, id(hw))
    hit = _SHAPES.get(key)
    if hit is None or hit[0] is not hw:
        shapes = [(p.units, shape_of(fop, ax, p, 0)) for p in plan_pieces(fop, hw, ax)]
        hit = _memo(_SHAPES)[key] = (hw, shapes)
    jobs: dict = {}  # pieces share shapes: one lookup each
    out = []
    for u, sh in hit[1]:
        js = []
        for shape, acc in sh:
            j = jobs.get((shape, acc))
            if j is None:
                j = jobs[shape, acc] = _job(shape, acc, hw, cus, bw)
            js.append(j)
        out.append((u, tuple(js)))
    return out


_SHAPES: dict[tuple, tuple] = {}


class _Comm:
    """Closed-form transfer steps of a schedule's own sends (:func:`t3.schedules.ficco._Gen.send`:
    :func:`t3.ops.collectives.transfer_work`; a DMA command runs on one engine), per GPU, symmetric."""

    def __init__(self, hw: Hardware, executor: str, cus: int | None):
        self.hw, self.ex = hw, executor
        self.bw = hw.link.bandwidth_Bps * hw.collective.link_efficiency
        # a send reads at the source and writes at the destination: both on this GPU's HBM
        self.hbm = hw.hbm.effective_Bps * hbm_timing(hw).eta(0.5)
        self.copy = (cus or hw.compute.cus) * hw.compute.cu_copy_Bps / 2  # a load and a store per byte
        dma = executor == "dma"
        self.delay = (
            hw.link.latency_s
            + (hw.dma.command_overhead_s if dma else 0.0)
            + (0.0 if dma else hw.compute.kernel_launch_s)
        )

    def step_s(self, nbytes: float, sends: int) -> float:
        """``sends`` concurrent sends of ``nbytes`` each from every GPU (each GPU receives as many)."""
        hw = self.hw
        links = sends * self.bw if hw.topology.kind == "mesh" else self.bw
        rate = min(links, self.hbm / 2)
        if self.ex == "cu":
            rate = min(rate, self.copy)
        else:
            rate = min(rate, min(sends, hw.dma.engines) * hw.dma.bandwidth_Bps)
        return self.delay + sends * nbytes / rate


def ideal_s(fop: FiccoOperator, hw: Hardware, ax: Axes) -> float:
    """Static estimate of the schedule's contention-free time (s). Mesh and switch topologies,
    symmetric operators (uniform MoE routing); others raise :class:`ScheduleError`."""
    n = fop.gpus
    if hw.topology.kind == "ring":
        raise ScheduleError("pipeline model: ring topologies are not modelled")
    if not fop.symmetric:
        raise ScheduleError("pipeline model: skewed MoE routing is not modelled")
    c = hw.compute
    k = comm_cus(hw, n)
    if ax.comm == "bulk":
        return _bulk_s(fop, hw, ax)
    # the better of the two plan sets: GEMM on all CUs, or on what the CU kernel leaves (losses.py)
    cus_opts = [c.cus] if ax.executor == "dma" else [c.cus, cus_beside(hw, k)]
    return min(_overlapped_s(fop, hw, ax, cu_n, k) for cu_n in cus_opts)


def _overlapped_s(
    fop: FiccoOperator, hw: Hardware, ax: Axes, cus: int, k: int, bw: float | None = None
) -> float:
    n = fop.gpus
    com = _Comm(hw, ax.executor, k)
    ps = pieces(fop, hw, ax, cus, bw)
    ficco = ax.comm == "ficco"
    arrive: dict[tuple, float] = {}
    if fop.op in ("ag-gemm", "moe"):
        t = 0.0
        if ficco:
            for j in range(n):
                t += com.step_s(_unit_bytes(fop, 0, j, "in"), n - 1)
                for o in range(1, n):
                    arrive[(o, j)] = t
        else:
            shard = sum(_unit_bytes(fop, 0, j, "in") for j in range(n))
            for o in range(1, n):
                t += com.step_s(shard, 1)
                for j in range(n):
                    arrive[(o, j)] = t
    caps = _caps(hw, bw)
    if arrive:
        done = _run_streams(ps, lambda u: arrive.get(u, 0.0), ax.streams, caps)
    else:
        done = _ungated(ps, ax.streams, caps)
    end = max(done.values())
    if fop.op == "ag-gemm":
        return end
    return max(end, _scatter_s(fop, hw, ax, com, done, k))


def _ungated(ps: list, streams: int, caps: dict) -> dict:
    """:func:`_run_streams` of pieces that wait for no transfer (gemm-rs), memoised: schedules that
    differ only in their communication run the same pieces."""
    key = (tuple((u, *map(id, js)) for u, js in ps), streams, *_caps_key(caps))
    hit = _UNGATED.get(key)
    same = hit is not None and all(
        a is b for (_, x), (_, y) in zip(hit[0], ps, strict=True) for a, b in zip(x, y, strict=True)
    )
    if not same:
        hit = _memo(_UNGATED)[key] = (ps, _run_streams(ps, lambda u: 0.0, streams, caps))
    return hit[1]


_UNGATED: dict[tuple, tuple] = {}


def _scatter_s(fop, hw, ax, com, done, k) -> float:
    """End of the reduce-scatter (or MoE combine) fed by the pieces' end times ``done``."""
    n = fop.gpus
    ficco = ax.comm == "ficco"
    hbm = hw.hbm.effective_Bps
    moe = fop.op == "moe"
    jsets = list(range(n)) if ficco else ["a"]
    land: dict[tuple, float] = {}
    prev_o: dict[int, float] = {}
    t_shard = 0.0
    for jj in jsets:
        js = range(n) if jj == "a" else [jj]
        nbytes = sum(_unit_bytes(fop, 0, j, "out") for j in js)
        for o in range(1, n):
            ready = max(done[(o, j)] for j in js)
            if ficco:
                start = max(ready, prev_o.get(o, 0.0))
                land[(jj, o)] = prev_o[o] = start + com.step_s(nbytes, n - 1)
            else:
                start = max(ready, t_shard)
                land[(jj, o)] = t_shard = start + com.step_s(nbytes, 1)
    end = max(land.values())
    if moe:
        return end
    red_end = 0.0
    copy_k = k * hw.compute.cu_copy_Bps
    copy_all = hw.compute.cus * hw.compute.cu_copy_Bps
    inc: list[tuple[float, float]] = []  # incremental reductions: (ready, bytes of the block)
    for jj in jsets:
        js = range(n) if jj == "a" else [jj]
        cb = sum(_unit_bytes(fop, 0, j, "out") for j in js)
        local = max(done[(0, j)] for j in js)
        if ax.reduce == "batched":
            start = max([local, red_end] + [land[(jj, o)] for o in range(1, n)])
            red_end = start + hw.compute.kernel_launch_s + (n + 1) * cb / min(hbm, copy_all)
        else:
            # the partials land in order; the owner's reductions share the communication CUs and
            # HBM: one server, in landing order, each after the previous partial of its sub-block
            for o in range(1, n):
                inc.append((max(land[(jj, o)], local), cb))
    if inc:
        t = 0.0
        for ready, cb in sorted(inc):
            t = max(t, ready) + 3 * cb / min(hbm, copy_k)
        red_end = t
        # transfers and reductions share the communication HBM (and, for a CU kernel, its CUs):
        # from the first send on, all of their bytes go through them
        sent = (n - 1) * sum(_unit_bytes(fop, 0, j, "out") for j in range(n))
        first = (
            min(max(done[(o, j)] for o in range(n)) for j in range(n))
            if ficco
            else min(max(done[(o, j)] for j in range(n)) for o in range(1, n))
        )
        busy = (2 * sent + 3 * sent) / hbm
        if ax.executor == "cu":
            busy = max(busy, (2 + 3) * sent / copy_k)  # a send's load + store, a reduction's 2 loads + store
        red_end = max(red_end, first + busy)
    return max(end, red_end)


def _bulk_s(fop: FiccoOperator, hw: Hardware, ax: Axes) -> float:
    """A bulk schedule: the library collective (closed form of :mod:`t3.ops.collectives`, the
    algorithm and protocol the library picks) before or after the whole GEMM alone."""
    n, c = fop.gpus, hw.compute
    ex = Executor(ax.executor, None, "comm")

    def coll(op: str, nbytes: float) -> float:
        return idle_time(op, choose(op, nbytes, hw, n, ex), nbytes, hw, n, ex)

    if fop.op == "moe":
        rows = fop.expert_rows()[0]
        g = sum(gemm_alone_s(s, hw, c.cus) for s in
                (GemmShape(rows * n, 2 * fop.n, fop.k, fop.dtype), GemmShape(rows * n, fop.k, fop.n, fop.dtype)))  # fmt: skip
        a2a = coll("all_to_all", (n - 1) * rows * fop.k * fop.eb)
        return a2a + g + a2a
    g = gemm_alone_s(GemmShape(fop.m, fop.n, fop.k, fop.dtype), hw, c.cus)
    if fop.op == "ag-gemm":
        return coll("all_gather", fop.m * fop.k * fop.eb) + g
    return g + coll("reduce_scatter", fop.m * fop.n * fop.eb)


def comm_hbm_bytes(fop: FiccoOperator, ax: Axes) -> float:
    """HBM bytes a GPU's communication moves: each byte sent is read once and written once at the
    receiver; reduce-scatter adds its reductions (incremental: 3 per received byte; batched and
    bulk: N + 1 per owned block)."""
    n = fop.gpus
    sent = fop.comm_bytes()
    if fop.op == "moe":
        return 2 * 2 * sent  # dispatch and combine
    out = 2 * sent
    if fop.op == "gemm-rs":
        block = fop.m * fop.n * fop.eb / n
        out += 3 * sent if (ax.comm != "bulk" and ax.reduce == "inc") else (n + 1) * block
    return out


# The most of the HBM the communication's average rate may take from the GEMM in ``shared_s`` (a
# named unknown: the engine's sharing never starves a GEMM load completely; caps of 0.5 and 0.7 gave
# the same cross-validated accuracy on the training cases, docs/ficco.md).
HBM_SHARE_CAP = 0.7


def shared_s(fop: FiccoOperator, hw: Hardware, ax: Axes) -> float:
    """Static estimate of the schedule's time with the GPU shared: a CU kernel's CUs are taken from
    the GEMM, and the GEMM's HBM bandwidth is what the communication's HBM traffic leaves (its
    average rate over the contention-free run, at most 70 % of the HBM)."""
    if ax.comm == "bulk":
        return ideal_s(fop, hw, ax)
    t0 = ideal_s(fop, hw, ax)
    c, n = hw.compute, fop.gpus
    k = comm_cus(hw, n)
    b = hw.hbm.effective_Bps
    comm_b = comm_hbm_bytes(fop, ax)
    share = min(HBM_SHARE_CAP, comm_b / (t0 * b))
    cus = cus_beside(hw, k) if ax.executor == "cu" else c.cus
    return _overlapped_s(fop, hw, ax, cus, k, b * (1.0 - share))


# --- the pipeline selector --------------------------------------------------------------------

# Contention factors (simulated time / ``shared_s``, geometric mean over the training cases of
# benchmarks/data/ficco_train.json.gz): one per (operation, topology, schedule), and one per
# (operation, topology, pattern, executor) for a schedule the training never ranked. Written by
# `benchmarks/fit_ficco_selector.py factors --write` (= `fit_factors(load_rows(DATA))`).
FACTORS_FILE = Path(__file__).with_name("pipeline_factors.json")


def _load_factors() -> dict[str, dict[str, float]]:
    data = json.loads(FACTORS_FILE.read_text())
    return {"schedule": data["schedule"], "class": data["class"]}


FACTORS = _load_factors()


def factor_key(op: str, topology: str, ax: Axes) -> str:
    return f"{op}/{topology}/{ax.name}"


def _class_key(key: str) -> str:
    op, topo, name = key.split("/")
    ax = parse_name(name)
    return f"{op}/{topo}/{ax.comm}/{ax.executor if ax.comm != 'bulk' else '-'}"


def factor(factors: dict[str, dict[str, float]], key: str) -> float:
    """The schedule's contention factor, else its class's, else 1."""
    f = factors["schedule"].get(key)
    return f if f is not None else factors["class"].get(_class_key(key), 1.0)


def shared_estimates(rows: list[dict]) -> list[dict[str, tuple[str, float]]]:
    """For each labelled case (dict with operator, hardware, times): schedule name -> (factor key,
    ``shared_s``) for the schedules of the vocabulary; empty where the model does not apply."""
    from t3.config.hardware import load_hardware
    from t3.ficco.learned import _fop

    out = []
    hws: dict[str, Hardware] = {}
    for r in rows:
        fop = _fop(r["operator"])
        hw = hws.setdefault(r["hardware"], load_hardware(r["hardware"]))
        est = {}
        if _modelled(fop, hw):
            for s in sorted(r["times"]):
                ax = parse_name(s)
                if _in_vocabulary(ax):
                    est[s] = (factor_key(fop.op, hw.topology.kind, ax), shared_s(fop, hw, ax))
        out.append(est)
    return out


def fit_factors(rows: list[dict], estimates: list[dict] | None = None) -> dict[str, dict[str, float]]:
    """Contention factors from labelled cases (``estimates``: their :func:`shared_estimates`,
    computed if not given): ``{"schedule": {key: factor}, "class": {class key: factor}}``."""
    estimates = shared_estimates(rows) if estimates is None else estimates
    logs: dict[str, dict[str, list[float]]] = {"schedule": {}, "class": {}}
    for r, est in zip(rows, estimates, strict=True):
        for s, (key, e) in est.items():
            x = math.log(r["times"][s] / e)
            logs["schedule"].setdefault(key, []).append(x)
            logs["class"].setdefault(_class_key(key), []).append(x)
    return {
        level: {k: round(math.exp(sum(v) / len(v)), 4) for k, v in sorted(d.items())}
        for level, d in logs.items()
    }


def _modelled(fop: FiccoOperator, hw: Hardware) -> bool:
    return hw.topology.kind != "ring" and fop.symmetric


def _in_vocabulary(ax: Axes) -> bool:
    """Schedules the selector ranks: local piece first, unbounded prefetch (the ordering variants
    never won on the scenario set, docs/ficco.md)."""
    return ax.local_first and not ax.prefetch


def ranking(fop: FiccoOperator, hw: Hardware, runnable: bool = False) -> list[tuple[str, float]]:
    """Every legal schedule of the vocabulary with its predicted time (s), best first;
    ``runnable``: only those :mod:`t3.runtime` executes (one compute stream, DMA executor)."""
    out = []
    for ax in enumerate_space(fop, hw)[0]:
        if _in_vocabulary(ax) and not (runnable and (ax.streams != 1 or ax.executor != "dma")):
            f = factor(FACTORS, factor_key(fop.op, hw.topology.kind, ax))
            out.append((ax.name, shared_s(fop, hw, ax) * f))
    return sorted(out, key=lambda x: (x[1], x[0]))


def select_pipeline(fop: FiccoOperator, hw: Hardware, runnable: bool = False) -> tuple[str, dict]:
    """(schedule, features): the schedule with the least predicted time. Ring topologies and skewed
    MoE routing are not modelled: the learned tree answers there. ``runnable``: only schedules
    :mod:`t3.runtime` executes (one compute stream, no prefetch bound, DMA executor)."""
    from t3.ficco.learned import runnable_variant, select_learned

    check_fits(fop, hw)
    if not _modelled(fop, hw):
        name, f = select_learned(fop, hw)
        name = runnable_variant(fop, hw, name) if runnable else name
        return name, {**f, "selector": "learned (ring or skewed MoE: not in the pipeline model)"}
    rank = ranking(fop, hw, runnable)
    return rank[0][0], {"selector": "pipeline", "predicted_s": dict(rank[:10])}
