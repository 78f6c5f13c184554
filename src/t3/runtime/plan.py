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

    @classmethod
    def from_schedule(cls, name: str, world: int) -> Plan:
        """The plan that executes the FiCCO schedule ``name`` (``t3.ficco.space`` grammar) on ``world``
        ranks: ``bulk-*`` is the non-overlapped baseline; ``shard-g<G>-<M|N|K>-*`` cuts the GEMM into G
        pieces (G a multiple of the world size: G = world is the shard plan, G = world x P cuts every
        shard into P pieces along the named dimension). The runtime's communication thread plays the
        DMA engine's role and its piece order is fixed (own chunk last for GEMM -> RS/AR, own shard
        first for AG -> GEMM), so the executor and ordering suffixes (``-cu``/``-dma``, ``-ll``) and the
        batched-reduction suffix (``-rb``: the runtime always reduces a region as it arrives) select
        the same execution. FiCCO's all-peer pattern (``ficco-*``), prefetch bounds (``-p<D>``) and two
        compute streams (``-s2``) are not implemented: a ``ValueError`` says so."""
        from t3.errors import T3Error
        from t3.ficco.space import parse_name

        try:
            ax = parse_name(name)
        except T3Error as err:
            raise ValueError(f"plan: {err}") from None
        if ax.comm == "ficco":
            raise ValueError(
                f"plan: '{name}': FiCCO's all-peer transfers ('ficco-*', every step sends a piece to every "
                "peer at once) are not implemented in the runtime; use a 'shard-*' or 'bulk-*' schedule"
            )
        if ax.prefetch or ax.streams != 1:
            raise ValueError(
                f"plan: '{name}': prefetch bounds (-p) and two compute streams (-s2) are not implemented in the runtime"
            )
        if ax.comm == "bulk":
            return cls(overlap=False)
        if ax.g % world:
            raise ValueError(
                f"plan: '{name}': {ax.g} GEMM pieces are not a multiple of the world size ({world})"
            )
        pieces = ax.g // world
        return cls() if pieces == 1 else cls("ficco", ax.split.lower(), pieces)  # type: ignore[arg-type]

    @property
    def n_pieces(self) -> int:
        return self.pieces if self.granularity == "ficco" else 1

    def describe(self) -> str:
        if self.granularity == "shard":
            base = "shard"
        else:
            base = f"ficco(split={self.split_dim}, pieces={self.pieces})"
        return base if self.overlap else base + ", no overlap"
