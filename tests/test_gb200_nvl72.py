"""gb200-nvl72: one NVLink domain of 72 GPUs. Its peaks follow from the values NVIDIA publishes, TP up to 72
runs the same on the symmetric path as on every GPU (T3 and T3-MCA with near-memory compute added), NVLS
over 72 ranks falls on NCCL's own tuning formula, and its validation rows are loaded and reported."""

from __future__ import annotations

import pytest
from conftest import assert_same_outcome

from t3.config.hardware import load_hardware
from t3.ops.collectives import simulate_collective
from t3.schedules import RunOptions, get_config
from t3.validation import load_dataset
from t3.workload import sublayer_operator
from t3.workload.models import ModelSpec

HW = "gb200-nvl72"
# A model that splits over 72 GPUs in whole heads: hidden, heads, ffn and the reduce-scatter chunks divide 72.
TP72 = ModelSpec(name="tp72", hidden=9216, layers=80, heads=72, ffn=36864, tokens=9216)


def test_peaks_are_the_specification():
    """NVIDIA's GB200 NVL72 specification per GPU: 2.5 PFLOPS dense BF16, 5 dense FP8, 8 TB/s HBM3e,
    NVLink 5 at 1.8 TB/s both directions; 72 GPUs on one switch."""
    hw = load_hardware(HW)
    c = hw.compute
    peak = {d: c.cus * c.clock_hz * c.matrix_flops_per_clk_per_cu[d] for d in ("bf16", "fp8")}
    assert peak["bf16"] == pytest.approx(2.5e15, rel=0.002)
    assert peak["fp8"] == pytest.approx(5.0e15, rel=0.002)
    assert hw.hbm.bandwidth_Bps == 8.0e12 and 2 * hw.link.bandwidth_Bps == 1.8e12
    assert (hw.topology.kind, hw.topology.gpus) == ("switch", 72)
    # the switch trays reduce what every GPU port brings in (b200-8's rule, 72 ports)
    assert hw.collective.nvls_reduce_Bps == pytest.approx(72 * hw.link.bandwidth_Bps)


@pytest.mark.parametrize("config", ["sequential", "ideal-gemm-rs-overlap", "t3", "t3-mca", "ideal-rs-nmc"])
def test_tp72_symmetric_equals_all_gpus(config):
    hw = load_hardware(HW, {"nmc.present": True})  # T3's near-memory compute, added to this GPU
    op = sublayer_operator(TP72, "fc2", 72)
    fast = get_config(config).run(op, hw, RunOptions(symmetric=True))
    full = get_config(config).run(op, hw, RunOptions(symmetric=False))
    assert_same_outcome(fast, full)


def test_nvls_over_72_ranks_is_nccls_formula():
    """NCCL's NVLS all-reduce bandwidth (src/graph/tuning.cc): the link's achievable rate x nvlsEfficiency x
    (channels - 1) / channels, twice over for an all-reduce's busbw; nothing in it depends on the rank count.
    At 8 GiB the fixed costs are a fraction of a per cent."""
    hw = load_hardware(HW)
    col = hw.collective
    out = simulate_collective("all_reduce", 8 << 30, 72, hw)
    assert out["algo"].startswith("nvls")
    ch = col.nvls_channels
    formula = 2 * hw.link.bandwidth_Bps * col.link_efficiency * col.nvls_efficiency * (ch - 1) / ch
    assert out["busbw_Bps"] == pytest.approx(formula, rel=0.01)
    # and the ring, which NVLS beats there, is bound by the link's achievable rate
    ring = simulate_collective("all_reduce", 8 << 30, 72, hw, algo="ring")
    assert ring["busbw_Bps"] < hw.link.bandwidth_Bps * col.link_efficiency < out["busbw_Bps"]


def test_rows_loaded_and_blind():
    rows = [r for r in load_dataset() if r.hardware == HW]
    cats = {r.category for r in rows}
    assert cats == {"collective_busbw", "gemm_tflops"}
    val = [r for r in rows if r.role == "validation"]
    assert len(val) >= 3 and all(r.blind for r in val if r.workload.get("nbytes", 1 << 20) >= 1 << 20)
    # the calibration rows are the one-host table's sizes paced by the host (collective.host_call_s)
    cal = {r.workload["nbytes"] for r in rows if r.role == "calibration"}
    assert cal == {k << 10 for k in (8, 16, 32, 64, 128)}
    assert all(r.workload["gpus_per_thread"] == 4 for r in rows if r.role == "calibration")
    assert {r.workload["gpus"] for r in rows if r.category == "collective_busbw"} == {4, 72}


@pytest.mark.parametrize("config", ["sequential", "ideal-gemm-rs-overlap", "t3", "t3-mca", "ideal-rs-nmc"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_size_guard_holds_at_tp72(config, symmetric):
    """The size guard's estimate stays within 2x of the ops simulated at TP 72, on both paths."""
    from t3 import size

    hw = load_hardware(HW, {"nmc.present": True})
    op = sublayer_operator(TP72, "fc2", 72)
    out = get_config(config).run(op, hw, RunOptions(symmetric=symmetric))
    built = sum(len(r.schedule.ops) for r in out.results)
    est = size.run_work(op, hw, config, symmetric).ops
    assert 0.5 * built <= est <= 2 * built, (est, built)
