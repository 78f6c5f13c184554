"""Reference implementations: plain ``A @ B`` and torch.distributed's own collectives.

They define the semantics the tile-triggered path must reproduce and are the fallback path.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup | None) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(out, inp, group=group)


def _all_gather(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup | None) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, inp, group=group)


def matmul_reduce_scatter(
    A: torch.Tensor, B: torch.Tensor, group: dist.ProcessGroup | None, scatter_dim: int
) -> torch.Tensor:
    world = dist.get_world_size(group)
    C = A @ B
    if scatter_dim == 1:
        C = torch.cat(C.chunk(world, dim=1))  # chunk c of the columns -> rows block c
    out = torch.empty((C.shape[0] // world, C.shape[1]), dtype=C.dtype, device=C.device)
    _reduce_scatter(out, C.contiguous(), group)
    return out


def matmul_all_reduce(A: torch.Tensor, B: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    C = A @ B
    dist.all_reduce(C, group=group)
    return C


def all_gather_matmul(A: torch.Tensor, B: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    world = dist.get_world_size(group)
    full = torch.empty((world * A.shape[0], A.shape[1]), dtype=A.dtype, device=A.device)
    _all_gather(full, A.contiguous(), group)
    return full @ B
