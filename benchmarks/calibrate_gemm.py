"""Calibrate each real-GPU preset's GEMM inner-loop efficiency on its calibration GEMM rows only.

Run: PYTHONPATH=src python3 benchmarks/calibrate_gemm.py

For every preset with GEMM calibration rows in the validation dataset (``src/t3/validation/data``),
``compute.gemm_efficiency`` is swept over 0.700 .. 1.000 in steps of 0.005; the loss of a value is
the largest |predicted / measured - 1| over that preset's calibration GEMM rows (TFLOPS through
``t3.api.gemm``, so the tile choice, waves, L2 reuse and K-loop prologues all act). The table prints
the best value per preset and the loss around it; validation rows are never used. The sustained GEMM
clock is not fitted: it is a preset field with its own source.

Presets with rows of their own GPU measured by ``t3 measure`` (``MEASURED``) are fitted on those rows
instead, by ``t3 calibrate --measured`` (``compute.gemm_efficiency`` on the large BF16 GEMMs, then
``compute.gemm_clock_hz.fp8`` on the FP8 ones): dozens of shapes of the library the model describes
against the dataset's two or three. This script prints that command's GEMM fits for them.
"""

from __future__ import annotations

from pathlib import Path

from t3 import api
from t3.config.hardware import load_hardware
from t3.measure.calibrate import calibrate, load_measured
from t3.validation.conventions import measured_compared
from t3.validation.dataset import load_dataset

GRID = [round(0.700 + 0.005 * i, 3) for i in range(61)]
MEASURED = {
    "h100-8": "measurements/h100/h100-8-20261126-232539",
    "h200-8": "measurements/h200/h200-8-20261126-222829",
}


def main() -> None:
    rows = [r for r in load_dataset() if r.category == "gemm_tflops" and r.role == "calibration"]
    presets = sorted({r.hardware for r in rows} - set(MEASURED))
    print(f"{'preset':10} {'gemm_efficiency':>15} {'max |error|':>12}  rows (predicted / measured TFLOPS)")
    for name in presets:
        base = load_hardware(name)
        mine = [r for r in rows if r.hardware == name]
        results = []
        for eff in GRID:
            hw = base.with_overrides({"compute.gemm_efficiency": eff})
            errs = []
            for r in mine:
                w = r.workload
                got = api.gemm(w["m"], w["n"], w["k"], dtype=w["dtype"], hardware=hw)["tflops"]
                errs.append((r.id, got, measured_compared(r)))
            loss = max(abs(g / m - 1) for _, g, m in errs)
            results.append((loss, eff, errs))
        best = min(results, key=lambda x: (x[0], x[1]))
        i = GRID.index(best[1])
        for loss, eff, errs in results[max(0, i - 2) : i + 3]:
            mark = " <- chosen" if eff == best[1] else ""
            detail = ", ".join(f"{rid}: {g:.1f}/{m:.1f}" for rid, g, m in errs)
            print(f"{name:10} {eff:15.3f} {100 * loss:11.1f} %  {detail}{mark}")
    print("(loss = max |predicted/measured - 1| over the preset's calibration GEMM rows; TFLOPS)")
    for name, folder in MEASURED.items():
        cal = calibrate(load_measured(Path(folder), allow_cpu=False)[1], load_hardware(name))
        for f in cal.fits:
            if "gemm" in f.path:
                print(
                    f"{name:10} {f.path}: {f.value:.4g} (median |error| {100 * f.before:.1f} % -> {100 * f.after:.1f} %"
                    f" on {len(f.rows)} rows of {folder}: t3 calibrate --measured {folder} --base {name})"
                )


if __name__ == "__main__":
    main()
