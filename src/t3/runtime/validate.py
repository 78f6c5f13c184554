"""Argument checks. Everything here runs before any data moves and raises ``ValueError`` naming the
argument; only local facts are checked here (a shape that differs between ranks is caught by the
handshake, ``t3.runtime.handshake``, and raises :class:`PeerError` on every rank)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from t3.runtime.plan import Plan

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
ALGOS = ("ring", "direct")
PATHS = ("auto", "tiled", "reference")
TIMEOUT_MAX_S = 86400.0  # one day


def group_size(group: Any) -> tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "group: torch.distributed is not initialized (call torch.distributed.init_process_group)"
        )
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise ValueError(
            f"group: expected a torch.distributed.ProcessGroup or None, got {type(group).__name__}"
        )
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the group")
    return rank, dist.get_world_size(group)


def operands(A: Any, B: Any) -> None:
    for name, t in (("A", A), ("B", B)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {tuple(t.shape)}")
        if t.dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{name}.dtype: expected a floating dtype {[str(d) for d in FLOAT_DTYPES]}, got {t.dtype}"
            )
        if t.is_sparse or t.layout != torch.strided:
            raise ValueError(f"{name}: expected a dense strided tensor")
        if t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name}.device: expected a cpu or cuda tensor, got {t.device}")
    if A.dtype != B.dtype:
        raise ValueError(f"B.dtype: must equal A.dtype ({A.dtype}), got {B.dtype}")
    if A.device != B.device:
        raise ValueError(f"B.device: must equal A.device ({A.device}), got {B.device}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"B: inner dimensions differ: A is {tuple(A.shape)}, B is {tuple(B.shape)}")


def options(
    algo: Any, tile: Any, plan: Any, path: Any, timeout: Any, world: int
) -> tuple[tuple[int, int], Plan]:
    if algo not in ALGOS:
        raise ValueError(f"algo: expected one of {ALGOS}, got {algo!r}")
    if (
        not isinstance(tile, tuple | list)
        or len(tile) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in tile)
    ):
        raise ValueError(f"tile: expected two positive integers (bm, bn), got {tile!r}")
    if plan is None:
        plan = Plan()
    elif isinstance(plan, str):  # a FiCCO schedule name
        plan = Plan.from_schedule(plan, world)
    if not isinstance(plan, Plan):
        raise ValueError(
            f"plan: expected a t3.runtime.Plan or a FiCCO schedule name, got {type(plan).__name__}"
        )
    if plan.all_peer and algo != "direct":
        raise ValueError(
            f"algo: FiCCO's all-peer pattern sends every piece to every peer at once: use algo='direct', "
            f"got {algo!r}"
        )
    if plan.all_peer and plan.pieces != world:
        raise ValueError(
            f"plan.pieces: the all-peer pattern cuts every shard into world size ({world}) pieces"
        )
    if plan.all_peer and plan.groups and (world * plan.pieces) % plan.groups:
        raise ValueError(
            f"plan.groups: {world * plan.pieces} regions do not split into {plan.groups} compute groups"
        )
    if path not in PATHS:
        raise ValueError(f"path: expected one of {PATHS}, got {path!r}")
    seconds(timeout)
    return (int(tile[0]), int(tile[1])), plan


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def seconds(timeout: Any) -> float:
    """``timeout``: a number of seconds in (0, TIMEOUT_MAX_S]. Larger values are refused here: the
    waits turn it into a ``timedelta`` and a lock timeout, which overflow (1e300 s) long before
    ``math.inf``, and no peer wait is meant to outlast a day."""
    if not _real(timeout) or not math.isfinite(timeout) or not 0 < timeout <= TIMEOUT_MAX_S:
        raise ValueError(
            f"timeout: expected a finite number of seconds > 0 and <= {TIMEOUT_MAX_S:g} (one day), "
            f"got {timeout!r}"
        )
    return float(timeout)


def min_flops(value: Any) -> float:
    """``min_flops``: a finite number of FLOP >= 0 (0: ``path='auto'`` always runs tiled)."""
    if not _real(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"min_flops: expected a finite number of FLOP >= 0, got {value!r}")
    return float(value)


def scatter_dim(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
        raise ValueError(f"scatter_dim: expected 0 or 1, got {value!r}")
    return value


def divisible(what: str, size: int, by: int, why: str) -> str | None:
    return None if size % by == 0 else f"{what}: {size} is not divisible by {why} ({by})"


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return value


def reduction(plan: Plan, algo: str, gathers: bool) -> None:
    """Batched reductions (``-rb``) exist for GEMM -> RS/AR with direct transfers only."""
    if plan.reduce != "batched":
        return
    if gathers:
        raise ValueError(
            "plan.reduce: batched reductions (-rb) apply to GEMM -> reduce-scatter / all-reduce; "
            "all-gather -> GEMM reduces nothing"
        )
    if algo != "direct":
        raise ValueError(
            f"plan.reduce: batched reductions (-rb) need algo='direct' (a ring adds the running partial sum "
            f"at every hop: there is nothing to batch), got algo={algo!r}"
        )
