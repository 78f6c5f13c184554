"""T3 mechanism: address maps, byte accounting against closed forms, tracker, MCA, symmetry."""

import math

import pytest
from conftest import assert_same_outcome

from t3.api import run
from t3.config.hardware import load_hardware
from t3.errors import ConfigError, ScheduleError
from t3.hardware import AddressMap, McaPolicy, direct_rs_maps, mca_threshold, ring_rs_maps, stagger_order
from t3.ops.gemm import plan_gemm
from t3.schedules import RunOptions, get_config
from t3.schedules.t3 import staggered_plan
from t3.workload import get_model, sublayer_operator

MESH_NMC = {"nmc.present": True}  # MI300X has no NMC; the direct-RS mapping is tested on its mesh with it


def _op(model="t-nlg", sub="op", tp=8, tokens=2048):
    return sublayer_operator(get_model(model), sub, tp, tokens=tokens)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_map_follows_the_stagger(n):
    maps = ring_rs_maps(n)
    for c in range(n):
        # chunk c: produced first by GPU c, then by c-1, ..., last by c+1 which keeps it
        producers = [(c - s) % n for s in range(n)]
        for s, g in enumerate(producers):
            assert stagger_order(g, n)[s] == c
            m = maps[g].lookup(c)
            want = "remote" if s == 0 else ("local" if s == n - 1 else "dma")
            assert m.kind == want
            if want != "local":
                assert m.peer == (g - 1) % n
            if want == "dma":
                assert m.trigger_count == 2 and m.op == "update"


def test_direct_map_sends_to_owner():
    n = 4
    maps = direct_rs_maps(n)
    for g in range(n):
        order = stagger_order(g, n)
        assert maps[g].lookup(order[-1]).kind == "local"
        for c in order[:-1]:
            assert maps[g].lookup(c).kind == "remote" and maps[g].lookup(c).peer == (c + 1) % n


def test_address_map_rejects_bad_mappings():
    m = AddressMap(1, 4)
    with pytest.raises(ScheduleError, match="itself"):
        m.remote_map(0, 1)
    m.remote_map(0, 0)
    with pytest.raises(ScheduleError, match="twice"):
        m.dma_map(0, 2, 2)
    with pytest.raises(ScheduleError, match="outside"):
        m.remote_map(7, 2)
    assert m.lookup(3).kind == "local"


@pytest.mark.parametrize("config", ["t3", "t3-mca"])
@pytest.mark.parametrize(
    "hw_name,tp,over", [("paper-80cu", 8, {}), ("paper-80cu", 4, {}), ("mi300x-8", 8, MESH_NMC)]
)
def test_symmetric_equals_all_gpus(config, hw_name, tp, over):
    hw = load_hardware(hw_name, over)
    op = _op(tp=tp)
    fast = get_config(config).run(op, hw, RunOptions(symmetric=True))
    full = get_config(config).run(op, hw, RunOptions(symmetric=False))
    assert_same_outcome(fast, full)
    for k in ("peak_occupancy", "triggers", "stall_s"):
        assert fast.extra["tracker"][k] == pytest.approx(full.extra["tracker"][k], rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("config", ["t3", "t3-mca"])
@pytest.mark.parametrize("model,tp", [("t-nlg", 2), ("t-nlg", 4), ("t-nlg", 8), ("gpt-3", 32)])
def test_bytes_match_closed_forms(config, model, tp):
    """Ring T3 per GPU: GEMM writes S (S/N remote), DMA reads (N-2)/N S, NMC updates (N-1)/N S,
    link (N-1)/N S for the RS plus (N-1)/N S for the AG; tracker triggers = (N-2) x tiles per chunk."""
    hw = load_hardware("paper-80cu")
    op = _op(model=model, tp=tp)
    out = get_config(config).run(op, hw, RunOptions())
    s, n = op.comm_bytes, tp
    d = out.dram_bytes
    assert d["gemm_write"] == pytest.approx(s * (n - 1) / n)
    assert out.extra["gemm_write_bytes"]["remote"] == pytest.approx(s / n)
    assert d["rs_read"] == pytest.approx(s * (n - 2) / n)
    assert d["rs_write"] == pytest.approx(s * (n - 1) / n)
    # NCCL's out-of-place ring all-gather: copySend, recvCopySend, recv (t3.ops.collectives)
    assert d["ag_read"] == pytest.approx(s) and d["ag_write"] == pytest.approx(s * (2 * n - 1) / n)
    assert out.link_bytes == pytest.approx(2 * s * (n - 1) / n)
    plan, columns = staggered_plan(op, hw)
    # 2048 tokens / 32 GPUs = 64 rows < a 128-row tile: chunks are taken along the output columns
    assert columns == (tp == 32) and out.extra["chunks"] == ("columns" if columns else "rows")
    assert out.extra["tracker"]["triggers"] == (n - 2) * plan.tiles_m_chunk * plan.tiles_n
    # the GEMM reads are those of the staggered plan
    assert d["gemm_read"] == pytest.approx(plan.read_bytes)


def test_direct_mapping_bytes():
    hw = load_hardware("mi300x-8", MESH_NMC)
    op = _op(tp=8)
    out = get_config("t3").run(op, hw, RunOptions())
    s, n = op.comm_bytes, 8
    assert out.extra["rs_algorithm"] == "direct"
    assert out.dram_bytes["rs_read"] == 0
    assert out.dram_bytes["rs_write"] == pytest.approx(s * (n - 1) / n)
    assert out.dram_bytes["gemm_write"] == pytest.approx(s / n)
    assert out.extra["tracker"]["triggers"] == 0


def test_t3_needs_nmc():
    with pytest.raises(ConfigError, match="nmc.present"):
        get_config("t3").run(_op(), load_hardware("h100-8"), RunOptions())


@pytest.mark.parametrize("sub", ["op", "fc2", "fc1-bwd", "ip-bwd"])
def test_t3_beats_sequential_on_tnlg_tp8(sub):
    seq = run("t-nlg", 8, sub, "sequential")["time_s"]
    t3 = run("t-nlg", 8, sub, "t3")["time_s"]
    mca = run("t-nlg", 8, sub, "t3-mca")["time_s"]
    assert t3 < seq and mca < seq
    # the RS runs inside the GEMM: T3 is never better than the larger of GEMM and RS, plus the AG
    ideal = run("t-nlg", 8, sub, "ideal-gemm-rs-overlap")
    assert t3 >= ideal["time_s"] * 0.9


def test_mca_helps_large_fc_layers():
    assert run("t-nlg", 8, "fc2", "t3-mca")["time_s"] < run("t-nlg", 8, "fc2", "t3")["time_s"]


def test_tracker_entries_sweep():
    """Fewer entries -> peak occupancy bounded by the table, more stall; too few -> clear error."""
    op = _op(sub="fc2", tokens=8192)
    prev_stall = -1.0
    for entries in (512, 256, 160):
        hw = load_hardware("paper-80cu", {"tracker.entries": entries})
        out = get_config("t3").run(op, hw, RunOptions())
        tr = out.extra["tracker"]
        assert tr["entries"] == entries and tr["peak_occupancy"] <= entries
        assert tr["stall_s"] >= prev_stall
        prev_stall = tr["stall_s"]
    hw = load_hardware("paper-80cu", {"tracker.entries": 64})
    with pytest.raises(ScheduleError, match="tracker.entries"):
        get_config("t3").run(op, hw, RunOptions())


def test_tracker_granularity_scales_entries():
    op = _op(sub="fc2")
    base = get_config("t3").run(op, load_hardware("paper-80cu"), RunOptions()).extra["tracker"]
    hw = load_hardware(
        "paper-80cu",
        {"tracker.wavefront_tiles_per_tile": 4, "tracker.granularity_tiles": 2, "tracker.entries": 4096},
    )
    fine = get_config("t3").run(op, hw, RunOptions()).extra["tracker"]
    assert fine["triggers"] == 2 * base["triggers"]


def test_mca_policy_closed_form():
    p = McaPolicy(threshold=0.4, starvation_share=0.05)
    # GEMM (level 0) leaves the starvation share, or less if communication asks less (work-conserving)
    assert p.available(100.0, 100.0, 0, 20.0) == pytest.approx(95.0)
    assert p.available(100.0, 100.0, 0, 2.0) == pytest.approx(98.0)
    assert p.available(100.0, 100.0, 0, 0.0) == pytest.approx(100.0)
    # communication: everything left while the GEMM uses < 40 %, else only the starvation share
    assert p.available(100.0, 70.0, 1, 0.0) == pytest.approx(70.0)
    assert p.available(100.0, 50.0, 1, 0.0) == pytest.approx(5.0)
    assert p.available(100.0, 2.0, 1, 0.0) == pytest.approx(2.0)


def test_mca_in_the_engine():
    """A GEMM-like op (100 B on a 100 B/s HBM) and a link-bound update (10 B of HBM and of a 10 B/s link).
    Default arbitration: demand-proportional, both at 100/110 of their max rate -> both end at 1.1 s.
    MCA: the GEMM gets 95 B/s (ends at 100/95 s), the update the 5 B/s starvation share meanwhile."""
    from t3.sim import Engine, Policy
    from t3.sim.schedule import Op, Resource, Schedule

    def sched(policy, prio_comm, link=10.0):
        res = [Resource("hbm", 100.0, "hbm", 0, policy), Resource("link", link, "link", 0)]
        ops = [
            Op(0, 0, "gemm", "gemm-load", "gemm", [(0, 100.0)], [], 0.0, [], {}, 0),
            Op(1, 0, "upd", "dma", "rs", [(0, 10.0), (1, 10.0)], [], 0.0, [], {}, prio_comm),
        ]
        return Schedule("t", ops, res, 1, [0])

    d = Engine().run(sched(Policy(), 0))
    assert d.end[0] == pytest.approx(1.1) and d.end[1] == pytest.approx(1.1)
    m = Engine().run(sched(McaPolicy(0.5, 0.05), 1))
    t_gemm = 100 / 95
    assert m.end[0] == pytest.approx(t_gemm)
    assert m.end[1] == pytest.approx(t_gemm + (10 - 5 * t_gemm) / 10)
    # work-conserving: an update that can only use 2 B/s (slow link) leaves the GEMM 98 B/s, not 95
    w = Engine().run(sched(McaPolicy(0.5, 0.05), 1, link=2.0))
    assert w.end[0] == pytest.approx(100 / 98) and w.end[1] == pytest.approx(5.0)


def test_mca_threshold_from_first_stage():
    hw = load_hardware("paper-80cu")
    op = _op(sub="fc2", tokens=8192)
    plan = plan_gemm(op.gemm, hw, chunks=8)
    theta, u = mca_threshold(plan, hw)
    cap = hw.hbm.effective_Bps
    first = [w for w in plan.waves if any(c == 0 for c, _, _ in w.segments)]
    nbytes = sum(w.read_bytes + sum(w.write_bytes.values()) for w in first)
    t = sum(max(w.compute_s, (w.read_bytes + sum(w.write_bytes.values())) / cap) for w in first)
    assert u == pytest.approx(nbytes / t / cap)
    assert theta == pytest.approx(min(hw.mca.occupancy_threshold, max(hw.mca.starvation_share, u)))
    hw2 = load_hardware("paper-80cu", {"mca.intensity_scale": 100.0})
    assert mca_threshold(plan, hw2)[0] == hw.mca.occupancy_threshold


def test_ideal_rs_nmc_closed_form():
    """RS with NMC, idle ring: launch + (N-1)(latency + max(c/B_link, 2c/B_hbm, 2c/(channels x cu_copy)))
    (a step reads c and sends it as c of updates: a load and a store per byte on the kernel's CUs)."""
    hw = load_hardware("paper-80cu", {"link.bandwidth_Bps": 1e12})  # make HBM/CU the limit
    op = _op(tp=4)
    out = get_config("ideal-rs-nmc").run(op, hw, RunOptions())
    c = op.comm_bytes / 4
    step = hw.link.latency_s + max(
        c / hw.link.bandwidth_Bps,
        2 * c / hw.hbm.effective_Bps,
        2 * c / (hw.collective.channels * hw.compute.cu_copy_Bps),
    )
    assert out.breakdown_s["reduce_scatter"] == pytest.approx(hw.compute.kernel_launch_s + 3 * step, rel=1e-9)
    ideal = get_config("ideal-gemm-rs-overlap").run(op, hw, RunOptions())
    assert out.breakdown_s["reduce_scatter"] < ideal.breakdown_s["reduce_scatter"]
    assert out.time_s == pytest.approx(
        max(out.breakdown_s["gemm"], out.breakdown_s["reduce_scatter"]) + out.breakdown_s["all_gather"]
    )


def test_deterministic():
    a = run("t-nlg", 8, "fc2", "t3-mca")
    b = run("t-nlg", 8, "fc2", "t3-mca")
    assert a == b and not math.isnan(a["time_s"])


@pytest.mark.parametrize("tp", [8, 16, 32])
def test_every_zoo_model_runs(tp):
    """The mechanism runs for every zoo model at TP 8/16/32 on paper-80cu; RS+AG link bytes are exact."""
    from t3.workload import model_names

    hw = load_hardware("paper-80cu")
    for m in model_names():
        op = sublayer_operator(get_model(m), "fc2", tp)
        for config in ("t3", "t3-mca"):
            out = get_config(config).run(op, hw, RunOptions())
            assert out.time_s > out.breakdown_s["all_gather"] > 0
            assert out.link_bytes == pytest.approx(2 * op.comm_bytes * (tp - 1) / tp)
            assert out.extra["tracker"]["peak_occupancy"] <= hw.tracker.entries
