"""The board's power limit on GEMMs run back to back (``api.gemm(loop="sustained")``,
``t3.ops.gemm.power_limited_s``): its closed form, its calibration targets (the steady rates
``benchmarks/device_clock.py`` measured on the lent H100 and H200), its shape dependence, and the
sustained rows of a source never fitted (Azure's H100 table), which it moves the right way."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.ops.gemm import plan_gemm, power_limited_s
from t3.validation import load_dataset
from t3.validation.runner import Predictor
from t3.workload.sublayers import GemmShape

MEASURED = Path(__file__).resolve().parents[1] / "measurements"
CLOCK_RUNS = {
    "h100-8": MEASURED / "h100" / "clock-20261127.json",
    "h200-8": MEASURED / "h200" / "clock-20261127-2.json",
}


def test_the_bound_is_the_gemms_energy_over_the_power_left_above_idle():
    hw = load_hardware("h100-8")
    p = hw.power
    m, n, k = 8192, 4096, 2048
    plan = plan_gemm(GemmShape(m, n, k, "fp8"), hw)
    energy = 2.0 * m * n * k * p.flop_j["fp8"] + (m * k + k * n + 2 * m * n) * p.byte_j  # fp8 in, 16-bit out
    assert power_limited_s(hw, plan) == pytest.approx(energy / (p.limit_w - p.idle_w), rel=1e-12)
    r = api.gemm(m, n, k, dtype="fp8", hardware=hw, loop="sustained")
    assert r["power_s"] == pytest.approx(energy / (p.limit_w - p.idle_w), rel=1e-12)
    assert r["time_s"] == max(r["short_s"], r["power_s"])
    assert r["power_bound"] == (r["power_s"] > r["short_s"])
    short = api.gemm(m, n, k, dtype="fp8", hardware=hw)
    assert short["loop"] == "short" and short["power_s"] is None and short["time_s"] == r["short_s"]


def _steady(run: dict, name: str) -> float:
    """Measured seconds per call of ``name`` alone, back to back at the limit (its first run)."""
    return next(r for r in run["runs"] if r["workloads"] == [name])["streams"][0]["median_call_s"]


@pytest.mark.parametrize("preset", sorted(CLOCK_RUNS))
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8"])
def test_the_calibration_targets_hold_and_need_the_limit(preset, dtype):
    run = json.loads(CLOCK_RUNS[preset].read_text())
    measured = _steady(run, f"gemm-{dtype}")
    r = api.gemm(8192, 8192, 8192, dtype=dtype, hardware=preset, loop="sustained")
    assert r["time_s"] == pytest.approx(measured, rel=0.005)  # fitted exactly (closed form), rounding
    assert r["power_bound"]
    # without the limit the model is the short-run rate, 8-19 % faster than the steady measurement
    assert r["short_s"] < 0.95 * measured


@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1024, 2145, 1024), (512, 4096, 4096)])
def test_small_gemms_draw_less_than_the_limit(shape):
    for preset in CLOCK_RUNS:
        r = api.gemm(*shape, dtype="fp8", hardware=preset, loop="sustained")
        assert not r["power_bound"] and r["time_s"] == r["short_s"], (preset, shape)


def test_the_limit_binds_harder_on_denser_dtypes():
    # FP8 does twice the FLOPs per clock at a little over half the energy per FLOP: its short-run rate
    # overshoots the limit by more than BF16's
    loss = {}
    for dtype in ("bf16", "fp8"):
        r = api.gemm(8192, 8192, 8192, dtype=dtype, hardware="h100-8", loop="sustained")
        loss[dtype] = r["time_s"] / r["short_s"]
    assert loss["fp8"] > loss["bf16"] > 1.0


def test_a_preset_without_a_power_section_serves_both_loops_alike():
    hw = load_hardware("mi300x-8")
    assert hw.power is None
    a = api.gemm(4096, 4096, 4096, dtype="bf16", hardware=hw, loop="sustained")
    b = api.gemm(4096, 4096, 4096, dtype="bf16", hardware=hw)
    assert a["time_s"] == b["time_s"] and a["power_s"] is None and not a["power_bound"]


def test_bad_loops_and_unmeasured_dtypes_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"^loop: unknown loop 'long'"):
        api.gemm(1024, 1024, 1024, loop="long")
    with pytest.raises(ConfigError, match=r"^loop: 'sustained' needs power\.flop_j for dtype 'fp32'"):
        api.gemm(1024, 1024, 1024, dtype="fp32", hardware="h100-8", loop="sustained")
    with pytest.raises(ConfigError, match=r"power\.idle_w: 800 W is not below power\.limit_w \(700 W\)"):
        load_hardware("h100-8", {"power.idle_w": 800.0})


def _azure_h100_sustained():
    return [r for r in load_dataset() if r.id.startswith("h100-gemm-fp8-") and r.id.endswith("-azure")
            and r.workload["loop"] == "sustained"]  # fmt: skip


def test_the_limit_moves_a_never_fitted_sources_sustained_rows_towards_measurement():
    rows = _azure_h100_sustained()
    assert len(rows) == 6 and all(r.blind for r in rows)
    pred = Predictor()
    with_limit = [abs(pred.predict(r).predicted / r.measured - 1) for r in rows]
    short = [api.gemm(r.workload["m"], r.workload["n"], r.workload["k"], dtype="fp8")["tflops"] / r.measured - 1
             for r in rows]  # fmt: skip
    assert min(short) > 0  # the short-run rate is above what every one of these loops sustains
    assert statistics.median(with_limit) < 0.6 * statistics.median(short)


@pytest.mark.parametrize("preset", sorted(CLOCK_RUNS))
def test_the_measured_clock_rises_beside_communication_under_the_limit(preset):
    """The runs the docs quote (docs/validation.md, "Clock under combined load"): a GEMM of random data
    alone holds the power limit's clock; beside a copy kernel or the driver's copy the pair still draws
    about the limit but the clock is higher, and beside a copy on 32 blocks it is the boost clock."""
    run = json.loads(CLOCK_RUNS[preset].read_text())
    clock = {
        tuple(r["workloads"]): r["clock"]["sm_mhz"]["median"]
        for r in run["runs"]
        if r["clock"].get("samples")
    }
    power = {
        tuple(r["workloads"]): r["clock"]["power_w"]["median"]
        for r in run["runs"]
        if r["clock"].get("samples")
    }
    alone = clock[("gemm-bf16",)]
    assert alone < 1550 and power[("gemm-bf16",)] > 680  # at the 700 W limit
    for other in ("copy-132", "memcpy", "copy-32"):
        assert clock[("gemm-bf16", other)] > alone + 50, other
    assert clock[("gemm-bf16", "copy-32")] >= 1950
    assert clock[("gemm-bf16", "h2d")] < alone + 50  # a copy-engine copy leaves the GEMM's clock as it is
