"""Overlap plan: how finely an op's output (or gathered input) is cut into communicated regions.

A plan is two parameters, the vocabulary the FiCCO schedules are expressed in:

- ``granularity``: ``"shard"`` communicates one region per destination (reduce-scatter, all-reduce)
  or per source shard (all-gather); ``"ficco"`` cuts every shard into ``pieces`` finer regions;
- ``split_dim``: the GEMM dimension the pieces are cut along: ``"m"`` or ``"n"`` for GEMM -> RS/AR
  (output rows / columns), ``"m"`` or ``"k"`` for AG -> GEMM (rows / columns of the gathered operand;
  a ``"k"`` split accumulates partial products).

``overlap=False`` keeps the same regions, transfers and reductions but starts communication only
after the whole GEMM finished: the sequential baseline with identical bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Granularity = Literal["shard", "ficco"]
SplitDim = Literal["m", "n", "k"]


@dataclass(frozen=True)
class Plan:
    granularity: Granularity = "shard"
    split_dim: SplitDim = "m"
    pieces: int = 1
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.granularity not in ("shard", "ficco"):
            raise ValueError(f"plan.granularity: must be 'shard' or 'ficco', got {self.granularity!r}")
        if self.split_dim not in ("m", "n", "k"):
            raise ValueError(f"plan.split_dim: must be 'm', 'n' or 'k', got {self.split_dim!r}")
        if not isinstance(self.pieces, int) or isinstance(self.pieces, bool) or self.pieces < 1:
            raise ValueError(f"plan.pieces: must be an integer >= 1, got {self.pieces!r}")
        if self.granularity == "shard" and self.pieces != 1:
            raise ValueError(f"plan.pieces: granularity 'shard' means pieces=1, got {self.pieces}")

    @property
    def n_pieces(self) -> int:
        return self.pieces if self.granularity == "ficco" else 1

    def describe(self) -> str:
        if self.granularity == "shard":
            base = "shard"
        else:
            base = f"ficco(split={self.split_dim}, pieces={self.pieces})"
        return base if self.overlap else base + ", no overlap"
