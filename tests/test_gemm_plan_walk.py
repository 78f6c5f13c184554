"""The GEMM planner's reuse distances (a row-major raster's in closed form, a column-major one's by a walk
over each wave's operand blocks: merged intervals of last-use lists) against a brute-force oracle that
visits every tile of every wave and keeps the wave that last used each A row block and B column block in
a dict; the closed form against the walk bit for bit; and the planner's tile choice, which skips a tile whose CU time
alone cannot beat the best so far, against the full scan of the menu."""

from __future__ import annotations

import math
import random

import pytest

import t3.ops.gemm as gemm
from t3.config.hardware import load_hardware
from t3.workload.sublayers import GemmShape


def _oracle_reads(shape, hw, chunks, order, bypass, tile) -> list[tuple[int, float]]:
    """Per wave (its distinct operand bytes, its DRAM reads), from first principles: tile t of chunk ch
    (row-major: row t // tn, column t % tn; column-major: column t // tm, row t % tm) uses A row block
    ``ch * tm + row`` and B column block ``column``; a block last used by wave p is read again with the
    L2 miss probability at the reuse distance of the planner's model (a miss below 1e-12 is a hit)."""
    c = hw.compute
    bm, bn = tile
    rows = shape.m // chunks
    tm, tn = math.ceil(rows / bm), math.ceil(shape.n / bn)
    tiles_c = tm * tn
    wave = hw.compute.cus * c.wg_per_cu
    eb = shape.elem_bytes
    # an output narrower than a tile loads only its in-bounds rows / columns (t3.ops.gemm.tile_extent);
    # wider ones charge every block a whole tile's
    a_block, b_block = min(bm, rows) * shape.k * eb, min(bn, shape.n) * shape.k * eb
    out_tile = rows * shape.n * shape.out_elem_bytes / tiles_c
    total = tiles_c * chunks
    waves = []
    for lo in range(0, total, wave):
        a_set, b_set, alloc = set(), set(), 0.0
        for g in range(lo, min(lo + wave, total)):
            pos, t = divmod(g, tiles_c)
            ch = order[pos]
            r, col = (t % tm, t // tm) if c.raster == "column" else (t // tn, t % tn)
            a_set.add(ch * tm + r)
            b_set.add(col)
            if pos not in bypass:
                alloc += out_tile
        waves.append((a_set, b_set, alloc))
    ws = [len(a) * a_block + len(b) * b_block for a, b, _ in waves]
    last: dict[tuple[str, int], int] = {}
    out = []
    for w, (a_set, b_set, _) in enumerate(waves):
        reads = 0.0
        for name, blocks, size in (("a", a_set, a_block), ("b", b_set, b_block)):
            for blk in blocks:
                p = last.get((name, blk))
                if p is None:
                    reads += size
                else:
                    d = 0.5 * ws[p] + sum(ws[p + 1 : w]) + 0.5 * ws[w] + sum(x[2] for x in waves[p:w])
                    miss = 1.0 - gemm.l2_hit(d, hw)
                    reads += size * miss if miss > 1e-12 else 0.0  # (the model's cut of a certain hit)
                last[(name, blk)] = w
        out.append((ws[w], reads))
    return out


def _cases(n: int, seed: int):
    rng = random.Random(seed)
    presets = [load_hardware(h) for h in ("paper-80cu", "h100-8", "mi300x-8")]
    presets.append(load_hardware("paper-80cu", {"compute.raster": "column"}))  # (no preset walks columns)
    for _ in range(n):
        hw = rng.choice(presets)
        chunks = rng.choice([1, 2, 4, 8])
        m = chunks * rng.choice([64, 200, 1000, 1536, 6144])
        shape = GemmShape(m, rng.choice([64, 384, 1000, 5120, 20480]), rng.choice([64, 512, 4096]), "bf16")
        order = list(range(chunks))
        rng.shuffle(order)
        bypass = frozenset(rng.sample(range(chunks), rng.randint(0, chunks)))
        yield shape, hw, chunks, tuple(order), bypass, rng.choice(gemm.tile_menu(hw))


@pytest.mark.parametrize(
    "case", list(_cases(80, 3)), ids=lambda c: f"{c[1].name}-{c[0].m}x{c[0].n}x{c[0].k}-{c[2]}"
)
def test_wave_reads_match_a_tile_by_tile_walk(case):
    shape, hw, chunks, order, bypass, tile = case
    plan = gemm._plan(shape, hw, hw.compute.cus, chunks, order, bypass, tile)
    want = _oracle_reads(shape, hw, chunks, order, bypass, tile)
    assert len(plan.waves) == len(want)
    for w, (_, reads) in zip(plan.waves, want, strict=True):
        assert w.read_bytes == pytest.approx(reads, rel=1e-12, abs=1e-6)
    # the distinct operand bytes per wave set the reuse distances: a wrong count moves the reads
    assert sum(w.read_bytes for w in plan.waves) == pytest.approx(sum(r for _, r in want), rel=1e-12)


def test_the_closed_form_is_the_walk_bit_for_bit():
    """A row-major raster's reuse in closed form (:func:`t3.ops.gemm._row_reuse`) gives the plan the walk
    gives, every float equal (the order of the sums included), over chunks, orders, bypassed stores, odd
    CU counts (waves that start mid-row) and stream-K."""
    rng = random.Random(11)
    presets = [load_hardware(h) for h in ("paper-80cu", "h100-8", "mi300x-8", "b200-8")]
    for _ in range(400):
        hw = rng.choice(presets)
        chunks = rng.choice([1, 1, 2, 3, 8, 16])
        m = chunks * rng.choice([1, 7, 64, 300, 1000, 2048])
        shape = GemmShape(m, rng.choice([8, 100, 1024, 3000, 12288]), rng.choice([16, 512, 4096]), "bf16")
        order = list(range(chunks))
        rng.shuffle(order)
        bypass = frozenset(x for x in range(chunks) if rng.random() < 0.4)
        cus = rng.choice([hw.compute.cus, hw.compute.cus // 3, 7, 1])
        tile, sk = rng.choice(gemm.TILES), rng.random() < 0.2
        args = (shape, hw, cus, chunks, tuple(order), bypass, tile, sk)
        assert gemm._plan(*args) == gemm._plan(*args, walk=True), args


def test_the_tile_choice_is_the_full_scans(monkeypatch):
    """Skipping a tile whose CU time alone is no better than the best so far, or dropping it while it is
    planned, never changes the plan."""
    cases = list(_cases(80, 7))
    got = [gemm.plan_gemm(s, hw, chunks=ch) for s, hw, ch, *_ in cases]
    gemm._PLANS.clear()
    monkeypatch.setattr(gemm, "_compute_bound_s", lambda *a: 0.0)  # never skip
    timed = gemm._plan_timed
    monkeypatch.setattr(gemm, "_plan_timed", lambda *a, limit=None, **k: timed(*a, **k))  # never drop
    full = [gemm.plan_gemm(s, hw, chunks=ch) for s, hw, ch, *_ in cases]
    gemm._PLANS.clear()
    assert got == full
    # and the bound is a bound: never above the planned alone time
    for s, hw, ch, _, _, tile in cases:
        for sk in gemm._decompositions(s, hw, hw.compute.cus, ch, frozenset(), tile):
            p = gemm._plan(s, hw, hw.compute.cus, ch, tuple(range(ch)), frozenset(), tile, sk)
            assert gemm._compute_bound_s(s, hw, hw.compute.cus, ch, tile, sk) <= p.alone_s(hw) * (1 + 1e-12)


def test_a_plan_is_dropped_only_when_it_cannot_beat_the_limit():
    """``_plan(..., limit=L)`` is the full plan when that plan's time alone is below L (to the choice's
    1e-12), and None otherwise; dropped plans are dropped within their first waves when they are far
    from L."""
    rng = random.Random(5)
    presets = [load_hardware(h) for h in ("paper-80cu", "h100-8", "mi300x-8", "b200-8")]
    dropped_early = 0
    for _ in range(300):
        hw = rng.choice(presets)
        chunks = rng.choice([1, 1, 2, 8])
        shape = GemmShape(
            chunks * rng.choice([64, 300, 2048, 8192]),
            rng.choice([100, 1024, 12288]),
            rng.choice([16, 4096]),
            "bf16",
        )
        tile, sk = rng.choice(gemm.TILES), rng.random() < 0.2
        bypass = frozenset(range(chunks - 1)) if rng.random() < 0.5 else frozenset()
        args = (shape, hw, hw.compute.cus, chunks, tuple(range(chunks)), bypass, tile, sk)
        full = gemm._plan(*args)
        t = full.alone_s(hw)
        assert gemm._plan_timed(*args) == (full, t)  # the planner's own sum is alone_s, bit for bit
        for limit in (t * rng.uniform(0.5, 1.0), t, t * (1 + 1e-13), t * rng.uniform(1.0, 2.0)):
            got = gemm._plan(*args, limit=limit)
            if t < limit * (1 - 1e-12):
                assert got == full, (args, limit)
            else:
                assert got is None, (args, limit)
        counted = []
        wave = gemm.Wave

        def count(*a, counted=counted, wave=wave, **k):
            counted.append(1)
            return wave(*a, **k)

        gemm.Wave = count
        try:
            if (
                len(full.waves) >= 20
                and gemm._plan(*args, limit=t * 0.5) is None
                and len(counted) < len(full.waves) // 2
            ):
                dropped_early += 1
        finally:
            gemm.Wave = wave
    assert dropped_early > 10


def test_a_plain_gemm_that_cannot_beat_the_limit_is_dropped_once_its_waves_repeat():
    """A plain GEMM's full waves repeat the wave ``period`` before once they copy it, so the time of the
    waves left is known at the first copy: a plan 1e-4 short of the limit is dropped within its first
    waves, where the CU-time bound of the waves left (0.16 % below this plan's time: its prologues) would
    keep it to near its end; 1e-6 above the limit it is the full plan. Oracle: the full plan's own time
    alone, and the bound's."""
    hw = load_hardware("paper-80cu")
    shape = GemmShape(65536, 12288, 24576, "bf16")  # 615 waves of 128 x 128 tiles on 80 CUs
    args = (shape, hw, hw.compute.cus, 1, (0,), frozenset(), (128, 128), False)
    full = gemm._plan(*args)
    t = full.alone_s(hw)
    assert len(full.waves) == 615
    assert gemm._compute_bound_s(shape, hw, hw.compute.cus, 1, (128, 128), False) < t * (1 - 1e-3)
    counted = []
    wave = gemm.Wave

    def count(*a, **k):
        counted.append(1)
        return wave(*a, **k)

    gemm.Wave = count
    try:
        assert gemm._plan(*args, limit=t * (1 - 1e-4)) is None
    finally:
        gemm.Wave = wave
    assert len(counted) < 30, len(counted)
    assert gemm._plan(*args, limit=t * (1 + 1e-6)) == full
