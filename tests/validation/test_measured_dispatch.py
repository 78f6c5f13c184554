"""Block dispatch on the rows `t3 measure` took on an H100 and an H200 (measurements/): a GEMM launched
behind a kernel that fills every SM (the driver's device-to-device copy, PyTorch's add) waits for it,
so the two run one after the other: launched together they gain nothing, and a thin GEMM beside a
background of 256 MiB copies loses a whole copy per call. Switching the mechanism off (every kernel a
fluid share of the CUs from its launch) overshoots the thin GEMMs' loss by a factor of two to four."""

from __future__ import annotations

import statistics
from pathlib import Path

from t3.sim.schedule import ScheduleBuilder
from t3.validation import load_dataset
from t3.validation.runner import Predictor

RUNS = sorted((Path(__file__).resolve().parents[2] / "measurements").glob("*/*/measured.toml"))
ROWS = [r for r in load_dataset(RUNS) if r.category == "interference"]


def _every_sm(w) -> bool:
    return w["comm"] in ("memcpy", "sm_reduce") or (w["comm"] == "sm_copy" and w["cus"] in (0, 132))


def _thin_beside_copies():
    rows = [r for r in ROWS if r.workload["arrangement"] == "background" and r.workload["victim"] == "compute"
            and r.workload["comm"] == "memcpy" and r.workload["nbytes"] == 1 << 28 and r.workload["m"] <= 1024]  # fmt: skip
    assert len(rows) >= 8 and {r.hardware for r in rows} == {"h100-8", "h200-8"}
    return rows


def _errors(rows):
    p = Predictor()
    return [p.predict(r).predicted - r.measured for r in rows]


def test_the_driver_copy_is_a_kernel_on_every_sm_not_a_copy_engine():
    # measured alone: the driver's 256 MiB copy and the copy kernel on every SM take the same time
    def alone(comm, cus):
        return statistics.median(
            r.published["alone_us"] for r in ROWS if r.workload["comm"] == comm and r.workload["cus"] == cus
            and r.workload["nbytes"] == 1 << 28 and r.workload["victim"] == "comm" and r.hardware == "h200-8"
            and r.workload["arrangement"] == "together"
        )  # fmt: skip

    assert abs(alone("memcpy", 0) / alone("sm_copy", 132) - 1) < 0.05


def test_launched_together_a_gemm_and_a_kernel_on_every_sm_gain_nothing():
    pairs = [r for r in ROWS if r.workload["victim"] == "pair" and _every_sm(r.workload)]
    assert len(pairs) >= 40
    assert statistics.median(r.measured for r in pairs) > -5.0  # measured: about the two one after the other
    p = Predictor()
    assert all(p.predict(r).predicted > -3.0 for r in pairs)  # (a GEMM's first loads go beside the kernel)
    assert statistics.median(abs(e) for e in _errors(pairs)) < 5.0  # percentage points


def test_a_thin_gemm_behind_copies_on_every_sm_waits_a_whole_copy():
    rows = _thin_beside_copies()
    assert min(r.measured for r in rows) > 50.0
    assert statistics.median(abs(e) for e in _errors(rows)) < 30.0


def test_without_block_dispatch_the_thin_gemms_loss_overshoots(monkeypatch):
    monkeypatch.setattr(ScheduleBuilder, "kernel", lambda self, *a, **k: None)
    assert statistics.median(abs(e) for e in _errors(_thin_beside_copies())) > 100.0
