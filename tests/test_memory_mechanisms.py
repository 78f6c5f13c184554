"""The T3 paper's qualitative results on paper-80cu, each over several sublayers, and the memory
mechanisms they come from: remove a mechanism (or invert an arbitration) and these tests fail."""

from __future__ import annotations

import pytest

from t3.api import run
from t3.experiments.reproduce_t3 import GAP_PP

GAP = GAP_PP / 100  # the report's reading of "close to" / "well short of" (pp of speed-up)

MAIN = [
    (m, tp, s) for m in ("mega-gpt-2", "t-nlg") for tp in (8, 16) for s in ("op", "fc2", "fc1-bwd", "ip-bwd")
]


def _speedups(model, tp, sub, configs, **ov):
    seq = run(model, tp, sub, "sequential", hw_overrides=ov or None)["time_s"]
    return {c: seq / run(model, tp, sub, c, hw_overrides=ov or None)["time_s"] - 1 for c in configs}


@pytest.mark.parametrize("model,tp,sub", MAIN)
def test_nmc_reduce_scatter_is_faster_than_the_cu_ring(model, tp, sub):
    """The CU ring ends with a reduction (recvReduceCopy) not hidden behind the link; NMC has none."""
    cu = run(model, tp, sub, "ideal-gemm-rs-overlap")["breakdown_s"]["reduce_scatter"]
    nmc = run(model, tp, sub, "ideal-rs-nmc")["breakdown_s"]["reduce_scatter"]
    assert nmc < cu * 0.99


@pytest.mark.parametrize("model,tp,sub", MAIN)
def test_t3_mca_is_never_slower_than_t3(model, tp, sub):
    t3 = run(model, tp, sub, "t3")["time_s"]
    mca = run(model, tp, sub, "t3-mca")["time_s"]
    assert mca <= t3 * 1.0005


@pytest.mark.parametrize("model,tp", [("mega-gpt-2", 8), ("mega-gpt-2", 16), ("t-nlg", 8), ("t-nlg", 16)])
def test_on_op_sublayers_t3_is_close_to_or_beats_ideal(model, tp):
    s = _speedups(model, tp, "op", ("ideal-gemm-rs-overlap", "t3"))
    assert s["t3"] >= s["ideal-gemm-rs-overlap"] - GAP  # "close to": within 2 pp


@pytest.mark.parametrize("sub", ["fc2", "fc1-bwd"])
def test_on_large_fc_t3_falls_short_of_ideal_and_mca_recovers_most(sub):
    s = _speedups("t-nlg", 8, sub, ("ideal-gemm-rs-overlap", "t3", "t3-mca"))
    gap_t3 = s["ideal-gemm-rs-overlap"] - s["t3"]
    gap_mca = s["ideal-gemm-rs-overlap"] - s["t3-mca"]
    assert gap_t3 > GAP  # "well short": more than 2 pp
    assert gap_mca < 0.5 * gap_t3  # MCA closes more than half of it


@pytest.mark.parametrize("off", [{"hbm.turnaround": 0.0}, {"hbm.latency_s": 0.0}])
def test_that_contention_comes_from_turnaround_and_latency(off):
    """T-NLG FC-2 TP 8: T3's NMC updates (writes) beside the GEMM's reads cost turnaround, and the
    loaded latency then throttles the GEMM's windowed loads. Without either mechanism the loss is gone."""
    s = _speedups("t-nlg", 8, "fc2", ("ideal-gemm-rs-overlap", "t3"), **off)
    assert s["ideal-gemm-rs-overlap"] - s["t3"] < 0.005


def test_under_t3_the_gemm_reads_less_and_the_all_gather_moves_the_same_bytes():
    for model, tp, sub in MAIN:
        seq = run(model, tp, sub, "sequential")["dram_bytes"]
        t3 = run(model, tp, sub, "t3")["dram_bytes"]
        assert t3["gemm_read"] <= seq["gemm_read"] * (1 + 1e-12)
        assert t3["ag_read"] == pytest.approx(seq["ag_read"], rel=1e-12)
        assert t3["ag_write"] == pytest.approx(seq["ag_write"], rel=1e-12)
    seq = run("t-nlg", 8, "fc2", "sequential")["dram_bytes"]["gemm_read"]
    t3 = run("t-nlg", 8, "fc2", "t3")["dram_bytes"]["gemm_read"]
    assert t3 < 0.95 * seq  # B (18 MB) does not fit: uncached output stores keep more of it in L2
