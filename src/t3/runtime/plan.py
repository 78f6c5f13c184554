"""Overlap plan: how finely an op's output (or gathered input) is cut into communicated regions.

A plan is two parameters, the vocabulary the FiCCO schedules are expressed in:

- ``granularity``: ``"shard"`` communicates one region per destination (reduce-scatter, all-reduce)
  or per source shard (all-gather); ``"ficco"`` cuts every shard into ``pieces`` finer regions;
- ``split_dim``: the GEMM dimension the pieces are cut along: ``"m"`` or ``"n"`` for GEMM -> RS/AR
  (output rows / columns), ``"m"`` or ``"k"`` for AG -> GEMM (rows / columns of the gathered operand;
  a ``"k"`` split accumulates partial products).

``overlap=False`` keeps the same regions, transfers and reductions but starts communication only
after the whole GEMM finished: the sequential baseline with identical bytes.

``all_peer=True`` is FiCCO's own pattern (``ficco-*`` schedules; direct transfers only): every shard
is cut into as many pieces as there are ranks, step ``p`` sends piece ``p`` to every peer at once,
and the GEMM runs piece-major (piece ``p`` of every shard before piece ``p + 1``) in ``groups``
compute groups: a group starts once all of its regions are there (AG -> GEMM), and its regions are
sent once all of them are computed (GEMM -> RS/AR). ``groups=0`` means one group per region.

``local_first`` orders the rank's own shard / chunk among its regions: ``True`` first, ``False``
last, ``None`` the op's own choice (last for GEMM -> RS/AR, whose own chunk is reduced last; first
for AG -> GEMM, whose own shard needs no transfer). ``reduce="batched"`` (GEMM -> RS/AR with direct
transfers) makes the owner wait until every partial of a transfer step landed and add them in one
reduction, instead of adding each as it lands (``"incremental"``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Literal

Granularity = Literal["shard", "ficco"]
SplitDim = Literal["m", "n", "k"]
Reduce = Literal["incremental", "batched"]


@dataclass(frozen=True)
class Plan:
    granularity: Granularity = "shard"
    split_dim: SplitDim = "m"
    pieces: int = 1
    overlap: bool = True
    all_peer: bool = False
    groups: int = 0
    local_first: bool | None = None
    reduce: Reduce = "incremental"

    def __post_init__(self) -> None:
        if self.granularity not in ("shard", "ficco"):
            raise ValueError(f"plan.granularity: must be 'shard' or 'ficco', got {self.granularity!r}")
        if self.split_dim not in ("m", "n", "k"):
            raise ValueError(f"plan.split_dim: must be 'm', 'n' or 'k', got {self.split_dim!r}")
        if not isinstance(self.pieces, int) or isinstance(self.pieces, bool) or self.pieces < 1:
            raise ValueError(f"plan.pieces: must be an integer >= 1, got {self.pieces!r}")
        if self.granularity == "shard" and self.pieces != 1:
            raise ValueError(f"plan.pieces: granularity 'shard' means pieces=1, got {self.pieces}")
        for name in ("overlap", "all_peer"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"plan.{name}: must be True or False, got {getattr(self, name)!r}")
        if self.all_peer and self.granularity != "ficco":
            raise ValueError("plan.all_peer: FiCCO's all-peer pattern needs granularity 'ficco'")
        if not isinstance(self.groups, int) or isinstance(self.groups, bool) or self.groups < 0:
            raise ValueError(f"plan.groups: must be an integer >= 0, got {self.groups!r}")
        if not (self.local_first is None or isinstance(self.local_first, bool)):
            raise ValueError(f"plan.local_first: must be None, True or False, got {self.local_first!r}")
        if self.reduce not in ("incremental", "batched"):
            raise ValueError(f"plan.reduce: must be 'incremental' or 'batched', got {self.reduce!r}")

    @classmethod
    def from_schedule(cls, name: str, world: int) -> Plan:
        """The plan that executes the FiCCO schedule ``name`` (``t3.ficco.space`` grammar) on ``world``
        ranks; every part of the name is executed or refused with a ``ValueError``, none is ignored:

        - ``bulk-g1-M-dma``: the non-overlapped baseline (``overlap=False``);
        - ``shard-g<G>-<M|N|K>-dma``: G GEMM pieces, G a multiple of the world size (G = world is the
          shard plan; G = world x P cuts every shard into P pieces along the named dimension);
        - ``ficco-g<G>-<M|N|K>-dma``: FiCCO's all-peer pattern (``all_peer=True``, world pieces per
          shard, G compute groups; needs ``algo='direct'``);
        - ``-ll`` / ``-lf`` (or nothing): the own shard / chunk last / first (``local_first``);
        - ``-rb``: batched reductions (``reduce='batched'``; GEMM -> RS/AR with ``algo='direct'``);
        - ``-s1``: one compute stream, which is what the runtime has.

        Refused: ``-cu`` (the runtime's communication thread and the backend move the bytes beside the
        GEMM thread, as DMA engines do: that is ``-dma``; no communication runs on the GEMM's compute
        thread), ``-s2`` (one compute thread), ``-p<D>`` (no prefetch bound), the named implementations'
        ``-ep`` (epilogue stores to peers), ``-fk`` (one fused GEMM kernel), ``-rsum`` (a sum kernel at
        the end) and ``-sb`` (async-TP's barriers of all GPUs), and ``bulk`` names other than ``bulk-g1-M-dma[-lf]`` (as in the simulator's legality
        rules). The message names the closest schedule the runtime runs."""
        from t3.errors import T3Error
        from t3.ficco.space import parse_name

        try:
            ax = parse_name(name)
        except T3Error as err:
            raise ValueError(f"plan: {err}") from None
        missing = []
        if ax.streams != 1:
            missing.append("two compute streams (-s2): the runtime has one compute thread")
        if ax.prefetch:
            missing.append(f"a prefetch bound (-p{ax.prefetch}): the runtime issues every transfer at once")
        if ax.executor == "cu":
            missing.append(
                "a communication kernel on the compute units (-cu): the runtime's communication thread "
                "and the backend move the bytes beside the GEMM thread, as DMA engines do (-dma)"
            )
        if ax.executor == "ep":
            missing.append(
                "stores to peers from the GEMM's epilogue (-ep): the runtime's GEMM thread writes its tiles "
                "locally and the communication thread sends them, as DMA engines do (-dma)"
            )
        if ax.fused:
            missing.append(
                "one fused GEMM kernel over all pieces (-fk): the runtime runs one GEMM call per piece"
            )
        if ax.reduce == "sum":
            missing.append(
                "a library sum kernel after every partial landed (-rsum): the runtime reduces each transfer "
                "step's partials as they complete (-rb)"
            )
        if ax.handshake:
            missing.append(
                "async-TP's symmetric-memory barriers around each transfer (-sb): the runtime's point-to-point "
                "sends and receives synchronise the two GPUs of each transfer only"
            )
        if missing:
            near = replace(
                ax, streams=1, prefetch=0, executor="dma", fused=False, handshake=False,
                reduce="batched" if ax.reduce == "sum" else ax.reduce,
            ).name  # fmt: skip
            raise ValueError(
                f"plan: '{name}': not implemented in the runtime: {'; '.join(missing)}. "
                f"The closest schedule the runtime runs is '{near}'"
            )
        if ax.comm == "bulk":
            if ax.g != 1 or ax.split != "M" or not ax.local_first or ax.reduce != "inc":
                raise ValueError(
                    f"plan: '{name}': bulk is one GEMM, then one collective: pieces, split, local order and "
                    "batched reductions do not apply (the runtime runs 'bulk-g1-M-dma')"
                )
            return cls(overlap=False)
        order = {
            "local_first": ax.local_first,
            "reduce": "batched" if ax.reduce == "batched" else "incremental",
        }
        if ax.comm == "ficco":
            if (world * world) % ax.g:
                raise ValueError(
                    f"plan: '{name}': {world * world} regions (world size {world} squared) do not split "
                    f"into {ax.g} compute groups"
                )
            split = ax.split.lower()
            plan = cls("ficco", split, world, all_peer=True, groups=ax.g, **order)  # type: ignore[arg-type]
            if ax.split != "M" and ax.g > 1:  # one piece = the whole GEMM: nothing to mix
                for grp in plan.groups_of(plan.all_peer_order(0, world, own_first=ax.local_first)):
                    if len({p for _, p in grp}) != 1:
                        raise ValueError(
                            f"plan: '{name}': a {ax.split}-split compute group must hold one piece, but "
                            f"{ax.g} groups of {world} ranks' pieces mix them (use a multiple of {world})"
                        )
            return plan
        if ax.g % world:
            raise ValueError(
                f"plan: '{name}': {ax.g} GEMM pieces are not a multiple of the world size ({world})"
            )
        pieces = ax.g // world
        if pieces == 1:
            return cls(**order)  # type: ignore[arg-type]
        return cls("ficco", ax.split.lower(), pieces, **order)  # type: ignore[arg-type]

    def region_order(
        self, rank: int, world: int, owners: list[int], own_first: bool
    ) -> list[tuple[int, int]]:
        """The order a rank processes its regions (shard or chunk q, piece p): FiCCO's all-peer
        order, or else shard-major over ``owners`` (the algorithm's order of shards / chunks). The own
        shard / chunk goes first or last as ``local_first`` says; ``own_first`` is the op's choice
        when ``local_first`` is None."""
        first = own_first if self.local_first is None else self.local_first
        if self.all_peer:
            return self.all_peer_order(rank, world, first)
        others = [q for q in owners if q != rank]
        owners = [rank, *others] if first else [*others, rank]
        return [(q, p) for q in owners for p in range(self.n_pieces)]

    def all_peer_order(self, rank: int, world: int, own_first: bool) -> list[tuple[int, int]]:
        """FiCCO's order of the regions (shard or chunk q, piece p) on ``rank``: piece-major over the
        peers ``rank + 1, rank + 2, ...``; the own shard's pieces first (``own_first``) or last, all
        together for an M split (they need no transfer), beside each piece otherwise."""
        others = [(rank + k) % world for k in range(1, world)]
        P = self.pieces
        if self.split_dim == "m":
            own = [(rank, p) for p in range(P)]
            rem = [(q, p) for p in range(P) for q in others]
            return own + rem if own_first else rem + own
        out: list[tuple[int, int]] = []
        for p in range(P):
            rem = [(q, p) for q in others]
            out += [(rank, p), *rem] if own_first else [*rem, (rank, p)]
        return out

    def groups_of(self, order: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
        """``order`` cut into the plan's compute groups (one region each when ``groups`` is 0)."""
        size = len(order) // self.groups if self.groups else 1
        return [order[i : i + size] for i in range(0, len(order), size)]

    @property
    def n_pieces(self) -> int:
        return self.pieces if self.granularity == "ficco" else 1

    def describe(self) -> str:
        if self.granularity == "shard":
            base = "shard"
        elif self.all_peer:
            base = f"ficco all-peer(split={self.split_dim}, pieces={self.pieces}, groups={self.groups or 'each'})"
        else:
            base = f"ficco(split={self.split_dim}, pieces={self.pieces})"
        if self.local_first is not None:
            base += ", local first" if self.local_first else ", local last"
        if self.reduce == "batched":
            base += ", batched reductions"
        return base if self.overlap else base + ", no overlap"

    def fields(self) -> list[tuple[str, object]]:
        """Every field and its value: the plan's full canonical description."""
        return [(f.name, getattr(self, f.name)) for f in dataclass_fields(self)]
