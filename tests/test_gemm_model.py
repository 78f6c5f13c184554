"""The GEMM model (t3.ops.gemm): L2 hit curve, reuse with write-allocate pollution and bypass, K-loop
streaming, tile choice, and one model for every caller."""

from __future__ import annotations

import math

import numpy as np
import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.ops.gemm import (
    add_gemm,
    l2_hit,
    plan_gemm,
    stream_k_fixup_s,
    tile_epilogue_s,
    tile_flops_per_s,
    tile_l2_elems,
    tile_menu,
    tile_peak_flops_per_s,
)
from t3.schedules import RunOptions, get_config
from t3.schedules.t3 import staggered_plan
from t3.sim.engine import Engine
from t3.sim.schedule import ScheduleBuilder
from t3.workload import get_model, sublayer_operator
from t3.workload.sublayers import GemmShape


@pytest.fixture(scope="module")
def hw():
    return load_hardware("paper-80cu")


def test_l2_hit_curve_matches_poisson_closed_form_and_hashed_sets(hw):
    c = hw.compute
    sets = c.l2_usable_fraction * c.l2_bytes / (c.l2_line_bytes * c.l2_ways)
    for frac in (0.5, 1.0, 1.3, 2.0):
        d = frac * c.l2_bytes
        lam = d / (c.l2_line_bytes * sets)
        closed = sum(math.exp(-lam) * lam**j / math.factorial(j) for j in range(c.l2_ways))
        assert l2_hit(d, hw) == pytest.approx(closed, rel=1e-9)
    # brute force: hash d/line distinct lines uniformly over the sets; a line survives if fewer than
    # `ways` others land in its set
    rng = np.random.default_rng(0)
    s = int(sets)
    for frac in (0.9, 1.2):
        lines = int(frac * c.l2_bytes / c.l2_line_bytes)
        counts = np.bincount(rng.integers(0, s, size=lines), minlength=s)
        probe = rng.integers(0, s, size=20000)
        empirical = float(np.mean(counts[probe] < c.l2_ways))
        assert l2_hit(frac * c.l2_bytes, hw) == pytest.approx(empirical, abs=0.02)
    # monotone: more data touched in between, fewer hits
    ds = [x * c.l2_bytes for x in (0.1, 0.5, 0.9, 1.1, 1.5, 3.0)]
    hits = [l2_hit(d, hw) for d in ds]
    assert all(a >= b for a, b in zip(hits, hits[1:], strict=False)) and hits[0] > 0.999 and hits[-1] < 1e-3


def test_operands_that_fit_are_read_from_dram_once(hw):
    small = GemmShape(4096, 1024, 512)  # A 4 MB + B 1 MB: far below the 16 MB L2
    p = plan_gemm(small, hw)
    assert p.read_bytes == pytest.approx(small.m * small.k * 2 + small.k * small.n * 2, rel=1e-3)
    assert sum(sum(w.write_bytes.values()) for w in p.waves) == pytest.approx(small.out_bytes)


def test_t3_stores_bypass_the_l2_so_the_gemm_reads_no_more_and_less_when_b_does_not_fit(hw):
    for model, sub in (("t-nlg", "fc2"), ("t-nlg", "op"), ("mega-gpt-2", "fc2"), ("mega-gpt-2", "ip-bwd")):
        op = sublayer_operator(get_model(model), sub, 8)
        seq, _ = staggered_plan(op, hw)
        t3, _ = staggered_plan(op, hw, bypass=frozenset(range(7)))
        assert t3.read_bytes <= seq.read_bytes * (1 + 1e-12)
        b_bytes = op.gemm.k * op.gemm.n * 2
        if b_bytes > hw.compute.l2_bytes:  # B does not fit: every wave's output evicts part of it
            assert t3.read_bytes < 0.98 * seq.read_bytes
    # and the simulated runs count exactly those reads
    op = sublayer_operator(get_model("t-nlg"), "fc2", 8)
    r_seq = get_config("sequential").run(op, hw, RunOptions()).dram_bytes["gemm_read"]
    r_t3 = get_config("t3").run(op, hw, RunOptions()).dram_bytes["gemm_read"]
    assert r_t3 < 0.98 * r_seq


def test_column_raster_is_the_row_raster_of_the_transposed_product(hw):
    col = hw.with_overrides({"compute.raster": "column"})
    for m, n, k in ((8192, 4256, 2128), (4096, 12288, 1024)):
        a = plan_gemm(GemmShape(m, n, k), col, tile=(128, 128))
        b = plan_gemm(GemmShape(n, m, k), hw, tile=(128, 128))
        assert a.read_bytes == pytest.approx(b.read_bytes, rel=1e-9)
        assert [w.n_tiles for w in a.waves] == [w.n_tiles for w in b.waves]


def _alone(shape, hw, cus=None):
    b = ScheduleBuilder("g", hw, 2)
    plan = plan_gemm(shape, hw, cus=cus)
    add_gemm(b, 0, plan)
    return Engine().run(b.build()).makespan, plan


@pytest.mark.parametrize("preset", ["paper-80cu", "h100-8", "mi300x-8"])
@pytest.mark.parametrize(
    "mnk", [(8192, 4256, 2128), (4096, 4096, 256), (1024, 8192, 8192), (12288, 12288, 12288)]
)
def test_engine_gemm_alone_equals_the_plans_closed_form(preset, mnk):
    hw = load_hardware(preset)
    t, plan = _alone(GemmShape(*mnk, "fp16"), hw)
    assert t == pytest.approx(plan.alone_s(hw), rel=1e-6)


def test_prologue_is_exposed_and_grows_with_latency(hw):
    shape = GemmShape(8192, 4256, 532)  # short K: the first K stages are a large share of the reads
    t0, p = _alone(shape, hw)
    assert t0 > p.compute_s + hw.compute.kernel_launch_s  # no free prefetch a wave ahead
    slow = hw.with_overrides({"hbm.latency_s": 4 * hw.hbm.latency_s})
    t1, _ = _alone(shape, slow)
    assert t1 > t0
    w = p.waves[1]
    assert w.prologue_bytes == pytest.approx(w.read_bytes * hw.compute.k_stages * hw.compute.k_step / 532)


def test_compute_bound_gemm_runs_at_the_tile_rate_times_waves(hw):
    shape = GemmShape(8192, 8192, 8192)
    t, p = _alone(shape, hw)
    rate = tile_flops_per_s(hw, p.tile_m, p.tile_n, "fp16")
    per_wave = 2 * p.tile_m * p.tile_n * shape.k / rate
    waves = math.ceil(p.tiles / p.wave_size)
    assert p.compute_s == pytest.approx(per_wave * waves)
    assert p.compute_s <= t <= p.compute_s * 1.05 + hw.compute.kernel_launch_s


def test_tile_choice_is_the_least_alone_time_of_the_menu(hw):
    for shape in (GemmShape(1024, 4256, 532), GemmShape(8192, 4256, 2128), GemmShape(768, 768, 4096)):
        best = min(tile_menu(hw), key=lambda t: plan_gemm(shape, hw, tile=t).alone_s(hw))
        p = plan_gemm(shape, hw)
        assert (p.tile_m, p.tile_n) == best


def test_small_tiles_are_slower_per_flop_when_the_l2_cannot_feed_them():
    hw = load_hardware("paper-80cu", {"compute.gemm_efficiency": 1.0})
    big = tile_flops_per_s(hw, 128, 128, "fp16")
    small = tile_flops_per_s(hw, 64, 64, "fp16")
    assert small < big
    c = hw.compute
    assert small == pytest.approx(c.l2_Bps / c.cus * 2 * 64 * 64 / (128 * 2))


def test_one_gemm_model_for_run_ficco_and_the_selector():
    from t3.ficco.pipeline import gemm_alone_s
    from t3.schedules.ficco import gemm_alone_schedule

    for preset in ("h100-8", "mi300x-8"):
        hw = load_hardware(preset)
        shape = GemmShape(12288, 12288, 12288, "bf16")
        t_run, plan = _alone(shape, hw)
        t_ficco = Engine().run(gemm_alone_schedule([(shape, False)], hw, 8)).makespan
        t_sel = gemm_alone_s(shape, hw, hw.compute.cus)
        assert t_ficco == pytest.approx(t_run, rel=1e-9)
        assert t_sel == pytest.approx(t_run, rel=1e-6)


def test_exposed_epilogue_adds_each_tiles_store_at_the_cus_l2_share():
    """Closed form: with ``epilogue = "exposed"`` every tile costs its K loop plus ``tm tn bytes / (l2_Bps /
    cus)``; the whole GEMM's CU time grows by that per tile round, so short-K GEMMs lose the most."""
    hw = load_hardware("h100-8")
    over = hw.with_overrides({"compute.epilogue": "overlapped"})
    c = hw.compute
    for mnk in ((4096, 4096, 256), (8192, 8192, 1024), (8192, 8192, 8192)):
        shape = GemmShape(*mnk, "bf16")
        a = plan_gemm(shape, hw, tile=(256, 128))
        b = plan_gemm(shape, over, tile=(256, 128))
        epi = 256 * 128 * 2 / (c.l2_Bps / c.cus)
        assert tile_epilogue_s(hw, 256, 128, 2) == pytest.approx(epi)
        assert tile_epilogue_s(over, 256, 128, 2) == 0.0
        assert a.t_tile == pytest.approx(b.t_tile + epi, rel=1e-12)
        rounds = sum(math.ceil(w.n_tiles / w.cus_used) for w in a.waves)
        assert a.compute_s == pytest.approx(b.compute_s + rounds * epi, rel=1e-9)
    # the share the epilogue adds falls with K (the t3 measure rows: 4096x4096x256 at 46 % of 4096^3's rate)
    share = [
        plan_gemm(GemmShape(4096, 4096, k, "bf16"), hw).alone_s(hw)
        / plan_gemm(GemmShape(4096, 4096, k, "bf16"), over).alone_s(over)
        for k in (256, 1024, 8192)
    ]
    assert share[0] > share[1] > share[2] > 1.0


def test_multicast_takes_the_larger_block_once_per_cluster():
    hw = load_hardware("h100-8", {"compute.multicast": 2, "compute.gemm_efficiency": 1.0})
    c = hw.compute
    assert tile_l2_elems(hw, 256, 128) == 256 / 2 + 128
    assert tile_l2_elems(hw, 64, 128) == 128 / 2 + 64
    cap = c.l2_Bps / c.cus * 2 * 128 * 64 / ((128 / 2 + 64) * 2)
    assert tile_flops_per_s(hw, 128, 64, "bf16") == pytest.approx(min(cap, tile_peak_flops_per_s(hw, "bf16")))
    one = load_hardware("h100-8", {"compute.gemm_efficiency": 1.0})
    assert tile_flops_per_s(hw, 128, 64, "bf16") > tile_flops_per_s(one, 128, 64, "bf16")


def test_a_cta_pair_splits_the_larger_block_in_the_l2_and_in_shared_memory():
    """sm100's 2-CTA matrix instruction (``compute.mma_ctas`` = 2 on b200-8): the pair splits the larger block.
    Oracles: the L2 side is the multicast formula (half the larger block per CTA); the shared-memory side is
    cuBLAS's ``nvjet_sm100_tst_128x256_64x6_2x1_2cta`` kernel, whose name says 6 stages of 64 of K for a
    128 x 256 tile: (128 + 256 / 2) x 64 bf16 elements per stage fit 6 times in 232448 - 16660 B, where
    the whole block (128 + 256) would fit 4. Without the pair (mma_ctas = 1) the same preset keeps 4."""
    from t3.ops.gemm import tile_stages

    hw = load_hardware("b200-8")
    assert hw.compute.mma_ctas == 2 and hw.compute.multicast == 1
    assert tile_stages(hw, 128, 256, 2) == 6
    assert tile_l2_elems(hw, 128, 256) == 128 + 256 / 2 and tile_l2_elems(hw, 256, 128) == 256 / 2 + 128
    # a 100-row output has one row of tiles: a pair along M (sharing the 256 columns' block) has no partner
    # tile, a pair along N shares the 100 in-bounds rows
    assert tile_l2_elems(hw, 128, 256, (100, 4096)) == 100 + 256
    assert tile_l2_elems(hw, 256, 128, (100, 4096)) == 100 / 2 + 128
    one = load_hardware("b200-8", {"compute.mma_ctas": 1})
    assert tile_stages(one, 128, 256, 2) == 4 and tile_l2_elems(one, 128, 256) == 384
    assert tile_flops_per_s(hw, 128, 128, "bf16") > tile_flops_per_s(one, 128, 128, "bf16")
    # a 128-row GEMM of long K is L2-bound on b200-8's tiles: the pair makes it faster, never slower
    shape = GemmShape(128, 6144, 4096, "bf16")
    assert plan_gemm(shape, hw).alone_s(hw) < plan_gemm(shape, one).alone_s(one)
    with pytest.raises(ConfigError, match="compute.mma_ctas"):
        load_hardware("b200-8", {"compute.mma_ctas": 3})


def test_stream_k_spreads_the_partial_last_wave_over_every_cu():
    """Closed form of the hybrid data-parallel + stream-K plan: whole waves as before, the last partial
    wave's ``n`` tiles cost ``n t_main / cus + t_epilogue + fixup`` on all CUs; chosen only where faster,
    never for a GEMM of one partial wave nor for T3's chunked plans."""
    hw = load_hardware("h100-8", {"compute.stream_k": True})
    dp = load_hardware("h100-8")
    c = hw.compute
    shape = GemmShape(1024, 9216, 14336, "fp8")  # 4 x 72 = 288 tiles of 256x128: 2 waves + 24 tiles
    p = plan_gemm(shape, hw, tile=(256, 128))
    q = plan_gemm(shape, dp, tile=(256, 128))
    assert p.stream_k and not q.stream_k
    t_main = 2 * 256 * 128 * shape.k / tile_flops_per_s(hw, 256, 128, "fp8")
    last = p.waves[-1]
    assert last.n_tiles == 288 - 2 * c.cus and last.cus_used == c.cus
    expect = last.n_tiles * t_main / c.cus + tile_epilogue_s(hw, 256, 128, 2) + stream_k_fixup_s(hw, 256, 128)
    assert last.compute_s == pytest.approx(expect, rel=1e-12)
    assert p.waves[0].compute_s == q.waves[0].compute_s
    assert p.alone_s(hw) < q.alone_s(dp)
    # one partial wave (fewer tiles than CUs) and chunked plans keep whole tiles
    assert not plan_gemm(GemmShape(512, 8192, 8192, "bf16"), hw).stream_k
    assert not plan_gemm(shape, hw, chunks=8).stream_k
    # the engine runs the plan's closed form
    t, plan = _alone(shape, hw)
    assert plan.stream_k and t == pytest.approx(plan.alone_s(hw), rel=1e-6)


def test_fp8_gemms_write_a_16_bit_output():
    """The libraries' FP8 GEMMs write BF16/FP16 (torch._scaled_mm's out_dtype, cuBLASLt's D type): the
    output bytes and each tile's exposed epilogue are 16-bit ones; other dtypes write their own."""
    for dtype, out in (("fp8", 2), ("bf16", 2), ("fp16", 2), ("fp32", 4)):
        s = GemmShape(1024, 512, 256, dtype)
        assert s.out_elem_bytes == out and s.out_bytes == 1024 * 512 * out
    hw = load_hardware("h100-8")
    r8 = api.gemm(8192, 8192, 1024, dtype="fp8", hardware=hw)
    assert r8["epilogue_s"] == pytest.approx(tile_epilogue_s(hw, 256, 128, 2), rel=1e-12)


def test_an_output_type_set_by_the_caller_is_what_each_tile_stores():
    """``out_dtype`` (e.g. cublasGemmEx with an FP32 C) sets the output's bytes: the plan writes m x n x 4
    bytes and each tile's exposed epilogue stores 4-byte elements; FP32 output is never faster; None is
    the library's default (the row above), echoed as the type charged."""
    hw = load_hardware("h100-8")
    s = GemmShape(2048, 2048, 2048, "fp16", "fp32")
    assert s.out_elem_bytes == 4 and s.out_bytes == 2048 * 2048 * 4
    assert GemmShape(2048, 2048, 2048, "fp8", "fp32").out_elem_bytes == 4
    plan = plan_gemm(s, hw)
    assert sum(sum(w.write_bytes.values()) for w in plan.waves) == pytest.approx(2048 * 2048 * 4, rel=1e-12)
    r32 = api.gemm(2048, 2048, 2048, dtype="fp16", hardware=hw, out_dtype="fp32")
    r16 = api.gemm(2048, 2048, 2048, dtype="fp16", hardware=hw)
    tm, tn = (int(x) for x in r32["tile"].split("x"))
    assert r32["epilogue_s"] == pytest.approx(tile_epilogue_s(hw, tm, tn, 4), rel=1e-12)
    assert r32["time_s"] > r16["time_s"]
    assert (r32["out_dtype"], r16["out_dtype"]) == ("fp32", "fp16")
    assert api.gemm(2048, 2048, 2048, dtype="fp8", hardware=hw)["out_dtype"] == "bf16"


# ---- TF32: FP32 operands on the TF32 tensor-core path ------------------------------------------------------
def test_tf32_runs_at_the_datasheet_rate_with_four_byte_operands():
    """A tile's TF32 rate is the datasheet's TF32 peak per SM (half of BF16's on H100: 494.7 of 989.4 TFLOPS)
    at the GEMM clock and efficiency, unless the L2 feeds it slower: with operands twice as wide its L2
    intensity is half BF16's, so the bound is min(peak, L2 share x intensity) computed here by hand."""
    from t3.ops.gemm import tile_flops_per_s, tile_l2_elems

    hw = load_hardware("h100-8")
    c = hw.compute
    assert c.matrix_flops_per_clk_per_cu["tf32"] * c.cus * c.clock_hz == pytest.approx(494.7e12, rel=1e-3)
    for tm, tn in ((256, 128), (128, 64), (64, 64)):
        peak = c.matrix_flops_per_clk_per_cu["tf32"] * c.gemm_clock("tf32") * c.gemm_efficiency
        fed = c.l2_Bps / c.cus * 2.0 * tm * tn / (tile_l2_elems(hw, tm, tn) * 4)
        assert tile_flops_per_s(hw, tm, tn, "tf32") == pytest.approx(min(peak, fed), rel=1e-12)
    big = api.gemm(8192, 8192, 8192, "tf32", hardware=hw)
    assert big["tflops"] < 0.5 * c.matrix_flops_per_clk_per_cu["bf16"] * c.cus * c.clock_hz / 1e12
    assert big["out_dtype"] == "tf32"  # (four-byte FP32 output, as cuBLAS's CUDA_R_32F C)


def test_tf32_is_refused_where_the_gpu_has_no_tf32_rate():
    with pytest.raises(ConfigError, match="mi355x-8' has no matrix rate for tf32"):
        api.gemm(4096, 4096, 4096, "tf32", hardware="mi355x-8")


# ---- an output narrower than one tile: edge tiles load and store only their in-bounds part ---------------
def test_a_tile_of_a_narrow_output_loads_only_its_in_bounds_operands():
    """Written out by hand on h100-8 with 2-CTA multicast (clusters sharing the larger block): a 128 x 64
    tile of a 16-row output takes 16 / 2 + 64 elements per K from the L2 (its A block's 16 rows, multicast
    to the cluster's two CTAs, and its B block's 64 columns), not 128 / 2 + 64; a 64 x 128 tile, whose 2x1
    cluster would share the B block with the tile below, has no tile below on one tile row: 128 + 16,
    unshared. An output at least as wide as the tile keeps the whole tile's count; without multicast
    (the preset as shipped) the in-bounds rows and columns alone."""
    from t3.ops.gemm import tile_extent, tile_flops_per_s, tile_l2_elems

    assert tile_l2_elems(load_hardware("h100-8"), 128, 64, (16, 4096)) == 16 + 64
    hw = load_hardware("h100-8", {"compute.multicast": 2})
    c = hw.compute
    assert tile_extent(16, 4096, (128, 64)) == (16, 64)
    assert tile_extent(4096, 40, (128, 64)) == (128, 40)
    assert tile_extent(4096, 4096, (128, 64)) == (128, 64)
    assert tile_l2_elems(hw, 128, 64, (16, 4096)) == 16 / 2 + 64
    assert tile_l2_elems(hw, 64, 128, (16, 4096)) == 128 + 16
    assert tile_l2_elems(hw, 64, 128, (4096, 4096)) == tile_l2_elems(hw, 64, 128) == 128 / 2 + 64
    # one column of tiles: the 1x2 cluster's partner has no tile, nothing shared
    assert tile_l2_elems(hw, 256, 128, (4096, 40)) == 256 + 40
    assert tile_l2_elems(hw, 256, 128, (4096, 128)) == 256 + 128
    assert tile_l2_elems(hw, 256, 128, (4096, 129)) == 256 / 2 + 128
    # the tile's rate: its whole tile's FLOPs (the matrix instructions run on the padded tile) over the
    # bytes it loads, capped by the matrix peak
    fed = c.l2_Bps / c.cus * 2.0 * 128 * 64 / ((16 / 2 + 64) * 2)
    want = min(fed, tile_peak_flops_per_s(hw, "bf16"))
    assert tile_flops_per_s(hw, 128, 64, "bf16", (16, 4096)) == pytest.approx(want, rel=1e-12)


def test_a_decode_gemm_reads_its_operands_once_and_is_bound_by_the_hbm():
    """M = 16 (a decode step's tokens), N = K = 4096 on h100-8: fewer tiles than SMs, one wave; its DRAM
    reads are the operands' true bytes, (M K + K N) x 2 (not M padded to the tile's rows), and it takes at
    least those bytes at the HBM's effective rate plus the launch. No faster with more rows of the same
    tile count: M = 64 costs at least as much."""
    hw = load_hardware("h100-8")
    m, n, k = 16, 4096, 4096
    plan = plan_gemm(GemmShape(m, n, k, "bf16"), hw)
    assert len(plan.waves) == 1
    assert plan.read_bytes == pytest.approx((m * k + k * n) * 2, rel=1e-12)
    t = plan.alone_s(hw)
    assert t >= hw.compute.kernel_launch_s + plan.read_bytes / hw.hbm.effective_Bps
    assert t <= plan_gemm(GemmShape(64, n, k, "bf16"), hw).alone_s(hw)
    r = api.gemm(m, n, k, hardware=hw)
    tm, tn = (int(x) for x in r["tile"].split("x"))
    assert r["tile_flops_per_s"] == tile_flops_per_s(hw, tm, tn, "bf16", (m, n))


# ---- split-K: few tiles of long K -----------------------------------------------------------------------
def test_a_split_k_plan_is_its_closed_form():
    """128 x 1024 x 8192 on h100-8 (8 tiles of 128 x 128 on 132 SMs) written out by hand for each split s:
    one wave of 8 s thread blocks, each a 1/s slice of the tile's K loop plus its FP32 partial's store at the
    CU's L2 share, then the 8 s partials read back and the output written over the wave's CUs at their
    share; the operands read from DRAM once; two kernel launches (the GEMM's and the reduction's)."""
    from t3.ops.gemm import _plan, tile_flops_per_s

    hw = load_hardware("h100-8")
    c = hw.compute
    shape = GemmShape(128, 1024, 8192, "bf16")
    share = c.l2_Bps / c.cus
    for s in (2, 4, 16):
        p = _plan(shape, hw, c.cus, 1, (0,), frozenset(), (128, 128), split=s)
        (w,) = p.waves
        t_main = 2 * 128 * 128 * 8192 / tile_flops_per_s(hw, 128, 128, "bf16", (128, 1024))
        used = min(8 * s, c.cus)
        want = t_main / s + 128 * 128 * 4 / share + 8 * (s * 128 * 128 * 4 + 128 * 128 * 2) / (used * share)
        assert w.compute_s == pytest.approx(want, rel=1e-12)
        assert w.cus_used == used and w.n_tiles == 8 and p.blocks == 8 * s
        assert w.read_bytes == pytest.approx((128 * 8192 + 8192 * 1024) * 2, rel=1e-12)
        assert w.prologue_bytes == pytest.approx(w.read_bytes * c.k_stages * c.k_step * s / 8192, rel=1e-12)
        assert p.launch_s(hw) == 2 * c.kernel_launch_s
        assert p.alone_s(hw) == pytest.approx(2 * c.kernel_launch_s + sum(p.wave_alone_s(w, hw)), rel=1e-12)


def test_the_split_is_the_fastest_candidate_and_only_where_tiles_leave_cus_idle():
    """The planner's split is the least-time one among the allowed splits of the tile it picks whole (a
    brute-force scan of ``_plan``: the menu's tiles whole, then 2 to ``compute.split_k`` slices of the best
    while its tiles leave half the CUs idle and the slices fit one wave); a GEMM of more tiles, a chunked
    (staggered) one, or a preset whose library does not split (``compute.split_k = 1``) is never split."""
    from t3.ops.gemm import _plan, tile_menu

    for hwn, shape in (
        ("h100-8", GemmShape(64, 1024, 16384, "bf16")),
        ("mi300x-8", GemmShape(32, 4096, 4096, "bf16")),
    ):
        hw = load_hardware(hwn)
        c = hw.compute
        got = plan_gemm(shape, hw)
        best = None
        for t in tile_menu(hw):
            a = _plan(shape, hw, c.cus, 1, (0,), frozenset(), t).alone_s(hw)
            if best is None or a < best[0] * (1 - 1e-12):
                best = (a, t, 1)
        tiles = -(-shape.m // best[1][0]) * -(-shape.n // best[1][1])
        assert 2 * tiles <= c.cus
        for s in range(2, min(c.split_k, c.cus // tiles, shape.k // (c.k_stages * c.k_step)) + 1):
            a = _plan(shape, hw, c.cus, 1, (0,), frozenset(), best[1], split=s).alone_s(hw)
            if a < best[0] * (1 - 1e-12):
                best = (a, best[1], s)
        assert (got.alone_s(hw), (got.tile_m, got.tile_n), got.split_k) == best
        assert got.split_k > 1
        assert api.gemm(shape.m, shape.n, shape.k, hardware=hw)["split_k"] == got.split_k
        assert plan_gemm(shape, load_hardware(hwn, {"compute.split_k": 1})).split_k == 1
        assert plan_gemm(GemmShape(shape.m * 8, shape.n, shape.k, "bf16"), hw, chunks=8).split_k == 1
    # 128 tiles on 132 SMs run one CTA per tile, as cuBLAS's grid for this shape shows (kernel-facts.json)
    assert plan_gemm(GemmShape(128, 8192, 8192, "bf16"), load_hardware("h100-8")).split_k == 1
    assert plan_gemm(GemmShape(8192, 8192, 8192, "bf16"), load_hardware("h100-8")).split_k == 1


# ---- K stages per tile: as many as fit in shared memory ---------------------------------------------------
def _measured_kernels() -> list[tuple[str, int, int, int, int]]:
    """(gpu, tile rows, tile columns, K stages, shared memory) of every cuBLAS kernel `t3 measure`'s kernel
    facts recorded, read from its name (``..._{tm}x{tn}_{k_step}x{stages}_...``) and its launch."""
    import json
    import re
    from pathlib import Path

    out = []
    for f in sorted(Path(__file__).resolve().parents[1].glob("measurements/*/kernel-facts.json")):
        for g in json.loads(f.read_text())["gemms"]:
            for kern in g["kernels"]:
                m = re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_", kern["name"])
                if m and kern["name"].startswith("nvjet_sm90"):
                    tm, tn, _, stages = (int(x) for x in m.groups())
                    out.append((f.parent.name, tm, tn, stages, int(kern["shared memory"])))
    return out


def test_each_tile_keeps_the_stages_cublas_kernels_keep():
    """The oracle is the measured kernels: on h100-8 / h200-8 each recorded cuBLAS kernel's stage count (from
    its name) is what fits in the preset's shared memory beside its epilogue, and its shared memory is those
    stages plus at most the preset's epilogue bytes. Four tile shapes, three to eight stages."""
    from t3.ops.gemm import tile_stages

    kernels = _measured_kernels()
    assert {(tm, tn) for _, tm, tn, _, _ in kernels} >= {(320, 128), (256, 128), (128, 128), (128, 64)}
    for gpu, tm, tn, stages, smem in kernels:
        hw = load_hardware(f"{gpu}-8")
        assert tile_stages(hw, tm, tn, 2) == stages, (gpu, tm, tn)
        stage = (tm + tn) * hw.compute.k_step * 2
        assert stages * stage < smem <= stages * stage + hw.compute.smem_epilogue_bytes
        assert smem <= hw.compute.smem_bytes


def test_a_smaller_tile_keeps_more_in_flight_and_a_preset_without_shared_memory_keeps_k_stages():
    """On h100-8 a decode GEMM's 128 x 64 tiles keep 8 stages (7 in flight), where k_stages alone would keep 4
    (3 in flight): its memory-bound wave is faster, never slower. mi300x-8 gives no shared memory: every tile
    keeps its k_stages."""
    from t3.ops.gemm import tile_stages

    hw = load_hardware("h100-8")
    assert tile_stages(hw, 128, 64, 2) == 8 and tile_stages(hw, 256, 128, 2) == hw.compute.k_stages
    four = hw.model_copy(
        update={"compute": hw.compute.model_copy(update={"smem_bytes": None, "smem_epilogue_bytes": 0})}
    )
    shape = GemmShape(16, 4096, 4096, "bf16")
    deep, flat = plan_gemm(shape, hw, tile=(128, 64)), plan_gemm(shape, four, tile=(128, 64))
    assert deep.waves[0].window_bytes == pytest.approx(flat.waves[0].window_bytes * 7 / 3, rel=1e-12)
    assert deep.alone_s(hw) < flat.alone_s(four)
    mi = load_hardware("mi300x-8")
    assert mi.compute.smem_bytes is None
    assert {tile_stages(mi, tm, tn, 2) for tm, tn in tile_menu(mi)} == {mi.compute.k_stages}


def test_shared_memory_fields_are_checked_by_name():
    from t3.config.hardware import Compute

    base = load_hardware("h100-8").compute.model_dump()
    with pytest.raises(ValueError, match="smem_epilogue_bytes: set without smem_bytes"):
        Compute(**{**base, "smem_bytes": None})
    with pytest.raises(ValueError, match="smem_epilogue_bytes: 232448 leaves none of smem_bytes"):
        Compute(**{**base, "smem_epilogue_bytes": 232448})
