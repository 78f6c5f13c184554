"""The power section of h100-8 and h200-8 (`power.*`), from the clock and power runs of
`benchmarks/device_clock.py` on each GPU (measurements/<gpu>/clock-*.json). Closed forms, no search:

- ``limit_w``: the board's power limit as nvidia-smi reports it (``power.limit``).
- ``idle_w``: the power drawn by the idle GPU (the run with no work).
- ``byte_j``: (power - idle) / (bytes read + written per second) of the copies alone (the copy kernel
  on every SM and on 32 blocks, and the driver's device-to-device copy), the median of the three.
- ``flop_j[dtype]`` (calibration targets: the steady rates of the 8192-cubed GEMMs of random data,
  bf16, fp16 and fp8, run back to back for 2 s at the power limit): the energy the limit leaves per
  call, (limit - idle) x the measured time per call, less the call's device-memory bytes (operands
  read once, output written once: t3.ops.gemm.gemm_compulsory_bytes) x byte_j, per FLOP.

Power readings are NVML's, a one-second average: the plateau from 1.2 s on is used (a run that kept only
the medians over 0.5-2.0 s, as the H200's first did, would give those; its second run is used here).

    PYTHONPATH=src python benchmarks/calibrate_power.py

Prints every input and the values, with units; the presets' comments name this command.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from t3.ops.gemm import gemm_compulsory_bytes
from t3.workload.sublayers import GemmShape

ROOT = Path(__file__).resolve().parent.parent / "measurements"
RUNS = {"h100-8": ROOT / "h100" / "clock-20261127.json", "h200-8": ROOT / "h200" / "clock-20261127-2.json"}
PLATEAU_S = 1.2  # NVML's power is a 1 s average: it has settled from here on (h100 run's samples)
GEMM = 8192
COPIES = ("copy-132", "copy-32", "memcpy")


def power_w(run: dict) -> tuple[float, str]:
    rows = run.get("samples", {}).get("rows")
    if rows:
        plateau = [r[3] for r in rows if r[0] >= PLATEAU_S]
        if plateau:
            return statistics.median(plateau), f"plateau from {PLATEAU_S} s"
    return run["clock"]["power_w"]["median"], "median over 0.5-2.0 s"


def alone(runs: list[dict], name: str) -> dict:
    return next(r for r in runs if r["workloads"] == [name])


def calibrate(preset: str, path: Path) -> dict:
    d = json.loads(path.read_text())
    runs = d["runs"]
    smi = d["environment"]["smi"].splitlines()[-1]
    limit = float(re.findall(r"([\d.]+) W", smi)[0])
    idle, how = power_w(next(r for r in runs if r["workloads"] == []))
    print(f"{preset} ({d['environment']['gpu']}, {path.relative_to(ROOT.parent)}): power limit {limit:.0f} W"
          f" (nvidia-smi), idle {idle:.0f} W ({how})")  # fmt: skip
    per_byte = []
    for name in COPIES:
        r = alone(runs, name)
        p, how = power_w(r)
        s = r["streams"][0]
        rate = s["rate"] * 1e9  # bytes read + written per second
        per_byte.append((p - idle) / rate)
        print(f"  {name:10s} {p:6.0f} W ({how}), {rate / 1e9:7.1f} GB/s read + written:"
              f" {per_byte[-1] * 1e12:6.1f} pJ/B")  # fmt: skip
    byte_j = statistics.median(per_byte)
    print(f"  byte_j = {byte_j:.4g} J/B (median of the three)")
    flop_j = {}
    for dtype in ("bf16", "fp16", "fp8"):
        s = alone(runs, f"gemm-{dtype}")["streams"][0]
        t = s["median_call_s"]
        nbytes = gemm_compulsory_bytes(GemmShape(GEMM, GEMM, GEMM, dtype))
        flops = 2.0 * GEMM**3
        flop_j[dtype] = ((limit - idle) * t - byte_j * nbytes) / flops
        print(f"  gemm {dtype:5s} {GEMM}^3: {t * 1e6:7.1f} us per call ({flops / t / 1e12:6.1f} TFLOP/s) at the"
              f" limit; {nbytes / 2**20:6.0f} MiB of device memory (operands once, output once): flop_j = {flop_j[dtype]:.4g} J"
              f" ({flop_j[dtype] * 1e12:.3f} pJ/FLOP)")  # fmt: skip
    return {"limit_w": limit, "idle_w": round(idle, 1), "byte_j": float(f"{byte_j:.4g}"),
            "flop_j": {k: float(f"{v:.4g}") for k, v in flop_j.items()}}  # fmt: skip


def main() -> None:
    for preset, path in RUNS.items():
        print(f"  -> [power] {json.dumps(calibrate(preset, path))}")
        print()


if __name__ == "__main__":
    main()
