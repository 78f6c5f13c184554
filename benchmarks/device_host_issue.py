"""What one call costs the host thread that issues it from Python (PyTorch), for the calls a pipelined
implementation such as PyTorch's async-TP makes once per step: a matmul, a device-to-device copy, an
event record, a stream wait, a stream switch, a sum. The GPU is kept busy by a long kernel queued first,
so the calls never wait for it: the host's own time per call is what is measured (median of repeats of
a batch of calls, wall clock). One GPU; no distributed setup.

    python3 benchmarks/device_host_issue.py OUT.json

Prints one line per call (microseconds per call) and writes them with the environment to OUT.json.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

BATCH = 200
REPEATS = 15


def busy(ms: float) -> None:
    """Queue about ``ms`` of GPU work (a sleep kernel), so the calls issued behind it never block."""
    torch.cuda._sleep(int(ms * 1e-3 * 1.5e9))


def per_call_us(fn) -> dict:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    xs = []
    for _ in range(REPEATS):
        busy(40.0)
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        t1 = time.perf_counter()
        xs.append((t1 - t0) / BATCH * 1e6)
        torch.cuda.synchronize()
    xs.sort()
    return {
        "median_us": statistics.median(xs),
        "p10_us": xs[len(xs) // 10],
        "p90_us": xs[(9 * len(xs)) // 10],
    }


def main(path: str) -> None:
    if not torch.cuda.is_available():
        sys.exit("device_host_issue.py needs a GPU that PyTorch sees")
    dev = torch.device("cuda")
    bf = torch.bfloat16
    a64, b64 = (torch.randn(64, 64, device=dev, dtype=bf) for _ in range(2))
    a, b = torch.randn(512, 8192, device=dev, dtype=bf), torch.randn(8192, 4096, device=dev, dtype=bf)
    out = torch.empty(512, 4096, device=dev, dtype=bf)
    src, dst = torch.empty(1 << 20, device=dev), torch.empty(1 << 20, device=dev)
    stacked = torch.randn(8, 512, 4096, device=dev, dtype=bf)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    ev = torch.cuda.Event()

    def stream_switch() -> None:
        with torch.cuda.stream(s1):
            pass

    def wait() -> None:
        s2.wait_event(ev)

    calls = {
        "torch.mm 64x64x64 (bf16)": lambda: torch.mm(a64, b64),
        "torch.mm 512x4096x8192 into out (bf16)": lambda: torch.mm(a, b, out=out),
        "dst.copy_(src) 4 MiB device to device": lambda: dst.copy_(src),
        "event.record()": lambda: ev.record(),
        "stream.wait_event(event)": wait,
        "with torch.cuda.stream(s): (enter + exit)": stream_switch,
        "torch.sum over 8 stacked 512x4096 (bf16)": lambda: torch.sum(stacked, dim=0),
        "empty kernel (torch.cuda._sleep(0))": lambda: torch.cuda._sleep(0),
    }
    env = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "cuda": torch.version.cuda,
           "batch": BATCH, "repeats": REPEATS, "python": sys.version.split()[0]}  # fmt: skip
    print(f"{env['gpu']}, torch {env['torch']}, CUDA {env['cuda']}, Python {env['python']}")
    res = {}
    for name, fn in calls.items():
        res[name] = per_call_us(fn)
        r = res[name]
        print(
            f"  {name:46s} {r['median_us']:7.2f} us per call on the host (p10 {r['p10_us']:.2f}, p90 {r['p90_us']:.2f})"
        )
    Path(path).write_text(json.dumps({"environment": env, "host_us_per_call": res}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 benchmarks/device_host_issue.py OUT.json")
    main(sys.argv[1])
