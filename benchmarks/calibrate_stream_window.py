"""``compute.stream_inflight_bytes`` of h100-8 and h200-8: the bytes of loads one thread block of t3 measure's
copy kernel keeps in flight, from that GPU's copies on k blocks alone (measurements/<gpu>/*/measured.toml,
``hbm_bandwidth`` rows with ``stream = "copy"`` and ``cus`` > 0; calibration rows).

The kernel (src/t3/measure/kernels.py) loads a block of 32 KiB, then stores it, then takes the next: one
block moves its loads over the memory's latency, not over what its CU could issue. The value is the window
at which the model's copies on the k below saturation (under ``t3.measure.calibrate.SATURATION`` of the
fastest copy measured) give the measured GB/s (median of predicted / measured - 1 = 0, by bisection through
``t3.api.memory_stream`` on the preset as shipped): the fit ``t3 calibrate --measured`` runs on one run
(``t3.measure.calibrate._fit_stream_window``), here on every run of the GPU at once. Not fitted to: the same kernel's slowdown beside a GEMM (the held rows), which is what it then
predicts (``python benchmarks/measured_interference.py``).

    PYTHONPATH=src python benchmarks/calibrate_stream_window.py

Prints, per GPU, the rows used and the value; the presets' comments name this command.
"""

from __future__ import annotations

from pathlib import Path

from t3.config.hardware import load_hardware
from t3.measure.calibrate import Calibration, _fit_stream_window, _stream_bias
from t3.validation import load_dataset

ROOT = Path(__file__).resolve().parent.parent / "measurements"


def main() -> None:
    for gpu, preset in (("h100", "h100-8"), ("h200", "h200-8")):
        files = sorted((ROOT / gpu).glob("*/measured.toml"))
        rows = load_dataset(files)
        hw = load_hardware(preset)
        cal = Calibration(hw, hw, [])
        fitted = _fit_stream_window(
            rows, hw, cal
        )  # the fit t3 calibrate --measured runs, on every run at once
        fit = cal.fits[-1]
        below = [r for r in rows if r.id in set(fit.rows)]
        per_block = sorted({round(r.measured / r.workload["cus"], 1) for r in below})
        print(
            f"{preset}: {len(below)} copy rows ({len(files)} runs), {per_block[0]}-{per_block[-1]} GB/s per block"
            f" read + written; at the preset's latency {hw.hbm.latency_s * 1e9:.0f} ns: {fit.what}:"
            f" compute.stream_inflight_bytes = {fit.value:.0f} B (bias {100 * _stream_bias(below, fitted):+.2f} %)"
            + (f" [{fit.note}]" if fit.note else "")
        )


if __name__ == "__main__":
    main()
