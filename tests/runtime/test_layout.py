"""Laws of the region layout and tiling (property tests, no communication)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from t3.runtime.gather_gemm import shard_order  # noqa: E402
from t3.runtime.gemm_collective import Layout, chunk_order  # noqa: E402
from t3.runtime.producer import tile_grid  # noqa: E402


@given(rows=st.integers(1, 40), cols=st.integers(1, 40), bm=st.integers(1, 50), bn=st.integers(1, 50))
def test_tiles_partition_the_block(rows: int, cols: int, bm: int, bn: int) -> None:
    cover = [[0] * cols for _ in range(rows)]
    for t in tile_grid(rows, cols, bm, bn):
        for i in range(t.r0, t.r1):
            for j in range(t.c0, t.c1):
                cover[i][j] += 1
    assert all(v == 1 for row in cover for v in row)


@given(
    world=st.integers(1, 5),
    pieces=st.integers(1, 4),
    a=st.integers(1, 3),
    b=st.integers(1, 3),
    chunk_dim=st.sampled_from([0, 1]),
    split=st.sampled_from(["m", "n"]),
)
def test_regions_partition_the_output(
    world: int, pieces: int, a: int, b: int, chunk_dim: int, split: str
) -> None:
    # sizes divisible as the ops require: chunk dim by the world size, split dim of a chunk by pieces
    M = a * (world if chunk_dim == 0 else 1) * (pieces if split == "m" else 1)
    N = b * (world if chunk_dim == 1 else 1) * (pieces if split == "n" else 1)
    L = Layout(M, N, world, chunk_dim, split, pieces)
    cover = [[0] * N for _ in range(M)]
    for c in range(world):
        for p in range(pieces):
            blk = L.block(c, p)
            assert (blk.rows, blk.cols) == L.piece_shape
            owner = L.block(c, 0)
            # every piece lies inside its chunk: rows block c (chunk_dim 0) or columns block c (1)
            if chunk_dim == 0:
                assert c * (M // world) <= blk.r0 and blk.r1 <= (c + 1) * (M // world)
            else:
                assert c * (N // world) <= blk.c0 and blk.c1 <= (c + 1) * (N // world)
            loc = L.local_block(c, p)
            assert (loc.r0 + owner.r0, loc.c0 + owner.c0) == (blk.r0, blk.c0)
            for i in range(blk.r0, blk.r1):
                for j in range(blk.c0, blk.c1):
                    cover[i][j] += 1
    assert all(v == 1 for row in cover for v in row)


@given(world=st.integers(1, 8), algo=st.sampled_from(["ring", "direct"]), data=st.data())
def test_orders_are_permutations_with_the_own_part_placed(world: int, algo: str, data: st.DataObject) -> None:
    rank = data.draw(st.integers(0, world - 1))
    chunks = chunk_order(rank, world, algo)
    assert sorted(chunks) == list(range(world)) and chunks[-1] == rank  # own chunk produced last
    shards = shard_order(rank, world, algo)
    assert sorted(shards) == list(range(world)) and shards[0] == rank  # own shard multiplied first
