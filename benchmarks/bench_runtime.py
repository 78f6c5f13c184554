"""Overlap benchmark of the runtime: sequential vs tile-triggered GEMM -> RS / AR and AG -> GEMM.

World size 2 on this host (one process and one GEMM thread per rank, gloo over loopback), for
shapes where the GEMM and the communication take about the same time. Every variant is measured
in the same run, alternating repetitions, and the time of a repetition is the slowest rank's:

- ``compute``      the tiled GEMM alone (the producer of the tile-triggered path);
- ``comm``         the same transfers and reductions alone, on a finished product;
- ``reference``    ``A @ B`` then torch.distributed's collective (gloo's reduce-scatter is an
                   all-reduce internally: more bytes than the ring, so it is not the fair baseline);
- ``sequential``   the tiled path with overlap off: identical regions, bytes and reductions,
                   communication starting after the whole GEMM;
- ``tile-triggered`` (one row per plan).

The CPU time of every variant (all threads of the rank's process, slowest rank, median) is
printed too: on this host communication costs CPU (kernel copies through loopback, gloo's I/O
thread, the reductions, and any polling while waiting) and competes with the GEMM for the two
cores, whereas the ideal bound ``max(compute, comm)`` assumes communication leaves the cores
free, as DMA engines and links do on GPUs.

Two statistics are printed: the median over repetitions and the best repetition (the least
disturbed by other load on the host); the fraction of the ideal gain is given for each.

``ideal = max(compute, comm)``; the fraction of the ideal gain achieved is
``(sequential - t) / (sequential - ideal)``. The last column is the simulator's prediction for
the same run on the ``cpu-local`` preset, when the simulator API is importable (see
``_predict.py`` for which schedule stands for which variant).

Usage: ``PYTHONPATH=src python3 benchmarks/bench_runtime.py [--reps 15] [--quick]``
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
from _predict import predict  # noqa: E402

# (op, M, N, K): compute ~ communication at world size 2 on the cpu-local host (fp32)
# (op, M, N, K); for "ag", M is the rows of one rank's shard (the GEMM has world * M rows)
SHAPES = [("rs", 2048, 2048, 128), ("rs", 4096, 2048, 128), ("ar", 2048, 2048, 256), ("ag", 2048, 96, 2048)]
QUICK_SHAPES = [("rs", 2048, 2048, 128), ("ag", 2048, 96, 2048)]
TILE = (256, 2048)
PLANS = [("shard", 1), ("ficco", 2), ("ficco", 4)]


def _timed(make: Callable[[], Callable[[], Any]]) -> tuple[float, float]:
    """Slowest rank's wall time and CPU time (all threads of the process) of ``make()()``;
    ``make`` (untimed) prepares the call."""
    import torch
    import torch.distributed as dist

    fn = make()
    dist.barrier()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    t = torch.tensor([time.perf_counter() - t0, time.process_time() - c0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0]), float(t[1])


def _measure(
    world: int, op: str, M: int, N: int, K: int, reps: int, seed: int
) -> dict[str, tuple[float, float, float]]:
    import torch
    import torch.distributed as dist

    from t3.runtime import Plan, all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter, reference
    from t3.runtime.comm import Peers
    from t3.runtime.gather_gemm import GatherGemm
    from t3.runtime.gemm_collective import GemmCollective, Layout
    from t3.runtime.producer import Block, TiledMatmul

    g = torch.Generator().manual_seed(seed)
    A, B = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    fused = {"rs": matmul_reduce_scatter, "ar": matmul_all_reduce, "ag": all_gather_matmul}[op]
    rows = world * M if op == "ag" else M  # rows of the GEMM every rank computes
    mm = TiledMatmul(torch.randn(rows, K, generator=g), B, TILE)
    C = mm.A @ B

    def compute() -> Callable[[], Any]:
        out = torch.empty(rows, N)
        return lambda: mm.region(Block(0, rows, 0, N), out, None, 0)

    def comm() -> Callable[[], Any]:
        """The algorithm's transfers and reductions alone, on a finished product (set-up untimed)."""
        peers = Peers(None, "bench", 300.0)
        if op == "ag":
            return GatherGemm(A, B, peers, "ring", Plan(), TILE).communicate
        job = GemmCollective(A, B, peers, Layout(M, N, world, 0, "m", 1), "ring", Plan(), TILE, op == "ar")
        for c in range(world):  # as the producer leaves them: own chunk in the output, others in ws
            dest = job._own_piece(0) if c == peers.rank else job.ws[c, 0]
            dest.copy_(C[c * (M // world) : (c + 1) * (M // world)])
            job.tracker.add(job.L.region(c, 0), mm.count(job.L.block(c, 0)))
        return job.communicate

    def ref() -> Callable[[], Any]:
        if op == "rs":
            return lambda: reference.matmul_reduce_scatter(A, B, None, 0)
        if op == "ag":
            return lambda: reference.all_gather_matmul(A, B, None)
        return lambda: reference.matmul_all_reduce(A, B, None)

    def tiled(plan: Plan) -> Callable[[], Callable[[], Any]]:
        return lambda: lambda: fused(A, B, tile=TILE, plan=plan, path="tiled")

    variants: dict[str, Callable[[], Callable[[], Any]]] = {
        "compute": compute,
        "comm": comm,
        "reference": ref,
        "sequential": tiled(Plan(overlap=False)),
    }
    for gran, pieces in PLANS:
        plan = Plan(gran, "m", pieces)  # type: ignore[arg-type]
        variants[f"tile-triggered {plan.describe()}"] = tiled(plan)
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for make in variants.values():  # warm-up
        _timed(make)
    for _ in range(reps):  # interleaved repetitions: drift and other load hit every variant alike
        for name, make in variants.items():
            wall, used = _timed(make)
            times[name].append(wall)
            cpu[name].append(used)
    dist.barrier()
    return {k: (statistics.median(v), min(v), statistics.median(cpu[k])) for k, v in times.items()}


def _rank(rank: int, world: int, shapes: list[tuple[str, int, int, int]], reps: int) -> list[dict[str, Any]]:
    return [
        {"op": op, "M": M, "N": N, "K": K, "median": _measure(world, op, M, N, K, reps, seed=rank)}
        for op, M, N, K in shapes
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions per variant (median reported)")
    ap.add_argument("--quick", action="store_true", help="one shape only")
    args = ap.parse_args()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    world = 2
    import torch

    print(
        f"# bench_runtime: world size {world}, gloo on 127.0.0.1, 1 GEMM thread per rank, fp32, tile {TILE}, "
        f"{args.reps} reps (median, slowest rank), torch {torch.__version__}, {_group.cpu_count()} CPUs"
    )
    print(f"# host load average before: {os.getloadavg()[0]:.2f} (1 min)")
    rows = _group.run(_rank, world, shapes, args.reps)[0]
    print(f"# host load average after: {os.getloadavg()[0]:.2f} (1 min)")
    any_sim = False
    for row in rows:
        op, M, N, K = row["op"], row["M"], row["N"], row["K"]
        med = {k: v[0] for k, v in row["median"].items()}
        best = {k: v[1] for k, v in row["median"].items()}
        cpu = {k: v[2] for k, v in row["median"].items()}
        sim = predict(op, M, N, K, world, PLANS)
        any_sim = any_sim or bool(sim)
        if op == "ag":
            print(
                f"\n## all-gather (ring) -> GEMM, shard {M}x{K}, B {K}x{N} fp32: "
                f"{2 * world * M * N * K / 1e9:.2f} GFLOP per rank, {M * K * 4 / 2**20:.0f} MiB shard per rank"
            )
        else:
            name = {"rs": "GEMM -> reduce-scatter (ring)", "ar": "GEMM -> all-reduce (ring RS + ring AG)"}[op]
            print(
                f"\n## {name}, M={M} N={N} K={K} fp32: {2 * M * N * K / 1e9:.2f} GFLOP and "
                f"{M * N * 4 / 2**20:.0f} MiB of partial output per rank"
            )
        print(
            f"{'variant':40s} {'median ms':>9s} {'speed-up':>8s} {'of ideal gain':>13s}   "
            f"{'best ms':>8s} {'of ideal gain':>13s}   {'CPU ms/rank':>11s}   simulated ms (what)"
        )
        med["ideal"], best["ideal"] = max(med["compute"], med["comm"]), max(best["compute"], best["comm"])
        for k in med:
            label = "ideal = max(compute, comm)" if k == "ideal" else k
            cells = []
            for stat in (med, best):
                t, seq, ideal = stat[k], stat["sequential"], stat["ideal"]
                gain = (
                    "" if k in ("compute", "comm", "reference") else f"{(seq - t) / (seq - ideal) * 100:.0f}%"
                )
                cells.append((t, gain))
            speed = f"{med['sequential'] / med[k]:.2f}x" if k not in ("compute", "comm") else ""
            s_txt = f"{sim[k][0] * 1e3:.2f} ({sim[k][1]})" if k in sim else "-"
            c_txt = f"{cpu[k] * 1e3:.2f}" if k in cpu else ""
            print(
                f"{label:40s} {cells[0][0] * 1e3:9.2f} {speed:>8s} {cells[0][1]:>13s}   "
                f"{cells[1][0] * 1e3:8.2f} {cells[1][1]:>13s}   {c_txt:>11s}   {s_txt}"
            )
        # On a host whose cores also move the bytes (loopback TCP), a rank cannot finish before it has
        # spent the CPU time of its GEMM plus that of its communication: the reachable share of the
        # ideal gain is bounded by this CPU limit, whatever the overlap.
        if "compute" in cpu and "comm" in cpu:
            limit = max(med["ideal"], cpu["compute"] + cpu["comm"])
            reach = (med["sequential"] - limit) / (med["sequential"] - med["ideal"]) * 100
            print(
                f"{'CPU-bound limit = cpu(compute)+cpu(comm)':40s} {limit * 1e3:9.2f} {'':>8s} {reach:12.0f}%"
                "   (the most of the ideal gain this host's cores allow)"
            )
    if not any_sim:
        print("\n(simulated column empty: the simulator API is not importable in this checkout)")
    else:
        print(
            "\n(simulated: t3 simulator on the cpu-local preset, see benchmarks/_predict.py; FiCCO schedule"
            " names for the tile-triggered rows; '-' where the simulator has no matching schedule)"
        )


if __name__ == "__main__":
    main()
