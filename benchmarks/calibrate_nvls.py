"""`collective.nvls_loop_s` of h100-8: the fixed cost of one loop of NCCL's NVLS all-reduce kernel, paid
for the loops its smaller chunks add below 1 GiB (t3.ops.collectives.nvls_extra_loops_s; the chunk rule
is NCCL's own, src/enqueue.cc). No such cost is published.

Calibration rows (stated in src/t3/validation/data/collectives.toml): xxrjun/nccl-tests-cluster's 8-GPU
all_reduce_perf rows of 32-512 MiB (64 KiB and 32 KiB chunks). The value minimises their median |error|
on a grid of 0.1 us. Every other H100 and H200 all-reduce row of 2 MiB and more is validation, printed
beside with the algorithm the model picks (the least predicted time, as NCCL's tuner does), with and
without the cost.

    PYTHONPATH=src python benchmarks/calibrate_nvls.py
"""

from __future__ import annotations

import statistics

from t3.validation import load_dataset
from t3.validation.runner import Predictor

GRID = [round(0.1 * i, 1) for i in range(0, 151)]  # us: 0 ... 15
MiB = 1 << 20


def rows():
    return [r for r in load_dataset() if r.category == "collective_busbw" and r.hardware in ("h100-8", "h200-8")
            and r.workload["op"] == "all_reduce" and r.workload["nbytes"] >= 2 * MiB]  # fmt: skip


def predict(r, loop_s: float) -> tuple[float, str]:
    """(relative error of the predicted bus bandwidth, algorithm) with ``nvls_loop_s`` = loop_s: the row
    predicted as ``t3 validate`` predicts it, on the overridden preset."""
    o = Predictor({"collective.nvls_loop_s": loop_s}).predict(r)
    return o.error, o.detail["algo"]


def main() -> None:
    rs = rows()
    cal = [r for r in rs if r.role == "calibration"]
    print(f"{len(rs)} all-reduce rows of h100-8 / h200-8 from 2 MiB, {len(cal)} of them calibration")
    best = None
    for us in GRID:
        med = statistics.median(abs(predict(r, us * 1e-6)[0]) for r in cal)
        if best is None or med < best[0] - 1e-12:
            best = (med, us)
    med, us = best
    print(f"nvls_loop_s = {us:g}e-6 s: median |error| {100 * med:.2f} % on the calibration rows")
    print(
        f"{'row':34s} {'role':12s} {'GPUs':>4s} {'size':>9s} {'error':>8s} {'algo':14s} {'no loop cost':>13s}"
    )
    for r in rs:
        e, a = predict(r, us * 1e-6)
        e0, a0 = predict(r, 0.0)
        size = f"{r.workload['nbytes'] / MiB:g} MiB"
        print(f"{r.id:34s} {r.role:12s} {r.workload['gpus']:4d} {size:>9s} {100 * e:+7.1f} % {a:14s}"
              f" {100 * e0:+7.1f} % ({a0})")  # fmt: skip


if __name__ == "__main__":
    main()
