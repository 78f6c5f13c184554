"""Public ops: validation, path choice (tile-triggered or reference fallback) and statistics."""

from __future__ import annotations

import time
from typing import Any, Literal, Protocol

import torch
import torch.distributed as dist

from t3.runtime import reference, validate
from t3.runtime.comm import CommThread, Peers
from t3.runtime.gather_gemm import GatherGemm
from t3.runtime.gemm_collective import GemmCollective, Layout
from t3.runtime.plan import Plan
from t3.runtime.producer import TiledMatmul
from t3.runtime.stats import RuntimeStats
from t3.runtime.tracker import TileTracker, TrackerAborted

DEFAULT_TILE = (256, 2048)  # wide row panels: near full GEMM rate on a CPU core (benchmarks/bench_runtime.py)
DEFAULT_TIMEOUT_S = 120.0
# Below this many FLOP per rank the thread hand-off and per-region messages cost more than the
# overlap can win on a CPU host (see docs/runtime.md); "auto" then runs the reference and says so.
DEFAULT_MIN_FLOPS = 2.0**26

Path = Literal["auto", "tiled", "reference"]
Algo = Literal["ring", "direct"]


class _Job(Protocol):
    tracker: TileTracker
    mm: TiledMatmul
    out: torch.Tensor

    def produce(self) -> None: ...
    def communicate(self) -> None: ...
    def release(self) -> None: ...


def _choose(path: str, world: int, flops: float, min_flops: float, blocker: str | None) -> tuple[bool, str]:
    """(run tile-triggered?, reason). ``blocker`` is a shape reason the tiled path cannot run."""
    if path == "reference":
        return False, "path='reference' requested"
    if world == 1:
        return False, "world size 1: nothing to communicate"
    if blocker is not None:
        if path == "tiled":
            raise ValueError(blocker)
        return False, f"shape not supported by the tiled path: {blocker}"
    if path == "tiled":
        return True, "path='tiled' requested"
    if flops < min_flops:
        return False, f"small problem: {flops:.3g} FLOP < min_flops {min_flops:.3g} FLOP"
    return True, f"{flops:.3g} FLOP >= min_flops {min_flops:.3g} FLOP"


def _run(job: _Job, peers: Peers, stats: RuntimeStats) -> torch.Tensor:
    comm = CommThread(job.communicate, job.tracker, name=f"t3-{peers.op}-comm", device=job.out.device)
    comm.start()
    try:
        job.produce()
    except TrackerAborted:
        comm.raise_if_failed()
        raise
    except BaseException as err:
        job.tracker.abort(err)
        raise
    stats.wait_s += comm.join(peers, peers.timeout)
    job.release()
    stats.tiles = job.mm.tiles
    stats.regions = job.tracker.regions
    stats.produce_s = job.mm.produce_s
    stats.comm_wait_s = peers.wait_s
    stats.bytes_sent = peers.bytes_sent
    return job.out


def _finish(out: torch.Tensor, stats: RuntimeStats, t0: float, return_stats: bool) -> Any:
    stats.total_s = time.perf_counter() - t0
    return (out, stats) if return_stats else out


def matmul_reduce_scatter(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    group: dist.ProcessGroup | None = None,
    scatter_dim: int = 0,
    algo: Algo = "ring",
    tile: tuple[int, int] = DEFAULT_TILE,
    plan: Plan | str | None = None,
    path: Path = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    min_flops: float = DEFAULT_MIN_FLOPS,
    return_stats: bool = False,
) -> Any:
    """``reduce_scatter(A @ B)`` along ``scatter_dim`` over ``group``, GEMM tiles triggering transfers.

    Same values, shape, dtype and strides as ``A @ B`` followed by torch.distributed's
    reduce-scatter (rank ``r`` gets block ``r`` of the summed product along ``scatter_dim``).
    Returns the tensor, or ``(tensor, RuntimeStats)`` with ``return_stats=True``.
    """
    t0 = time.perf_counter()
    validate.operands(A, B)
    rank, world = validate.group_size(group)
    tile, plan = validate.options(algo, tile, plan, path, timeout, world)
    if scatter_dim not in (0, 1) or isinstance(scatter_dim, bool):
        raise ValueError(f"scatter_dim: expected 0 or 1, got {scatter_dim!r}")
    M, N = A.shape[0], B.shape[1]
    size = (M, N)[scatter_dim]
    bad = validate.divisible(f"scatter_dim {scatter_dim} size", size, world, "the world size")
    if bad:
        raise ValueError(bad)
    if plan.split_dim == "k":
        raise ValueError("plan.split_dim: GEMM -> reduce-scatter pieces split 'm' or 'n', not 'k'")
    chunk = (M // world, N) if scatter_dim == 0 else (M, N // world)
    if plan.n_pieces > 1:
        bad = validate.divisible(
            f"plan.pieces: chunk {plan.split_dim.upper()} size",
            chunk[plan.split_dim == "n"],
            plan.n_pieces,
            "pieces",
        )
        if bad:
            raise ValueError(bad)
    flops = 2.0 * M * N * A.shape[1]
    tiled, reason = _choose(path, world, flops, min_flops, None)
    stats = RuntimeStats("matmul_reduce_scatter", "tile-triggered" if tiled else "reference", reason, world)
    with torch.no_grad():
        if not tiled:
            return _finish(
                reference.matmul_reduce_scatter(A, B, group, scatter_dim, float(timeout)),
                stats,
                t0,
                return_stats,
            )
        stats.algo, stats.plan, stats.tile = algo, plan.describe(), tile
        peers = Peers(group, "matmul_reduce_scatter", float(timeout))
        layout = Layout(M, N, world, scatter_dim, "m" if plan.split_dim == "m" else "n", plan.n_pieces)
        job = GemmCollective(A, B, peers, layout, algo, plan, tile, all_reduce=False)
        return _finish(_run(job, peers, stats), stats, t0, return_stats)


def matmul_all_reduce(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    group: dist.ProcessGroup | None = None,
    algo: Algo = "ring",
    tile: tuple[int, int] = DEFAULT_TILE,
    plan: Plan | str | None = None,
    path: Path = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    min_flops: float = DEFAULT_MIN_FLOPS,
    return_stats: bool = False,
) -> Any:
    """``all_reduce(A @ B)`` over ``group``: a tile-triggered reduce-scatter of row chunks followed
    by an all-gather of the reduced chunks. Needs the row count divisible by the world size (and
    by the pieces) for the tiled path; ``path='auto'`` falls back to the reference otherwise."""
    t0 = time.perf_counter()
    validate.operands(A, B)
    rank, world = validate.group_size(group)
    tile, plan = validate.options(algo, tile, plan, path, timeout, world)
    if plan.split_dim == "k":
        raise ValueError("plan.split_dim: GEMM -> all-reduce pieces split 'm' or 'n', not 'k'")
    M, N = A.shape[0], B.shape[1]
    blocker = validate.divisible("A rows (M)", M, world, "the world size")
    if blocker is None and plan.n_pieces > 1:
        size = M // world if plan.split_dim == "m" else N
        blocker = validate.divisible(
            f"plan.pieces: chunk {plan.split_dim.upper()} size", size, plan.n_pieces, "pieces"
        )
    flops = 2.0 * M * N * A.shape[1]
    tiled, reason = _choose(path, world, flops, min_flops, blocker)
    stats = RuntimeStats("matmul_all_reduce", "tile-triggered" if tiled else "reference", reason, world)
    with torch.no_grad():
        if not tiled:
            return _finish(reference.matmul_all_reduce(A, B, group, float(timeout)), stats, t0, return_stats)
        stats.algo, stats.plan, stats.tile = algo, plan.describe(), tile
        peers = Peers(group, "matmul_all_reduce", float(timeout))
        layout = Layout(M, N, world, 0, "m" if plan.split_dim == "m" else "n", plan.n_pieces)
        job = GemmCollective(A, B, peers, layout, algo, plan, tile, all_reduce=True)
        return _finish(_run(job, peers, stats), stats, t0, return_stats)


def all_gather_matmul(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    group: dist.ProcessGroup | None = None,
    algo: Algo = "ring",
    tile: tuple[int, int] = DEFAULT_TILE,
    plan: Plan | str | None = None,
    path: Path = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    min_flops: float = DEFAULT_MIN_FLOPS,
    return_stats: bool = False,
) -> Any:
    """``all_gather(A) @ B``: rank shards of ``A`` (m x K each) stacked along rows, times ``B``
    (K x N); the GEMM of each shard piece starts as soon as it arrived."""
    t0 = time.perf_counter()
    validate.operands(A, B)
    rank, world = validate.group_size(group)
    tile, plan = validate.options(algo, tile, plan, path, timeout, world)
    if plan.split_dim == "n":
        raise ValueError("plan.split_dim: all-gather -> GEMM pieces split 'm' or 'k', not 'n'")
    m, K = A.shape
    if plan.n_pieces > 1:
        size = m if plan.split_dim == "m" else K
        bad = validate.divisible(
            f"plan.pieces: shard {plan.split_dim.upper()} size", size, plan.n_pieces, "pieces"
        )
        if bad:
            raise ValueError(bad)
    flops = 2.0 * world * m * K * B.shape[1]
    tiled, reason = _choose(path, world, flops, min_flops, None)
    stats = RuntimeStats("all_gather_matmul", "tile-triggered" if tiled else "reference", reason, world)
    with torch.no_grad():
        if not tiled:
            return _finish(reference.all_gather_matmul(A, B, group, float(timeout)), stats, t0, return_stats)
        stats.algo, stats.plan, stats.tile = algo, plan.describe(), tile
        peers = Peers(group, "all_gather_matmul", float(timeout))
        job = GatherGemm(A, B, peers, algo, plan, tile)
        out = _run(job, peers, stats)
        stats.wait_s += job.wait_s
        return _finish(out, stats, t0, return_stats)
