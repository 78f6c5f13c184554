"""Tiled matmul producer: computes an output block tile by tile and reports each finished tile
to the tracker (GEMM -> collective), or computes a block once its input arrived (AG -> GEMM)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from t3.runtime.tracker import TileTracker


@dataclass(frozen=True)
class Block:
    """Half-open index ranges ``[r0, r1) x [c0, c1)``."""

    r0: int
    r1: int
    c0: int
    c1: int

    @property
    def rows(self) -> int:
        return self.r1 - self.r0

    @property
    def cols(self) -> int:
        return self.c1 - self.c0


def tile_grid(rows: int, cols: int, bm: int, bn: int) -> list[Block]:
    """Tiles of a ``rows x cols`` block, row-major, edge tiles clipped."""
    return [
        Block(i, min(i + bm, rows), j, min(j + bn, cols))
        for i in range(0, rows, bm)
        for j in range(0, cols, bn)
    ]


class TiledMatmul:
    """``A @ B`` computed tile by tile into caller-provided output views."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor, tile: tuple[int, int]) -> None:
        self.A = A
        self.B = B
        self.bm, self.bn = tile
        self.tiles = 0
        self.produce_s = 0.0

    def count(self, block: Block) -> int:
        return len(tile_grid(block.rows, block.cols, self.bm, self.bn))

    def region(self, block: Block, out: torch.Tensor, tracker: TileTracker | None, region: int) -> None:
        """Compute output block ``block`` of ``A @ B`` into ``out`` (its shape), tile by tile."""
        t0 = time.perf_counter()
        a = self.A[block.r0 : block.r1]
        b = self.B[:, block.c0 : block.c1]
        for t in tile_grid(block.rows, block.cols, self.bm, self.bn):
            torch.mm(a[t.r0 : t.r1], b[:, t.c0 : t.c1], out=out[t.r0 : t.r1, t.c0 : t.c1])
            self.tiles += 1
            if tracker is not None:
                tracker.add(region)
        self.produce_s += time.perf_counter() - t0

    def product(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, accumulate: bool) -> None:
        """``out (+)= a @ b`` tile by tile (AG -> GEMM: ``a`` is an arrived piece of the operand)."""
        t0 = time.perf_counter()
        for t in tile_grid(out.shape[0], out.shape[1], self.bm, self.bn):
            o = out[t.r0 : t.r1, t.c0 : t.c1]
            if accumulate:
                o.addmm_(a[t.r0 : t.r1], b[:, t.c0 : t.c1])
            else:
                torch.mm(a[t.r0 : t.r1], b[:, t.c0 : t.c1], out=o)
            self.tiles += 1
        self.produce_s += time.perf_counter() - t0
