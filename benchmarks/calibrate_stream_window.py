"""``compute.stream_inflight_bytes`` of h100-8 and h200-8: the bytes of loads one thread block of t3 measure's
copy kernel keeps in flight, from that GPU's copies on k blocks alone (measurements/<gpu>/*/measured.toml,
``hbm_bandwidth`` rows with ``stream = "copy"`` and ``cus`` > 0; calibration rows).

The kernel (src/t3/measure/kernels.py) loads a block of 32 KiB, then stores it, then takes the next: one
block moves its loads over the memory's latency, not over what its CU could issue. The value is the window
at which the model's copies on the k below saturation (under ``t3.measure.calibrate.SATURATION`` of the
fastest copy measured, as ``t3 calibrate`` takes them for ``compute.cu_copy_Bps``) give the measured GB/s
(median of predicted / measured - 1 = 0, by bisection through ``t3.api.memory_stream`` on the preset as
shipped). Not fitted to: the same kernel's slowdown beside a GEMM (the held rows), which is what it then
predicts (``python benchmarks/measured_interference.py``).

    PYTHONPATH=src python benchmarks/calibrate_stream_window.py

Prints, per GPU, the rows used and the value; the presets' comments name this command.
"""

from __future__ import annotations

from pathlib import Path

from t3.config.hardware import load_hardware
from t3.measure.calibrate import SATURATION, _root, _stream_bias, _stream_rows
from t3.validation import load_dataset

ROOT = Path(__file__).resolve().parent.parent / "measurements"


def main() -> None:
    for gpu, preset in (("h100", "h100-8"), ("h200", "h200-8")):
        files = sorted((ROOT / gpu).glob("*/measured.toml"))
        rows = load_dataset(files)
        blocks = _stream_rows(rows, "copy", cus=True)
        fastest = max(r.measured for r in blocks + _stream_rows(rows, "copy"))
        below = [r for r in blocks if r.measured < SATURATION * fastest]
        hw = load_hardware(preset)

        def bias(w: float, hw=hw, below=below) -> float:
            return _stream_bias(below, hw.with_overrides({"compute.stream_inflight_bytes": w}))

        value = _root(bias, 1e3, 1e6)
        ks = sorted({r.workload["cus"] for r in below})
        per_block = sorted({round(r.measured / r.workload["cus"], 1) for r in below})
        print(
            f"{preset}: {len(below)} copy rows on k = {', '.join(map(str, ks))} blocks ({len(files)} runs), "
            f"{per_block[0]}-{per_block[-1]} GB/s per block read + written; at the preset's latency "
            f"{hw.hbm.latency_s * 1e9:.0f} ns: compute.stream_inflight_bytes = {value:.0f} B "
            f"(bias {100 * bias(value):+.2f} %)"
        )


if __name__ == "__main__":
    main()
