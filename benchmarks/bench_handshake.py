"""What the runtime's handshake costs: the agreement all-gather every op runs before any data moves.

World size 2 on this host (one process per rank, gloo over loopback, one GEMM thread per rank).
Per-call wall time (slowest rank) of back-to-back calls, in batches; the variants alternate batch
by batch so that drift and other load hit them alike; the median over batches is printed.

- ``handshake alone``: ``t3.runtime.handshake.agree`` with a real call description (one
  all-gather of 1 KiB per rank plus the comparison);
- every op row twice: ``check_peers=True`` (default) and ``check_peers=False`` (no handshake); the
  difference is the handshake's cost inside the op, and its share of the op's time is printed.

Usage: ``PYTHONPATH=src python3 benchmarks/bench_handshake.py [--batches 15] [--calls 20]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _group  # noqa: E402

# (label, op, M, N, K, path): a tiny tiled op (handshake-sized work), the same on the reference path,
# and a shape of bench_runtime.py where the GEMM and the communication take milliseconds
ROWS = [
    ("RS 256x256x64 tiled", "rs", 256, 256, 64, "tiled"),
    ("RS 256x256x64 reference", "rs", 256, 256, 64, "reference"),
    ("AG 128x256, B 256x64 tiled", "ag", 128, 64, 256, "tiled"),
    ("RS 2048x2048x128 tiled", "rs", 2048, 2048, 128, "tiled"),
]


def _per_call(fn: Callable[[], Any], calls: int) -> float:
    """Slowest rank's mean wall time per call of ``calls`` back-to-back calls."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = torch.tensor([(time.perf_counter() - t0) / calls], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0])


def _rank(rank: int, world: int, batches: int, calls: int) -> dict[str, float]:
    import torch

    from t3.runtime import Plan, all_gather_matmul, handshake, matmul_reduce_scatter

    g = torch.Generator().manual_seed(rank)
    variants: dict[str, tuple[Callable[[], Any], int]] = {}
    A, B = torch.randn(256, 64, generator=g), torch.randn(64, 256, generator=g)
    fields = handshake.describe(
        "matmul_reduce_scatter", world, A, B, "tile-triggered", "ring", (256, 2048), Plan()
    )
    variants["handshake alone"] = (lambda: handshake.agree(None, "bench", fields, 60.0), calls)
    for label, op, M, N, K, path in ROWS:
        A, B = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
        fn = matmul_reduce_scatter if op == "rs" else all_gather_matmul
        n = max(1, calls // 10) if M * N * K > 1e8 else calls
        for check in (True, False):
            variants[f"{label}|{check}"] = (
                lambda fn=fn, A=A, B=B, path=path, check=check: fn(
                    A, B, path=path, check_peers=check, timeout=60.0
                ),
                n,
            )
    for fn, n in variants.values():  # warm-up (buffers, connections)
        _per_call(fn, n)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(batches):
        for k, (fn, n) in variants.items():
            times[k].append(_per_call(fn, n))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=15, help="timed batches per variant (median reported)")
    ap.add_argument(
        "--calls", type=int, default=20, help="back-to-back calls per batch (2 for the big shape)"
    )
    args = ap.parse_args()
    import torch

    world = 2
    print(
        f"# bench_handshake: world size {world}, gloo on 127.0.0.1, 1 GEMM thread per rank, fp32, "
        f"{args.batches} batches of {args.calls} calls (median of per-call means, slowest rank), "
        f"torch {torch.__version__}, {_group.cpu_count()} CPUs"
    )
    print(f"# host load average before: {os.getloadavg()[0]:.2f} (1 min)")
    med = _group.run(_rank, world, args.batches, args.calls)[0]
    print(f"# host load average after: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"\n{'what':32s} {'checked ms':>10s} {'unchecked ms':>12s} {'handshake ms':>12s} {'share':>7s}")
    print(f"{'handshake alone':32s} {med['handshake alone'] * 1e3:10.3f} {'':>12s} {'':>12s} {'':>7s}")
    for label, *_ in ROWS:
        on, off = med[f"{label}|True"], med[f"{label}|False"]
        print(
            f"{label:32s} {on * 1e3:10.3f} {off * 1e3:12.3f} {(on - off) * 1e3:12.3f} {(on - off) / on * 100:6.1f}%"
        )


if __name__ == "__main__":
    main()
