"""NCCL's send/recv connections in the all-to-all (t3.ops.collectives.p2p_connections): the channel and
slice rules by hand, the time they give, and the 4-GPU rows (validation, never fitted: the rate was
fitted on the 8-GPU rows), which they bring close where the link rate alone was 11-36 % fast."""

from __future__ import annotations

import statistics

import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.ops.collectives import Executor, p2p_connections, simulate_collective
from t3.validation import load_dataset

MiB, KiB = 1 << 20, 1 << 10


def _by_hand(hw, n, peer):
    """NCCL's rules written out: P/N channels per peer, doubled while a channel's slice exceeds 16 MiB,
    at most one per 64 KiB; the last step (at most one chunk) copied out by 9 of 20 warps."""
    p, r = hw.collective.p2p_channels, hw.collective.p2p_connection_Bps
    cpp = p // n
    while peer / cpp > 16 * MiB and cpp < p:
        cpp *= 2
    cpp = max(1, min(cpp, int(peer // (64 * KiB))))
    drain = min(512 * KiB, peer / cpp) / (hw.compute.cu_copy_Bps / 2 * 9 / 20)
    return cpp, cpp * n * r / (n - 1), drain


@pytest.mark.parametrize(
    ("n", "peer", "cpp"),
    [
        (8, 4 * MiB, 4),
        (4, 8 * MiB, 8),
        (8, 64 * MiB, 4),
        (8, 128 * MiB, 8),
        (4, 512 * MiB, 32),
        (8, 128 * KiB, 2),
    ],
)
def test_channels_per_peer_follow_nccls_slice_rules(n, peer, cpp):
    hw = load_hardware("h100-8")
    got = p2p_connections(hw, n, peer, Executor("cu"))
    assert got[0] == cpp
    assert got == pytest.approx(_by_hand(hw, n, peer), rel=1e-12)


def test_the_connections_bound_a_mid_size_all_to_all_and_the_link_a_large_one():
    hw = load_hardware("h100-8")
    col, c = hw.collective, hw.compute
    n, size = 8, 32 * MiB
    peer = size / n
    cpp, rate, drain = _by_hand(hw, n, peer)
    fixed = c.kernel_launch_s + col.simple.base_latency_s + col.simple.step_latency_s
    r = simulate_collective("all_to_all", size, n, hw, "direct/simple")
    assert r["time_s"] == pytest.approx(fixed + drain + peer / rate, rel=1e-9)
    # 1 GiB: two connections per channel, and the links bound it (the connections would allow 2x)
    big = simulate_collective("all_to_all", 1 << 30, n, hw, "direct/simple")
    cpp, rate, drain = _by_hand(hw, n, (1 << 30) / n)
    assert cpp == 8 and big["time_s"] > fixed + drain + (1 << 30) / n / rate * 1.5


def test_copy_engines_and_presets_without_a_rate_are_not_limited():
    hw = load_hardware("h100-8")
    assert p2p_connections(hw, 8, 4 * MiB, Executor("dma")) == (0, 0.0, 0.0)
    assert p2p_connections(load_hardware("mi300x-8"), 8, 4 * MiB, Executor("cu")) == (0, 0.0, 0.0)
    off = load_hardware("h100-8", {"collective.p2p_connection_Bps": 0.0})
    assert p2p_connections(off, 8, 4 * MiB, Executor("cu")) == (0, 0.0, 0.0)


def test_the_never_fitted_4_gpu_rows_fall_close_and_need_the_connections():
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.hardware == "h100-8"
            and r.workload["op"] == "all_to_all" and r.workload["gpus"] == 4
            and r.workload["nbytes"] <= 512 * MiB]  # fmt: skip
    assert len(rows) == 5 and all(r.role == "validation" for r in rows)
    off = load_hardware("h100-8", {"collective.p2p_connection_Bps": 0.0})

    def err(r, hw):
        w = r.workload
        x = api.collective("all_to_all", w["nbytes"], gpus=4, hardware=hw)
        return x["busbw_Bps"] / 1e9 / r.published["busbw_GBps"] - 1

    with_model = [abs(err(r, "h100-8")) for r in rows]
    without = [err(r, off) for r in rows]
    assert max(with_model) < 0.06
    assert min(without) > 0.10 and statistics.median(without) > 0.15  # the link rate alone is too fast
