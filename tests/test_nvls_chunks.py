"""NCCL's NVLS chunk below 1 GiB (t3.ops.collectives.nvls_chunk_bytes / nvls_extra_loops_s): the chunk
rule by hand, the loops it adds and their cost in the time, and what that does to the algorithm choice:
on 4 H100s the ring wins at mid sizes, as the never-fitted 4-GPU runs show."""

from __future__ import annotations

import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.ops.collectives import nvls_chunk_bytes, nvls_extra_loops_s, simulate_collective
from t3.validation import load_dataset

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(
    ("n", "size", "chunk"),
    [(8, 2 * GiB, 128), (8, GiB, 128), (8, GiB - 1, 64), (8, 64 * MiB, 64), (8, 64 * MiB - 1, 32),
     (8, 8 * MiB, 32), (8, 8 * MiB - 1, 16), (4, 512 * MiB, 128), (4, 512 * MiB - 1, 64), (4, 4 * MiB - 1, 16)],
)  # fmt: skip
def test_the_chunk_halves_below_64_8_and_2_loops_of_channels_x_heads(n, size, chunk):
    # 16 channels x n heads: 8 GPUs -> 128 ops: 64 loops of 128 KiB = 1 GiB, 8 of 64 KiB = 64 MiB, 2 of 32 KiB
    assert nvls_chunk_bytes(load_hardware("h100-8"), n, size) == chunk * KiB


def test_the_added_loops_cost_the_loop_time_each():
    hw = load_hardware("h100-8")
    loop = hw.collective.nvls_loop_s
    ops = 16 * 8
    # 256 MiB: 64 KiB chunks, 32 loops per channel instead of 16
    assert nvls_extra_loops_s(hw, 8, 256 * MiB) == pytest.approx(loop * (256 * MiB / (ops * 64 * KiB) - 16))
    assert nvls_extra_loops_s(hw, 8, 2 * GiB) == 0.0
    off = load_hardware("h100-8", {"collective.nvls_loop_s": 0.0})
    for size in (32 * MiB, 256 * MiB):
        a = simulate_collective("all_reduce", size, 8, hw, "nvls")
        b = simulate_collective("all_reduce", size, 8, off, "nvls")
        assert a["time_s"] - b["time_s"] == pytest.approx(nvls_extra_loops_s(hw, 8, size), rel=1e-9)


def test_on_four_gpus_the_ring_wins_at_mid_sizes_as_measured():
    off = load_hardware("h100-8", {"collective.nvls_loop_s": 0.0})
    for size in (32 * MiB, 128 * MiB):
        assert api.collective("all_reduce", size, gpus=4, hardware="h100-8")["algo"].startswith("ring")
        assert api.collective("all_reduce", size, gpus=4, hardware=off)["algo"].startswith("nvls")
    assert api.collective("all_reduce", 2 * GiB, gpus=4, hardware="h100-8")["algo"].startswith("nvls")
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.hardware == "h100-8"
            and r.workload["op"] == "all_reduce" and r.workload["gpus"] == 4
            and 16 * MiB <= r.workload["nbytes"] <= 256 * MiB]  # fmt: skip
    assert len(rows) >= 8 and all(r.role == "validation" for r in rows)

    def err(r, hw):
        w = r.workload
        x = api.collective(
            "all_reduce", w["nbytes"], gpus=4, hardware=hw, gpus_per_thread=w["gpus_per_thread"]
        )
        return (
            abs(r.measured * 1e-6 / x["time_s"] - 1)
            if r.unit == "us"
            else abs(x["busbw_Bps"] / 1e9 / r.measured - 1)
        )

    assert max(err(r, "h100-8") for r in rows) < 0.04
    assert max(err(r, off) for r in rows) > 0.06
