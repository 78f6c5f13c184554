"""Micro-measurements behind the ``cpu-local`` hardware preset.

Each rank of the runtime benchmark is one process with one GEMM thread on this host, and ranks
talk over gloo on the loopback interface. This script measures, with the same settings:

- GEMM rate (fp32, bf16) of one thread, for the tile shape the runtime uses;
- memory bandwidth of one thread (a large tensor copy: bytes read + written per second);
- loopback transfers of gloo ``isend``/``irecv`` between two ranks, both directions at once (as in
  a 2-rank ring step) for 1, 4 and 16 MiB; a straight-line fit gives the bandwidth per direction
  (slope) and the fixed cost per message (intercept); plus a 4-byte ping-pong and the cost of
  issuing one ``isend``;
- the fixed cost of one tiny ``torch.mm`` call (the per-tile launch overhead of the producer);
- the core clock (``cpu MHz`` in /proc/cpuinfo).

Usage: ``PYTHONPATH=src python3 benchmarks/calibrate_cpu_local.py`` (about a minute).
The values printed are the ones written, with this command and output, into
``src/t3/config/presets/cpu-local.toml``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _group  # noqa: E402


def _median_time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gemm_rate(dtype_name: str, m: int = 2048, n: int = 2048, k: int = 512) -> float:
    import torch

    torch.set_num_threads(1)
    dtype = getattr(torch, dtype_name)
    A, B = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    C = torch.empty(m, n, dtype=dtype)
    return 2.0 * m * n * k / _median_time(lambda: torch.mm(A, B, out=C), 7)


def copy_rate(nbytes: int = 256 * 2**20) -> float:
    import torch

    torch.set_num_threads(1)
    x = torch.empty(nbytes // 4)
    y = torch.empty_like(x)
    return 2.0 * nbytes / _median_time(lambda: y.copy_(x), 7)


def clock_hz() -> float:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("cpu mhz"):
                return float(line.split(":")[1]) * 1e6
    except OSError:
        pass
    return float("nan")


def mm_call_overhead() -> float:
    import torch

    torch.set_num_threads(1)
    a, b, c = torch.ones(1, 1), torch.ones(1, 1), torch.empty(1, 1)
    n = 20000

    def loop() -> None:
        for _ in range(n):
            torch.mm(a, b, out=c)

    return _median_time(loop, 5) / n


def _p2p(rank: int, world: int, sizes: list[int], reps: int) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    peer = 1 - rank
    res: dict[str, float] = {}
    for nbytes in sizes:
        s, r = torch.ones(nbytes // 4), torch.empty(nbytes // 4)

        def exchange(s: torch.Tensor = s, r: torch.Tensor = r) -> None:
            ws = dist.isend(s, peer)
            wr = dist.irecv(r, peer)
            ws.wait()
            wr.wait()

        times = []
        exchange()
        for _ in range(reps):
            dist.barrier()
            t0 = time.perf_counter()
            exchange()
            times.append(time.perf_counter() - t0)
        res[f"exchange_{nbytes}"] = statistics.median(times)
    # one-way latency: half a ping-pong of 4 bytes
    x = torch.zeros(1)
    dist.barrier()
    t0 = time.perf_counter()
    n = 200
    for _ in range(n):
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        else:
            dist.recv(x, 0)
            dist.send(x, 0)
    res["latency"] = (time.perf_counter() - t0) / (2 * n)
    # cost of issuing one isend (not waiting for it)
    y = torch.zeros(1)
    works = []
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(n):
        works.append(dist.isend(y, peer, tag=100 + i) if rank == 0 else dist.irecv(y, peer, tag=100 + i))
    res["issue"] = (time.perf_counter() - t0) / n
    for w in works:
        w.wait()
    return res


def main() -> None:
    import torch

    print(f"torch {torch.__version__}, {_group.cpu_count()} CPUs available, 1 GEMM thread per rank")
    fp32, bf16 = gemm_rate("float32"), gemm_rate("bfloat16")
    print(f"GEMM rate fp32 (2048x2048x512, 1 thread):  {fp32 / 1e9:8.1f} GFLOP/s")
    print(f"GEMM rate bf16 (2048x2048x512, 1 thread):  {bf16 / 1e9:8.1f} GFLOP/s")
    print(f"memory copy (256 MiB, 1 thread, r+w):      {copy_rate() / 1e9:8.2f} GB/s")
    print(f"torch.mm call overhead (1x1, 1 thread):    {mm_call_overhead() * 1e6:8.2f} us")
    print(f"core clock (/proc/cpuinfo cpu MHz):        {clock_hz() / 1e9:8.3f} GHz")
    sizes = [2**20, 4 * 2**20, 16 * 2**20]
    res = _group.run(_p2p, 2, sizes, 9)
    ts = []
    for nbytes in sizes:
        t = max(r[f"exchange_{nbytes}"] for r in res)
        ts.append(t)
        print(
            f"gloo loopback exchange {nbytes / 2**20:5.1f} MiB each way:  {t * 1e3:8.3f} ms "
            f"= {nbytes / t / 1e9:6.2f} GB/s per direction"
        )
    slope, intercept = statistics.linear_regression(sizes, ts)
    print(
        f"fit: bandwidth per direction {1 / slope / 1e9:6.3f} GB/s, fixed cost per message {intercept * 1e6:8.1f} us"
    )
    print(
        f"gloo 4 B ping-pong one-way:                {statistics.mean(r['latency'] for r in res) * 1e6:8.1f} us"
    )
    print(
        f"isend/irecv issue cost:                    {statistics.mean(r['issue'] for r in res) * 1e6:8.1f} us"
    )
    print(f"host load average (1, 5, 15 min):          {os.getloadavg()}")


if __name__ == "__main__":
    main()
