"""Public ops: validation, agreement between the ranks, path choice (tile-triggered or reference
fallback) and statistics.

Every op runs in three stages: local checks of its arguments (``ValueError`` naming the argument),
the handshake (``t3.runtime.handshake``: the ranks compare what they are about to do, or that a
rank rejected its arguments, and every rank reaches the same decision), then the chosen path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
import torch.distributed as dist

from t3.runtime import handshake, reference, validate
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
    reductions: int

    def produce(self) -> None: ...
    def communicate(self) -> None: ...
    def release(self) -> None: ...


def _choose(path: str, world: int, flops: float, min_flops: float, blocker: str | None) -> tuple[bool, str]:
    """(run tile-triggered?, reason). ``blocker`` is a shape reason the tiled path cannot run.
    ``path='tiled'`` runs tiled or raises, at every world size (world size 1: no transfers)."""
    if path == "reference":
        return False, "path='reference' requested"
    if path == "tiled":
        if blocker is not None:
            raise ValueError(blocker)
        return True, "path='tiled' requested" + (" (world size 1: no transfers)" if world == 1 else "")
    if world == 1:
        return False, "world size 1: nothing to communicate"
    if blocker is not None:
        return False, f"shape not supported by the tiled path: {blocker}"
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
    stats.reductions = job.reductions
    return job.out


@dataclass(frozen=True)
class _Call:
    """A call that passed its local checks: what the handshake compares and the path runs."""

    op: str
    world: int
    tile: tuple[int, int]
    plan: Plan
    tiled: bool
    reason: str


def _checked(op: str, group: Any, timeout: Any, check_peers: Any, checks: Callable[[], _Call]) -> _Call:
    """Run the local argument checks; a rank whose checks fail still takes part in the handshake (it
    states that it rejected its arguments), so that its peers raise ``PeerError`` at once instead of
    waiting for it, and the group stays in step. The rank itself raises its ``ValueError``."""
    validate.group_size(group)  # without a usable group there is nobody to tell
    validate.flag("check_peers", check_peers)
    try:
        return checks()
    except Exception as err:
        if check_peers:
            try:
                wait = validate.seconds(timeout)
            except ValueError:
                wait = DEFAULT_TIMEOUT_S
            handshake.refuse(group, op, f"{type(err).__name__}: {err}", wait)
        raise


def _agree(
    check: bool,
    group: dist.ProcessGroup | None,
    call: _Call,
    stats: RuntimeStats,
    A: torch.Tensor,
    B: torch.Tensor,
    algo: str,
    timeout: float,
    scatter_dim: int | None = None,
) -> None:
    """The handshake: before any data moves, every rank checks that all ranks are about to run the
    same thing; ``PeerError`` on every rank otherwise (``check_peers=False`` skips it)."""
    if not check:
        return
    path = "tile-triggered" if call.tiled else "reference"
    fields = handshake.describe(call.op, call.world, A, B, path, algo, call.tile, call.plan, scatter_dim)
    stats.handshake_s = handshake.agree(group, call.op, fields, float(timeout))


def _stats(call: _Call) -> RuntimeStats:
    return RuntimeStats(call.op, "tile-triggered" if call.tiled else "reference", call.reason, call.world)


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
    check_peers: bool = True,
) -> Any:
    """``reduce_scatter(A @ B)`` along ``scatter_dim`` over ``group``, GEMM tiles triggering transfers.

    Same values, shape, dtype and strides as ``A @ B`` followed by torch.distributed's
    reduce-scatter (rank ``r`` gets block ``r`` of the summed product along ``scatter_dim``).
    Returns the tensor, or ``(tensor, RuntimeStats)`` with ``return_stats=True``. Before any data
    moves the ranks check that they agree (``PeerError`` on every rank otherwise) unless
    ``check_peers=False``.
    """
    t0 = time.perf_counter()
    op = "matmul_reduce_scatter"

    def checks() -> _Call:
        validate.operands(A, B)
        rank, world = validate.group_size(group)
        tile_, plan_ = validate.options(algo, tile, plan, path, timeout, world)
        validate.min_flops(min_flops)
        validate.flag("return_stats", return_stats)
        validate.scatter_dim(scatter_dim)
        M, N = A.shape[0], B.shape[1]
        size = (M, N)[scatter_dim]
        bad = validate.divisible(f"scatter_dim {scatter_dim} size", size, world, "the world size")
        if bad:
            raise ValueError(bad)
        if plan_.split_dim == "k":
            raise ValueError("plan.split_dim: GEMM -> reduce-scatter pieces split 'm' or 'n', not 'k'")
        validate.reduction(plan_, algo, gathers=False)
        chunk = (M // world, N) if scatter_dim == 0 else (M, N // world)
        if plan_.n_pieces > 1:
            bad = validate.divisible(
                f"plan.pieces: chunk {plan_.split_dim.upper()} size",
                chunk[plan_.split_dim == "n"],
                plan_.n_pieces,
                "pieces",
            )
            if bad:
                raise ValueError(bad)
        tiled, reason = _choose(path, world, 2.0 * M * N * A.shape[1], min_flops, None)
        return _Call(op, world, tile_, plan_, tiled, reason)

    call = _checked(op, group, timeout, check_peers, checks)
    stats = _stats(call)
    with torch.no_grad():
        _agree(check_peers, group, call, stats, A, B, algo, timeout, scatter_dim)
        if not call.tiled:
            out = reference.matmul_reduce_scatter(A, B, group, scatter_dim, float(timeout))
            return _finish(out, stats, t0, return_stats)
        stats.algo, stats.plan, stats.tile = algo, call.plan.describe(), call.tile
        peers = Peers(group, op, float(timeout))
        M, N, P = A.shape[0], B.shape[1], call.plan.n_pieces
        layout = Layout(M, N, call.world, scatter_dim, "m" if call.plan.split_dim == "m" else "n", P)
        job = GemmCollective(A, B, peers, layout, algo, call.plan, call.tile, all_reduce=False)
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
    check_peers: bool = True,
) -> Any:
    """``all_reduce(A @ B)`` over ``group``: a tile-triggered reduce-scatter of row chunks followed
    by an all-gather of the reduced chunks. Needs the row count divisible by the world size (and
    by the pieces) for the tiled path; ``path='auto'`` falls back to the reference otherwise.
    Before any data moves the ranks check that they agree unless ``check_peers=False``."""
    t0 = time.perf_counter()
    op = "matmul_all_reduce"

    def checks() -> _Call:
        validate.operands(A, B)
        rank, world = validate.group_size(group)
        tile_, plan_ = validate.options(algo, tile, plan, path, timeout, world)
        validate.min_flops(min_flops)
        validate.flag("return_stats", return_stats)
        if plan_.split_dim == "k":
            raise ValueError("plan.split_dim: GEMM -> all-reduce pieces split 'm' or 'n', not 'k'")
        validate.reduction(plan_, algo, gathers=False)
        M, N = A.shape[0], B.shape[1]
        blocker = validate.divisible("A rows (M)", M, world, "the world size")
        if blocker is None and plan_.n_pieces > 1:
            size = M // world if plan_.split_dim == "m" else N
            blocker = validate.divisible(
                f"plan.pieces: chunk {plan_.split_dim.upper()} size", size, plan_.n_pieces, "pieces"
            )
        tiled, reason = _choose(path, world, 2.0 * M * N * A.shape[1], min_flops, blocker)
        return _Call(op, world, tile_, plan_, tiled, reason)

    call = _checked(op, group, timeout, check_peers, checks)
    stats = _stats(call)
    with torch.no_grad():
        _agree(check_peers, group, call, stats, A, B, algo, timeout)
        if not call.tiled:
            return _finish(reference.matmul_all_reduce(A, B, group, float(timeout)), stats, t0, return_stats)
        stats.algo, stats.plan, stats.tile = algo, call.plan.describe(), call.tile
        peers = Peers(group, op, float(timeout))
        M, N, P = A.shape[0], B.shape[1], call.plan.n_pieces
        layout = Layout(M, N, call.world, 0, "m" if call.plan.split_dim == "m" else "n", P)
        job = GemmCollective(A, B, peers, layout, algo, call.plan, call.tile, all_reduce=True)
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
    check_peers: bool = True,
) -> Any:
    """``all_gather(A) @ B``: rank shards of ``A`` (m x K each) stacked along rows, times ``B``
    (K x N); the GEMM of each shard piece starts as soon as it arrived. Before any data moves the
    ranks check that they agree unless ``check_peers=False``."""
    t0 = time.perf_counter()
    op = "all_gather_matmul"

    def checks() -> _Call:
        validate.operands(A, B)
        rank, world = validate.group_size(group)
        tile_, plan_ = validate.options(algo, tile, plan, path, timeout, world)
        validate.min_flops(min_flops)
        validate.flag("return_stats", return_stats)
        if plan_.split_dim == "n":
            raise ValueError("plan.split_dim: all-gather -> GEMM pieces split 'm' or 'k', not 'n'")
        validate.reduction(plan_, algo, gathers=True)
        m, K = A.shape
        if plan_.n_pieces > 1:
            size = m if plan_.split_dim == "m" else K
            bad = validate.divisible(
                f"plan.pieces: shard {plan_.split_dim.upper()} size", size, plan_.n_pieces, "pieces"
            )
            if bad:
                raise ValueError(bad)
        tiled, reason = _choose(path, world, 2.0 * world * m * K * B.shape[1], min_flops, None)
        return _Call(op, world, tile_, plan_, tiled, reason)

    call = _checked(op, group, timeout, check_peers, checks)
    stats = _stats(call)
    with torch.no_grad():
        _agree(check_peers, group, call, stats, A, B, algo, timeout)
        if not call.tiled:
            return _finish(reference.all_gather_matmul(A, B, group, float(timeout)), stats, t0, return_stats)
        stats.algo, stats.plan, stats.tile = algo, call.plan.describe(), call.tile
        peers = Peers(group, op, float(timeout))
        job = GatherGemm(A, B, peers, algo, call.plan, call.tile)
        out = _run(job, peers, stats)
        stats.wait_s += job.wait_s
        return _finish(out, stats, t0, return_stats)
