"""Nodes joined by a network (``[network]``): NCCL's ring and all-to-all across nodes, their closed forms
against the engine and against NCCL's own tuning formulas, presets that extend a preset, and the refusals
of what is not modelled across nodes."""

from __future__ import annotations

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ConfigError, ScheduleError, T3Error
from t3.ops.collectives import Algo, Executor, idle_time, parse_algo, ring_step_latency, simulate_collective
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
    assert fast["algo"].startswith(("ring/", "tree/", "nvls-tree/") if op == "all_reduce" else "ring/")
    assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9)
    assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-12)


@pytest.mark.parametrize("hw_name,gpus", [("h100-2x8", 16), ("h200-4x8", 32), ("h100-16x8", 48)])
@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
@pytest.mark.parametrize("nbytes", [8192, 3 << 20, 1 << 30])
def test_tree_closed_form_and_symmetry(hw_name, gpus, proto, nbytes):
    """NCCL's tree all-reduce across nodes: the closed form is the engine's time, and every GPU simulated
    gives the symmetric path's."""
    hw = load_hardware(hw_name)
    fast = simulate_collective("all_reduce", nbytes, gpus, hw, algo=f"tree/{proto}")
    assert fast["algo"] == f"tree/{proto}"
    assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9)
    if gpus <= 32:
        full = simulate_collective("all_reduce", nbytes, gpus, hw, algo=f"tree/{proto}", symmetric=False)
        assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-12)


@pytest.mark.parametrize("proto", ["simple", "ll128", "ll"])
@pytest.mark.parametrize("gpus", [16, 32, 48, 128])
def test_tree_latency_is_nccls_tuning_formula(proto, gpus):
    """NCCL src/graph/tuning.cc: a tree all-reduce's latency is 2 x ((ranks per node - 1) x
    hwLatencies[NVLINK][Tree] + log2i(nodes) x hwLatencies[NET][Tree]) (log2i rounds down: 6 nodes, 2)."""
    hw = load_hardware("h100-16x8")
    nvlink = {"ll": 0.6e-6, "ll128": 1.25e-6, "simple": 4.0e-6}[proto]  # NCCL's table, written out
    net = {"ll": 5.0e-6, "ll128": 8.5e-6, "simple": 14.0e-6}[proto]
    nodes = gpus // 8
    log2i = {2: 1, 4: 2, 6: 2, 16: 4}[nodes]
    terms: dict = {}
    idle_time("all_reduce", Algo("tree", proto), 1 << 20, hw, gpus, terms=terms)
    assert terms["hop_latency_s"] == pytest.approx(2 * (7 * nvlink + log2i * net), rel=1e-12)


def _chain_pipeline(nchunks: int, depth: int, tau: float) -> float:
    """Brute force: ``nchunks`` chunks cross ``depth`` hops in order, each hop moving one chunk at a time
    in ``tau``; the time the last chunk leaves the last hop."""
    free = [0.0] * depth
    end = 0.0
    for _ in range(nchunks):
        t = 0.0
        for h in range(depth):
            t = max(t, free[h]) + tau
            free[h] = t
        end = t
    return end


@pytest.mark.parametrize("proto", ["simple", "ll"])
@pytest.mark.parametrize("chunks", [1, 3, 16])
def test_tree_pipeline_fill_is_a_chain_of_chunks(proto, chunks):
    """Each direction of the tree moves the buffer in chunks through its hops: Simple's D (7 in the node,
    log2i(nodes) between nodes) each hold a chunk until it has landed; LL's forward each line within the
    node and hold chunks only at the log2i(nodes) network hops, after the first that paces the transfer.
    Its time beyond the hop latencies is that of a chain of such hops in which each moves a chunk in the
    direction's per-chunk time, as a brute-force walk of the chunks gives it."""
    from t3.ops.collectives import step_time, tree_program

    hw = load_hardware("h100-16x8")
    gpus = 32
    depth = 7 + 2 if proto == "simple" else 1 + 2
    nc = hw.collective.channels
    chunk = getattr(hw.collective, proto).chunk_bytes
    nbytes = chunks * nc * chunk
    a = Algo("tree", proto)
    ex = Executor().for_call(hw, a, nbytes, gpus)
    assert ex.channels(hw) == nc
    terms: dict = {}
    t = idle_time("all_reduce", a, nbytes, hw, gpus, terms=terms)
    want = 0.0
    for st in tree_program()[0]:
        whole = step_time(hw, gpus, st, nbytes, a, ex)
        want += _chain_pipeline(chunks, depth, whole / chunks)
    got = t - terms["launch_s"] - terms["base_latency_s"] - terms["hop_latency_s"]
    assert got == pytest.approx(want, rel=1e-9)


def test_ll128_tree_chunk_follows_nccls_loop():
    """NCCL src/enqueue.cc: LL128's tree chunk halves while nBytes / (channels x chunk) is below
    (1 + log2i(nodes) + 0.1 ppn) x 64 / ppn (down to 128 KiB), then x 16 / ppn (down to 32 KiB)."""
    from t3.ops.collectives import tree_chunk_bytes

    hw = load_hardware("h100-16x8")
    for gpus in (16, 32, 128):
        nodes = gpus // 8
        nsteps = 1 + (nodes.bit_length() - 1) + 0.8
        for nbytes in (1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 32):
            chunk = 614400 // 16 * 15  # NCCL's LL128 step of lines, payload words only
            while nbytes // (20 * chunk) < nsteps * 8 and chunk > 131072:
                chunk //= 2
            while nbytes // (20 * chunk) < nsteps * 2 and chunk > 32768:
                chunk //= 2
            assert tree_chunk_bytes(hw, Algo("tree", "ll128"), nbytes, 20, gpus) == chunk


def test_tree_for_small_calls_ring_for_large():
    """Across nodes the library's choice takes the tree for a small all-reduce (its latency grows with
    log2(nodes), the ring's with the ranks) and the ring for a large one (the tree moves every byte
    through each GPU twice, the ring 2(n-1)/n times, and pays its pipeline's fill)."""
    hw = load_hardware("h100-16x8")
    for gpus in (16, 32, 128):
        assert simulate_collective("all_reduce", 8192, gpus, hw)["algo"].startswith("tree/")
        large = simulate_collective("all_reduce", 16 << 30, gpus, hw)["algo"]
        assert not large.startswith("tree/")  # 2 nodes: NVLS-Tree; more: it and the ring are both NIC-bound
    # 4 -> 8 -> 16 nodes: the tree adds a level each time (the same time), the ring twice the ranks
    t = [simulate_collective("all_reduce", 8192, g, hw, algo="tree/ll")["time_s"] for g in (32, 64, 128)]
    r = [simulate_collective("all_reduce", 8192, g, hw, algo="ring/ll")["time_s"] for g in (32, 64, 128)]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0], rel=1e-9)
    assert r[2] - r[1] == pytest.approx(2 * (r[1] - r[0]), rel=0.05)


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


@pytest.mark.parametrize("hw_name,gpus", [("h100-2x8", 16), ("h200-4x8", 32)])
@pytest.mark.parametrize("nbytes", [8192, 3 << 20, 1 << 30])
def test_nvls_tree_closed_form_and_symmetry(hw_name, gpus, nbytes):
    """NCCL's NVLS-Tree across nodes: the closed form is the engine's time, and every GPU simulated (each
    node's switch its own resource) gives the symmetric path's."""
    hw = load_hardware(hw_name)
    fast = simulate_collective("all_reduce", nbytes, gpus, hw, algo="nvls-tree")
    assert fast["algo"] == "nvls-tree/simple"
    assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9)
    full = simulate_collective("all_reduce", nbytes, gpus, hw, algo="nvls-tree", symmetric=False)
    assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-12)


def test_nvls_tree_is_bound_by_the_switch_port_the_nics_and_nccls_channel_maximum():
    """Each GPU heads shard c = S/k of its node: its switch port carries S + c each way (the node's NVLS
    all-reduce), its NIC share c each way between 2 nodes and 2c between more (double binary trees), and
    the NVLS graph's 8 channels move at most NCCL's per-channel maximum of bus bandwidth (tuning.cc
    perChMaxNVLSTreeBws, Hopper: 57.7 GB/s on 2 nodes, 45.5 beyond; the call's bus bytes are 2 (n-1)/n S).
    A long call's time tends to the largest of the three (closed forms written here), plus the latency and
    fill: on these H100 nodes NCCL's maximum, below both the port's and the NICs' rates."""
    from t3.ops.collectives import _wire

    hw = load_hardware("h100-16x8")
    k, S = 8, 64 << 30
    port = (S + S / k) * _wire(hw, Algo("nvls")) / hw.link.bandwidth_Bps
    nic_rate = hw.network.nic_Bps * hw.network.nics_per_node / k * hw.network.efficiency
    for gpus, net, per in ((16, S / k, 57.7e9), (32, 2 * S / k, 45.5e9), (128, 2 * S / k, 45.5e9)):
        terms: dict = {}
        t = idle_time("all_reduce", Algo("nvls-tree"), S, hw, gpus, terms=terms)
        heads = S * 2 * (gpus - 1) / gpus / (8 * per)
        assert terms["resources_s"]["link"] == pytest.approx(port, rel=1e-12)
        assert terms["resources_s"]["nic"] == pytest.approx(net / nic_rate, rel=1e-12)
        assert terms["resources_s"]["tree_channels"] == pytest.approx(heads, rel=1e-12)
        bound = max(port, net / nic_rate, heads)
        assert bound == heads  # NCCL's maximum binds on every count of nodes here
        assert bound < t < 1.01 * bound
    assert port > S / k / nic_rate  # without it, 2 nodes: the port would bound it; 4 and more: the NICs (2c)
    assert port < 2 * S / k / nic_rate


def test_nvls_tree_channel_maximum_follows_the_kernels_thread_blocks():
    """NCCL_MIN_CTAS gives the NVLS kernel more thread blocks than its default 16 on Hopper
    (collective.nvls_channels): the channel maximum grows with them (at the default it is NCCL's graph
    channels x per-channel maximum); a preset without NCCL's graphs has no such bound."""
    from t3.ops.collectives import nvls_tree_channel_bound

    hw = load_hardware("h100-16x8")
    S, gpus = 1 << 30, 64
    bus, cap = nvls_tree_channel_bound(hw, gpus, S, 16)
    assert bus == pytest.approx(S * 2 * 63 / 64, rel=1e-15)
    assert cap == pytest.approx(8 * 45.5e9, rel=1e-15)
    assert nvls_tree_channel_bound(hw, gpus, S, 24)[1] == pytest.approx(1.5 * cap, rel=1e-15)
    slow = idle_time("all_reduce", Algo("nvls-tree"), 8 << 30, hw, gpus)
    fast = idle_time("all_reduce", Algo("nvls-tree"), 8 << 30, hw, gpus, ex=Executor("cu", 24))
    assert fast < slow
    bare = load_hardware("h100-16x8", {"collective.nccl": None})
    assert nvls_tree_channel_bound(bare, gpus, S, 16) == (0.0, 0.0)


@pytest.mark.parametrize("gpus,nbytes", [(16, 1 << 30), (16, 96 << 20), (32, 1 << 30), (32, 16 << 20)])
def test_nvls_tree_fill_is_a_chain_of_chunks(gpus, nbytes):
    """The shard crosses 2 x log2i(nodes) network hops (up and down the tree) that each hold a chunk: beyond
    its latency and launch the call takes a chain of 1 + 2 log2i(nodes) chunk stages, as a brute-force walk
    of the chunks gives it, with NCCL's NVLS-Tree chunk (128 KiB; 64 KiB on 4 nodes or more and below
    4 x ops x 128 KiB; 32 KiB below ops x 64 KiB; ops = 16 channels x 8 heads)."""
    from t3.ops.collectives import nvls_tree_latency

    hw = load_hardware("h100-16x8")
    k, nc = 8, hw.collective.nvls_channels
    ops = nc * k
    chunk = 128 << 10 if gpus // k < 4 else 64 << 10
    if nbytes < 4 * ops * chunk and chunk > 65536:
        chunk = 65536
    if nbytes < ops * chunk and chunk > 32768:
        chunk = 32768
    levels = {16: 1, 32: 2}[gpus]
    chunks = nbytes / k / (nc * chunk)
    terms: dict = {}
    t = idle_time("all_reduce", Algo("nvls-tree"), nbytes, hw, gpus, terms=terms)
    bulk = max(v for name, v in terms["resources_s"].items() if name != "pipeline_fill")
    n_chunks = round(chunks)
    assert n_chunks == pytest.approx(chunks)  # whole chunks at these sizes
    want = _chain_pipeline(n_chunks, 1 + 2 * levels, bulk / n_chunks)
    got = t - hw.compute.kernel_launch_s - nvls_tree_latency(hw, gpus)
    assert got == pytest.approx(want, rel=1e-9)


def test_nvls_tree_fastest_for_large_calls_on_2_nodes_only():
    """On 2 nodes NVLS-Tree's NICs carry half of what they carry between more nodes, so past its latency
    and fill it beats the ring (bound by the NICs) for large calls; on 4 nodes and more the ring's NIC
    bound is the better one (the model's own times; which one runs is NCCL's choice:
    tests/test_nccl_tuning.py)."""
    hw = load_hardware("h100-16x8")

    def t(algo: str, gpus: int, nbytes: int) -> float:
        return idle_time("all_reduce", parse_algo("all_reduce", algo, hw, gpus), nbytes, hw, gpus)

    assert t("nvls-tree/simple", 16, 16 << 30) < t("ring/simple", 16, 16 << 30)
    assert t("ring/simple", 32, 16 << 30) < t("nvls-tree/simple", 32, 16 << 30)
    assert simulate_collective("all_reduce", 16 << 30, 16, hw)["algo"] == "nvls-tree/simple"
    assert simulate_collective("all_reduce", 8192, 16, hw)["algo"].startswith("tree/")
    from t3.ops.collectives import valid_algos

    assert "nvls-tree/simple" in valid_algos("all_reduce", hw, 16)
    assert "nvls-tree/simple" not in valid_algos("all_reduce", hw, 8)  # one node: NVLS itself
    assert "nvls-tree/simple" not in valid_algos("all_reduce", load_hardware("b200-4x8"), 32)


@pytest.mark.parametrize("algo", ["nvls-tree/simple", "tree/ll128", "tree/simple"])
@pytest.mark.parametrize("cus", [4, 8])
def test_tree_algorithms_on_given_channels_closed_form_is_the_engines(algo, cus):
    """An executor given its CUs (the interference API's ``channels``) runs the tree or NVLS-Tree on them:
    the chunks per channel of its pipeline's fill follow, and the closed form is still the engine's."""
    from t3.ops.collectives import all_reduce, parse_algo
    from t3.sim import Engine, ScheduleBuilder

    hw = load_hardware("h100-2x8")
    a = parse_algo("all_reduce", algo, hw, 16)
    for size in (1 << 20, 256 << 20):
        b = ScheduleBuilder("x", hw, 16, symmetric=True)
        all_reduce(b, size, ex=Executor("cu", cus), algo=a)
        t = Engine().run(b.build()).makespan
        assert t == pytest.approx(idle_time("all_reduce", a, size, hw, 16, Executor("cu", cus)), rel=1e-9)
        if (
            size > 1 << 20
        ):  # (a shard below a chunk per channel crosses each hop whole, whatever the channels)
            assert t != pytest.approx(idle_time("all_reduce", a, size, hw, 16), rel=1e-6)
