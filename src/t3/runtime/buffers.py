"""Buffer allocation. With poisoning on, every buffer starts as NaN so that an element the
runtime forgets to write shows up in any comparison (tests turn it on; it costs a fill)."""

from __future__ import annotations

import os
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
