"""GEMM slowdown beside a second kernel on one GPU: (a) a copy on k thread blocks, (b) copy-engine
copies, (c) a reduction ``a + b -> c`` (all SMs through ``torch.add``, or k blocks through Triton).

Two arrangements (the dataset's ``arrangement``):

- ``background``: the interferer runs back to back on stream 2 for the whole of the GEMM's timed span
  on stream 1 (the span's calls are the victim's samples; the interferer's calls that fall wholly inside
  it are its own). Short interferer calls are grouped into units of ``r`` calls replayed from one CUDA
  graph (a unit lasts >= ``UNIT_S``), so the host keeps ahead of the GPU; an interferer call's time is
  then a unit's time / r. The run checks that the interferer outlasted the GEMM's span (``coverage``
  >= 1) and takes it again with more calls where it did not.
- ``together``: one GEMM call and one interferer call released at the same moment.
- ``held``: one launch of the interferer on k thread blocks that loops over its buffer (``passes``
  times) for longer than the GEMM's timed span, launched first, so its blocks are resident before the
  GEMM's (as a collective's kernel holds its channels' blocks for its whole duration); the GEMM's calls
  follow on stream 1 after a short sleep (``HELD_LEAD_S``). The interferer's rate beside the GEMM is
  recovered from its one time: with ``S`` the overlap (its start to the GEMM's last end) and
  ``T``/``T0`` its times with and without the GEMM, its rate beside the GEMM is ``x = 1 - (T - T0) / S``
  of its rate alone (the rest of its work ran alone), and its slowdown ``1 / x - 1``.

Both streams are released by one event after a sleep gate (everything is queued first); the alone
times are the same calls with nothing beside them, taken just before.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from .plan import ALL, MiB
from .rows import interference_rows, size_label
from .suites import gemm_operands
from .timing import batch, gate_for, stats

UNIT_S = 200e-6  # an interferer unit (r calls, one launch) lasts at least this
BG_MARGIN = 2.5  # interferer time queued = this x the GEMM's span alone (the GEMM slows down too)
MAX_UNITS = 400
SPAN_UNITS = 4  # the GEMM's timed span lasts at least this many interferer units (their samples)
MAX_VICTIM_CALLS = 400
TOGETHER_PER_REP = 5  # single launches per repetition in the together arrangement
HELD_LEAD_S = 50e-6  # the GEMM's stream sleeps this long after the release, so the held blocks land first
MAX_PASSES = 1 << 20


# the dataset's name of a copy-engine copy by direction
# the driver's device-to-device copy is `memcpy`, not a copy-engine copy: on an H100 and an H200 it runs at
# the rate of a copy kernel on every SM and waits for a GEMM like one (t3.ops.interference)
CE_COMM = {"d2d": "memcpy", "d2h": "ce_d2h", "h2d": "ce_h2d"}


@dataclass(frozen=True)
class Interferer:
    comm: str  # sm_copy, sm_reduce, memcpy (the driver's device to device copy), ce_d2h, ce_h2d
    cus: int  # thread blocks (0: the library's own grid, or a copy engine)
    nbytes: int  # bytes copied (a reduction: bytes of c)
    kind: str  # "" or the copy direction (d2d, d2h, h2d)
    what: str  # a phrase for the conventions
    fn: Any  # fn(i): one call
    held: Any = None  # held(passes): one launch looping ``passes`` times over the buffer (k blocks only)

    @property
    def rid(self) -> str:
        cus = f"-cus{self.cus}" if not self.comm.startswith("ce_") else ""
        kind = f"-{self.kind}" if self.kind else ""
        return f"{self.comm}{kind}-{size_label(self.nbytes)}{cus}"


@dataclass
class Overlap:
    victim: list[float]
    comm: list[float]
    coverage: float
    host_s: float
    gate_s: float


def interference(run: Any) -> None:
    bk, plan = run.bk, run.plan
    streams = (bk.stream(), bk.stream(), bk.stream())
    fixed = bk.fixed_grid()
    if fixed:
        run.skip("interference", "copy / add on k blocks", fixed)
    for m, n, k, dtype in plan.victims:
        with run.measuring("interference", f"GEMM {m}x{n}x{k} {dtype}"):
            vop, vwhat = gemm_operands(bk, m, n, k, dtype, plan, None)
            t_v = stats(batch(bk, vop, 5, 3)).median
            for size in plan.intf_bytes:
                for itf in _interferers(run, size, fixed):
                    if run.over_budget("interference"):
                        return
                    label = f"GEMM {m}x{n}x{k} beside {itf.rid}"
                    with run.measuring("interference", label):
                        _background(run, streams, (m, n, k, dtype), vop, vwhat, t_v, itf)
                        if itf.held is not None:
                            _held(run, streams, (m, n, k, dtype), vop, vwhat, t_v, itf)
                        if _together_too(bk, plan, itf) and size == max(plan.intf_bytes):
                            _together(run, streams, (m, n, k, dtype), vop, vwhat, itf)
                            for lead in plan.together_leads_s:  # each launched first, the other behind
                                for first in ("comm", "gemm"):
                                    _together(run, streams, (m, n, k, dtype), vop, vwhat, itf, (first, lead))
                run.release()
            del vop
        run.release()


def _together_too(bk: Any, plan: Any, itf: Interferer) -> bool:
    """Whether the plan also measures this interferer launched together with the GEMM (driver copies:
    the device-to-device copy only)."""
    blocks = ALL if itf.cus == bk.cus and itf.comm.startswith("sm_") else itf.cus
    return (itf.comm, blocks) in plan.together and itf.kind in ("", "d2d")


def _interferers(run: Any, nbytes: int, fixed: str) -> list[Interferer]:
    bk, plan, t = run.bk, run.plan, run.bk.torch
    n = nbytes // 4
    dev = bk.device
    src = t.full((n,), 1.0, device=dev, dtype=t.float32)
    dst = t.empty_like(src)
    b = t.full((n,), 2.0, device=dev, dtype=t.float32)
    out: list[Interferer] = []
    mib = f"{nbytes / MiB:.0f} MiB"
    grid = (
        "its k chunks one after another (CPU)"
        if bk.kind == "cpu"
        else "Triton, grid = k blocks of 512 threads"
    )
    if not fixed:
        for kk in sorted({min(bk.cus if k == ALL else k, bk.cus) for k in plan.copy_blocks}):
            out.append(Interferer("sm_copy", kk, nbytes, "", f"a copy of {mib} (fp32) on k = {kk} thread blocks ({grid})",
                                  lambda i, kk=kk: bk.block_copy(src, dst, kk),
                                  lambda p, kk=kk: bk.block_copy(src, dst, kk, p)))  # fmt: skip
    for k in sorted({0 if k == 0 else min(bk.cus if k == ALL else k, bk.cus) for k in plan.reduce_blocks}):
        if k == 0:
            out.append(Interferer("sm_reduce", 0, nbytes, "", f"torch.add(a, b, out=c) on {mib} fp32 arrays (every SM, PyTorch's grid)",
                                  lambda i: t.add(src, b, out=dst)))  # fmt: skip
        elif not fixed:
            kk = k
            out.append(Interferer("sm_reduce", kk, nbytes, "", f"c = a + b on {mib} fp32 arrays on k = {kk} thread blocks ({grid})",
                                  lambda i, kk=kk: bk.block_add(src, b, dst, kk),
                                  lambda p, kk=kk: bk.block_add(src, b, dst, kk, p)))  # fmt: skip
    host = bk.host_buffer(nbytes) if any(c in ("d2h", "h2d") for c in plan.ce_kinds) else None
    raw_src, raw_dst = src.view(t.uint8), dst.view(t.uint8)
    ce = {
        "d2d": (lambda i: raw_dst.copy_(raw_src, non_blocking=True), f"device-to-device copy of {mib} (dst.copy_(src), cudaMemcpyAsync)"),
        "d2h": (lambda i: host.copy_(raw_src, non_blocking=True), f"device-to-host copy of {mib} into pinned memory"),
        "h2d": (lambda i: raw_dst.copy_(host, non_blocking=True), f"host-to-device copy of {mib} from pinned memory"),
    }  # fmt: skip
    for kind in plan.ce_kinds:
        fn, what = ce[kind]
        key = ("copy_kind", kind, nbytes)
        if key not in run.cache:
            run.cache[key] = bk.copy_kind(lambda fn=fn: fn(0))
        path = run.cache[key]
        out.append(
            Interferer(CE_COMM[kind], 0, nbytes, kind, f"{what}, non_blocking on its own stream; {path}", fn)
        )
    return out


def _release(bk: Any, streams: tuple[Any, Any, Any], gate_s: float) -> Any:
    """Gate stream 0, record the release event on it, make streams 1 and 2 wait for it."""
    g, s1, s2 = streams
    go = bk.event()
    with bk.use(g):
        bk.gate(gate_s)
        go.record()
    bk.wait(s1, go)
    bk.wait(s2, go)
    return go


def _overlap(bk: Any, streams: tuple[Any, Any, Any], vop: Any, v_iters: int, unit: Any, units: int,
             gate_s: float) -> Overlap:  # fmt: skip
    """The GEMM ``v_iters`` times on stream 1 beside ``units`` interferer units on stream 2."""
    _, s1, s2 = streams
    bk.sync()
    h0 = time.perf_counter()
    go = _release(bk, streams, gate_s)
    cev = [bk.event() for _ in range(units + 1)]
    vev = [bk.event() for _ in range(v_iters + 1)]
    j = 0
    with bk.use(s2):
        cev[0].record()
        while not bk.concurrent and j < units:  # sequential backends: the whole background first
            unit(j)
            j += 1
            cev[j].record()
    with bk.use(s1):
        vev[0].record()
    for i in range(v_iters):  # queue both streams in step, so neither waits for the host
        with bk.use(s2):
            while j < math.ceil(units * (i + 1) / v_iters):
                unit(j)
                j += 1
                cev[j].record()
        with bk.use(s1):
            vop(i)
            vev[i + 1].record()
    host = time.perf_counter() - h0
    bk.sync()
    tv = [bk.elapsed(go, e) for e in vev]
    tc = [bk.elapsed(go, e) for e in cev]
    victim = [b - a for a, b in zip(tv, tv[1:], strict=False)]
    inside = [b - a for a, b in zip(tc, tc[1:], strict=False) if a >= tv[0] and b <= tv[-1]]
    span = tv[-1] - tv[0]
    cov = (tc[-1] - tv[0]) / span if span > 0 else 0.0
    if not bk.concurrent:  # sequential backends (CPU): the streams ran one after the other, every unit counts
        inside = [b - a for a, b in zip(tc, tc[1:], strict=False)]
    # on a GPU, no unit wholly inside the GEMM's span: the interferer did not run beside it (it waited for the
    # span, or ran before it), and its calls outside it are not its time beside the GEMM: no sample
    return Overlap(victim, inside, cov, host, gate_s)


def _background(run: Any, streams: tuple[Any, Any, Any], shape: tuple[int, int, int, str], vop: Any, vwhat: str,
                t_v: float, itf: Interferer) -> None:  # fmt: skip
    bk, plan = run.bk, run.plan
    _, s1, s2 = streams
    c1 = stats(batch(bk, itf.fn, 3, 2, stream=s2)).median
    r = max(1, math.ceil(UNIT_S / c1))
    unit, how = bk.repeat(itf.fn, r, graph=itf.kind not in ("d2h", "h2d"))
    u_alone = batch(bk, unit, plan.intf_iters, 1, stream=s2)
    # the GEMM's span: the plan's, and at least SPAN_UNITS of the interferer's units
    span = max(plan.victim_span_s, SPAN_UNITS * stats(u_alone).median)
    v_iters = max(3, min(MAX_VICTIM_CALLS, math.ceil(span / t_v)))
    v_alone = batch(bk, vop, v_iters, 2, stream=s1)
    units = min(MAX_UNITS, math.ceil(BG_MARGIN * sum(v_alone) / stats(u_alone).median) + 2)
    victim: list[float] = []
    comm: list[float] = []
    covs: list[float] = []
    gate_s = gate_for(units + v_iters)
    for _ in range(plan.intf_reps):
        for _attempt in range(3):
            ov = _overlap(bk, streams, vop, v_iters, unit, units, gate_s)
            if not bk.concurrent or (ov.coverage >= 1.0 and ov.host_s < 0.9 * gate_s):
                break
            if ov.host_s >= 0.9 * gate_s:
                gate_s = 2.0 * ov.host_s + 1e-3
            if ov.coverage < 1.0:
                units = min(MAX_UNITS * 4, units * 2)
        victim += ov.victim
        comm += [c / r for c in ov.comm]
        covs.append(ov.coverage)
    cov = min(covs)
    m, n, k, dtype = shape
    if not comm:  # no interferer unit ran wholly inside the GEMM's span in any repetition
        run.note(
            f"interference {itf.rid}-background-{m}x{n}x{k}: no call of the interferer ran wholly inside the GEMM's"
            f" span ({units} units queued, the last ending at {cov:.2f} x the span): it waited for the GEMMs or"
            " ran before them, so its slowdown beside the GEMM is not measured (no comm row)"
        )
    workload = {"m": m, "n": n, "k": k, "dtype": dtype, "comm": itf.comm, "nbytes": itf.nbytes, "gpus": 1,
                "cus": itf.cus, "arrangement": "background"}  # fmt: skip
    base = (
        f"GEMM: {vwhat}; {v_iters} calls back to back on stream 1, an event after each. Beside it on stream 2:"
        f" {itf.what}, repeated back to back for the whole of the GEMM's timed span ({how}; {units} units"
        f" queued; the interferer's last call ended at {cov:.2f} x the GEMM's span{'' if cov >= 1 or not bk.concurrent else ': NOT covered'});"
        f" {bk.release}; {bk.timer}; alone: the same calls"
        f" with nothing beside them, taken just before; {plan.intf_reps} repetitions pooled; medians per call"
        f" (p10 / p90 in published); measured = 100 x (together / alone - 1)"
    )
    if not bk.concurrent:
        base += "; CPU: the two streams ran one after the other, so nothing overlapped"
    extra = {"units": float(units), "calls_per_unit": float(r)}
    if cov > 0:
        extra["coverage"] = cov
    conv = base + "; this row: the GEMM's slowdown"
    cconv = base + "; this row: the interferer's own slowdown (its calls wholly inside the GEMM's span)"
    u_calls = [u / r for u in u_alone]
    series = [("compute", v_alone, victim, conv)] + ([("comm", u_calls, comm, cconv)] if comm else [])
    rows = interference_rows(run.ctx, f"{itf.rid}-background-{m}x{n}x{k}", workload, series, extra)
    run.emit(rows[0], {"alone_s": v_alone, "together_s": victim})
    if comm:
        run.emit(rows[1], {"alone_s": u_calls, "together_s": comm, "unit_alone_s": u_alone})
    run.progress(
        f"[interference] GEMM {m}x{n}x{k} beside {itf.rid}: GEMM {rows[0]['measured']:+.1f} %,"
        + (f" interferer {rows[1]['measured']:+.1f} %" if comm else " interferer not beside it (no row)")
        + (
            f" (the interferer covered {cov:.2f} x the GEMM's span)"
            if bk.concurrent
            else " (CPU: one after the other)"
        )
    )


def _single(bk: Any, streams: tuple[Any, Any, Any], vop: Any, cfn: Any, i: int,
            order: tuple[str, float] = ("comm", 0.0)) -> tuple[float, float, float]:  # fmt: skip
    """One GEMM call (stream 1) and one interferer call (stream 2) released together (either may be None):
    each one's own time, and the pair's (the first start to the last end). ``order`` = (the one queued
    first, ``"comm"`` or ``"gemm"``; seconds the other sleeps on its stream before its call, inside its
    time)."""
    _, s1, s2 = streams
    bk.sync()
    go = _release(bk, streams, 1e-3)
    ev = [bk.event() for _ in range(4)]
    first, lead_s = order

    def comm() -> None:
        with bk.use(s2):
            ev[2].record()
            if lead_s and first == "gemm" and vop is not None:
                bk.gate(lead_s)
            cfn(i)
            ev[3].record()

    def gemm() -> None:
        with bk.use(s1):
            ev[0].record()
            if lead_s and first == "comm" and cfn is not None:
                bk.gate(lead_s)
            vop(i)
            ev[1].record()

    for who in ("comm", "gemm") if first == "comm" else ("gemm", "comm"):
        if who == "comm" and cfn is not None:
            comm()
        if who == "gemm" and vop is not None:
            gemm()
    bk.sync()
    tv = bk.elapsed(ev[0], ev[1]) if vop is not None else 0.0
    tc = bk.elapsed(ev[2], ev[3]) if cfn is not None else 0.0
    if vop is None or cfn is None:
        return tv, tc, tv + tc
    at = [bk.elapsed(go, e) for e in ev]
    return tv, tc, max(at[1], at[3]) - min(at[0], at[2])


def _together(run: Any, streams: tuple[Any, Any, Any], shape: tuple[int, int, int, str], vop: Any, vwhat: str,
              itf: Interferer, order: tuple[str, float] = ("comm", 0.0)) -> None:  # fmt: skip
    bk, plan = run.bk, run.plan
    reps = plan.intf_reps * TOGETHER_PER_REP
    first, lead_s = order
    _single(bk, streams, vop, itf.fn, 0, order)  # warm-up
    v_alone, c_alone, v_tog, c_tog, p_alone, p_tog = [], [], [], [], [], []
    for i in range(reps):
        v_alone.append(_single(bk, streams, vop, None, i)[0])
        c_alone.append(_single(bk, streams, None, itf.fn, i)[1])
        tv, tc, tp = _single(bk, streams, vop, itf.fn, i, order)
        v_tog.append(tv)
        c_tog.append(tc)
        p_alone.append(v_alone[-1] + c_alone[-1])
        p_tog.append(tp)
    m, n, k, dtype = shape
    workload = {"m": m, "n": n, "k": k, "dtype": dtype, "comm": itf.comm, "nbytes": itf.nbytes, "gpus": 1,
                "cus": itf.cus, "arrangement": "together"}  # fmt: skip
    second = "the GEMM" if first == "comm" else "the interferer"
    if lead_s:
        workload.update(lead_us=round(lead_s * 1e6, 3), first=first)
        when = (f"{'the interferer' if first == 'comm' else 'the GEMM'} queued first and {second} behind a"
                f" {lead_s * 1e6:.0f} us sleep kernel on its stream, the sleep inside its time")  # fmt: skip
    else:
        when = f"{'the interferer' if first == 'comm' else 'the GEMM'} queued first"
    base = (
        f"GEMM: {vwhat}; one call on stream 1 and one call of {itf.what} on stream 2, launched at the same"
        f" moment ({bk.release}; {when}); each kernel's own time from events around it on its stream;"
        f" alone: the same single launches with nothing beside them, interleaved with the together runs;"
        f" {reps} launches of each; medians (p10 / p90 in published); measured = 100 x (together / alone - 1)"
    )
    if not bk.concurrent:
        base += "; CPU: the two streams ran one after the other, so nothing overlapped"
    pair = (
        "; this row: the pair, from the first start to the last end, against the two one after the other"
        " (alone = the sum of their alone times in the same repetition; below 0: running them together gains)"
    )
    series = [("compute", v_alone, v_tog, base + "; this row: the GEMM's slowdown"),
              ("comm", c_alone, c_tog, base + "; this row: the interferer's own slowdown"),
              ("pair", p_alone, p_tog, base + pair)]  # fmt: skip
    tag = f"-lead{lead_s * 1e6:.0f}us-{first}first" if lead_s else ""
    rows = interference_rows(run.ctx, f"{itf.rid}-together{tag}-{m}x{n}x{k}", workload, series, {})
    for row, (_, alone, together, _) in zip(rows, series, strict=True):
        run.emit(row, {"alone_s": alone, "together_s": together})
    run.progress(
        f"[interference] together{tag}, GEMM {m}x{n}x{k} and {itf.rid}: GEMM {rows[0]['measured']:+.1f} %,"
        f" interferer {rows[1]['measured']:+.1f} %, the pair {rows[2]['measured']:+.1f} % against one after the other"
    )


def held_rate(t_alone: float, t_with: float, overlap: float) -> float:
    """The held interferer's rate beside the GEMM over its rate alone, ``x = 1 - (T - T0) / S``: of its
    time ``T`` beside a GEMM that ran for ``S`` of it, ``S`` went at ``x`` of its alone rate and the rest
    alone, so ``T0 = x S + (T - S)``."""
    return 1.0 - (t_with - t_alone) / overlap


def _held_once(bk: Any, streams: tuple[Any, Any, Any], vop: Any, v_iters: int, hfn: Any, passes: int,
               gate_s: float) -> tuple[list[float], float, float, float]:  # fmt: skip
    """One held launch on stream 2, then ``v_iters`` GEMM calls on stream 1 (``vop`` None: the held
    launch alone): the GEMM's call times, the held launch's time, the overlap (its start to the GEMM's
    last end) and the coverage (the held launch's end over the GEMM's last end, from the release)."""
    _, s1, s2 = streams
    bk.sync()
    go = _release(bk, streams, gate_s)
    c0, c1 = bk.event(), bk.event()
    with bk.use(s2):
        c0.record()
        hfn(passes)
        c1.record()
    vev = [bk.event() for _ in range(v_iters + 1)] if vop is not None else []
    if vop is not None:
        with bk.use(s1):
            bk.gate(HELD_LEAD_S)
            vev[0].record()
            for i in range(v_iters):
                vop(i)
                vev[i + 1].record()
    bk.sync()
    t_c = bk.elapsed(c0, c1)
    if vop is None:
        return [], t_c, 0.0, 0.0
    tv = [bk.elapsed(go, e) for e in vev]
    victim = [b - a for a, b in zip(tv, tv[1:], strict=False)]
    start = bk.elapsed(go, c0)
    overlap = tv[-1] - start
    cov = (start + t_c) / tv[-1] if tv[-1] > 0 else 0.0
    return victim, t_c, overlap, cov


def _held(run: Any, streams: tuple[Any, Any, Any], shape: tuple[int, int, int, str], vop: Any, vwhat: str,
          t_v: float, itf: Interferer) -> None:  # fmt: skip
    bk, plan = run.bk, run.plan
    _, s1, s2 = streams
    one = stats(batch(bk, lambda i: itf.held(1), 3, 2, stream=s2)).median
    span = plan.victim_span_s
    v_iters = max(3, min(MAX_VICTIM_CALLS, math.ceil(span / t_v)))
    v_alone = batch(bk, vop, v_iters, 2, stream=s1)
    passes = min(MAX_PASSES, max(2, math.ceil(BG_MARGIN * sum(v_alone) / max(one, 1e-9))))
    gate_s = gate_for(v_iters + 2)
    victim: list[float] = []
    c_alone: list[float] = []
    c_with: list[float] = []
    rates: list[float] = []
    covs: list[float] = []
    for _ in range(plan.intf_reps):
        for _attempt in range(3):
            _, t0, _, _ = _held_once(bk, streams, None, 0, itf.held, passes, gate_s)
            vic, t1, overlap, cov = _held_once(bk, streams, vop, v_iters, itf.held, passes, gate_s)
            if not bk.concurrent or cov >= 1.0 or passes >= MAX_PASSES:
                break
            passes = min(MAX_PASSES, passes * 2)
        victim += vic
        c_alone.append(t0)
        c_with.append(t1)
        covs.append(cov)
        if bk.concurrent and overlap > 0:
            rates.append(held_rate(t0, t1, overlap))
    cov = min(covs)
    m, n, k, dtype = shape
    workload = {"m": m, "n": n, "k": k, "dtype": dtype, "comm": itf.comm, "nbytes": itf.nbytes, "gpus": 1,
                "cus": itf.cus, "arrangement": "held"}  # fmt: skip
    covered = cov >= 1.0 or not bk.concurrent
    base = (
        f"GEMM: {vwhat}; {v_iters} calls back to back on stream 1, an event after each, after a"
        f" {HELD_LEAD_S * 1e6:.0f} us sleep on stream 1. Beside it on stream 2, launched first: {itf.what},"
        f" as ONE launch looping {passes} times over its buffer (its blocks resident for the whole of the"
        f" GEMM's timed span; the launch ended at {cov:.2f} x the GEMM's end{'' if covered else ': NOT covered'});"
        f" {bk.release}; {bk.timer}; alone: the same GEMM calls and the same held launch with nothing beside"
        f" them; {plan.intf_reps} repetitions pooled"
    )
    if not bk.concurrent:
        base += "; CPU: the two streams ran one after the other, so nothing overlapped"
    extra = {"passes": float(passes)}
    if cov > 0:
        extra["coverage"] = cov
    series = [
        (
            "compute",
            v_alone,
            victim,
            base + "; medians per GEMM call (p10 / p90 in published);"
            " measured = 100 x (together / alone - 1); this row: the GEMM's slowdown",
        )
    ]
    x = stats(rates).median if rates else 0.0
    if bk.concurrent and covered and x > 0.02:
        # the comm row's alone / together are per-pass times: alone T0 / passes, beside the GEMM the same
        # over x, the rate ratio each repetition gave
        a_pass = [t / passes for t in c_alone]
        w_pass = [t / passes / r for t, r in zip(c_alone, rates, strict=True)]
        series.append(("comm", a_pass, w_pass, base + "; this row: the interferer's own slowdown while"
                       " beside the GEMM, 1 / x - 1 with x = 1 - (T - T0) / S its rate beside the GEMM over"
                       " its rate alone (T, T0: the held launch's time with and without the GEMM; S: its"
                       " start to the GEMM's last end); per-pass times in published"))  # fmt: skip
    elif bk.concurrent:
        run.note(f"{itf.rid} held beside GEMM {m}x{n}x{k}: no comm row (coverage {cov:.2f},"
                 f" rate beside the GEMM {x:.3f} of alone)")  # fmt: skip
    rows = interference_rows(run.ctx, f"{itf.rid}-held-{m}x{n}x{k}", workload, series, extra)
    run.emit(rows[0], {"alone_s": v_alone, "together_s": victim})
    if len(rows) > 1:
        run.emit(rows[1], {"alone_s": c_alone, "together_s": c_with, "rate_beside": rates})
    run.progress(
        f"[interference] held, GEMM {m}x{n}x{k} beside {itf.rid}: GEMM {rows[0]['measured']:+.1f} %"
        + (f", interferer {rows[1]['measured']:+.1f} %" if len(rows) > 1 else ", interferer: no row")
        + (f" ({passes} passes, covered {cov:.2f} x)" if bk.concurrent else " (CPU: one after the other)")
    )
