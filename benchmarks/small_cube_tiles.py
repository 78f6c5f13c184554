"""Small GEMM cubes on the tile the model picks and on the preset's largest tile, beside their measured kernel
times: the two readings of the B200's small-cube rows (pytorch/ao#2427) and the Hopper row that tells the
library's habit there (the H200's FP16 1024 cube of tile-ai/tileops#2110). Not a test, and nothing fitted:
the model's own plans (``t3.ops.gemm.plan_gemm``, the kernel alone: no launch), the measured times as the
dataset has them (``src/t3/validation/data/gemms.toml``).

    PYTHONPATH=src python benchmarks/small_cube_tiles.py
"""

from __future__ import annotations

from t3.config.hardware import load_hardware
from t3.ops.gemm import plan_gemm
from t3.validation import load_dataset
from t3.workload.sublayers import GemmShape

ROWS = [
    "b200-gemm-bf16-1024cube-torchao2427",
    "b200-gemm-bf16-1536cube-torchao2427",
    "b200-gemm-bf16-2048cube-torchao2427",
    "h200-gemm-fp16-1024cube-tileops2110",
]


def main() -> None:
    rows = {r.id: r for r in load_dataset()}
    print(f"{'row':40s} {'measured':>11s} {'model':>22s} {'largest tile':>26s}")
    for rid in ROWS:
        r = rows[rid]
        w, hw = r.workload, load_hardware(r.hardware)
        shape = GemmShape(w["m"], w["n"], w["k"], w["dtype"])
        measured_us = 2.0 * w["m"] * w["n"] * w["k"] / (r.measured * 1e12) * 1e6
        best = plan_gemm(shape, hw)
        big = plan_gemm(shape, hw, tile=(hw.compute.tile_m, hw.compute.tile_n))
        cells = []
        for plan in (best, big):
            t = plan.alone_s(hw, launch=False) * 1e6
            cells.append(
                f"{plan.breakdown(hw)['tile']:>8s} {t:6.2f} us {100 * (measured_us / t - 1):+6.1f} %"
            )
        print(f"{rid:40s} {measured_us:8.2f} us {cells[0]:>22s} {cells[1]:>26s}")
    print(
        "(%: the row's TFLOPS error on that plan, predicted / measured - 1 = measured time / the plan's time - 1)"
    )


if __name__ == "__main__":
    main()
