"""The rows `t3 measure` took on an H200 (measurements/h200): they load as dataset rows of that GPU, and
the engine's whole-rounds mechanism keeps the GEMM's measured staircase beside a held copy kernel: a
one-wave GEMM of 128 tiles (512x8192x8192) doubles once a few SMs are held and loses nothing with one
or two. Switching the mechanism off (the last wave as a fluid) breaks it."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

import t3.ops.gemm as gemm
from t3.validation import load_dataset
from t3.validation.runner import Predictor

RUNS = sorted((Path(__file__).resolve().parents[2] / "measurements" / "h200").glob("*/measured.toml"))
ROWS = load_dataset(RUNS)


def test_the_measured_rows_are_the_h200s_calibration_rows():
    assert len(RUNS) == 4 and len(ROWS) > 1500
    assert {r.hardware for r in ROWS} == {"h200-8"}
    assert {r.role for r in ROWS} == {"calibration"}
    assert all(r.source == "measured by `t3 measure`, NVIDIA H200" for r in ROWS)
    assert {r.workload.get("arrangement") for r in ROWS if r.category == "interference"} == {
        "background", "together", "held"}  # fmt: skip


def _held(m, n, k, ks):
    rows = [r for r in ROWS if r.category == "interference" and r.workload["arrangement"] == "held"
            and r.workload["victim"] == "compute" and r.workload["comm"] == "sm_copy"
            and (r.workload["m"], r.workload["n"], r.workload["k"]) == (m, n, k) and r.workload["cus"] in ks]  # fmt: skip
    assert rows
    return rows


def _errors(rows):
    p = Predictor()
    return [abs(p.predict(r).predicted - r.measured) for r in rows]


def test_a_one_wave_gemm_doubles_beside_held_sms_in_whole_rounds():
    doubled = _held(512, 8192, 8192, {6, 8, 12, 16, 24, 32})
    assert statistics.median(r.measured for r in doubled) > 80.0  # measured: two rounds
    assert max(_errors(doubled)) < 15.0  # percentage points
    untouched = _held(512, 8192, 8192, {1, 2})
    assert max(r.measured for r in untouched) < 5.0 and max(_errors(untouched)) < 5.0


def test_without_whole_rounds_the_staircase_is_lost(monkeypatch):
    monkeypatch.setattr(gemm, "gemm_tail", lambda plan, w, hw: ())
    import t3.schedules.ficco as ficco
    import t3.schedules.t3 as t3s

    monkeypatch.setattr(ficco, "gemm_tail", lambda plan, w, hw: ())
    monkeypatch.setattr(t3s, "gemm_tail", lambda plan, w, hw: ())
    doubled = _held(512, 8192, 8192, {6, 8, 12, 16, 24, 32})
    assert min(_errors(doubled)) > 50.0  # the fluid wave loses a few per cent, not a round


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4096, 7168, 8192), (1024, 7168, 8192)])
def test_more_held_sms_never_slow_the_gemm_less(shape):
    """Measured and predicted, the GEMM's slowdown grows with the held blocks k up to half the SMs (66
    held, which leave the GEMM's 2-CTA clusters no slot by compute.cluster_ctas, are refused)."""
    p = Predictor()
    by_k: dict[int, list[float]] = {}
    for r in _held(*shape, set(range(1, 66))):
        by_k.setdefault(r.workload["cus"], []).append(p.predict(r).predicted)
    pred = [statistics.median(v) for _, v in sorted(by_k.items())]
    assert all(b >= a - 1e-9 for a, b in zip(pred, pred[1:], strict=False))
