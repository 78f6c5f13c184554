"""Output address-space configuration of a T3 GEMM (the software side of T3).

Before the GEMM launches, the runtime maps every output chunk of every GPU:

- ``remote_map(chunk, peer)``: the chunk's pages map to ``peer``; ordinary GEMM stores become remote
  *updates* that cross the link and are reduced into the peer's copy by near-memory compute;
- ``dma_map(chunk, peer, trigger_count, op)``: the pages stay local but are tracked; when a tile has
  received ``trigger_count`` updates (local + incoming), a pre-programmed DMA ``op`` (``"update"``:
  reduce into the destination) sends it to ``peer``;
- unmapped: ordinary local memory (the chunk this GPU finally owns).

Staggered production: GPU g produces chunk ``(g + s - 1) mod N`` in stage s (1-based), i.e. its
chunk order is ``[(g + p) mod N for p in 0..N-1]`` (:func:`stagger_order`).

Ring reduce-scatter (the paper's case, direction g -> g-1): a chunk's first producer remote-maps it to
g-1, the next N-2 producers dma_map it to g-1 (trigger 2: own tile + the upstream update), the last
keeps it; GPU g ends owning chunk ``(g - 1) mod N``. Link bytes per GPU = (N-1)/N of the tensor, as a
ring RS. Direct reduce-scatter (fully-connected mesh / switch): every chunk but the last produced is
remote-mapped straight to its owner (the GPU that produces it last), so GPU g owns chunk (g-1) mod N
too and receives N-1 remote updates per tile; no DMA and no tracker are needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from t3.errors import ScheduleError


@dataclass(frozen=True)
class Mapping:
    kind: Literal["local", "remote", "dma"]
    peer: int | None = None
    trigger_count: int = 0  # updates (local + incoming) that complete a tile (dma only)
    op: str = ""  # DMA operation (dma only): "update" = reduce into the destination


LOCAL = Mapping("local")


class AddressMap:
    """The mapping of one GPU's output chunks (unmapped chunks are local)."""

    def __init__(self, gpu: int, n_gpus: int):
        self.gpu, self.n = gpu, n_gpus
        self._m: dict[int, Mapping] = {}

    def _check(self, chunk: int, peer: int) -> None:
        if not 0 <= chunk < self.n:
            raise ScheduleError(f"address map: chunk {chunk} outside 0..{self.n - 1}")
        if peer % self.n == self.gpu:
            raise ScheduleError(f"address map: GPU {self.gpu} cannot map chunk {chunk} to itself")
        if chunk in self._m:
            raise ScheduleError(f"address map: chunk {chunk} of GPU {self.gpu} mapped twice")

    def remote_map(self, chunk: int, peer: int) -> None:
        self._check(chunk, peer)
        self._m[chunk] = Mapping("remote", peer % self.n)

    def dma_map(self, chunk: int, peer: int, trigger_count: int, op: str = "update") -> None:
        self._check(chunk, peer)
        if trigger_count < 1:
            raise ScheduleError(f"address map: trigger_count must be >= 1, got {trigger_count}")
        if op != "update":
            raise ScheduleError(f"address map: unknown DMA op '{op}' (update)")
        self._m[chunk] = Mapping("dma", peer % self.n, trigger_count, op)

    def lookup(self, chunk: int) -> Mapping:
        return self._m.get(chunk, LOCAL)


def stagger_order(gpu: int, n: int) -> tuple[int, ...]:
    """Chunk produced by ``gpu`` at each stage position p = s - 1: ``(gpu + p) mod n``."""
    return tuple((gpu + p) % n for p in range(n))


def ring_rs_maps(n: int) -> list[AddressMap]:
    maps = []
    for g in range(n):
        m = AddressMap(g, n)
        order = stagger_order(g, n)
        m_prev = (g - 1) % n
        for p, c in enumerate(order):
            if p == 0:
                m.remote_map(c, m_prev)
            elif p < n - 1:
                m.dma_map(c, m_prev, trigger_count=2, op="update")
        maps.append(m)
    return maps


def direct_rs_maps(n: int) -> list[AddressMap]:
    maps = []
    for g in range(n):
        m = AddressMap(g, n)
        for p, c in enumerate(stagger_order(g, n)):
            if p < n - 1:
                m.remote_map(c, (c + 1) % n)  # the owner of c produces it last
        maps.append(m)
    return maps
