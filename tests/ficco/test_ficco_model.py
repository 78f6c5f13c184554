"""Schedules against closed forms; loss definitions against cases where they must be zero."""

import pytest

from t3.config.hardware import load_hardware
from t3.ficco.losses import LossModel
from t3.ficco.space import Axes, FiccoOperator, enumerate_space, legality, parse_name
from t3.schedules.ficco import comm_cus, ficco_schedule, gemm_alone_schedule, plan_pieces, shape_of
from t3.sim.engine import Engine


def _t(s):
    return Engine().run(s).makespan


@pytest.fixture(scope="module")
def mi():
    return load_hardware("mi300x-8")


def test_shard_allgather_uses_one_link_per_step_closed_form(mi):
    fop = FiccoOperator("ag-gemm", 4096, 512, 1024)
    c = fop.m // 8 * fop.k * fop.eb  # one shard
    t = _t(ficco_schedule(fop, mi, parse_name("shard-g8-M-cu"), mode="comm"))
    bw = mi.link.bandwidth_Bps * mi.collective.link_efficiency  # achievable link rate
    step = mi.link.latency_s + mi.compute.kernel_launch_s + c / bw
    assert t == pytest.approx(7 * step, rel=1e-9)


def test_ficco_allgather_uses_all_links_closed_form(mi):
    fop = FiccoOperator("ag-gemm", 4096, 512, 1024)
    c = fop.m // 8 * fop.k * fop.eb
    t = _t(ficco_schedule(fop, mi, parse_name("ficco-g8-M-cu"), mode="comm"))
    # each of the 7 links carries the shard in 8 serial pieces, all links at once; the CU kernel issues
    # a load and a store per byte and has enough CUs for all links at their achievable rate
    link = mi.link.bandwidth_Bps * mi.collective.link_efficiency
    assert 2 * 7 * link <= comm_cus(mi, 8) * mi.compute.cu_copy_Bps
    assert t == pytest.approx(8 * (mi.link.latency_s + mi.compute.kernel_launch_s) + c / link, rel=1e-9)
    # DMA: one engine per command, so a piece moves at min(engine, link)
    t = _t(ficco_schedule(fop, mi, parse_name("ficco-g8-M-dma"), mode="comm"))
    bw = min(mi.dma.bandwidth_Bps, link)
    assert t == pytest.approx(8 * (mi.link.latency_s + mi.dma.command_overhead_s) + c / bw, rel=1e-9)


@pytest.mark.parametrize("op", ["ag-gemm", "gemm-rs", "moe"])
def test_every_schedule_moves_the_bulk_link_bytes(mi, op):
    fop = FiccoOperator(op, 1024, 512, 256)
    legal, _ = enumerate_space(fop, mi)
    ref = ficco_schedule(fop, mi, parse_name("bulk-g1-M-cu")).traffic_per_gpu()["link"]
    assert ref == pytest.approx(fop.comm_bytes())
    for ax in legal:
        assert ficco_schedule(fop, mi, ax).traffic_per_gpu()["link"] == pytest.approx(ref), ax.name


def test_pieces_cover_the_gemm_flops(mi):
    for op in ("ag-gemm", "gemm-rs", "moe"):
        fop = FiccoOperator(op, 1024, 512, 256)
        for ax in enumerate_space(fop, mi)[0]:
            fl = sum(s.flops for p in plan_pieces(fop, mi, ax) for s, _ in shape_of(fop, ax, p, 0))
            assert fl == pytest.approx(fop.flops()), ax.name


@pytest.mark.parametrize(
    "name",
    ["ficco-g8-M-dma-s2", "shard-g64-M-cu", "ficco-g64-M-cu-p1", "bulk-g1-M-dma", "ficco-g8-N-dma-s2-rb"],
)
@pytest.mark.parametrize("op", ["ag-gemm", "gemm-rs", "moe"])
def test_symmetric_quotient_equals_all_gpu_mode(name, op):
    hw = load_hardware("h100-8")
    fop = FiccoOperator(op, 1024, 512, 256)
    ax = parse_name(name)
    if legality(fop, hw, ax) is not None:
        return
    a = _t(ficco_schedule(fop, hw, ax, symmetric=True))
    b = _t(ficco_schedule(fop, hw, ax, symmetric=False))
    assert a == pytest.approx(b, rel=1e-9)


def test_skewed_routing_conserves_rows_and_heats_gpu0():
    f = FiccoOperator("moe", 8000, 64, 64, skew=0.5)
    rows = f.expert_rows()
    assert sum(rows) == 8000 and rows[0] == max(rows)
    assert rows[0] / (8000 / 8) == pytest.approx(1.5, rel=1e-3)
    assert rows == sorted(rows, reverse=True)


def test_skew_slows_bulk_moe(mi):
    ax = parse_name("bulk-g1-M-dma")
    t0 = _t(ficco_schedule(FiccoOperator("moe", 512, 256, 256), mi, ax))
    t1 = _t(ficco_schedule(FiccoOperator("moe", 512, 256, 256, skew=0.5), mi, ax))
    assert t1 > t0


# ---- loss definitions -----------------------------------------------------------------------------
def test_bulk_has_no_losses(mi):
    lm = LossModel(FiccoOperator("gemm-rs", 1024, 512, 256), mi)
    for ex in ("cu", "dma"):
        e = lm.evaluate(Axes("bulk", 1, "M", ex))
        assert e.decomposition_s == 0.0 and e.contention_s == 0.0
        full = _t(ficco_schedule(lm.fop, mi, e.axes, "full"))
        assert _t(ficco_schedule(lm.fop, mi, e.axes, "ideal")) == pytest.approx(full, rel=1e-12)


def test_decomposition_loss_is_sum_of_pieces_minus_whole(mi):
    fop = FiccoOperator("ag-gemm", 4096, 1024, 1024)
    lm = LossModel(fop, mi)
    ax = parse_name("ficco-g8-M-dma")
    piece = _t(gemm_alone_schedule([(shape_of(fop, ax, plan_pieces(fop, mi, ax)[0], 0)[0][0], False)], mi, 8))
    whole = _t(
        gemm_alone_schedule(
            [
                (
                    fop_shape := shape_of(fop, Axes("bulk", 1), plan_pieces(fop, mi, Axes("bulk", 1))[0], 0)[
                        0
                    ][0],
                    False,
                )
            ],
            mi,
            8,
        )
    )
    assert fop_shape.m == 4096
    assert lm.decomposition_gemm_s(ax) == pytest.approx(8 * piece - whole, rel=1e-12)
    assert lm.decomposition_gemm_s(parse_name("ficco-g1-M-dma")) == 0.0


def test_comm_decomposition_loss_vanishes_without_overheads(mi):
    hw0 = mi.with_overrides(
        {"dma.command_overhead_s": 0.0, "compute.kernel_launch_s": 0.0, "link.latency_s": 0.0}
    )
    lm = LossModel(FiccoOperator("ag-gemm", 4096, 512, 512), hw0)
    assert lm.evaluate(parse_name("ficco-g64-M-dma")).decomposition_comm_s == pytest.approx(0.0, abs=1e-15)
    lm = LossModel(FiccoOperator("ag-gemm", 4096, 512, 512), mi)
    # DMA: 8 serial commands per link (8 overheads) instead of the bulk collective's one command and
    # one kernel launch
    assert lm.evaluate(parse_name("ficco-g8-M-dma")).decomposition_comm_s == pytest.approx(
        8 * mi.dma.command_overhead_s - (mi.dma.command_overhead_s + mi.compute.kernel_launch_s), rel=1e-9
    )


def test_contention_loss_vanishes_with_unlimited_hbm_and_dma(mi):
    fat = mi.with_overrides({"hbm.bandwidth_Bps": 1e18})
    fop = FiccoOperator("ag-gemm", 4096, 1024, 1024)
    e = LossModel(fop, fat).evaluate(parse_name("ficco-g8-M-dma-s2"))
    assert e.contention_s == pytest.approx(0.0, abs=1e-12 + 1e-9 * e.time_s)
    # a GEMM whose pieces fill every CU many times over: the CU kernel takes CUs away from it
    big = FiccoOperator("ag-gemm", 32768, 8192, 4096)
    e = LossModel(big, mi).evaluate(parse_name("ficco-g8-M-cu"))
    assert e.contention_s > 0


def test_ring_transfers_are_forwarded_hop_by_hop_closed_form():
    hw = load_hardware("paper-80cu")  # ring
    fop = FiccoOperator("ag-gemm", 4096, 512, 1024)
    c = fop.m // 8 * fop.k * fop.eb
    per = hw.link.latency_s + hw.compute.kernel_launch_s
    t = _t(ficco_schedule(fop, hw, parse_name("shard-g8-M-cu"), mode="comm"))
    assert t == pytest.approx(7 * (per + c / hw.link.bandwidth_Bps), rel=1e-9)
    # ficco on a ring: 8 pipelined passes of c/8 bytes; the one outgoing link still carries 7c bytes
    # (no bandwidth gain over shard) and pays 7 + 7 hop latencies on the critical path
    t = _t(ficco_schedule(fop, hw, parse_name("ficco-g8-M-cu"), mode="comm"))
    assert t == pytest.approx(7 * c / hw.link.bandwidth_Bps + (7 + 7) * per, rel=1e-9)


def test_contention_is_not_negative_when_fewer_cus_plan_better():
    # two streams of 16 row pieces; the GEMM pieces are planned for all 304 CUs in the ideal run and for
    # the 281 the CU kernel leaves in the real one.
    mi = load_hardware("mi300x-8", {"compute.cu_copy_Bps": 30e9})
    assert comm_cus(mi, 8) == 23  # the CU kernel takes 23 CUs: the GEMM keeps 281
    # Whichever plan set is better, the ideal is the better of the two isolated runs and the contention
    # loss is never negative.
    fop = FiccoOperator("ag-gemm", 4096, 4608, 768)
    ax = parse_name("ficco-g16-M-cu-s2")
    full = _t(ficco_schedule(fop, mi, ax, "full"))
    ideal = _t(ficco_schedule(fop, mi, ax, "ideal"))
    own = _t(ficco_schedule(fop, mi, ax, "ideal-own"))
    assert own <= full
    e = LossModel(fop, mi).evaluate(ax)
    assert e.ideal_s == pytest.approx(min(ideal, own), rel=1e-12) and e.contention_s >= 0.0


def test_batched_reduction_closed_form_and_traffic(mi):
    fop = FiccoOperator("gemm-rs", 1024, 512, 256)
    c = fop.m // 8 * fop.n * fop.eb  # one owner's block, sent by each peer
    ax = parse_name("shard-g8-M-dma-rb")
    t = _t(ficco_schedule(fop, mi, ax, mode="comm"))
    # 7 chained peer steps of one DMA command each, then one reduction kernel of the owner's N partials
    # (N reads + 1 write) at the HBM rate (all CUs move more than HBM can serve)
    assert 304 * mi.compute.cu_copy_Bps > mi.hbm.effective_Bps
    link = mi.link.bandwidth_Bps * mi.collective.link_efficiency
    step = mi.link.latency_s + mi.dma.command_overhead_s + c / min(mi.dma.bandwidth_Bps, link)
    red = mi.compute.kernel_launch_s + 9 * c / mi.hbm.effective_Bps
    assert t == pytest.approx(7 * step + red, rel=1e-9)
    # HBM traffic of the reductions: as the bulk reduce-scatter's (N reads + 1 write of a block),
    # against 3 bytes per received byte when every arrival is added as it lands
    rb = ficco_schedule(fop, mi, parse_name("ficco-g8-N-dma-rb")).traffic_per_gpu()
    inc = ficco_schedule(fop, mi, parse_name("ficco-g8-N-dma")).traffic_per_gpu()
    bulk = ficco_schedule(fop, mi, parse_name("bulk-g1-M-dma")).traffic_per_gpu()
    sent = 7 * c  # every partial crosses a link once: read at the sender, written at the owner
    assert rb["rs_read"] - sent == pytest.approx(8 * c) and rb["rs_write"] - sent == pytest.approx(c)
    assert rb["rs_read"] == pytest.approx(bulk["rs_read"]) and rb["rs_write"] == pytest.approx(
        bulk["rs_write"]
    )
    assert inc["rs_read"] - sent == pytest.approx(2 * 7 * c) and inc["rs_write"] - sent == pytest.approx(
        7 * c
    )
