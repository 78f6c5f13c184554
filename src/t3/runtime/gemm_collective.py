"""GEMM -> reduce-scatter / all-reduce, tile-triggered.

The output ``C = A @ B`` (M x N, a partial sum on every rank) is cut into one chunk per rank
along ``chunk_dim`` (rank ``c`` owns chunk ``c`` of the reduced result), and every chunk into
``pieces`` regions along the plan's split dimension. The producer computes regions in the order
the algorithm sends them; the tracker counts each region's tiles; the communication thread
sends a region as soon as it is complete and, on the ring, as soon as the upstream partial of
the same region arrived and was added.

Ring (rank r, W ranks, step s = 0..W-2): send region of chunk (r-1-s) mod W to r+1, receive the
same chunk's partial of step s from r-1 and add it into the local region before forwarding; the
partial received at the last step is chunk r. Direct: send each region to its owner; the owner
adds its own region and every received one in ascending rank order as they land, or, with batched
reductions (``plan.reduce == "batched"``), waits until every partial of a transfer step landed (FiCCO's
all-peer plan: piece ``p`` from every peer; otherwise: everything) and adds them in one reduction.
FiCCO's all-peer plan produces piece-major (piece ``p`` of every chunk; ``Plan.all_peer_order``) and
sends a compute group's regions once the whole group is computed. The own chunk is produced last
unless the plan says ``local_first``.

All-reduce = the reduce-scatter above into the rank's rows of the full output, then the owner's
reduced pieces travel the ring (or go directly) to every other rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from t3.runtime import buffers
from t3.runtime.comm import Peers, Pending
from t3.runtime.plan import Plan
from t3.runtime.producer import Block, TiledMatmul
from t3.runtime.tracker import TileTracker


@dataclass(frozen=True)
class Layout:
    M: int
    N: int
    world: int
    chunk_dim: int  # 0: chunks of rows, 1: chunks of columns
    split: str  # "m" or "n": the direction pieces are cut in
    pieces: int

    @property
    def chunk_shape(self) -> tuple[int, int]:
        if self.chunk_dim == 0:
            return self.M // self.world, self.N
        return self.M, self.N // self.world

    @property
    def piece_shape(self) -> tuple[int, int]:
        cm, cn = self.chunk_shape
        return (cm // self.pieces, cn) if self.split == "m" else (cm, cn // self.pieces)

    def block(self, c: int, p: int) -> Block:
        cm, cn = self.chunk_shape
        pm, pn = self.piece_shape
        r0 = (c * cm if self.chunk_dim == 0 else 0) + (p * pm if self.split == "m" else 0)
        c0 = (c * cn if self.chunk_dim == 1 else 0) + (p * pn if self.split == "n" else 0)
        return Block(r0, r0 + pm, c0, c0 + pn)

    def region(self, c: int, p: int) -> int:
        return c * self.pieces + p

    def local_block(self, c: int, p: int) -> Block:
        """Piece ``p`` of chunk ``c`` in the coordinates of the chunk."""
        b, origin = self.block(c, p), self.block(c, 0)
        return Block(b.r0 - origin.r0, b.r1 - origin.r0, b.c0 - origin.c0, b.c1 - origin.c0)


def chunk_order(rank: int, world: int, algo: str) -> list[int]:
    """Order in which a rank's GEMM produces chunks: the order its communication sends them."""
    if algo == "ring":
        return [(rank - 1 - s) % world for s in range(world)]
    return [(rank + k) % world for k in range(1, world + 1)]


class GemmCollective:
    """State of one tile-triggered GEMM -> RS / AR call on one rank."""

    def __init__(
        self,
        A: torch.Tensor,
        B: torch.Tensor,
        peers: Peers,
        layout: Layout,
        algo: str,
        plan: Plan,
        tile: tuple[int, int],
        all_reduce: bool,
    ) -> None:
        self.peers = peers
        self.L = layout
        self.algo = algo
        self.plan = plan
        self.all_reduce = all_reduce
        self.rank, self.world, self.P = peers.rank, peers.world, layout.pieces
        self.mm = TiledMatmul(A, B, tile)
        pm, pn = layout.piece_shape
        self.scratch: list[torch.Tensor] = []
        self.ws = self._take((self.world, self.P, pm, pn), A)  # local partial sums, region-major
        if all_reduce:
            self.out = buffers.empty((layout.M, layout.N), A)
        else:
            self.out = buffers.empty(layout.chunk_shape, A)
        owners = chunk_order(self.rank, self.world, algo)
        self.order = plan.region_order(self.rank, self.world, owners, own_first=False)
        self.reductions = 0  # reduction operations on received partial sums
        self.tracker = TileTracker(
            [self.mm.count(layout.block(c, p)) for c in range(self.world) for p in range(self.P)]
        )

    def _take(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        t = buffers.WORKSPACE.take(shape, like)
        self.scratch.append(t)
        return t

    def release(self) -> None:
        """Hand the scratch buffers back for the next call (only after a successful call)."""
        buffers.WORKSPACE.give_back(self.scratch)
        self.scratch = []

    # --- producer (main thread) ---------------------------------------------------------------
    def produce(self) -> None:
        # The rank's own chunk is computed straight into its place in the output: the final
        # reduction then adds in place, and the first touch of the fresh output's pages (a page
        # fault each) happens here, in the GEMM, instead of after the last transfer arrived.
        for c, p in self.order:
            dest = self._own_piece(p) if c == self.rank else self.ws[c, p]
            self.mm.region(self.L.block(c, p), dest, self.tracker, self.L.region(c, p))

    # --- communication thread -----------------------------------------------------------------
    def _ready(self, c: int, p: int) -> None:
        self.tracker.wait(
            self.L.region(c, p), self.peers.timeout, f"{self.peers.op}: local region ({c}, {p})"
        )

    def _own_piece(self, p: int) -> torch.Tensor:
        """Where this rank's reduced piece p goes: its slice of the output."""
        if self.all_reduce:
            b = self.L.block(self.rank, p)
        else:
            b = self.L.local_block(self.rank, p)
        return self.out[b.r0 : b.r1, b.c0 : b.c1]

    def _own_chunk(self) -> torch.Tensor:
        """This rank's chunk of the output as ``(pieces, piece rows, piece columns)`` (a view)."""
        cm, cn = self.L.chunk_shape
        pm, pn = self.L.piece_shape
        chunk = self.out[self.rank * cm : (self.rank + 1) * cm] if self.all_reduce else self.out
        if self.L.split == "m":
            return chunk.view(self.P, pm, cn)
        return chunk.view(cm, self.P, pn).permute(1, 0, 2)

    def communicate(self) -> None:
        if not self.plan.overlap or self.world == 1:  # sequential baseline: transfers after the GEMM
            for c, p in self.order:
                self._ready(c, p)
        if self.world == 1:  # the own chunk is produced straight into the output: nothing to move
            return
        sends = self._reduce_scatter_ring() if self.algo == "ring" else self._reduce_scatter_direct()
        if self.all_reduce:
            sends += self._all_gather_ring() if self.algo == "ring" else self._all_gather_direct()
        for s in sends:
            self.peers.wait(s)

    def _reduce_scatter_ring(self) -> list[Pending]:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        prev, nxt = (r - 1) % W, (r + 1) % W
        pm, pn = self.L.piece_shape
        rbuf = self._take((W - 1, P, pm, pn), self.ws)
        recvs = [
            [
                pe.irecv(rbuf[s, p], prev, s * P + p, f"RS step {s} chunk {(r - 2 - s) % W} piece {p}")
                for p in range(P)
            ]
            for s in range(W - 1)
        ]
        sends: list[Pending] = []
        for s in range(W - 1):
            c = (r - 1 - s) % W
            for p in range(P):
                self._ready(c, p)
                if s > 0:
                    self.ws[c, p].add_(pe.wait(recvs[s - 1][p]))
                    self.reductions += 1
                sends.append(pe.isend(self.ws[c, p], nxt, s * P + p, f"RS step {s} chunk {c} piece {p}"))
        for p in range(P):
            self._ready(r, p)
            self._own_piece(p).add_(pe.wait(recvs[W - 2][p]))
            self.reductions += 1
        return sends

    def _reduce_scatter_direct(self) -> list[Pending]:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        pm, pn = self.L.piece_shape
        rbuf = self._take((W - 1, P, pm, pn), self.ws)  # slot i: partial of others[i]
        others = [q for q in range(W) if q != r]
        recvs = {
            q: [pe.irecv(rbuf[i, p], q, p, f"RS chunk {r} piece {p}") for p in range(P)]
            for i, q in enumerate(others)
        }
        sends: list[Pending] = []
        for group in self.plan.groups_of(self.order):  # a group's regions go once all are computed
            for c, p in group:
                self._ready(c, p)
            for c, p in group:
                if c != r:
                    sends.append(pe.isend(self.ws[c, p], c, p, f"RS chunk {c} piece {p}"))
        if self.plan.reduce == "batched":
            # one reduction per transfer step, once all of its partials landed: FiCCO's all-peer step p
            # carries piece p from every peer; a shard-level exchange is one step carrying everything
            own = self._own_chunk()  # holds this rank's partial already
            steps = [[p] for p in range(P)] if self.plan.all_peer else [list(range(P))]
            for step in steps:
                for p in step:
                    self._ready(r, p)
                    for q in others:
                        pe.wait(recvs[q][p])
                if len(step) == P:
                    own.add_(rbuf.sum(0))
                else:
                    own[step[0]].add_(rbuf[:, step[0]].sum(0))
                self.reductions += 1
            return sends
        for p in range(P):
            self._ready(r, p)
            acc = self._own_piece(p)  # holds this rank's partial already
            for q in others:
                acc.add_(pe.wait(recvs[q][p]))
                self.reductions += 1
        return sends

    def _gather_target(self, c: int, p: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(receive buffer, output view) for piece p of chunk c in the all-reduce output."""
        b = self.L.block(c, p)
        view = self.out[b.r0 : b.r1, b.c0 : b.c1]
        return (view, view) if view.is_contiguous() else (self._take(view.shape, view), view)

    def _source(self, c: int, p: int, staged: dict[tuple[int, int], torch.Tensor]) -> torch.Tensor:
        if (c, p) in staged:
            return staged[(c, p)]
        b = self.L.block(c, p)
        return self.out[b.r0 : b.r1, b.c0 : b.c1].contiguous()

    def _all_gather_ring(self) -> list[Pending]:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        prev, nxt = (r - 1) % W, (r + 1) % W
        base = (W - 1) * P
        staged: dict[tuple[int, int], torch.Tensor] = {}
        recvs: list[list[tuple[Pending, torch.Tensor]]] = []
        for s in range(W - 1):
            row = []
            for p in range(P):
                c = (r - 1 - s) % W
                buf, view = self._gather_target(c, p)
                staged[(c, p)] = buf
                row.append((pe.irecv(buf, prev, base + s * P + p, f"AG step {s} chunk {c} piece {p}"), view))
            recvs.append(row)
        sends: list[Pending] = []
        for s in range(W - 1):
            c = (r - s) % W
            for p in range(P):
                if s > 0:
                    self._land(*recvs[s - 1][p])
                src = self._source(c, p, staged)
                sends.append(pe.isend(src, nxt, base + s * P + p, f"AG step {s} chunk {c} piece {p}"))
        for p in range(P):
            self._land(*recvs[W - 2][p])
        return sends

    def _all_gather_direct(self) -> list[Pending]:
        W, P, r, pe = self.world, self.P, self.rank, self.peers
        base = P
        others = [q for q in range(W) if q != r]
        recvs = {}
        for q in others:
            row = []
            for p in range(P):
                buf, view = self._gather_target(q, p)
                row.append((pe.irecv(buf, q, base + p, f"AG chunk {q} piece {p}"), view))
            recvs[q] = row
        sends: list[Pending] = []
        for p in range(P):
            src = self._source(r, p, {})
            for q in others:
                sends.append(pe.isend(src, q, base + p, f"AG chunk {r} piece {p}"))
        for q in others:
            for p in range(P):
                self._land(*recvs[q][p])
        return sends

    def _land(self, pending: Pending, view: torch.Tensor) -> None:
        buf = self.peers.wait(pending)
        if buf.data_ptr() != view.data_ptr() or buf.stride() != view.stride():
            view.copy_(buf)
