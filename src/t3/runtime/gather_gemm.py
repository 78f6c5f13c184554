"""All-gather -> GEMM, arrival-triggered.

Every rank holds a shard ``A_q`` (m x K) of the gathered operand (W*m x K, shards stacked along
rows) and computes ``C = all_gather(A) @ B``. Each shard is cut into ``pieces`` along the plan's
split dimension (``"m"``: rows, ``"k"``: columns, whose partial products are accumulated). The
communication thread forwards pieces (ring) or exchanges them (direct) and marks each arrival in
the tracker; the GEMM loop computes the rows of a shard piece by piece as soon as they arrived,
starting with the rank's own shard, which needs no communication (or ending with it, when the plan
says ``local_first=False``). FiCCO's all-peer plan runs the GEMM piece-major instead (piece ``p`` of
every shard, in compute groups; ``Plan.all_peer_order``).
"""

from __future__ import annotations

import torch

from t3.runtime import buffers
from t3.runtime.comm import Peers, Pending
from t3.runtime.plan import Plan
from t3.runtime.producer import TiledMatmul
from t3.runtime.tracker import TileTracker


def shard_order(rank: int, world: int, algo: str) -> list[int]:
    """Order in which shards arrive (and are multiplied) on ``rank``."""
    if algo == "ring":
        return [(rank - s) % world for s in range(world)]
    return [(rank + k) % world for k in range(world)]


class GatherGemm:
    def __init__(
        self, A: torch.Tensor, B: torch.Tensor, peers: Peers, algo: str, plan: Plan, tile: tuple[int, int]
    ) -> None:
        self.peers, self.algo, self.plan = peers, algo, plan
        self.rank, self.world = peers.rank, peers.world
        self.m, self.K = A.shape
        self.N = B.shape[1]
        self.P = plan.n_pieces
        self.split = plan.split_dim
        pa, pk = (self.m // self.P, self.K) if self.split == "m" else (self.m, self.K // self.P)
        # the other ranks' shards land in a piece-major workspace; the own shard is used (and sent)
        # in place when its pieces are contiguous, so the first transfer starts without a copy
        self.ws = buffers.WORKSPACE.take((self.world - 1, self.P, pa, pk), A)
        self.shard: list[list[torch.Tensor]] = []
        for q in range(self.world):
            if q == self.rank:
                self.shard.append([self._piece_of(A, p).contiguous() for p in range(self.P)])
            else:
                self.shard.append([self.ws[q if q < self.rank else q - 1, p] for p in range(self.P)])
        self.B = B
        self.mm = TiledMatmul(A, B, tile)
        self.out = buffers.empty((self.world * self.m, self.N), A)
        self.tracker = TileTracker([1] * (self.world * self.P))
        for p in range(self.P):
            self.tracker.add(self._region(self.rank, p))
        self.wait_s = 0.0
        self.reductions = 0  # an all-gather reduces nothing

    def release(self) -> None:
        """Hand the scratch buffer back for the next call (only after a successful call)."""
        buffers.WORKSPACE.give_back([self.ws])

    def _region(self, q: int, p: int) -> int:
        return q * self.P + p

    def _piece_of(self, A: torch.Tensor, p: int) -> torch.Tensor:
        if self.split == "m":
            h = self.m // self.P
            return A[p * h : (p + 1) * h]
        w = self.K // self.P
        return A[:, p * w : (p + 1) * w]

    # --- GEMM loop (main thread) ---------------------------------------------------------------
    def order(self) -> list[tuple[int, int]]:
        """(shard, piece) in the order they are multiplied (and, direct, awaited)."""
        owners = shard_order(self.rank, self.world, self.algo)
        return self.plan.region_order(self.rank, self.world, owners, own_first=True)

    def produce(self) -> None:
        order = self.order()
        if not self.plan.overlap:
            for q, p in order:
                self._arrived(q, p)
        for group in self.plan.groups_of(order):
            for q, p in group:
                self._arrived(q, p)
            for q, p in group:
                a = self.shard[q][p]
                if self.split == "m":
                    h = self.m // self.P
                    r0 = q * self.m + p * h
                    self.mm.product(a, self.B, self.out[r0 : r0 + h], accumulate=False)
                else:
                    w = self.K // self.P
                    rows = self.out[q * self.m : (q + 1) * self.m]
                    self.mm.product(a, self.B[p * w : (p + 1) * w], rows, accumulate=p > 0)

    def _arrived(self, q: int, p: int) -> None:
        before = self.tracker.wait_s
        # the communication thread bounds every peer wait by the timeout; the extra second lets
        # its PeerError (which aborts the tracker) arrive first
        self.tracker.wait(
            self._region(q, p), self.peers.timeout + 1.0, f"{self.peers.op}: shard {q} piece {p}"
        )
        self.wait_s += self.tracker.wait_s - before

    # --- communication thread ------------------------------------------------------------------
    def communicate(self) -> None:
        if self.world == 1:  # the own shard is all there is (its pieces are marked at construction)
            return
        if self.algo == "ring":
            self._ring()
        else:
            self._direct()

    def _ring(self) -> None:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        prev, nxt = (r - 1) % W, (r + 1) % W
        recvs = [
            [
                pe.irecv(
                    self.shard[(r - 1 - s) % W][p],
                    prev,
                    s * P + p,
                    f"AG step {s} shard {(r - 1 - s) % W} piece {p}",
                )
                for p in range(P)
            ]
            for s in range(W - 1)
        ]
        sends: list[Pending] = []
        for s in range(W - 1):
            q = (r - s) % W
            for p in range(P):
                if s > 0:
                    pe.wait(recvs[s - 1][p])
                    self.tracker.add(self._region(q, p))
                sends.append(pe.isend(self.shard[q][p], nxt, s * P + p, f"AG step {s} shard {q} piece {p}"))
        for p in range(P):
            pe.wait(recvs[W - 2][p])
            self.tracker.add(self._region((r + 1) % W, p))
        for s in sends:
            pe.wait(s)

    def _direct(self) -> None:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        order = shard_order(r, W, "direct")[1:]
        recvs = {
            q: [pe.irecv(self.shard[q][p], q, p, f"AG shard {q} piece {p}") for p in range(P)] for q in order
        }
        # piece-major: step p sends piece p to every peer at once (FiCCO's pattern when all_peer)
        sends = [pe.isend(self.shard[r][p], q, p, f"AG shard {r} piece {p}") for p in range(P) for q in order]
        for q, p in self.order():  # marked in the order the GEMM loop consumes them
            if q != r:
                pe.wait(recvs[q][p])
                self.tracker.add(self._region(q, p))
        for s in sends:
            pe.wait(s)
