"""T3 mechanism: address maps, byte accounting against closed forms, tracker, MCA, symmetry."""

import math

import pytest
from conftest import assert_same_outcome

from t3.api import run
from t3.config.hardware import load_hardware
from t3.errors import ConfigError, ScheduleError
from t3.hardware import AddressMap, McaPolicy, direct_rs_maps, mca_threshold, ring_rs_maps, stagger_order
from t3.schedules import RunOptions, get_config
from t3.schedules.t3 import staggered_plan
from t3.sim.memory import HbmTiming
from t3.sim.schedule import ScheduleBuilder, hbm_timing
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
    plan, columns = staggered_plan(op, hw, bypass=frozenset(range(tp - 1)))
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


T = HbmTiming(
    turnaround=0.0, latency_s=300e-9, service_s=140e-9, queue_entries=64, channels=32, entry_bytes=32
)
QB = 64 * 32 * 32  # bytes the queues hold


def test_mca_policy_closed_form():
    p = McaPolicy(threshold=0.4, starvation_share=0.05, timing=T)
    # GEMM (level 0) leaves the starvation share, or less if communication asks less (work-conserving)
    assert p.available(100.0, 100.0, 0, 20.0) == pytest.approx(95.0)
    assert p.available(100.0, 100.0, 0, 2.0) == pytest.approx(98.0)
    assert p.available(100.0, 100.0, 0, 0.0) == pytest.approx(100.0)
    # communication: admitted up to the utilisation at which the GEMM's queue occupancy
    # X_g * S * rho / (2 (1 - rho_g)) / QB reaches the threshold
    cap = 1e12
    for x_g in (1e11, 3e11, 6e11):
        rho_star = 2 * 0.4 * (1 - x_g / cap) * QB / (x_g * T.service_s)
        expect = min(cap - x_g, max(0.05 * cap, rho_star * cap - x_g))
        assert p.available(cap, cap - x_g, 1, 0.0) == pytest.approx(expect)
        lat = p.latency(T, cap, 0, {0: x_g, 1: rho_star * cap - x_g})
        assert T.occupancy(x_g, lat) == pytest.approx(0.4, rel=1e-9) or rho_star * cap - x_g < 0.05 * cap
    # a GEMM that saturates the memory leaves communication the starvation share only
    assert p.available(cap, 0.02 * cap, 1, 0.0) == pytest.approx(0.02 * cap)
    assert p.available(cap, 0.5 * cap, 1, 0.0) >= 0.05 * cap


def test_mca_gate_is_monotone_in_the_threshold_and_never_starves():
    cap = 1e12
    for x_g in (2e11, 5e11, 8e11, 0.99e12):
        got = [McaPolicy(th, 0.05, T).available(cap, cap - x_g, 1, 0.0) for th in (0.0, 0.1, 0.3, 0.6, 1.0)]
        assert all(a <= b for a, b in zip(got, got[1:], strict=False))
        assert all(g >= min(cap - x_g, 0.05 * cap) - 1e-6 for g in got)


def test_mca_priority_latency_closed_form():
    p = McaPolicy(0.5, 0.05, T)
    flows = {0: 4e11, 1: 3e11}
    rho, rho_g = 0.7, 0.4
    assert p.latency(T, 1e12, 0, flows) == pytest.approx(T.latency_s + T.service_s * rho / (2 * (1 - rho_g)))
    assert p.latency(T, 1e12, 1, flows) == pytest.approx(
        T.latency_s + T.service_s * rho / (2 * (1 - rho_g) * (1 - rho))
    )
    # the GEMM waits less than under first-come sharing, communication more
    fcfs = T.latency(rho)
    assert p.latency(T, 1e12, 0, flows) < fcfs < p.latency(T, 1e12, 1, flows)


def test_mca_in_the_engine_communication_progresses_at_any_threshold():
    """A GEMM-like closed stream saturating the HBM beside a link-paced update: with threshold 0 the
    update still completes, at the starvation share while the GEMM runs."""
    from t3.sim import Engine

    hw = load_hardware("paper-80cu", {"hbm.turnaround": 0.0})
    for theta in (0.0, 0.5, 1.0):
        b = ScheduleBuilder("m", hw, 2)
        b.policies["hbm"] = McaPolicy(theta, 0.1, hbm_timing(hw))
        b.add(0, "gemm", kind="x", cat="gemm", work=[(b.hbm(0), 1e9)], window=8e6)
        b.add(
            0, "upd", kind="x", cat="rs", work=[(b.hbm_w(0), 1e8)] + [(r, 1e8) for r in b.path(0, 1)], prio=1
        )
        r = Engine().run(b.build())
        end = {o.key: r.end[o.id] for o in r.schedule.ops}
        assert math.isfinite(end["upd"])
        if theta == 0.0:  # gate shut: the update gets the starvation share while the GEMM runs
            share = 0.1 * hw.hbm.effective_Bps
            assert end["upd"] >= min(1e8 / share, end["gemm"]) * 0.999


def test_mca_threshold_from_first_stage():
    hw = load_hardware("paper-80cu")
    op = _op(sub="fc2", tokens=8192)
    from t3.schedules.t3 import T3Builder

    bld = T3Builder("t3-mca", op, hw, RunOptions(), mca=True)
    plan = bld.plan
    first = [w for w in plan.waves if any(c == plan.order[0] for c, _, _ in w.segments)]
    nbytes = sum(w.read_bytes + sum(w.write_bytes.values()) for w in first)
    t = sum(sum(plan.wave_alone_s(w, hw)) for w in first)
    u = nbytes / t / hw.hbm.effective_Bps
    assert bld.intensity == pytest.approx(u)
    assert bld.theta == pytest.approx(hw.mca.occupancy_threshold * (1 - u))
    assert mca_threshold(0.9, hw) < mca_threshold(0.2, hw)  # more memory-intensive -> lower threshold


def test_ideal_rs_nmc_closed_form():
    """RS with NMC, idle ring (symmetric: a GPU reads c and receives c of updates per step, each update
    costing kappa writes of channel time, the mix paying the turnaround): launch + (N-1)(latency +
    max(c/B_link, (1 + kappa) c / (B_hbm eta(w)), c/(cus x cu_copy))), w = kappa / (1 + kappa)."""
    from t3.hardware.nmc import update_cost

    hw = load_hardware("paper-80cu", {"link.bandwidth_Bps": 1e12, "hbm.latency_s": 0.0})  # HBM/CU the limit
    op = _op(tp=4)
    out = get_config("ideal-rs-nmc").run(op, hw, RunOptions())
    c = op.comm_bytes / 4
    k = update_cost(hw)
    eta = 1 / (1 + hw.hbm.turnaround * min(k / (1 + k), 1 / (1 + k)))
    step = hw.link.latency_s + max(
        c / hw.link.bandwidth_Bps,
        (1 + k) * c / (hw.hbm.effective_Bps * eta),
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
    """The mechanism runs for every zoo model at TP 8/16/32 on paper-80cu where the model splits over that
    TP (the 8 KV heads of Llama 3 and Mixtral do not split over 16 or 32 GPUs); RS+AG link bytes are exact."""
    from t3.errors import WorkloadError
    from t3.workload import model_names

    hw = load_hardware("paper-80cu")
    for m in model_names():
        kv = get_model(m).kv_heads
        if kv is not None and kv % tp:  # Llama 3's and Mixtral's 8 KV heads
            with pytest.raises(WorkloadError, match=f"kv_heads = 8 is not divisible by tp={tp}"):
                sublayer_operator(get_model(m), "fc2", tp)
            continue
        op = sublayer_operator(get_model(m), "fc2", tp)
        for config in ("t3", "t3-mca"):
            out = get_config(config).run(op, hw, RunOptions())
            assert out.time_s > out.breakdown_s["all_gather"] > 0
            assert out.link_bytes == pytest.approx(2 * op.comm_bytes * (tp - 1) / tp)
            assert out.extra["tracker"]["peak_occupancy"] <= hw.tracker.entries


def test_mca_admits_everything_beside_a_gemm_flow_whose_occupancy_underflows():
    """McaPolicy: the gate admits communication up to the flow at which the GEMM's queue occupancy
    reaches theta, which grows without bound as the GEMM's flow goes to 0; a flow so small that
    flow x service time underflows to 0 admits everything (no ZeroDivisionError), and a small but
    representable flow still gives the closed form."""
    import math

    from t3.hardware.mca import McaPolicy
    from t3.sim.memory import HbmTiming

    t = HbmTiming(0.0, 400e-9, 250e-9, 64, 80, 64)
    pol = McaPolicy(0.3, 0.1, t)
    cap = 3e12
    assert pol.admitted(cap, 5e-324) == math.inf
    # the remaining capacity is what communication gets then (available's min with remaining)
    assert pol.available(cap, cap - 5e-324, 1, 0.0) == cap - 5e-324
    x = 1e3
    want = 2.0 * 0.3 * (1.0 - x / cap) * (64 * 80 * 64) / (x * 250e-9) * cap
    assert pol.admitted(cap, x) == want
