"""Reference implementations: plain ``A @ B`` and torch.distributed's own collectives.

They define the semantics the tile-triggered path must reproduce and are the fallback path.
Collectives are issued asynchronously and waited for with the op's timeout, so the fallback
fails the same way as the tiled path (:class:`PeerError`) instead of hanging for the process
group's default timeout.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from t3.runtime.errors import PeerError


def _wait(work: dist.Work | None, op: str, what: str, timeout: float) -> None:
    if work is None:
        return
    try:
        ok = work.wait(timeout=timedelta(seconds=timeout))
    except Exception as err:
        raise _error(op, what, timeout, err) from err
    if ok is False:
        raise _error(op, what, timeout, None)


def _error(op: str, what: str, timeout: float, err: Exception | None) -> PeerError:
    text = "" if err is None else str(err).strip().splitlines()[0]
    timed_out = err is None or "timeout" in text.lower() or "timed out" in text.lower()
    why = f"no progress within the timeout of {timeout:.1f} s" if timed_out else f"failed ({text})"
    rank = dist.get_rank()
    return PeerError(
        f"t3.runtime.{op} (reference path) on rank {rank}: {what}: {why}. "
        "The process group is unusable now; destroy and re-create it.",
        op=op,
        peer=None,
        timed_out=timed_out,
    )


def _issue(fn, *args, op: str, what: str, **kw):  # type: ignore[no-untyped-def]
    try:
        return fn(*args, async_op=True, **kw)
    except Exception as err:  # a closed connection can fail at issue time
        raise _error(op, what, 0.0, err) from err


def matmul_reduce_scatter(
    A: torch.Tensor,
    B: torch.Tensor,
    group: dist.ProcessGroup | None,
    scatter_dim: int,
    timeout: float = 1800.0,
) -> torch.Tensor:
    world = dist.get_world_size(group)
    C = A @ B
    if scatter_dim == 1:
        C = torch.cat(C.chunk(world, dim=1))  # chunk c of the columns -> rows block c
    out = torch.empty((C.shape[0] // world, C.shape[1]), dtype=C.dtype, device=C.device)
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    op, what = "matmul_reduce_scatter", "reduce-scatter"
    _wait(_issue(fn, out, C.contiguous(), group=group, op=op, what=what), op, what, timeout)
    return out


def matmul_all_reduce(
    A: torch.Tensor, B: torch.Tensor, group: dist.ProcessGroup | None, timeout: float = 1800.0
) -> torch.Tensor:
    C = A @ B
    op, what = "matmul_all_reduce", "all-reduce"
    _wait(_issue(dist.all_reduce, C, group=group, op=op, what=what), op, what, timeout)
    return C


def all_gather_matmul(
    A: torch.Tensor, B: torch.Tensor, group: dist.ProcessGroup | None, timeout: float = 1800.0
) -> torch.Tensor:
    world = dist.get_world_size(group)
    full = torch.empty((world * A.shape[0], A.shape[1]), dtype=A.dtype, device=A.device)
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    op, what = "all_gather_matmul", "all-gather"
    _wait(_issue(fn, full, A.contiguous(), group=group, op=op, what=what), op, what, timeout)
    return full @ B
