"""Buffer allocation. With poisoning on, every buffer starts as NaN so that an element the
runtime forgets to write shows up in any comparison (tests turn it on; it costs a fill)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import torch

_POISON = os.environ.get("T3_RUNTIME_POISON", "") not in ("", "0")


def set_poison(on: bool) -> None:
    """Fill every buffer the runtime allocates with NaN (debugging and tests)."""
    global _POISON
    _POISON = bool(on)


def poison_enabled() -> bool:
    return _POISON


def empty(shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
    if _POISON:
        return torch.full(tuple(shape), float("nan"), dtype=like.dtype, device=like.device)
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)


class Workspace:
    """Reusable scratch buffers of one kind of call (partial sums, receive buffers).

    Large fresh allocations cost a page fault per 4 KiB page on first touch, on a CPU host as
    much as a GEMM of the same size; reusing them across calls removes that cost. Buffers are
    checked out for the duration of a call and handed back only when it succeeded (after a
    failure a late receive might still land in them), so concurrent calls never share one.
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        self._free: dict[tuple, list[torch.Tensor]] = {}
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
        key = (tuple(shape), like.dtype, like.device)
        with self._lock:
            pool = self._free.get(key)
            t = pool.pop() if pool else None
            if t is not None:
                self._bytes -= t.numel() * t.element_size()
        if t is not None:
            if _POISON:
                t.fill_(float("nan"))
            return t
        return empty(shape, like)

    def give_back(self, tensors: Sequence[torch.Tensor]) -> None:
        with self._lock:
            for t in tensors:
                size = t.numel() * t.element_size()
                if self._bytes + size > self._max_bytes:
                    continue
                self._free.setdefault((tuple(t.shape), t.dtype, t.device), []).append(t)
                self._bytes += size

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._bytes = 0


WORKSPACE = Workspace()
