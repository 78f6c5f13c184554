"""The static pipeline model and selector: the engine is the oracle for the model, exhaustive
exploration for the selector."""

import json
import math

import pytest

from t3.config.hardware import load_hardware
from t3.ficco.losses import LossModel
from t3.ficco.pipeline import FACTORS, gemm_alone_s, ranking, select_pipeline, shared_s
from t3.ficco.scenarios import OPERATORS
from t3.ficco.space import FiccoOperator, legality, parse_name
from t3.schedules.ficco import gemm_alone_schedule
from t3.sim.engine import Engine
from t3.workload.sublayers import GemmShape


@pytest.mark.parametrize("hwn", ["mi300x-8", "h100-8"])
@pytest.mark.parametrize("mnk", [(8192, 4096, 1792), (512, 3584, 4096), (1024, 14336, 4096), (96, 768, 8192)])
def test_gemm_alone_closed_form_matches_engine(hwn, mnk):
    hw = load_hardware(hwn)
    s = GemmShape(*mnk, "bf16")
    eng = Engine().run(gemm_alone_schedule([(s, False)], hw, 8)).makespan
    alone, lock, stag = gemm_alone_s(s, hw, hw.compute.cus)
    assert alone == pytest.approx(eng, rel=0.03)
    assert alone <= stag <= lock <= 2 * alone + 1e-12  # two streams never slower than back to back


@pytest.mark.parametrize(
    "op,name",
    [
        (FiccoOperator("ag-gemm", 8192, 3584, 4096), "ficco-g8-M-dma"),
        (FiccoOperator("ag-gemm", 8192, 3584, 4096), "shard-g8-M-dma"),
        (FiccoOperator("ag-gemm", 8192, 3584, 4096), "ficco-g8-K-dma"),
        (FiccoOperator("gemm-rs", 8192, 4096, 1792), "ficco-g8-N-dma-rb"),
        (FiccoOperator("gemm-rs", 8192, 4096, 1792), "ficco-g8-N-dma-s2-rb"),
        (FiccoOperator("moe", 8192, 14336, 4096), "ficco-g8-M-dma"),
        (FiccoOperator("gemm-rs", 8192, 4096, 1792), "bulk-g1-M-cu"),
    ],
)
@pytest.mark.parametrize("hwn", ["mi300x-8", "h100-8"])
def test_pipeline_model_tracks_the_engine(op, name, hwn):
    """DMA schedules: the static estimate is within 6 % of the simulated time (the GPU shared)."""
    hw = load_hardware(hwn)
    sim = LossModel(op, hw).evaluate(parse_name(name)).time_s
    assert shared_s(op, hw, parse_name(name)) == pytest.approx(sim, rel=0.06)


def test_select_pipeline_is_static_deterministic_and_legal(no_simulation):
    for hwn in ("mi300x-8", "h100-8"):
        hw = load_hardware(hwn)
        for f in OPERATORS[:12]:
            a = select_pipeline(f, hw)
            assert json.dumps(a, sort_keys=True) == json.dumps(select_pipeline(f, hw), sort_keys=True)
            assert legality(f, hw, parse_name(a[0])) is None
    # skewed MoE is not in the model: the learned tree answers
    moe = FiccoOperator("moe", 8192, 14336, 4096, skew=0.5)
    name, f = select_pipeline(moe, load_hardware("mi300x-8"))
    assert "learned" in f["selector"] and legality(moe, load_hardware("mi300x-8"), parse_name(name)) is None


def test_pipeline_pick_is_the_least_prediction_and_near_the_exhaustive_best():
    """On a design operator: the pick is the ranking's minimum, every ranked schedule is legal,
    and the pick's simulated time is within 5 % of the exhaustive best (brute force)."""
    hw = load_hardware("mi300x-8")
    op = FiccoOperator("gemm-rs", 8192, 4096, 1792)
    rank = ranking(op, hw)
    assert select_pipeline(op, hw)[0] == rank[0][0]
    assert all(legality(op, hw, parse_name(n)) is None and math.isfinite(t) for n, t in rank)
    lm = LossModel(op, hw)
    times = {n: lm.evaluate(parse_name(n)).time_s for n, _ in rank}
    assert times[rank[0][0]] <= min(times.values()) * 1.05


def test_factors_cover_every_class_and_are_near_one():
    ops, topos = ("ag-gemm", "gemm-rs", "moe"), ("mesh", "switch")
    pats = ("bulk/-", "ficco/cu", "ficco/dma", "shard/cu", "shard/dma")
    assert set(FACTORS) == {f"{o}/{t}/{p}" for o in ops for t in topos for p in pats}
    assert all(0.8 < v < 1.25 for v in FACTORS.values())
