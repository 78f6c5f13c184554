"""Nodes joined by a network (``[network]``): NCCL's ring and all-to-all across nodes, their closed forms
against the engine and against NCCL's own tuning formulas, presets that extend a preset, and the refusals
of what is not modelled across nodes."""

from __future__ import annotations

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ConfigError, ScheduleError, T3Error
from t3.ops.collectives import Algo, Executor, idle_time, ring_step_latency, simulate_collective
from t3.schedules import RunOptions, get_config
from t3.workload import get_model, sublayer_operator

OPS = ("all_reduce", "all_gather", "reduce_scatter")


@pytest.mark.parametrize(
    "hw_name,gpus", [("h100-2x8", 16), ("h200-4x8", 32), ("h200-4x8", 16), ("b200-4x8", 32)]
)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("nbytes", [8192, 3 << 20, 1 << 30])
def test_ring_across_nodes_closed_form_and_symmetry(hw_name, gpus, op, nbytes):
    """The closed form is the engine's time; every GPU simulated gives the symmetric path's."""
    hw = load_hardware(hw_name)
    fast = simulate_collective(op, nbytes, gpus, hw)
    full = simulate_collective(op, nbytes, gpus, hw, symmetric=False)
    assert fast["algo"].startswith("ring/")
    assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9)
    assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-12)


@pytest.mark.parametrize(
    "hw_name,gpus", [("h100-2x8", 16), ("h200-4x8", 32), ("b200-4x8", 32), ("h100-16x8", 48)]
)
@pytest.mark.parametrize("nbytes", [8192, 3 << 20, 1 << 30])
def test_all_to_all_across_nodes_closed_form_and_symmetry(hw_name, gpus, nbytes):
    """NCCL's grouped send/recv across nodes: the closed form is the engine's time, and every GPU
    simulated (whose remote peers differ from GPU to GPU) gives the symmetric path's."""
    hw = load_hardware(hw_name)
    fast = simulate_collective("all_to_all", nbytes, gpus, hw)
    assert fast["algo"].startswith("direct/")
    assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9)
    if gpus <= 32:
        full = simulate_collective("all_to_all", nbytes, gpus, hw, symmetric=False)
        assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-12)


@pytest.mark.parametrize("gpus", [16, 64, 128])
def test_large_all_to_all_is_bound_by_the_nics(gpus):
    """Of the N-1 blocks a GPU sends, the N-k for the other nodes leave through its NIC share (at the
    network's efficiency and Simple's payload share): nccl-tests' bus bandwidth, S/t x (N-1)/N, tends to
    that share x (N-1)/(N-k) (an oracle in closed form; the node's NVLink share is far faster)."""
    hw = load_hardware("h100-16x8")
    net, k = hw.network, hw.topology.gpus
    nic = net.nic_Bps * net.nics_per_node / k * net.efficiency * hw.collective.simple.bw_fraction
    want = nic * (gpus - 1) / (gpus - k)
    out = simulate_collective("all_to_all", 16 << 30, gpus, hw, algo="direct/simple")
    assert out["busbw_Bps"] == pytest.approx(want, rel=0.01)
    assert out["busbw_Bps"] < want
    # the network's latency is paid once per call: a small all-to-all across nodes takes more than the
    # same call in one node by the network step's latency over the node fabric's
    small = simulate_collective("all_to_all", 8192, gpus, hw, algo="direct/simple")
    one = simulate_collective("all_to_all", 8192, k, hw, algo="direct/simple")
    extra = hw.collective.simple.net_step_latency_s - hw.collective.simple.step_latency_s
    assert small["time_s"] - one["time_s"] == pytest.approx(extra, rel=0.05)


@pytest.mark.parametrize("op", OPS)
def test_large_ring_is_bound_by_the_nics(op):
    """Each GPU sends 1/k of every step through its NIC share: a long ring's link steps run at
    k x (NIC share per GPU) x its achievable fraction of bus bandwidth when that is below the node's
    NVLink share; the whole call a little below it (the ring's final local copy, which no link carries)."""
    hw = load_hardware("h100-16x8")
    net, k = hw.network, hw.topology.gpus
    nic = k * net.nic_Bps * net.nics_per_node / k * net.efficiency
    nvlink = hw.link.bandwidth_Bps * hw.collective.link_efficiency * k / (k - 1)
    assert nic < nvlink
    size = 64 << 30
    for gpus in (16, 64, 128):
        terms: dict = {}
        idle_time(op, Algo("ring", "simple"), size, hw, gpus, terms=terms)
        factor = 2 * (gpus - 1) / gpus if op == "all_reduce" else (gpus - 1) / gpus
        assert size * factor / terms["resources_s"]["link"] == pytest.approx(nic, rel=1e-9)
        out = simulate_collective(op, size, gpus, hw, algo="ring/simple")
        assert 0.9 * nic < out["busbw_Bps"] < nic


@pytest.mark.parametrize("proto", ["simple", "ll128", "ll"])
@pytest.mark.parametrize("gpus", [16, 32, 128])
def test_ring_latency_is_nccls_tuning_formula(proto, gpus):
    """NCCL src/graph/tuning.cc: a ring all-reduce's latency across nodes is (nsteps - nInter) x max(intra,
    net overhead (x3 for Simple)) + nInter x hwLatencies[NET][Ring], with nsteps = 2(n-1) and
    nInter = 2(nodes-1)."""
    hw = load_hardware("h100-16x8")
    p = getattr(hw.collective, proto)
    nodes = gpus // hw.topology.gpus
    nsteps, ninter = 2 * (gpus - 1), 2 * (nodes - 1)
    intra = max(p.step_latency_s, hw.network.overhead_s * (3 if proto == "simple" else 1))
    nccl = (nsteps - ninter) * intra + ninter * p.net_step_latency_s
    terms: dict = {}
    idle_time("all_reduce", Algo("ring", proto), 1 << 20, hw, gpus, terms=terms)
    assert terms["hop_latency_s"] == pytest.approx(nccl, rel=1e-12)
    assert ring_step_latency(hw, Algo("ring", proto), Executor(), gpus) * nsteps == pytest.approx(nccl)


def test_ll_cap_follows_the_node_count():
    """NCCL's llMaxBws across nodes: one value on 2 nodes, a lower one on more."""
    hw = load_hardware("h100-16x8")
    ll = hw.collective.ll
    two = simulate_collective("all_reduce", 1 << 30, 16, hw, algo="ring/ll")["busbw_Bps"]
    four = simulate_collective("all_reduce", 1 << 30, 32, hw, algo="ring/ll")["busbw_Bps"]
    assert two == pytest.approx(ll.net2_max_busbw_Bps, rel=0.02)
    assert four == pytest.approx(ll.net_max_busbw_Bps, rel=0.02)


def test_one_node_of_a_multi_node_preset_is_the_node_preset():
    """A preset that extends h100-8 adds the network and nothing else: one node runs as h100-8."""
    base, multi = load_hardware("h100-8"), load_hardware("h100-2x8")
    for section in ("compute", "hbm", "link", "topology", "dma", "nmc", "fused"):
        assert getattr(multi, section) == getattr(base, section), section
    assert multi.network is not None and base.network is None
    for op in OPS:
        a = simulate_collective(op, 64 << 20, 8, base)
        b = simulate_collective(op, 64 << 20, 8, multi)
        assert (a["time_s"], a["algo"]) == (b["time_s"], b["algo"])


def test_base_errors(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text('base = "h100-9"\nname = "x"\n')
    with pytest.raises(ConfigError, match="unknown preset 'h100-9'"):
        load_hardware(p)
    p.write_text('base = 8\nname = "x"\n')
    with pytest.raises(ConfigError, match="base: expected a preset name"):
        load_hardware(p)


NET = (
    'base = "h100-8"\nname = "x"\n[network]\nnodes = 2\nnics_per_node = 8\nnic_Bps = 50e9\nefficiency = 0.99\n'
    "{extra}"
    "[collective.simple]\nnet_step_latency_s = 14e-6\n[collective.ll128]\nnet_step_latency_s = 4e-6\n"
    "[collective.ll]\nnet_step_latency_s = {ll}\n"
)


@pytest.mark.parametrize(
    "extra,ll,msg",
    [
        ("rail_optimized = false\n", "2.7e-6", "network.rail_optimized: false is not modelled"),
        ("", '"x"', "collective.ll.net_step_latency_s"),
        ("nics_per_node = 3\n", "2.7e-6", "network.nics_per_node"),
    ],
)
def test_network_input_errors(tmp_path, extra, ll, msg):
    p = tmp_path / "x.toml"
    text = NET.format(extra=extra, ll=ll)
    if "nics_per_node = 3" in text:
        text = text.replace("nics_per_node = 8\n", "")
    p.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        load_hardware(p)


def test_missing_net_latency_is_named(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text(
        NET.format(extra="", ll="2.7e-6").replace("[collective.ll]\nnet_step_latency_s = 2.7e-6\n", "")
    )
    with pytest.raises(ConfigError, match=r"collective\.ll\.net_step_latency_s: needed with a \[network\]"):
        load_hardware(p)


def test_gpus_must_be_whole_nodes():
    hw = load_hardware("h200-4x8")
    for gpus in (12, 40):
        with pytest.raises(T3Error, match="not whole nodes"):
            simulate_collective("all_reduce", 1 << 20, gpus, hw)


@pytest.mark.parametrize(
    "call,msg",
    [
        (lambda hw: simulate_collective("all_to_all", 1 << 20, 16, hw, executor="dma"), "on copy engines"),
        (lambda hw: simulate_collective("all_gather", 1 << 20, 16, hw, executor="dma"), "on copy engines"),
        (lambda hw: simulate_collective("all_reduce", 1 << 20, 16, hw, algo="nvls/simple"), "nvls"),
    ],
)
def test_what_is_not_modelled_across_nodes_is_refused(call, msg):
    with pytest.raises(T3Error, match=msg):
        call(load_hardware("h100-2x8"))


def test_a_schedules_own_transfers_across_nodes_are_refused():
    """T3's tracker-driven DMA and NMC reductions are the node's own transfers: across nodes, refused
    with the reason, never sent over NVLink to another node."""
    hw = load_hardware("h100-2x8", {"nmc.present": True})
    op = sublayer_operator(get_model("mega-gpt-2"), "fc2", 16, tokens=4096)
    for config in ("t3", "ideal-rs-nmc"):
        with pytest.raises(ScheduleError, match="crosses from node"):
            get_config(config).run(op, hw, RunOptions())
    # the library's collectives are modelled: a sequential sublayer across two nodes runs
    out = get_config("sequential").run(op, hw, RunOptions())
    assert out.results[0].makespan > 0


def test_ficco_across_nodes_is_refused_before_any_work():
    """FiCCO's schedules move data between GPUs themselves: across nodes refused with the reason (one
    node of the same preset runs)."""
    from t3.api import overlap

    with pytest.raises(ConfigError, match="span nodes of 'h100-2x8'"):
        overlap("gemm-rs", 8192, 4096, 1792, gpus=16, hardware="h100-2x8", schedule="best")
    assert overlap("gemm-rs", 8192, 4096, 1792, gpus=8, hardware="h100-2x8")["time_s"] > 0


# ---- T3's own transfers stay in one node: refused before any work ----------------------------------
@pytest.mark.parametrize("config", ["t3", "t3-mca", "ideal-rs-nmc"])
def test_t3_across_nodes_is_refused_before_any_simulation(config, monkeypatch):
    """T3's stores, DMA and near-memory reductions use one node's fabric: on 16 GPUs of two nodes the
    run is refused naming ``tp``, before any engine runs (the engine is made to fail if called); on one
    node the same configuration runs. (A sweep's point fails with that message and the sweep goes on.)"""
    from t3 import api
    from t3.errors import ConfigError
    from t3.sim.engine import Engine

    def boom(*a, **k):
        raise AssertionError("the engine ran before the refusal")

    over = {"nmc.present": True}
    with monkeypatch.context() as m:
        m.setattr(Engine, "run", boom)
        with pytest.raises(ConfigError, match=r"^tp: configuration '.*' on 16 GPUs spans the nodes"):
            api.run(model="t-nlg", tp=16, config=config, hardware="h100-2x8", hw_overrides=over)
        # without near-memory compute the first thing named is that
        with pytest.raises(ConfigError, match=r"^nmc.present: "):
            api.run(model="t-nlg", tp=16, config=config, hardware="h100-2x8")
    rec = api.run(model="t-nlg", tp=8, config=config, hardware="h100-2x8", hw_overrides=over)
    assert rec["time_s"] > 0
