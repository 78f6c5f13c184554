"""The clock and power a GPU holds while a GEMM runs alone, a copy runs alone, and the two run together.

The question (issue: interference, "the clock a GPU holds when a GEMM and communication run
together"): is part of a GEMM's slowdown beside communication a lower clock, because the two together
draw more power than the GEMM alone? No measurement of it is published for H100/H200. This script
runs each workload back to back on its own stream for a couple of seconds, samples the SM clock, the
memory clock, the power draw, the temperature and the clock-event (throttle) reasons through NVML
every few milliseconds, and times every call with CUDA events. A GEMM's slowdown beside a copy and the
clock ratio of the two runs say how much of that slowdown the clock explains.

Run on a GPU machine (PyTorch with CUDA; Triton for the copy kernel on k blocks; nvidia-ml-py or
nvidia-smi for the samples):

    python3 benchmarks/device_clock.py OUT.json               # GEMMs, copies, and the two together
    python3 benchmarks/device_clock.py OUT.json --plan data   # uniform operands, do_bench's zeroing

Prints one line per workload (units in the header) and writes the samples' medians and spreads, every
call's time and the environment to OUT.json. No t3 dependency beyond the kit's copy kernel
(src/t3/measure/kernels.py, loaded by path).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

RUN_S = 2.0  # seconds each workload runs
SKIP_S = 0.5  # the first part of each run is left out (the clock and the power ramp)
SAMPLE_S = 0.005  # NVML sampling period
MIN_CALL_S = 4e-4  # a copy call is made this long at least (passes), so the host keeps ahead
QUEUE = 24  # calls in flight per stream at most (the host waits on the call this many back)
GEMM = 8192  # M = N = K of the GEMMs
COPY_BYTES = 256 << 20

REASONS = {0x1: "idle", 0x2: "applications clocks", 0x4: "SW power cap", 0x8: "HW slowdown",
           0x20: "SW thermal", 0x40: "HW thermal", 0x80: "HW power brake"}  # fmt: skip


class Sampler:
    """SM/memory clock (MHz), power (W), temperature (C) and clock-event reasons, with host times."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float, float, float, int]] = []
        self.source = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
            self.read()
            self.source = f"NVML (nvidia-ml-py), every {SAMPLE_S * 1e3:.0f} ms"
        except Exception as err:  # noqa: BLE001 - nvidia-smi below instead
            self.nv = None
            self.source = f"nvidia-smi -lms 20 (NVML unavailable: {err})"

    def read(self) -> tuple[float, float, float, float, float, int]:
        nv, h = self.nv, self.h
        sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        mem = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
        power = nv.nvmlDeviceGetPowerUsage(h) / 1e3
        temp = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        reasons = int(self._reasons(h)) if self._reasons else -1
        return (time.monotonic(), float(sm), float(mem), power, float(temp), reasons)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.read())
            time.sleep(SAMPLE_S)

    def _smi(self) -> None:
        q = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
        self._proc = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                sm, mem, power, temp = (float(p) for p in parts[:4])
                reasons = int(parts[4], 16) if len(parts) > 4 else -1
            except ValueError:
                continue
            self.samples.append((time.monotonic(), sm, mem, power, temp, reasons))
            if self._stop.is_set():
                break

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop if self.nv else self._smi, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            self._proc = None
        if self._thread is not None:
            self._thread.join(timeout=2)

    def window(self, t0: float, t1: float) -> dict:
        rows = [s for s in self.samples if t0 <= s[0] <= t1]
        if not rows:
            return {"samples": 0}

        def q(i: int) -> dict:
            xs = sorted(r[i] for r in rows)
            return {"median": statistics.median(xs), "p10": xs[len(xs) // 10], "p90": xs[(9 * len(xs)) // 10]}

        counts: dict[str, int] = {}
        for r in rows:
            if r[5] < 0:
                continue
            names = [name for bit, name in REASONS.items() if r[5] & bit] or ["none"]
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        return {"samples": len(rows), "sm_mhz": q(1), "mem_mhz": q(2), "power_w": q(3), "temp_c": q(4),
                "reasons": counts}  # fmt: skip


class Work:
    """One workload: a call to enqueue on the current stream, its useful work (FLOPs or bytes), a name."""

    def __init__(self, name: str, fn, flops: float = 0.0, nbytes: float = 0.0) -> None:
        self.name, self.fn, self.flops, self.nbytes = name, fn, flops, nbytes
        self.alone_s = 0.0


def probe(fn, n: int = 10) -> float:
    """Seconds per call of ``fn`` back to back (after three warm-ups)."""
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / n


def run(works: list[Work], sampler: Sampler, run_s: float = RUN_S) -> dict:
    """Run the works side by side, each on its own stream, for ``run_s``; per-call times and samples."""
    streams = [torch.cuda.Stream() for _ in works]
    events: list[list[torch.cuda.Event]] = [[] for _ in works]
    due = [0.0 for _ in works]  # the GPU time each stream's queue reaches (from its calls alone)
    torch.cuda.synchronize()
    for s, e in zip(streams, events, strict=True):  # one event each to start from
        with torch.cuda.stream(s):
            e.append(torch.cuda.Event(enable_timing=True))
            e[-1].record()
    t0 = time.monotonic()
    while works and min(due) < run_s:
        i = min(range(len(works)), key=lambda j: due[j])
        if len(events[i]) > QUEUE:
            events[i][-QUEUE].synchronize()  # keep the queue short (the host waits, releasing the GIL)
        with torch.cuda.stream(streams[i]):
            works[i].fn()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
        events[i].append(ev)
        due[i] += works[i].alone_s
    if not works:
        time.sleep(run_s)
    torch.cuda.synchronize()
    t1 = time.monotonic()
    series = [[round(x[0] - t0, 4), *x[1:]] for x in sampler.samples if t0 <= x[0] <= t1]
    out = {"host_s": t1 - t0, "clock": sampler.window(t0 + SKIP_S, t1 - 0.05), "streams": [],
           "samples": {"fields": ["s from start", "SM MHz", "memory MHz", "power W", "temperature C",
                                  "clock-event reasons (bits)"], "rows": series}}  # fmt: skip
    for w, e in zip(works, events, strict=True):
        ends = [e[0].elapsed_time(x) / 1e3 for x in e]  # GPU seconds from the stream's first event
        calls = [(ends[j], ends[j + 1] - ends[j]) for j in range(len(ends) - 1)]
        horizon = ends[-1] - 0.05
        steady = [d for start, d in calls if SKIP_S <= start <= horizon] or [d for _, d in calls]
        med = statistics.median(steady)
        rate = (w.flops / med / 1e12, "TFLOP/s") if w.flops else (w.nbytes / med / 1e9, "GB/s")
        out["streams"].append({"work": w.name, "calls": len(calls), "steady_calls": len(steady),
                               "median_call_s": med, "alone_call_s": w.alone_s, "rate": rate[0],
                               "rate_unit": rate[1], "call_s": [d for _, d in calls]})  # fmt: skip
    return out


def kit_kernels():
    here = Path(__file__).resolve().parent.parent / "src" / "t3" / "measure"
    pkg = tempfile.mkdtemp()
    shutil.copytree(here, Path(pkg) / "t3kit")
    sys.path.insert(0, pkg)
    from t3kit import kernels as kk  # noqa: PLC0415

    return kk.Kernels(torch)


def main(path: str, plan_name: str = "default") -> None:
    if not torch.cuda.is_available():
        sys.exit("device_clock.py needs a GPU that PyTorch sees (torch.cuda.is_available() is False)")
    dev = torch.device("cuda")
    sampler = Sampler()
    bf = torch.bfloat16
    a, b = (torch.randn(GEMM, GEMM, device=dev, dtype=bf) for _ in range(2))
    z = torch.zeros(GEMM, GEMM, device=dev, dtype=bf)
    c = torch.empty(GEMM, GEMM, device=dev, dtype=bf)
    ah, bh = a.half(), b.half()
    ch = torch.empty_like(ah)
    flops = 2.0 * GEMM**3
    works = {
        "gemm-bf16": Work("GEMM bf16 8192^3 (randn)", lambda: torch.mm(a, b.t(), out=c), flops=flops),
        "gemm-bf16-zeros": Work("GEMM bf16 8192^3 (zeros)", lambda: torch.mm(z, z.t(), out=c), flops=flops),
        "gemm-fp16": Work("GEMM fp16 8192^3 (randn)", lambda: torch.mm(ah, bh.t(), out=ch), flops=flops),
    }
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None:
        a8, b8 = a.to(fp8), b.to(fp8)
        one = torch.ones((), device=dev, dtype=torch.float32)
        works["gemm-fp8"] = Work(
            "GEMM fp8 8192^3 (randn)",
            lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=bf),
            flops=flops,
        )
    src = torch.randn(COPY_BYTES // 4, device=dev)
    dst = torch.empty_like(src)
    works["memcpy"] = Work(
        "memcpy d2d 256 MiB (dst.copy_(src))", lambda: dst.copy_(src), nbytes=2 * COPY_BYTES
    )
    host = torch.empty(COPY_BYTES // 4, dtype=torch.float32, pin_memory=True)
    dst2 = torch.empty_like(src)
    # the data and the pauses of published loops: uniform operands (Azure's superbench: curand uniform in
    # [-1, 1]) and triton.testing.do_bench's 256 MB buffer zeroed before each call (the call's time then
    # includes the zeroing; "zero-256MB" alone gives it)
    au, bu = ((torch.rand(GEMM, GEMM, device=dev) * 2 - 1).to(bf) for _ in range(2))
    works["gemm-bf16-uniform"] = Work(
        "GEMM bf16 8192^3 (uniform)", lambda: torch.mm(au, bu.t(), out=c), flops=flops
    )
    flush = torch.empty(int(256e6 // 4), dtype=torch.int, device=dev)
    works["zero-256MB"] = Work("zero a 256 MB buffer (do_bench's)", lambda: flush.zero_(), nbytes=256e6)
    if fp8 is not None:
        au8, bu8 = au.to(fp8), bu.to(fp8)
        works["gemm-fp8-uniform"] = Work(
            "GEMM fp8 8192^3 (uniform)",
            lambda: torch._scaled_mm(au8, bu8.t(), scale_a=one, scale_b=one, out_dtype=bf),
            flops=flops,
        )

        def flushed() -> None:
            flush.zero_()
            torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=bf)

        works["gemm-fp8-flushed"] = Work("zero 256 MB, then GEMM fp8 8192^3 (randn)", flushed, flops=flops)
    works["h2d"] = Work(
        "h2d 256 MiB (copy engine)", lambda: dst2.copy_(host, non_blocking=True), nbytes=COPY_BYTES
    )
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    try:
        kern = kit_kernels()
        for blocks in (32, sms):
            t = probe(lambda blocks=blocks: kern.copy(src, dst, blocks, 1), n=3)
            passes = max(1, round(MIN_CALL_S / t))
            works[f"copy-{blocks}"] = Work(
                f"copy kernel on {blocks} blocks, 256 MiB x {passes}",
                lambda blocks=blocks, passes=passes: kern.copy(src, dst, blocks, passes),
                nbytes=2 * COPY_BYTES * passes,
            )
    except Exception as err:  # noqa: BLE001 - the other workloads stand without the kit's copy
        print(f"the copy kernel on k blocks is skipped: {err}")
    for w in works.values():
        w.alone_s = probe(w.fn)
    # "data": the data and pauses of published loops, each beside its baseline in the same run
    if plan_name == "data":
        plan = [["gemm-fp8"], ["gemm-fp8-uniform"], ["zero-256MB"], ["gemm-fp8-flushed"], ["gemm-bf16"],
                ["gemm-bf16-uniform"], [], ["gemm-fp8"]]  # fmt: skip
    else:
        plan = [["gemm-bf16"], ["gemm-bf16-zeros"], ["gemm-fp16"], ["gemm-fp8"], [f"copy-{sms}"], ["copy-32"],
                ["memcpy"], ["h2d"], ["gemm-bf16", f"copy-{sms}"], ["gemm-bf16", "copy-32"],
                ["gemm-bf16", "memcpy"], ["gemm-bf16", "h2d"], ["gemm-fp8", "copy-32"], ["gemm-fp8", f"copy-{sms}"],
                [], ["gemm-bf16"]]  # fmt: skip
    p = torch.cuda.get_device_properties(dev)
    env = {"gpu": torch.cuda.get_device_name(dev), "sms": sms, "torch": torch.__version__,
           "cuda": torch.version.cuda, "samples": sampler.source, "run_s": RUN_S, "skip_s": SKIP_S,
           "l2_bytes": getattr(p, "L2_cache_size", None)}  # fmt: skip
    try:
        env["smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.applications.graphics,power.limit,"
             "power.max_limit", "--format=csv"], capture_output=True, text=True, timeout=20,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError) as err:
        env["smi"] = f"nvidia-smi: {err}"
    print(f"{env['gpu']}, torch {env['torch']}, CUDA {env['cuda']}; samples: {env['samples']}")
    print(env["smi"])
    print(f"{'workload':44s} {'SM clock MHz':>13s} {'power W':>8s} {'temp C':>7s}  reasons; per stream: rate,"
          " slowdown against alone")  # fmt: skip
    results = []
    alone: dict[str, float] = {}  # each workload's steady median call alone (the runs of one workload)
    sampler.start()
    try:
        for names in plan:
            names = [n for n in names if n in works]
            res = run([works[n] for n in names], sampler)
            res["workloads"] = names
            results.append(res)
            if len(names) == 1 and names[0] not in alone:
                alone[names[0]] = res["streams"][0]["median_call_s"]
            for n, s in zip(names, res["streams"], strict=True):
                s["slowdown_vs_alone_run"] = s["median_call_s"] / alone[n] - 1 if n in alone else None
            ck = res["clock"]
            label = " + ".join(names) or "idle"
            if ck.get("samples"):
                why = ", ".join(f"{k} {v}" for k, v in sorted(ck["reasons"].items()))
                head = (f"{label:44s} {ck['sm_mhz']['median']:7.0f} ({ck['sm_mhz']['p10']:.0f}-"
                        f"{ck['sm_mhz']['p90']:.0f}) {ck['power_w']['median']:6.0f} {ck['temp_c']['median']:6.0f}  {why}")  # fmt: skip
            else:
                head = f"{label:44s} (no clock samples)"
            tail = "; ".join(
                f"{s['work']}: {s['rate']:.1f} {s['rate_unit']}"
                + (
                    f", {100 * s['slowdown_vs_alone_run']:+.1f} %"
                    if s["slowdown_vs_alone_run"] is not None
                    else ""
                )
                for s in res["streams"]
            )
            print(head + ("; " + tail if tail else ""))
            time.sleep(0.3)
    finally:
        sampler.stop()
    Path(path).write_text(json.dumps({"environment": env, "runs": results}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--plan" and args[2] in ("default", "data"):
        main(args[0], args[2])
    elif len(args) == 1:
        main(args[0])
    else:
        sys.exit("usage: python3 benchmarks/device_clock.py OUT.json [--plan default|data]")
