"""The network proxy across nodes: one host thread per GPU posts every network send and receive of the
channels that leave or enter its node at that GPU, one after another, at NCCL's net overhead each; a ring
step (a tree direction) lasts at least that cycle. Oracles: the cycle counted by hand from NCCL's layout
(rail-aligned channels, ``ceil(channels / 8)`` per GPU; two posts per ring step, one or two per tree chunk),
and the closed form against the engine."""

from __future__ import annotations

import math

import pytest

from t3.config.hardware import load_hardware
from t3.ops.collectives import (
    Algo,
    Executor,
    idle_time,
    proxy_steps_s,
    ring_program,
    ring_step_latency,
    simulate_collective,
    tree_alphas,
    tree_chunk_bytes,
)


def test_a_mid_size_ring_across_two_nodes_is_set_by_the_proxys_cycle():
    """1 MiB all-reduce on 2 nodes, ring/LL128 on 20 channels: each GPU serves ceil(20 / 8) = 3 channels,
    a send and a receive each per step at 1 us: 6 us a step, above the step's latency and transfer, so
    the 30 link steps take 30 x 6 us (the launch, the base latency and the final local copy besides)."""
    hw = load_hardware("h100-2x8")
    a, n = Algo("ring", "ll128"), 16
    assert hw.collective.channels == 20 and hw.network.overhead_s == 1e-6
    terms: dict = {}
    t = idle_time("all_reduce", a, 1 << 20, hw, n, terms=terms)
    steps = 2 * (n - 1)
    alpha = ring_step_latency(hw, a, Executor(), n)
    assert terms["hops"] == steps
    assert terms["resources_s"]["proxy"] == pytest.approx(steps * (6e-6 - alpha), rel=1e-12)
    fixed = terms["launch_s"] + terms["base_latency_s"]
    tail = t - fixed - steps * 6e-6
    assert 0 < tail < 1e-6  # the final local copy of 1 MiB / 16 on HBM
    sim = simulate_collective("all_reduce", 1 << 20, n, hw, algo="ring/ll128")
    assert sim["time_s"] == pytest.approx(sim["predicted_s"], rel=1e-9)
    assert sim["time_s"] == pytest.approx(t, rel=1e-9)


def test_the_cycle_counts_channels_and_chunks():
    hw = load_hardware("h100-2x8")
    n = 16
    zero = [0.0]
    # LL128: 20 channels -> 3 per GPU; 40 -> 5; a step of 1 MiB / 16 per channel... one chunk each
    for ch, per in ((20, 3), (40, 5), (8, 1), (1, 1)):
        got = proxy_steps_s(hw, Algo("ring", "ll128"), Executor("cu", ch), n, 1 << 20, zero)[0]
        assert got == pytest.approx(2 * per * 1e-6)
    # Simple: one post per operation too
    got = proxy_steps_s(hw, Algo("ring", "simple"), Executor("cu", 20), n, 1 << 20, zero)[0]
    assert got == pytest.approx(2 * 3 * 1e-6)
    # a step larger than a chunk per channel: one post per chunk (Simple's 512 KiB)
    big = 16 * 20 * 3 * 512 * 1024  # 3 chunks per channel per step
    got = proxy_steps_s(hw, Algo("ring", "simple"), Executor("cu", 20), n, big, zero)[0]
    assert got == pytest.approx(3 * (2 * 3 * 1e-6))
    # the latency runs within the cycle; a latency longer than the cycle leaves no proxy work
    assert proxy_steps_s(hw, Algo("ring", "ll128"), Executor("cu", 20), n, 1 << 20, [2e-6, 1e-5]) == [
        pytest.approx(4e-6),
        0.0,
    ]


def test_nothing_on_one_node_or_without_an_overhead():
    hw = load_hardware("h100-2x8")
    a = Algo("ring", "ll128")
    assert proxy_steps_s(hw, a, Executor(), 8, 1 << 20, [0.0] * 14) == [0.0] * 14  # one node
    assert proxy_steps_s(load_hardware("h100-8"), a, Executor(), 8, 1 << 20, [0.0]) == [0.0]
    free = load_hardware("h100-2x8", {"network.overhead_s": 0.0})
    assert proxy_steps_s(free, a, Executor(), 16, 1 << 20, [0.0]) == [0.0]


@pytest.mark.parametrize("gpus,posts", [(16, 1), (32, 2), (64, 2)])
def test_the_trees_cycle_is_its_chunks_through_a_level(gpus, posts):
    """NCCL's double binary tree: between two nodes each chunk is one post at each end (a send or a
    receive); on more nodes a GPU's channels are interior in one tree (three posts) and leaves in the other
    (one): two a chunk on average. Chunks per channel: NCCL's LL128 tree chunk."""
    hw = load_hardware("h100-16x8")
    a, nbytes = Algo("tree", "ll128"), 8 << 20
    ex = Executor().for_call(hw, a, nbytes, gpus)
    nc = ex.channels(hw)
    chunks = math.ceil(nbytes / (nc * tree_chunk_bytes(hw, a, nbytes, nc, gpus)))
    cycle = posts * math.ceil(nc / 8) * chunks * 1e-6
    alphas = tree_alphas(hw, a, ex, nbytes, gpus)
    got = proxy_steps_s(hw, a, ex, gpus, nbytes, alphas)
    assert got == [pytest.approx(max(0.0, cycle - x)) for x in alphas]
    sim = simulate_collective("all_reduce", nbytes, gpus, hw, algo="tree/ll128")
    assert sim["time_s"] == pytest.approx(sim["predicted_s"], rel=1e-9)


def test_a_large_ring_is_not_bound_by_the_proxy():
    """At 1 GiB a step's transfer through the NIC outlasts the cycle: the time is the one without it."""
    hw = load_hardware("h100-2x8")
    free = load_hardware("h100-2x8", {"network.overhead_s": 0.0})
    for proto in ("simple", "ll128"):
        a = Algo("ring", proto)
        steps, _ = ring_program("all_reduce", 16)
        alpha = ring_step_latency(hw, a, Executor(), 16)
        assert max(proxy_steps_s(hw, a, Executor(), 16, 1 << 30, [alpha] * len(steps))) > 0
        # (the latency with no overhead is the same: NVLink's per-hop latency is above it on this preset)
        assert ring_step_latency(free, a, Executor(), 16) == alpha
        assert idle_time("all_reduce", a, 1 << 30, hw, 16) == pytest.approx(
            idle_time("all_reduce", a, 1 << 30, free, 16), rel=1e-12
        )


def test_two_collectives_across_nodes_share_the_proxy():
    """Two 1 MiB all-reduces at once on the same GPUs: their steps queue on one proxy per GPU, so the
    pair takes about twice one (the links would carry both in little more than one)."""
    from t3.ops.collectives import all_reduce
    from t3.sim import Engine, ScheduleBuilder

    hw = load_hardware("h100-2x8")
    one = simulate_collective("all_reduce", 1 << 20, 16, hw, algo="ring/ll128")["time_s"]
    b = ScheduleBuilder("two", hw, 16)
    all_reduce(b, 1 << 20, algo="ring/ll128", prefix="a")
    all_reduce(b, 1 << 20, algo="ring/ll128", prefix="b")
    two = Engine().run(b.build()).makespan
    assert 1.6 * one < two < 2.1 * one
