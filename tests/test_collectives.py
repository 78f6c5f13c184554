"""The collective model (t3.ops.collectives) against closed forms written here: traffic per category as
NCCL/RCCL run each algorithm, idle times, the library's protocol / algorithm choice, NVLS, errors."""

import math

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.hardware.nmc import nmc_reduce_scatter
from t3.ops.collectives import (
    Algo,
    Executor,
    all_gather,
    all_reduce,
    all_to_all,
    busbw_factor,
    choose,
    idle_time,
    nvls_extra_loops_s,
    reduce_scatter,
    simulate_collective,
    valid_algos,
)
from t3.sim import Engine, ScheduleBuilder

NS = (2, 3, 8, 16)
S = 48e6  # bytes: divisible by 2, 3, 8, 16


def _hw(name, n, **over):
    """A preset whose node holds ``n`` GPUs (mesh/switch presets have 8)."""
    return load_hardware(name, {"topology.gpus": max(n, 2), **over})


def _traffic(hw, n, add, symmetric=True):
    b = ScheduleBuilder("t", hw, n, symmetric=symmetric)
    add(b)
    return b.build().traffic_per_gpu()


def _cats(tr, cat):
    return tr.get(f"{cat}_read", 0.0), tr.get(f"{cat}_write", 0.0), tr.get("link", 0.0)


# ---- traffic per category, per GPU (closed forms) ---------------------------------------------------
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("hwn", ["paper-80cu", "h100-8", "mi300x-8"])
def test_ring_reduce_scatter_traffic_is_ncclss(n, hwn):
    """send + (N-2) recvReduceSend + recvReduceCopy: (2N-1)c read, Nc written, (N-1)c on links."""
    hw, c = _hw(hwn, n), S / n
    tr = _traffic(hw, n, lambda b: reduce_scatter(b, S, algo="ring/simple"))
    assert _cats(tr, "rs") == pytest.approx(((2 * n - 1) * c, n * c, (n - 1) * c))


@pytest.mark.parametrize("n", NS)
def test_store_and_forward_reduce_scatter_traffic(n):
    """The named store-and-forward ring: land, read both, write the sum (re-read by the next send)."""
    hw, c = _hw("paper-80cu", n), S / n
    tr = _traffic(hw, n, lambda b: reduce_scatter(b, S, algo="ring-sf/simple"))
    assert _cats(tr, "rs") == pytest.approx((3 * (n - 1) * c, 2 * (n - 1) * c, (n - 1) * c))


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("hwn", ["paper-80cu", "h100-8", "mi300x-8"])
def test_ring_all_gather_traffic(n, hwn):
    """copySend + (N-2) recvCopySend + recv, out of place: Nc read, (2N-1)c written."""
    hw, c = _hw(hwn, n), S / n
    tr = _traffic(hw, n, lambda b: all_gather(b, S, algo="ring/simple"))
    assert _cats(tr, "ag") == pytest.approx((n * c, (2 * n - 1) * c, (n - 1) * c))


@pytest.mark.parametrize("n", NS)
def test_ring_all_reduce_traffic(n):
    """NCCL's ring all-reduce: reduction phase (2N-1)c read / (N+1)c written, gather phase (N-1)c read /
    (2N-3)c written; 2(N-1)c on links; in all (3N-2)c each way."""
    hw, c = _hw("h100-8", n), S / n
    tr = _traffic(hw, n, lambda b: all_reduce(b, S, algo="ring/simple"))
    assert _cats(tr, "rs")[:2] == pytest.approx(((2 * n - 1) * c, (n + 1) * c))
    assert _cats(tr, "ag")[:2] == pytest.approx(((n - 1) * c, (2 * n - 3) * c))
    assert tr["link"] == pytest.approx(2 * (n - 1) * c)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("executor", ["cu", "dma"])
def test_direct_traffic(n, executor):
    """One-shot: RS (2N-1)c read, Nc written; AG Nc each way; AR both; (N-1)c on links per phase."""
    hw, c = _hw("mi300x-8", n), S / n
    ex = Executor(executor)
    tr = _traffic(hw, n, lambda b: reduce_scatter(b, S, ex=ex, algo="direct/simple"))
    assert _cats(tr, "rs") == pytest.approx(((2 * n - 1) * c, n * c, (n - 1) * c))
    tr = _traffic(hw, n, lambda b: all_gather(b, S, ex=ex, algo="direct/simple"))
    assert _cats(tr, "ag") == pytest.approx((n * c, n * c, (n - 1) * c))
    tr = _traffic(hw, n, lambda b: all_reduce(b, S, ex=ex, algo="direct/simple"))
    assert (tr["rs_read"] + tr["ag_read"], tr["rs_write"] + tr["ag_write"]) == pytest.approx(
        ((3 * n - 1) * c, 2 * n * c)
    )
    assert tr["link"] == pytest.approx(2 * (n - 1) * c)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("executor", ["cu", "dma"])
def test_all_to_all_traffic(n, executor):
    """Grouped send/recv: the receiver copies each message out of its buffer (CU kernel); DMA lands it
    in place. m bytes to each peer."""
    hw, m = _hw("h100-8", n), S / n
    mat = [[0.0 if g == h else m for h in range(n)] for g in range(n)]
    tr = _traffic(hw, n, lambda b: all_to_all(b, mat, ex=Executor(executor)))
    k = 2 if executor == "cu" else 1
    assert _cats(tr, "a2a") == pytest.approx((k * (n - 1) * m, k * (n - 1) * m, (n - 1) * m))


@pytest.mark.parametrize("n", [2, 3, 8])
def test_nvls_all_reduce_traffic(n):
    """multimem.ld_reduce + multimem.st: every GPU's HBM is read S and written S; port S + c."""
    hw = load_hardware("h100-8")
    c = S / n
    tr = _traffic(hw, n, lambda b: all_reduce(b, S, algo="nvls/simple"))
    assert (tr["rs_read"], tr["ag_write"], tr["link"]) == pytest.approx((S, S, S + c))


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("busy", [0.0, 40e-9])
def test_nmc_reduce_scatter_traffic_counts_an_update_as_one_write(n, busy):
    hw, c = _hw("paper-80cu", n, **{"nmc.update_busy_s": busy}), S / n
    tr = _traffic(hw, n, lambda b: nmc_reduce_scatter(b, S))
    assert _cats(tr, "rs") == pytest.approx(((n - 1) * c, (n - 1) * c, (n - 1) * c))


# ---- idle times (closed forms written here) ----------------------------------------------------------
def _eta(hw, w):
    k = hw.hbm.turnaround
    return 1 / (1 + k * min(w, 1 - w))


@pytest.mark.parametrize("n,size", [(2, 8e6), (4, 40e6), (8, 64e6), (16, 96e6)])
@pytest.mark.parametrize("turnaround", [0.0, 0.5])
def test_idle_ring_reduce_scatter_time(n, size, turnaround):
    """launch + base + (N-1)(alpha + c/B_step) + t_tail on the paper's ring (link-bound steps) with
    t_tail = 3c / min(channels x cu_copy_Bps, HBM x eta(1/3)): the final recvReduceCopy."""
    hw = load_hardware("paper-80cu", {"hbm.turnaround": turnaround})
    col, c = hw.collective, size / n
    alpha = hw.link.latency_s
    b_step = hw.link.bandwidth_Bps * col.link_efficiency * col.simple.bw_fraction
    assert 3 * c / (col.channels * hw.compute.cu_copy_Bps) < c / b_step  # link-bound steps
    assert 3 * c / (hw.hbm.effective_Bps * _eta(hw, 1 / 3)) < c / b_step
    tail = 3 * c / min(col.channels * hw.compute.cu_copy_Bps, hw.hbm.effective_Bps * _eta(hw, 1 / 3))
    expect = hw.compute.kernel_launch_s + col.simple.base_latency_s + (n - 1) * (alpha + c / b_step) + tail
    b = ScheduleBuilder("rs", hw, n)
    reduce_scatter(b, size)
    assert Engine().run(b.build()).makespan == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("n", [2, 8])
def test_idle_ring_reduce_scatter_on_a_switch_with_its_protocol(n):
    """h100-8, Simple: steps bound by the port at the achievable rate; LL128: by its busbw cap."""
    hw = load_hardware("h100-8")
    col, c = hw.collective, 64e6 / n
    for p in ("simple", "ll128"):
        pr = getattr(col, p)
        rate = hw.link.bandwidth_Bps * col.link_efficiency * pr.bw_fraction
        if pr.max_busbw_Bps:
            rate = min(rate, pr.max_busbw_Bps)
        tail = 3 * c / min(col.channels * hw.compute.cu_copy_Bps, hw.hbm.effective_Bps)
        expect = (
            hw.compute.kernel_launch_s + pr.base_latency_s + (n - 1) * (pr.step_latency_s + c / rate) + tail
        )
        r = simulate_collective("reduce_scatter", 64e6, n, hw, f"ring/{p}")
        assert r["time_s"] == pytest.approx(expect, rel=1e-9)
        assert r["algo"] == f"ring/{p}"


def test_hbm_bound_ring_reduce_scatter():
    """With slow HBM a middle step reads 2c and lands c (3c), the first reads c and lands c (2c)."""
    hw = load_hardware("paper-80cu", {"hbm.bandwidth_Bps": 1e11, "hbm.efficiency": 1.0})
    n, c = 8, 64e6 / 8
    b = ScheduleBuilder("rs", hw, n)
    reduce_scatter(b, 64e6)
    # HBM work at its turnaround-reduced rate: a send reads c and lands c (w = 1/2), a recvReduceSend
    # reads 2c and lands c (w = 1/3), as does the final recvReduceCopy
    steps = max(c / 75e9, 2 * c / (1e11 * _eta(hw, 0.5))) + (n - 2) * max(
        c / 75e9, 3 * c / (1e11 * _eta(hw, 1 / 3))
    )
    tail = max(3 * c / (1e11 * _eta(hw, 1 / 3)), 3 * c / (hw.collective.channels * hw.compute.cu_copy_Bps))
    expect = hw.compute.kernel_launch_s + (n - 1) * hw.link.latency_s + steps + tail
    assert Engine().run(b.build()).makespan == pytest.approx(expect, rel=1e-9)


def test_nmc_ring_reduce_scatter_has_no_tail_and_the_cu_ring_has():
    """The CU ring's last op (the recvReduceCopy) starts when its last link step ends and lasts t_tail;
    the NMC ring ends with its last link step (the memory reduced on arrival)."""
    hw = load_hardware("paper-80cu")
    n, c = 8, 64e6 / 8
    b = ScheduleBuilder("rs", hw, n)
    reduce_scatter(b, 64e6)
    res = Engine().run(b.build())
    ops = {o.key: o for o in res.schedule.ops}
    tail, last = ops["rs.tail"], ops[f"rs.{n - 2}"]
    assert res.start[tail.id] == pytest.approx(res.end[last.id])
    t_tail = 3 * c / (hw.collective.channels * hw.compute.cu_copy_Bps)  # channel-bound here
    assert res.end[tail.id] - res.start[tail.id] == pytest.approx(t_tail)
    b = ScheduleBuilder("nmc", hw, n)
    nmc_reduce_scatter(b, 64e6)
    res2 = Engine().run(b.build())
    assert all("tail" not in str(o.key) for o in res2.schedule.ops)
    assert res2.makespan == pytest.approx(res2.end[{o.key: o for o in res2.schedule.ops}[f"rs.{n - 2}"].id])
    # idle, link-bound: the NMC ring is faster by the tail (its steps move c at the same rate)
    assert res.makespan - res2.makespan == pytest.approx(t_tail, rel=1e-6)


@pytest.mark.parametrize("hwn", ["paper-80cu", "h100-8", "mi300x-8"])
@pytest.mark.parametrize("op", ["reduce_scatter", "all_gather", "all_reduce", "all_to_all"])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_engine_equals_closed_form_and_all_gpu_mode(hwn, op, n):
    """Every algorithm the library may run: the engine's idle time is ``idle_time``, and the symmetric
    fast path equals the all-GPU mode (time and traffic)."""
    hw = load_hardware(hwn, {"collective.ll.enabled": True, "collective.ll128.enabled": True})
    if op == "all_to_all" and hw.topology.kind == "ring":
        return
    for algo in valid_algos(op, hw, n)[1:]:
        for size in (3e5, 3e7):
            fast = simulate_collective(op, size, n, hw, algo)
            full = simulate_collective(op, size, n, hw, algo, symmetric=False)
            assert fast["time_s"] == pytest.approx(fast["predicted_s"], rel=1e-9), algo
            assert full["time_s"] == pytest.approx(fast["time_s"], rel=1e-9), algo
            for k, v in fast["traffic_bytes"].items():
                assert full["traffic_bytes"][k] == pytest.approx(v, rel=1e-12)


# ---- the library's choice ------------------------------------------------------------------------------
def _ring_ag_by_hand(hw, size, n, p):
    """NCCL's ring all-gather with protocol p, written out: launch + base + (N-1)(alpha + c/rate) + the
    final recv copy (2c through the channels' CUs / HBM), on the channels NCCL runs a call of this size on
    (src/enqueue.cc: one less while size < channels x threads x threshold, LL's threshold x the ranks),
    each its share of the protocol's cap."""
    col, c = hw.collective, size / n
    pr = getattr(col, p)
    ch = col.channels
    while ch >= 2 and size < ch * pr.threads * pr.thread_threshold_bytes * (n if p == "ll" else 1):
        ch -= 1
    rate = hw.link.bandwidth_Bps * col.link_efficiency * pr.bw_fraction
    if pr.max_busbw_Bps:
        rate = min(rate, pr.max_busbw_Bps * ch / col.channels)
    step = max(c / rate, 3 * c / hw.hbm.effective_Bps, 3 * c / (ch * hw.compute.cu_copy_Bps))
    tail = max(2 * c / hw.hbm.effective_Bps, 2 * c / (ch * hw.compute.cu_copy_Bps))
    return hw.compute.kernel_launch_s + pr.base_latency_s + (n - 1) * (pr.step_latency_s + step) + tail


def test_protocol_choice_is_the_least_closed_form_and_switches_where_they_cross():
    hw = load_hardware("h100-8")
    chosen = []
    for k in range(12, 30):
        size = 2.0**k
        times = {p: _ring_ag_by_hand(hw, size, 8, p) for p in ("ll", "ll128", "simple")}
        best = min(times, key=times.get)
        r = simulate_collective("all_gather", size, 8, hw)
        assert r["algo"] == f"ring/{best}"
        assert r["time_s"] == pytest.approx(times[best], rel=1e-9)
        chosen.append(best)
    # small messages take LL, large ones Simple, and the switches happen where the forms cross
    assert chosen[0] == "ll" and chosen[-1] == "simple" and "ll128" in chosen
    for k in range(12, 29):
        if chosen[k - 12] != chosen[k - 11]:
            a, b = chosen[k - 12], chosen[k - 11]
            lo, hi = 2.0**k, 2.0 ** (k + 1)
            assert _ring_ag_by_hand(hw, lo, 8, a) <= _ring_ag_by_hand(hw, lo, 8, b)
            assert _ring_ag_by_hand(hw, hi, 8, b) <= _ring_ag_by_hand(hw, hi, 8, a)


def test_nvls_on_switch_all_reduce_above_its_threshold_never_on_mesh_or_ring():
    h100 = load_hardware("h100-8")
    picks = {k: simulate_collective("all_reduce", 2.0**k, 8, h100)["algo"] for k in range(14, 31, 2)}
    assert picks[14] != "nvls/simple" and picks[30] == "nvls/simple"
    first = min(k for k, a in picks.items() if a == "nvls/simple")
    assert all(a == "nvls/simple" for k, a in picks.items() if k >= first)
    assert 2**20 <= 2.0**first <= 16 * 2**20  # from a few MiB upward (NCCL's own tuning constants)
    # NVLS by hand: launch + latency + (S + c) at the ports' NVLS rate, nvls_efficiency x the ring's
    # achievable link rate (the switch keeps up)
    s, c = 2.0**28, 2.0**28 / 8
    col = h100.collective
    port = h100.link.bandwidth_Bps * col.link_efficiency * col.nvls_efficiency
    loops = nvls_extra_loops_s(h100, 8, s)  # the loops NCCL's 64 KiB chunk adds below 1 GiB
    assert loops > 0
    expect = h100.compute.kernel_launch_s + col.nvls_latency_s + loops + (s + c) / port
    assert 8 * s / col.nvls_reduce_Bps < (s + c) / port
    assert simulate_collective("all_reduce", s, 8, h100)["time_s"] == pytest.approx(expect, rel=1e-9)
    # a slow switch makes its reduction the limit: N S / nvls_reduce_Bps
    slow = load_hardware("h100-8", {"collective.nvls_reduce_Bps": 1e12})
    t = simulate_collective("all_reduce", s, 8, slow, "nvls/simple")["time_s"]
    assert t == pytest.approx(
        h100.compute.kernel_launch_s + col.nvls_latency_s + loops + 8 * s / 1e12, rel=1e-9
    )
    for name in ("mi300x-8", "paper-80cu"):
        hw = load_hardware(name, {"collective.nvls_reduce_Bps": 1e13})
        assert "nvls/simple" not in valid_algos("all_reduce", hw, 8)
        assert all(
            simulate_collective("all_reduce", 2.0**k, 8, hw)["algo"] != "nvls/simple"
            for k in range(14, 31, 4)
        )
        with pytest.raises(ConfigError, match="^algo: unknown algorithm 'nvls/simple'"):
            simulate_collective("all_reduce", 1e6, 8, hw, "nvls/simple")


@pytest.mark.parametrize("eff", [0.5, 0.8, 1.0])
def test_nvls_and_the_ring_share_one_link_model(eff):
    """NCCL (src/graph/tuning.cc) scales NVLS's bandwidth by nvlsEfficiency relative to the graph bandwidth
    the ring uses: the NVLS port rate is nvls_efficiency x link_efficiency x the line rate, so both move
    with link_efficiency. Asymptotically busbw = 2(N-1)/(N+1) x that rate (S + c per port per direction)."""
    hw = load_hardware("h100-8", {"collective.link_efficiency": eff})
    col, n = hw.collective, 8
    rate = hw.link.bandwidth_Bps * eff * col.nvls_efficiency
    fixed = hw.compute.kernel_launch_s + col.nvls_latency_s
    for s in (2.0**26, 2.0**32):
        r = simulate_collective("all_reduce", s, n, hw, "nvls/simple")
        loops = nvls_extra_loops_s(hw, n, s)  # 64 MiB: NCCL's 32 KiB chunks; 4 GiB: none added
        assert r["time_s"] == pytest.approx(fixed + loops + s * (n + 1) / n / rate, rel=1e-9)
        ring = simulate_collective("all_reduce", s, n, hw, "ring/simple")
        # the ring's link-bound steps: 2(N-1) x (alpha + c / (link_efficiency x line rate))
        assert ring["time_s"] > 2 * (n - 1) * (s / n) / (hw.link.bandwidth_Bps * eff)
    big = simulate_collective("all_reduce", 2.0**36, n, hw, "nvls/simple")["busbw_Bps"]
    assert big == pytest.approx(2 * (n - 1) / (n + 1) * rate, rel=1e-3)


def _ramp(hw, op, n, p="simple"):
    """The ring's closed form T(S) = T0 + S / R for link-bound steps: T0 = launch + base + steps x alpha
    (the pipeline's fill: the per-hop latency once per step), 1/R = (steps / N) / (link rate) + the final
    primitive's k c through the channels' CUs or HBM (k = 2 for the final recv). Returns (T0, R)."""
    col = hw.collective
    pr = getattr(col, p)
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    rate = hw.link.bandwidth_Bps * col.link_efficiency * pr.bw_fraction
    eta = 1 / (1 + hw.hbm.turnaround * 0.5)  # the recv reads c and writes c
    tail = 2 / min(col.channels * hw.compute.cu_copy_Bps, hw.hbm.effective_Bps * eta)
    t0 = hw.compute.kernel_launch_s + pr.base_latency_s + steps * pr.step_latency_s
    return t0, 1 / (steps / n / rate + tail / n)


@pytest.mark.parametrize("op", ["all_gather", "all_reduce"])
def test_ring_busbw_rises_with_size_towards_the_link_rate(op):
    """busbw(S) = busbw_inf x S / (S + T0 R): half the asymptote at S = T0 R, 10/11 of it at 10 T0 R;
    strictly rising with size, below the achievable link rate, within 1 % of its asymptote at 64 GiB."""
    hw, n = load_hardware("h100-8"), 8
    col = hw.collective
    link = hw.link.bandwidth_Bps * col.link_efficiency
    # link-bound steps (the closed form below assumes it): CUs and HBM keep up with the link
    assert 4 / (col.channels * hw.compute.cu_copy_Bps) < 1 / link
    assert 4 / (hw.hbm.effective_Bps / (1 + hw.hbm.turnaround * 0.5)) < 1 / link
    t0, r = _ramp(hw, op, n)
    f = busbw_factor(op, n)
    inf = f * r
    assert 0.9 * link < inf < link  # the final primitive keeps it under the link rate
    for mult, frac in ((1, 1 / 2), (10, 10 / 11), (0.1, 0.1 / 1.1)):
        size = mult * t0 * r
        got = simulate_collective(op, size, n, hw, "ring/simple")["busbw_Bps"]
        assert got == pytest.approx(frac * inf, rel=1e-9)
    sizes = [2.0**k for k in range(20, 37, 2)]
    bw = [simulate_collective(op, s, n, hw, "ring/simple")["busbw_Bps"] for s in sizes]
    assert all(a < b for a, b in zip(bw, bw[1:], strict=False))
    assert bw[-1] == pytest.approx(inf, rel=1e-2) and bw[-1] < inf


# NCCL src/graph/tuning.cc (ncclTunerConstantsDefaults) and RCCL src/graph/tuning.cc (baseLat, tuning_model_5
# hwLat[xGMI]): (base, per-hop) ring latency per protocol, us
_LIBRARY_RING_LATENCY = {
    "h100-8": {"ll": (6.6, 0.6), "ll128": (14.0, 1.9), "simple": (8.4, 3.4)},
    "h200-8": {"ll": (6.6, 0.6), "ll128": (14.0, 1.9), "simple": (8.4, 3.4)},
    "mi300x-8": {"ll": (12.0, 0.8), "simple": (17.0, 2.1)},
}


@pytest.mark.parametrize("name", sorted(_LIBRARY_RING_LATENCY))
def test_presets_keep_the_library_latency_model(name):
    """latency = base + steps x per-hop (the library's tuning model): the per-hop latencies are the
    library's own and every protocol's base latency is the library's less one host-side constant."""
    col = load_hardware(name).collective
    table = _LIBRARY_RING_LATENCY[name]
    hosts = set()
    for p, (base, hop) in table.items():
        pr = getattr(col, p)
        assert pr.step_latency_s == pytest.approx(hop * 1e-6, rel=1e-9)
        hosts.add(round(base - pr.base_latency_s * 1e6, 9))
    assert len(hosts) == 1


def test_direct_all_reduce_up_to_its_size_limit_on_the_mesh():
    hw = load_hardware("mi300x-8")
    limit = hw.collective.direct_max_bytes
    assert simulate_collective("all_reduce", limit, 8, hw)["algo"].startswith("direct/")
    assert simulate_collective("all_reduce", 2 * limit, 8, hw)["algo"].startswith("ring/")


def test_dma_executor_runs_direct_copies():
    hw = load_hardware("mi300x-8")
    assert choose("all_gather", 1e8, hw, 8, Executor("dma")) == Algo("direct")
    r = simulate_collective("all_gather", 1e8, 8, hw, executor="dma")
    c = 1e8 / 8
    # 7 sends of c (one per link) and the local copy: the DMA engines move 8c
    dma = 8 * c / (hw.dma.engines * hw.dma.bandwidth_Bps)
    link = c / (hw.link.bandwidth_Bps * hw.collective.link_efficiency)
    hbm = 16 * c / hw.hbm.effective_Bps
    lat = hw.link.latency_s + hw.dma.command_overhead_s + hw.compute.kernel_launch_s
    assert r["time_s"] == pytest.approx(lat + max(dma, link, hbm), rel=1e-9)


def test_busbw_follows_nccl_tests():
    hw = load_hardware("h100-8")
    for op, f in (
        ("all_reduce", 2 * 7 / 8),
        ("reduce_scatter", 7 / 8),
        ("all_gather", 7 / 8),
        ("all_to_all", 7 / 8),
    ):
        r = simulate_collective(op, 2**26, 8, hw)
        assert r["busbw_Bps"] == pytest.approx(2**26 / r["time_s"] * f)
        assert r["device_s"] == pytest.approx(r["time_s"] - hw.compute.kernel_launch_s)


def test_windows_are_channels_or_engines_times_bytes_in_flight():
    hw = load_hardware("h100-8", {"compute.cu_inflight_bytes": 8192.0, "dma.inflight_bytes": 65536.0})
    b = ScheduleBuilder("w", hw, 8)
    reduce_scatter(b, 1e8, algo="ring/simple")
    all_gather(b, 1e8, ex=Executor("dma"), prefix="d")
    ops = b.build().ops
    assert {o.window for o in ops if o.key.startswith("rs.")} == {hw.collective.channels * 8192.0}
    assert {o.window for o in ops if o.key.startswith("d.")} == {hw.dma.engines * 65536.0}


# ---- errors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,field",
    [
        (("bogus", 1e6, 8), "op"),
        (("all_reduce", 0, 8), "nbytes"),
        (("all_reduce", -1.0, 8), "nbytes"),
        (("all_reduce", math.nan, 8), "nbytes"),
        (("all_reduce", 1e6, 9), "gpus"),
        (("all_reduce", 1e6, 1), "gpus"),
    ],
)
def test_errors_name_the_field(args, field):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        simulate_collective(*args, load_hardware("h100-8"))


def test_unknown_algo_lists_the_valid_ones():
    with pytest.raises(
        ConfigError, match=r"^algo: unknown algorithm 'tree'.*valid: auto, ring/ll, ring/ll128"
    ):
        simulate_collective("all_reduce", 1e6, 8, load_hardware("h100-8"), "tree")


def test_a_hardware_file_without_the_collective_section_is_valid(tmp_path):
    import tomllib
    from importlib import resources

    text = resources.files("t3.config").joinpath("presets", "paper-80cu.toml").read_text()
    data = tomllib.loads(text)
    data.pop("collective")
    lines = [ln for ln in text.splitlines()]
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("[collective]"))
    p = tmp_path / "no-collective.toml"
    p.write_text("\n".join(lines[:cut]) + "\n")
    hw = load_hardware(p)
    assert hw.collective.channels == 0 and hw.collective.simple.enabled
    r = simulate_collective("reduce_scatter", 8e6, 8, hw)
    c = 1e6
    tail = 3 * c / min(hw.compute.cus * hw.compute.cu_copy_Bps, hw.hbm.effective_Bps * _eta(hw, 1 / 3))
    assert r["time_s"] == pytest.approx(
        hw.compute.kernel_launch_s + 7 * (hw.link.latency_s + c / hw.link.bandwidth_Bps) + tail, rel=1e-9
    )


def test_idle_time_is_what_the_engine_runs_for_a_bulk_collective_with_a_start():
    """Dependencies delay the collective but do not change its duration (the FiCCO bulk closed form)."""
    hw = load_hardware("mi300x-8")
    b = ScheduleBuilder("x", hw, 8)
    b.add(0, "before", kind="x", cat="x", delay_s=7e-6)
    reduce_scatter(b, 5e7, start=lambda g: [(g, "before")])
    t = Engine().run(b.build()).makespan
    assert t == pytest.approx(
        7e-6 + idle_time("reduce_scatter", choose("reduce_scatter", 5e7, hw, 8), 5e7, hw, 8)
    )


# ---- ring steps as copies of a template ----------------------------------------------------------
@pytest.mark.parametrize(
    "hwn,n,symmetric", [("h100-8", 8, True), ("mi300x-8", 8, False), ("h100-2x8", 16, True)]
)
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_ring_steps_copied_from_a_template_equal_ops_made_one_by_one(hwn, n, symmetric, op):
    """run_ring makes a ring's repeated steps as copies of its first (``add_like``); every field the
    engine reads equals what step_op makes of the same arguments, op by op (the reference)."""
    from t3.ops.collectives import (
        base_latency,
        proxy_steps_s,
        ring_hops,
        ring_program,
        ring_step_deps,
        ring_step_latency,
        step_op,
    )

    hw = load_hardware(hwn)
    a = Algo("ring", "ll128")
    ex = Executor()
    b = ScheduleBuilder("t", hw, n, symmetric=symmetric)
    {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}[op](
        b,
        64e6,
        algo=a,
        ex=ex,
        prefix="x",
        **({"cats": ("c0", "c1")} if op == "all_reduce" else {"cat": "c0"}),
    )
    got = b.build()
    copies = sum(o.like >= 0 for o in got.ops)
    assert copies > 0  # the repeated primitives are copies
    ref = ScheduleBuilder("t", hw, n, symmetric=symmetric)
    steps, tail = ring_program(op, n)
    hops, alpha = ring_hops(hw, n), ring_step_latency(hw, a, ex, n)
    proxies = proxy_steps_s(hw, a, ex, n, 64e6, [alpha] * len(steps))
    first = hw.compute.kernel_launch_s + base_latency(hw, a, ex)
    for g in ref.gpus:
        for j, st in enumerate(steps):
            cat = "c0" if op != "all_reduce" or j < n else "c1"
            deps = ring_step_deps(lambda g: [], g, j, "x", hops)
            step_op(ref, g, f"x.{j}", st, 64e6 / n, hops, algo=a, ex=ex, cat=cat, prio=0, deps=deps,
                    delay=alpha + (first if j == 0 else 0.0), proxy=proxies[j])  # fmt: skip
    rops = ref.build().ops
    want = {(o.gpu, o.key): o for o in rops}
    fields = ("kind", "cat", "demands", "caps", "delay_s", "traffic", "prio", "acquire", "release",
              "writes", "window", "rounds")  # fmt: skip
    steps_got = [o for o in got.ops if o.kind.endswith("-step")]
    assert len(steps_got) == len(want)
    for o in steps_got:
        w = want[(o.gpu, o.key)]
        for f in fields:
            assert getattr(o, f) == getattr(w, f), (o.key, f)
        names = [(got.ops[d].gpu, got.ops[d].key) for d in o.deps]  # (op ids differ: no tails in ref)
        assert names == [(rops[d].gpu, rops[d].key) for d in w.deps]
