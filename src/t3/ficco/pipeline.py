"""A static pipeline model of a FiCCO schedule: its contention-free time from closed forms.

No simulation (no engine, no events): every duration is a closed form of the operator, the schedule's
axes and the hardware preset, and the pieces are composed by a max-plus recurrence (a piece starts when
its data has arrived and its stream is free; a transfer step starts when its data is ready and the
previous step to the same peer is done). :func:`ideal_s` estimates ``T_ideal`` of
:mod:`t3.ficco.losses` (the schedule's own pieces, communication on a private HBM and CU pool);
:func:`shared_s` the time with the GPU shared; :func:`select_pipeline` ranks every schedule by
``shared_s`` times a contention factor per class and runs the least.

Durations:

- a GEMM piece alone on C CUs: its static plan (:func:`t3.schedules.ficco.gemm_plan`: tile choice,
  waves) run as double-buffered waves -- load ``i+1`` under compute ``i``, a wave's compute no shorter
  than its output writes at the HBM rate -- plus one launch; a K piece after the first first reads
  the output back;
- two streams: while a piece runs beside its predecessor both progress at a shared rate, from the
  pair's time when started together (lockstep) or staggered (:func:`gemm_alone_s`);
- a transfer step: fixed delay (link latency, DMA command overhead, kernel launch for a CU kernel)
  plus its bytes at the bottleneck rate of what the step's sends share: the links (a mesh: one per
  peer; a switch: the GPU's port), the HBM (each GPU reads what it sends and writes what it receives),
  the communication kernel's CUs at the per-CU copy rate, or the DMA engines (one engine per command);
- reductions: incremental ones (3 bytes of HBM per received byte, on the communication CUs) one at a
  time in landing order; batched ones (N reads + 1 write, all CUs) one kernel per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.config.hardware import Hardware
from t3.errors import ScheduleError
from t3.ficco.space import Axes, FiccoOperator
from t3.schedules.ficco import _unit_bytes, comm_cus, gemm_plan, plan_pieces, shape_of
from t3.workload.sublayers import GemmShape

# Two GEMM pieces on two streams that did not start together interleave their HBM-bound and
# CU-bound phases imperfectly: the staggered pair time is taken this fraction of the way from the
# perfect-interleaving bound to the lockstep time (calibrated by cross-validation on the training
# cases, docs/ficco.md).
STAGGER_LOSS = 0.25


def gemm_alone_s(
    shape: GemmShape, hw: Hardware, cus: int, bw: float | None = None
) -> tuple[float, float, float]:
    """(alone, lockstep pair, staggered pair) times of a GEMM on ``cus`` CUs from its static plan,
    launch included.

    alone: its waves double-buffered (load ``i+1`` under compute ``i``; a wave's compute no shorter
    than its output writes at the HBM rate). Two such GEMMs on two streams, both done:
    *lockstep* (started together): wave by wave, both loads and writes go through the HBM at once and
    both computes share the CUs; *staggered* (one starts while the other runs, so one's loads run
    under the other's compute): neither is faster than alone, and together they need the HBM for both
    GEMMs' bytes and the CUs for both GEMMs' tiles: ``max(alone, 2 x HBM time, 2 x CU time)``."""
    key = (id(hw), shape, cus, bw)
    hit = _ALONE.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    res = _gemm_alone(shape, hw, cus, bw or hw.hbm.effective_Bps)
    _ALONE[key] = (hw, res)
    return res


_ALONE: dict[tuple, tuple[Hardware, tuple[float, float, float]]] = {}


def _gemm_alone(shape: GemmShape, hw: Hardware, cus: int, bw: float) -> tuple[float, float, float]:
    p = gemm_plan(shape, hw, cus=cus)
    out = []
    hbm_s = cu_s = 0.0
    for x in (1.0, 2.0):
        load_end: list[float] = []
        comp_end: list[float] = []
        for i, w in enumerate(p.waves):
            start = (
                hw.compute.kernel_launch_s
                if i == 0
                else max(load_end[-1], comp_end[i - 2] if i >= 2 else 0.0)
            )
            load_end.append(start + x * w.read_bytes / bw)
            wb = sum(w.write_bytes.values())
            cu = max(w.compute_s, x * w.compute_s * w.cus_used / cus)
            comp_end.append(max(load_end[-1], comp_end[-1] if comp_end else 0.0) + max(cu, x * wb / bw))
            if x == 1.0:
                hbm_s += (w.read_bytes + wb) / bw
                cu_s += w.compute_s * w.cus_used / cus
        out.append(comp_end[-1])
    t, lock = out
    stag = max(t, 2 * hbm_s, 2 * cu_s)
    return t, lock, stag + STAGGER_LOSS * (lock - stag)


@dataclass(frozen=True)
class Piece:
    time_s: float  # alone
    lock_s: float  # with an identical piece started together on the other stream (both end then)
    stag_s: float  # with an identical piece on the other stream, started at staggered times


def pieces(
    fop: FiccoOperator, hw: Hardware, ax: Axes, cus: int, bw: float | None = None
) -> list[tuple[tuple, Piece]]:
    """(units, times) of each compute piece on GPU 0 (symmetric operators); ``bw``: the HBM
    bandwidth the GEMM gets (default: all of it)."""
    out = []
    bw = bw or hw.hbm.effective_Bps
    for p in plan_pieces(fop, hw, ax):
        t = [0.0, 0.0, 0.0]
        for shape, acc in shape_of(fop, ax, p, 0):
            acc_s = shape.out_bytes / bw if acc else 0.0
            for i, v in enumerate(gemm_alone_s(shape, hw, cus, bw)):
                t[i] += v + (acc_s if i == 0 else 2 * acc_s)
        out.append((p.units, Piece(*t)))
    return out


class _Comm:
    """Closed-form transfer steps of one executor on one topology (per GPU, symmetric)."""

    def __init__(self, hw: Hardware, executor: str, cus: int | None):
        self.hw, self.ex = hw, executor
        self.bw = hw.link.bandwidth_Bps
        self.hbm = hw.hbm.effective_Bps
        self.copy = (cus or hw.compute.cus) * hw.compute.cu_copy_Bps
        self.delay = hw.link.latency_s + (
            hw.dma.command_overhead_s if executor == "dma" else hw.compute.kernel_launch_s
        )

    def step_s(self, nbytes: float, sends: int) -> float:
        """``sends`` concurrent sends of ``nbytes`` each from every GPU (each GPU receives as many)."""
        hw = self.hw
        links = sends * self.bw if hw.topology.kind == "mesh" else self.bw
        rate = min(links, self.hbm / 2)
        if self.ex == "cu":
            rate = min(rate, self.copy)
        else:
            rate = min(rate, sends * hw.dma.bandwidth_Bps, hw.dma.engines * hw.dma.bandwidth_Bps)
        return self.delay + sends * nbytes / rate


def _run_pieces(ps: list[tuple[tuple, Piece]], ready, streams: int) -> dict[tuple, float]:
    """End time of every unit's piece. A piece starts when its units have arrived and piece
    ``i - streams`` has ended. On one stream pieces run back to back. On two, while two pieces run
    together each progresses at ``time_s / lock_s`` of its alone speed if they started together, at
    ``time_s / stag_s`` if not (processor sharing), alone at full speed."""
    ends: list[float] = []
    if streams == 1:
        free = 0.0
        for units, pc in ps:
            free = max(max((ready(u) for u in units), default=0.0), free) + pc.time_s
            ends.append(free)
    else:
        now = 0.0
        active: list[list] = []  # [piece index, remaining alone-seconds, Piece, start]
        ends = [math.inf] * len(ps)

        def advance(until: float, stop_at: int | None = None) -> None:
            nonlocal now
            while active:
                if len(active) == 2:
                    lock = active[0][3] == active[1][3]
                    rate = [a[2].time_s / (a[2].lock_s if lock else a[2].stag_s) for a in active]
                else:
                    rate = [1.0]
                dt, k = min((a[1] / r, j) for j, (a, r) in enumerate(zip(active, rate, strict=True)))
                if now + dt > until:
                    for a, r in zip(active, rate, strict=True):
                        a[1] -= (until - now) * r
                    now = until
                    return
                now += dt
                for a, r in zip(active, rate, strict=True):
                    a[1] -= dt * r
                done = active.pop(k)
                ends[done[0]] = now
                if stop_at is not None and done[0] == stop_at:
                    return
            now = max(now, until)

        for i, (units, pc) in enumerate(ps):
            if i >= 2 and ends[i - 2] == math.inf:
                advance(math.inf, stop_at=i - 2)
            start = max(max((ready(u) for u in units), default=0.0), ends[i - 2] if i >= 2 else 0.0)
            advance(start)
            active.append([i, pc.time_s, pc, start])
        advance(math.inf)
    done: dict[tuple, float] = {}
    for (units, _), e in zip(ps, ends, strict=True):
        for u in units:
            done[u] = e
    return done


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
    cus_opts = [c.cus] if ax.executor == "dma" else [c.cus, c.cus - k]
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
    done = _run_pieces(ps, lambda u: arrive.get(u, 0.0), ax.streams)
    end = max(done.values())
    if fop.op == "ag-gemm":
        return end
    return max(end, _scatter_s(fop, hw, ax, com, done, k))


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
            busy = max(busy, 4 * sent / copy_k)
        red_end = max(red_end, first + busy)
    return max(end, red_end)


def _bulk_s(fop: FiccoOperator, hw: Hardware, ax: Axes) -> float:
    n, c = fop.gpus, hw.compute
    com = _Comm(hw, ax.executor, None)
    if fop.op == "moe":
        rows = fop.expert_rows()[0]
        g = sum(gemm_alone_s(s, hw, c.cus)[0] for s in
                (GemmShape(rows * n, 2 * fop.n, fop.k, fop.dtype), GemmShape(rows * n, fop.k, fop.n, fop.dtype)))  # fmt: skip
        a2a = com.step_s(rows * fop.k * fop.eb, n - 1)
        return a2a + g + a2a
    g = gemm_alone_s(GemmShape(fop.m, fop.n, fop.k, fop.dtype), hw, c.cus)[0]
    if fop.op == "ag-gemm":
        return com.step_s(fop.m * fop.k * fop.eb / n, n - 1) + g
    cb = fop.m * fop.n * fop.eb / n
    red = (n + 1) * cb / min(hw.hbm.effective_Bps, c.cus * c.cu_copy_Bps)
    return g + com.step_s(cb, n - 1) + red


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
    share = min(0.7, comm_b / (t0 * b))
    cus = c.cus - k if ax.executor == "cu" else c.cus
    return _overlapped_s(fop, hw, ax, cus, k, b * (1.0 - share))


# --- the pipeline selector --------------------------------------------------------------------

# Contention factors: geometric mean of (simulated time / shared_s) over the training cases
# (benchmarks/data/ficco_train.json.gz), per (operation, topology, pattern, executor), as
# `fit_factors(load_rows(DATA))` computes them (t3.ficco.learned; about 45 s).
FACTORS: dict[str, float] = {
    "ag-gemm/mesh/bulk/-": 0.9733,
    "ag-gemm/mesh/ficco/cu": 0.9973,
    "ag-gemm/mesh/ficco/dma": 1.0014,
    "ag-gemm/mesh/shard/cu": 1.0191,
    "ag-gemm/mesh/shard/dma": 1.0106,
    "ag-gemm/switch/bulk/-": 1.0123,
    "ag-gemm/switch/ficco/cu": 0.9993,
    "ag-gemm/switch/ficco/dma": 1.0125,
    "ag-gemm/switch/shard/cu": 0.9943,
    "ag-gemm/switch/shard/dma": 1.0114,
    "gemm-rs/mesh/bulk/-": 0.9714,
    "gemm-rs/mesh/ficco/cu": 1.0052,
    "gemm-rs/mesh/ficco/dma": 1.0097,
    "gemm-rs/mesh/shard/cu": 1.0376,
    "gemm-rs/mesh/shard/dma": 1.0166,
    "gemm-rs/switch/bulk/-": 1.0278,
    "gemm-rs/switch/ficco/cu": 0.9992,
    "gemm-rs/switch/ficco/dma": 1.0159,
    "gemm-rs/switch/shard/cu": 1.0053,
    "gemm-rs/switch/shard/dma": 1.0186,
    "moe/mesh/bulk/-": 0.9812,
    "moe/mesh/ficco/cu": 0.9917,
    "moe/mesh/ficco/dma": 1.0024,
    "moe/mesh/shard/cu": 1.0444,
    "moe/mesh/shard/dma": 1.0238,
    "moe/switch/bulk/-": 1.0192,
    "moe/switch/ficco/cu": 0.9959,
    "moe/switch/ficco/dma": 1.0178,
    "moe/switch/shard/cu": 0.9954,
    "moe/switch/shard/dma": 1.0114,
}


def factor_key(op: str, topology: str, ax: Axes) -> str:
    return f"{op}/{topology}/{ax.comm}/{ax.executor if ax.comm != 'bulk' else '-'}"


def shared_estimates(rows: list[dict]) -> list[dict[str, tuple[str, float]]]:
    """For each labelled case (dict with operator, hardware, times): schedule name -> (factor key,
    ``shared_s``) for the schedules of the vocabulary; empty where the model does not apply."""
    from t3.config.hardware import load_hardware
    from t3.ficco.learned import _fop
    from t3.ficco.space import parse_name

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


def fit_factors(rows: list[dict], estimates: list[dict] | None = None) -> dict[str, float]:
    """Per-class contention factors from labelled cases (``estimates``: their
    :func:`shared_estimates`, computed if not given)."""
    estimates = shared_estimates(rows) if estimates is None else estimates
    logs: dict[str, list[float]] = {}
    for r, est in zip(rows, estimates, strict=True):
        for s, (key, e) in est.items():
            logs.setdefault(key, []).append(math.log(r["times"][s] / e))
    return {k: round(math.exp(sum(v) / len(v)), 4) for k, v in sorted(logs.items())}


def _modelled(fop: FiccoOperator, hw: Hardware) -> bool:
    return hw.topology.kind != "ring" and fop.symmetric


def _in_vocabulary(ax: Axes) -> bool:
    """Schedules the selector ranks: local piece first, unbounded prefetch (the ordering variants
    never won on the scenario set, docs/ficco.md)."""
    return ax.local_first and not ax.prefetch


def ranking(fop: FiccoOperator, hw: Hardware) -> list[tuple[str, float]]:
    """Every legal schedule of the vocabulary with its predicted time (s), best first."""
    from t3.ficco.space import enumerate_space

    out = []
    for ax in enumerate_space(fop, hw)[0]:
        if _in_vocabulary(ax):
            f = FACTORS.get(factor_key(fop.op, hw.topology.kind, ax), 1.0)
            out.append((ax.name, shared_s(fop, hw, ax) * f))
    return sorted(out, key=lambda x: (x[1], x[0]))


def select_pipeline(fop: FiccoOperator, hw: Hardware) -> tuple[str, dict]:
    """(schedule, features): the schedule with the least predicted time. Ring topologies and skewed
    MoE routing are not modelled: the learned tree answers there."""
    from t3.ficco.learned import select_learned
    from t3.ficco.space import check_fits

    check_fits(fop, hw)
    if not _modelled(fop, hw):
        name, f = select_learned(fop, hw)
        return name, {**f, "selector": "learned (ring or skewed MoE: not in the pipeline model)"}
    rank = ranking(fop, hw)
    return rank[0][0], {"selector": "pipeline", "predicted_s": dict(rank[:10])}
