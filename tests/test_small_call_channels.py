"""NCCL's fewer channels for a call of few bytes (t3.ops.collectives.Executor.for_call) against NCCL's own
loop written here (src/enqueue.cc topoGetAlgoInfo: one channel less at a time while nBytes < nc x nt x
threshold) and the closed form of a capped ring: bus bytes / (the protocol's cap x the channels' share)."""

import pytest

from t3.config.hardware import load_hardware
from t3.ops.collectives import Algo, Executor, all_reduce, busbw_factor, idle_time, simulate_collective
from t3.sim import Engine, ScheduleBuilder


def nccl_channels(nbytes, channels, threads, threshold):
    """NCCL's loop, step by step (the oracle of the closed form in for_call)."""
    nc = channels
    while nbytes < nc * threads * threshold:
        if nc >= 2:
            nc -= 1
        else:
            break
    return nc


@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
@pytest.mark.parametrize("nbytes", [8, 1024, 4096, 32768, 65536, 98304, 262144, 655360, 1 << 20, 64 << 20])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_channels_follow_nccls_loop(proto, nbytes, n):
    hw = load_hardware("h100-8")
    p = getattr(hw.collective, proto)
    thr = p.thread_threshold_bytes * (n if proto == "ll" else 1)
    want = nccl_channels(nbytes, hw.collective.channels, p.threads, thr)
    ex = Executor().for_call(hw, Algo("ring", proto), nbytes, n)
    assert ex.channels(hw) == want
    assert ex.share == pytest.approx(want / hw.collective.channels)


def test_nccl_constants_are_the_defaults():
    """NCCL src/include/device.h and comm.h: 512/640/512 threads, thresholds 64/8/8 (LL x ranks on a ring)."""
    c = load_hardware("h100-8").collective
    assert (c.simple.threads, c.ll128.threads, c.ll.threads) == (512, 640, 512)
    assert (c.simple.thread_threshold_bytes, c.ll128.thread_threshold_bytes, c.ll.thread_threshold_bytes) == (
        64,
        8,
        8,
    )
    assert load_hardware("mi300x-8").collective.ll.threads == 256  # RCCL's device.h


def test_only_the_librarys_own_ring_and_tree_are_reduced():
    hw = load_hardware("h100-8")
    small = 32768
    assert Executor("cu", 20).for_call(hw, Algo("ring", "ll"), small, 8).channels(hw) == 20  # CUs given: kept
    assert Executor("dma").for_call(hw, Algo("ring", "simple"), small, 8).kind == "dma"
    for a in (Algo("direct", "ll"), Algo("nvls")):
        assert Executor().for_call(hw, a, small, 8).share == 1.0
    net = load_hardware("h100-2x8")  # across nodes the ring's loop (LL's threshold x all 16 ranks) ...
    want = nccl_channels(small, net.collective.channels, 512, 8 * 16)
    assert want == 1 and Executor().for_call(net, Algo("ring", "ll"), small, 16).channels(net) == want
    # ... and the tree's (its LL threshold not x the ranks)
    for a, thr in ((Algo("tree", "ll"), 8), (Algo("tree", "simple"), 64)):
        want = nccl_channels(small, net.collective.channels, 512, thr)
        assert Executor().for_call(net, a, small, 16).channels(net) == want
    assert Executor().for_call(net, Algo("tree", "ll"), small, 16).channels(net) == 8  # 32 KiB / (512 x 8 B)
    big = Executor()
    assert big.for_call(hw, Algo("ring", "ll"), 64 << 20, 8) is big  # a large call: the same executor


@pytest.mark.parametrize("nbytes", [32768, 65536, 262144])
def test_a_small_ll_all_reduce_takes_bus_bytes_over_its_channels_share_of_the_cap(nbytes):
    """On 8 GPUs LL's threshold is 8 x 8 B per thread, 32 KiB per channel of 512 threads: nbytes / 32 KiB
    channels, each 1/20 of llMaxBw, so the link time is the bus bytes / (cap x nc / 20) = 20 x 32 KiB x
    2(n-1)/n / cap whatever the size."""
    hw = load_hardware("h100-8")
    n, cap, ch = 8, hw.collective.ll.max_busbw_Bps, hw.collective.channels
    nc = nbytes // (512 * 8 * n)
    terms = {}
    t = idle_time("all_reduce", Algo("ring", "ll"), nbytes, hw, n, terms=terms)
    assert terms["channels"] == nc
    assert terms["resources_s"]["link"] == pytest.approx(
        nbytes * busbw_factor("all_reduce", n) / (cap * nc / ch)
    )
    sim = simulate_collective("all_reduce", nbytes, n, hw, "ring/ll")
    assert sim["time_s"] == pytest.approx(t, rel=1e-9)


def test_the_same_call_all_gpus_and_symmetric():
    hw = load_hardware("h100-8")
    times = []
    for sym in (True, False):
        b = ScheduleBuilder("t", hw, 8, symmetric=sym)
        all_reduce(b, 65536, algo="ring/ll")

        times.append(Engine().run(b.build()).makespan)
    assert times[0] == times[1]
