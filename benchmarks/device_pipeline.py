"""The consumer side of an all-gather + GEMM pipeline (PyTorch's async-TP), on one GPU: do the thin
per-shard GEMMs run as fast inside the pipeline as alone?

kraken's published async-TP rows (8 x H100, ``fused_all_gather_matmul``, M = 128 rows per GPU) spend
35 / 79 / 146 us per pipeline step at K = 4096 / 8192 / 16384 (N = 6656), where one such GEMM alone
runs in about 45 us at K = 8192 by ``t3 measure``'s own rows: the pieces look slower inside the
pipeline than alone, in proportion to K. This script separates the candidate causes on one GPU (no
peer, so the shard copies are device-to-device copies of the same size from a staging buffer, as
``_pipelined_all_gather_and_consume`` copies each arriving shard before multiplying it):

- ``bulk``: one GEMM of the gathered ``world x M`` rows (what the baseline runs after its all-gather);
- ``alone``: one shard's GEMM, timed alone (L2 flushed before each, like every case);
- ``serial``: the ``world`` shard GEMMs back to back on one stream, each into its slice of the output;
- ``two-streams``: the same, alternating between two streams (async-TP's ``-s2``), no copies;
- ``pipeline``: two alternating streams, each step a copy of the shard into the gathered input then
  its GEMM on the same stream, the local shard first (the async-TP consumer's order);
- ``pipeline-host``: the same issued step by step from Python without queuing it behind a sleep kernel,
  so the host's issue rate can show (the other cases are queued behind a sleep kernel first: the GPU
  never waits for the host).

Times are CUDA-event spans (microseconds), medians over repeats with p10 / p90; the L2 is flushed by
writing a 256 MiB buffer before every repeat. The operands are nn.Linear's layout (B stored N x K), as
in kraken's benchmark (``torch.randn(K, N).T.contiguous().T``) and ``t3 measure``.

    python3 benchmarks/device_pipeline.py OUT.json [--world 8] [--repeats 15]

Prints one line per (shape, case) and writes them with the environment to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

# (M rows per GPU, N, K): kraken's 8 x H100 shapes (PR #2 table) and two of t3 measure's pieces
SHAPES = [(128, 6656, 4096), (128, 6656, 8192), (128, 6656, 16384), (256, 6656, 8192), (512, 7168, 8192)]


def stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {
        "median_us": statistics.median(xs),
        "p10_us": xs[len(xs) // 10],
        "p90_us": xs[(9 * len(xs)) // 10],
    }


def shape_cases(m: int, n: int, k: int, world: int, dev, streams, timed):
    """(case, row) of every case of one shape (see the module docstring)."""
    s0, s1 = streams
    bf = torch.bfloat16
    b = torch.randn(k, n, device=dev, dtype=bf).T.contiguous().T  # K x N view of N x K storage
    staging = torch.randn(world, m, k, device=dev, dtype=bf)  # the shards as they arrive
    gathered = torch.empty(world * m, k, device=dev, dtype=bf)
    out = torch.empty(world * m, n, device=dev, dtype=bf)
    gathered.copy_(staging.reshape(world * m, k))
    shards = [gathered[i * m : (i + 1) * m] for i in range(world)]
    outs = [out[i * m : (i + 1) * m] for i in range(world)]

    def bulk():
        with torch.cuda.stream(s0):
            torch.mm(gathered, b, out=out)

    def alone():
        with torch.cuda.stream(s0):
            torch.mm(shards[0], b, out=outs[0])

    def serial():
        with torch.cuda.stream(s0):
            for i in range(world):
                torch.mm(shards[i], b, out=outs[i])

    def two_streams():
        for i in range(world):
            with torch.cuda.stream(s0 if i % 2 == 0 else s1):
                torch.mm(shards[i], b, out=outs[i])

    def pipeline():
        with torch.cuda.stream(s0):
            torch.mm(shards[0], b, out=outs[0])  # the local shard first
        for i in range(1, world):
            with torch.cuda.stream(s1 if i % 2 else s0):
                shards[i].copy_(staging[i])
                torch.mm(shards[i], b, out=outs[i])

    cases = [("bulk", bulk, True), ("alone", alone, True), ("serial", serial, True),
             ("two-streams", two_streams, True), ("pipeline", pipeline, True),
             ("pipeline-host", pipeline, False)]  # fmt: skip
    for name, run, queue in cases:
        r = {"m": m, "n": n, "k": k, "world": world, "case": name, **timed(run, queue)}
        flops = 2.0 * m * n * k * (1 if name == "alone" else world)
        r["tflops"] = flops / (r["median_us"] * 1e-6) / 1e12
        yield name, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("device_pipeline.py needs a GPU that PyTorch sees")
    dev, world = torch.device("cuda"), a.world
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
    main_s = torch.cuda.current_stream()
    rows = []

    def timed(run, queue: bool = True) -> dict:
        """CUDA-event span of ``run()`` (which may use s0 / s1; both wait for the start and are waited
        for at the end), L2 flushed first, median over the repeats."""
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        xs = []
        for _ in range(a.repeats):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if queue:
                torch.cuda._sleep(int(2e-3 * 1.5e9))  # everything below is queued before any of it runs
            start.record(main_s)
            s0.wait_stream(main_s)
            s1.wait_stream(main_s)
            run()
            main_s.wait_stream(s0)
            main_s.wait_stream(s1)
            end.record(main_s)
            torch.cuda.synchronize()
            xs.append(start.elapsed_time(end) * 1e3)
        return stats(xs)

    for m, n, k in SHAPES:
        for name, r in shape_cases(m, n, k, world, dev, (s0, s1), timed):
            rows.append(r)
            print(f"{m}x{n}x{k} x{world} {name:14s} {r['median_us']:9.1f} us (p10 {r['p10_us']:.1f}, "
                  f"p90 {r['p90_us']:.1f})  {r['tflops']:7.1f} TFLOPS", flush=True)  # fmt: skip
        torch.cuda.empty_cache()

    env = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "command": "python3 benchmarks/device_pipeline.py " + " ".join(sys.argv[1:]),
    }
    Path(a.out).write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
