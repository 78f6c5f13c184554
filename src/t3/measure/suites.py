"""The single-kernel suites: GEMM throughput, HBM stream bandwidth and runtime latencies.

Each suite takes a run (:class:`t3.measure.runner.Session`: backend, plan, row context) and writes one
row per measurement through it. Interference (two kernels at once) is in
:mod:`~t3.measure.interference`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

from .plan import ALL, MiB
from .rows import gemm_row, hbm_row, latency_row, size_label
from .timing import batch, chain, gate_for, stats

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4}  # tf32: FP32 operands on the TF32 tensor-core path


def _lib(bk: Any) -> str:
    return {"cuda": "cuBLAS", "rocm": "hipBLASLt / rocBLAS", "cpu": "ATen on the CPU"}[bk.kind]


def rotating_sets(bk: Any, plan: Any, set_bytes: int) -> int:
    """Buffer sets to rotate among so that one pass over them exceeds the L2 (the plan's multiple)."""
    target = max(plan.rotate_min_bytes, plan.rotate_l2_multiple * bk.l2_bytes)
    return max(2, math.ceil(target / max(set_bytes, 1)))


def gemm_operands(bk: Any, m: int, n: int, k: int, dtype: str, plan: Any, fp8: Any) -> tuple[Callable, str]:
    """``op(i)``: one GEMM on buffer set ``i % sets`` (random normal operands, seed 0), and a phrase
    saying what it runs, on what layout and how the buffers rotate."""
    t = bk.torch
    set_bytes = (m * k + n * k) * DTYPE_BYTES[dtype] + m * n * (4 if dtype == "tf32" else 2)
    sets = rotating_sets(bk, plan, set_bytes)
    g = t.Generator(device=bk.device)
    g.manual_seed(0)
    tdt = {"fp16": t.float16, "tf32": t.float32}.get(dtype, t.bfloat16)
    a = [t.randn(m, k, generator=g, device=bk.device, dtype=tdt) for _ in range(sets)]
    b = [t.randn(n, k, generator=g, device=bk.device, dtype=tdt) for _ in range(sets)]
    if dtype == "fp8":
        a, b = [x.to(fp8) for x in a], [x.to(fp8) for x in b]
        one = t.ones((), device=bk.device, dtype=t.float32)

        def op(i: int) -> None:
            j = i % sets
            t._scaled_mm(a[j], b[j].t(), scale_a=one, scale_b=one, out_dtype=t.bfloat16)

        what = f"torch._scaled_mm(A, B.t()) with {str(fp8).removeprefix('torch.')} A and B, per-tensor scales 1.0, BF16 out"
    else:
        c = [t.empty(m, n, device=bk.device, dtype=tdt) for _ in range(sets)]

        def op(i: int) -> None:
            j = i % sets
            t.mm(a[j], b[j].t(), out=c[j])

        what = (
            "torch.mm(A, B.t(), out=C), FP32 in and out on the TF32 tensor-core path (allow_tf32 set for this"
            " measurement), FP32 accumulation"
            if dtype == "tf32"
            else f"torch.mm(A, B.t(), out=C), {dtype.upper()} in and out, FP32 accumulation"
        )
    rot = (
        f"operands rotating among {sets} buffer sets of {set_bytes / MiB:.1f} MiB ({sets * set_bytes / MiB:.0f} MiB"
        f" in all, > the {bk.l2_bytes / MiB:.0f} MiB L2)"
    )
    return (
        op,
        f"{what} ({_lib(bk)} through PyTorch {t.__version__}); A M x K row-major, B stored N x K (nn.Linear's layout); {rot}; random normal operands (seed 0)",
    )


def _hygiene(bk: Any, warmup: int, iters: int) -> str:
    t = bk.torch
    tf32 = t.backends.cuda.matmul.allow_tf32
    return (
        f"{bk.timer}, an event after every call, {bk.batching}; {warmup} warm-up and {iters} timed calls;"
        f" median per call (p10 / p90 in published);"
        f" torch.backends.cuda.matmul.allow_tf32 = {tf32}"
    )


# ---- GEMM ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _tf32(bk: Any, on: bool):
    """PyTorch's TF32 switch for FP32 matmuls, set for one measurement and restored after it."""
    flags = bk.torch.backends.cuda.matmul
    before = flags.allow_tf32
    flags.allow_tf32 = on or before
    try:
        yield
    finally:
        flags.allow_tf32 = before


def gemm(run: Any) -> None:
    bk, plan = run.bk, run.plan
    fp8, fp8_why = bk.fp8() if any(g[3] == "fp8" for g in plan.gemms) else (None, "")
    total = len(plan.gemms)
    for i, (m, n, k, dtype, why) in enumerate(plan.gemms, 1):
        label = f"{dtype} {m}x{n}x{k}"
        if run.over_budget("gemm"):
            return
        if dtype == "fp8" and fp8 is None:
            run.skip("gemm", label, f"no FP8 GEMM here: {fp8_why}")
            continue
        with run.measuring("gemm", label), _tf32(bk, dtype == "tf32"):
            op, what = gemm_operands(bk, m, n, k, dtype, plan, fp8)
            samples = batch(bk, op, plan.gemm_iters, plan.gemm_warmup)
            conv = f"{what}; in the grid as: {why}; {_hygiene(bk, plan.gemm_warmup, plan.gemm_iters)}; TFLOPS = 2 M N K / median time"
            row = gemm_row(run.ctx, m, n, k, dtype, samples, conv)
            run.emit(row, {"samples_s": samples})
            st = stats(samples)
            run.progress(
                f"[gemm {i}/{total}] {label} ({why}): {row['measured']:.1f} TFLOPS,"
                f" {st.median * 1e6:.1f} us per call (p10 {st.p10 * 1e6:.1f} us, p90 {st.p90 * 1e6:.1f} us)"
            )
            del op
        run.release()


# ---- HBM ----------------------------------------------------------------------------------------------
def hbm(run: Any) -> None:
    with run.measuring("hbm", "streams"):
        _streams(run)
    run.release()
    with run.measuring("hbm", "copies on k blocks"):
        _block_copies(run)
    run.release()


def _streams(run: Any) -> None:
    """Read, write, copy and triad streams through PyTorch's own kernels, on every CU."""
    bk, plan, t = run.bk, run.plan, run.bk.torch
    n = plan.hbm_bytes // 4
    a = t.full((n,), 1.0, device=bk.device, dtype=t.float32)
    b = t.full((n,), 2.0, device=bk.device, dtype=t.float32)
    c = t.full((n,), 0.5, device=bk.device, dtype=t.float32)
    size = f"fp32 arrays of {plan.hbm_bytes / MiB:.0f} MiB (each > the {bk.l2_bytes / MiB:.0f} MiB L2 by {plan.hbm_bytes / bk.l2_bytes:.0f}x)"
    streams: list[tuple[str, int, Callable[[int], Any], str]] = [
        ("read", 4 * n, lambda i: t.sum(a), f"torch.sum(a): reads one of the {size}"),
        ("write", 4 * n, lambda i: a.fill_(1.0), f"a.fill_(1.0): writes one of the {size}"),
        ("copy", 8 * n, lambda i: b.copy_(a), f"b.copy_(a): reads one and writes another of the {size}"),
        ("triad", 12 * n, lambda i: t.add(b, c, alpha=0.5, out=a),
         f"torch.add(b, c, alpha=0.5, out=a): reads two and writes one of the {size}"),
    ]  # fmt: skip
    copy_path = bk.copy_kind(lambda: b.copy_(a))
    warm, iters = 3, plan.hbm_iters
    for name, nbytes, fn, what in streams:
        if run.over_budget("hbm"):
            return
        with run.measuring("hbm", name):
            samples = batch(bk, fn, iters, warm)
            extra = f"; {copy_path}" if name == "copy" else ""
            conv = f"{what}{extra}; nbytes = bytes read + written per call; {_hygiene(bk, warm, iters)}; GB/s = nbytes / median time"
            row = hbm_row(run.ctx, name, nbytes, 0, samples, conv)
            run.emit(row, {"samples_s": samples})
            run.progress(f"[hbm] {name} {size_label(nbytes)}: {row['measured']:.1f} GB/s")


def _block_copies(run: Any) -> None:
    """The same copy on k thread blocks (Triton, fixed grid): one block's copy rate, and where k blocks
    saturate the memory."""
    bk, plan, t = run.bk, run.plan, run.bk.torch
    why = bk.fixed_grid()
    if why:
        run.skip("hbm", "copy on k blocks", why)
        return
    n = plan.block_copy_bytes // 4
    src = t.full((n,), 1.0, device=bk.device, dtype=t.float32)
    dst = t.empty_like(src)
    warm, iters = 2, max(3, plan.hbm_iters // 2)
    counts = sorted({min(bk.cus if k == ALL else k, bk.cus) for k in plan.block_counts})
    how = (
        "its k chunks copied one after another (CPU: no thread blocks)"
        if bk.kind == "cpu"
        else "Triton kernel, grid = k blocks of 512 threads, each a grid-stride loop over 32 KiB fp32 chunks"
    )
    for kk in counts:
        if run.over_budget("hbm"):
            return
        with run.measuring("hbm", f"copy on {kk} blocks"):
            samples = batch(bk, lambda i, kk=kk: bk.block_copy(src, dst, kk), iters, warm)
            conv = (
                f"a copy of a {plan.block_copy_bytes / MiB:.0f} MiB fp32 array on exactly k = {kk} thread blocks"
                f" ({bk.cus} CUs / SMs on this GPU): {how}; nbytes = bytes read + written per call;"
                f" {_hygiene(bk, warm, iters)}; GB/s = nbytes / median time"
            )
            row = hbm_row(run.ctx, "copy", 2 * 4 * n, kk, samples, conv)
            run.emit(row, {"samples_s": samples})
            run.progress(
                f"[hbm] copy on {kk} blocks: {row['measured']:.1f} GB/s ({row['measured'] / kk:.2f} GB/s per block)"
            )


# ---- latencies ------------------------------------------------------------------------------------------
def latency(run: Any) -> None:
    bk, plan, t = run.bk, run.plan, run.bk.torch
    one = t.zeros(1, device=bk.device)
    two = t.zeros(1, device=bk.device)
    reps, n = plan.latency_reps, plan.launch_kernels
    kernel_s = 0.0
    with run.measuring("latency", "kernel_launch"):
        chain(bk, lambda i: bk.tiny(one), n)  # warm-up
        queued = [chain(bk, lambda i: bk.tiny(one), n) for _ in range(reps)]
        host = [chain(bk, lambda i: bk.tiny(one), n, gated=False) for _ in range(reps)]
        kernel_s = stats(queued).median
        conv = (
            f"{n} one-element kernels (t.add_(1)) back to back on one stream, {bk.batching}: time per kernel,"
            f" launch to launch ({bk.timer} around each chain); {reps} chains; median (p10 / p90 in published);"
            f" host_us: the same chain issued by the host as it goes (PyTorch's dispatch and the driver's launch"
            f" included)"
        )
        row = latency_row(run.ctx, "kernel_launch", queued, {"host_us": stats(host).median * 1e6}, conv)
        run.emit(row, {"samples_s": queued, "host_samples_s": host})
        run.progress(
            f"[latency] kernel launch: {row['measured']:.2f} us queued, {stats(host).median * 1e6:.2f} us host-issued"
        )
    if run.over_budget("latency"):
        return
    with run.measuring("latency", "event_wait"):
        s1, s2 = bk.stream(), bk.stream()
        hops_n = plan.wait_hops
        _hops(bk, s1, s2, one, two, hops_n)
        hops = [_hops(bk, s1, s2, one, two, hops_n) for _ in range(reps)]
        waits = [max(h - kernel_s, 0.0) for h in hops]
        conv = (
            f"ping-pong of {hops_n} hops between two streams: a one-element kernel, an event recorded after it,"
            f" the other stream waits for the event, runs its kernel, records, and so on, {bk.batching}; time per hop minus the queued kernel-launch time (kernel_us) = from the record to the"
            f" waiting stream's kernel start beyond a launch; {reps} chains; median (p10 / p90 in published)"
            + ("; CPU: streams are sequential, so this is ~0" if bk.kind == "cpu" else "")
        )
        extra = {"hop_us": stats(hops).median * 1e6, "kernel_us": kernel_s * 1e6}
        row = latency_row(run.ctx, "event_wait", waits, extra, conv)
        run.emit(row, {"samples_s": waits, "hop_samples_s": hops})
        run.progress(
            f"[latency] event record -> stream wait: {row['measured']:.2f} us ({extra['hop_us']:.2f} us per hop)"
        )
    if run.over_budget("latency"):
        return
    _flag(run)


def _hops(bk: Any, s1: Any, s2: Any, one: Any, two: Any, n: int) -> float:
    """Seconds per hop of an ``n``-hop event ping-pong between two streams (queued behind a gate)."""
    a, b = bk.event(), bk.event()
    bk.sync()
    with bk.use(s1):
        bk.gate(gate_for(3 * n))
        a.record()
    for _ in range(n):
        e1, e2 = bk.event(timing=False), bk.event(timing=False)
        with bk.use(s1):
            bk.tiny(one)
            e1.record()
        bk.wait(s2, e1)
        with bk.use(s2):
            bk.tiny(two)
            e2.record()
        bk.wait(s1, e2)
    with bk.use(s1):
        b.record()
    bk.sync()
    return bk.elapsed(a, b) / (2 * n)


def _flag(run: Any) -> None:
    bk, plan = run.bk, run.plan
    why = bk.fixed_grid()
    if why:
        run.skip("latency", "flag", why)
        return
    n1, n2 = plan.flag_rounds
    with run.measuring("latency", "flag"):
        bk.flag_pingpong(n1)  # warm-up
        pairs = [(bk.flag_pingpong(n1), bk.flag_pingpong(n2)) for _ in range(plan.latency_reps)]
        one_way = [max((b - a) / (2 * (n2 - n1)), 0.0) for a, b in pairs]
        how = (
            "emulated sequentially on the CPU (a fill and a read per flag)"
            if bk.kind == "cpu"
            else "two one-warp Triton kernels on two streams, released together by one event; each stores its"
            " flag with an atomic exchange and polls the other's with volatile loads"
        )
        conv = (
            f"a flag passed back and forth between two kernels: {how}; one way = (T({n2} rounds) - T({n1} rounds))"
            f" / (2 x {n2 - n1}), which cancels launches and start-up; {plan.latency_reps} pairs of chains;"
            f" median (p10 / p90 in published)"
        )
        row = latency_row(run.ctx, "flag", one_way, {}, conv)
        run.emit(row, {"samples_s": one_way, "chains_s": pairs})
        run.progress(f"[latency] flag seen by a polling kernel: {row['measured']:.2f} us one way")
