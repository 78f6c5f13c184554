"""Calibrate ``collective.host_call_s``, the host seconds a collective call costs per GPU, on the
calibration rows that pin it.

Run: PYTHONPATH=src python3 benchmarks/calibrate_host_call.py

A thread that drives N GPUs (nccl-tests ``-g N``: one process, N GPUs) issues the N calls of an
iteration one after another (NCCL's group launch enqueues and launches each GPU's kernel in turn), and
nccl-tests times back-to-back iterations on the host: where the kernels are shorter than that, an
iteration takes ``N x host_call_s`` whatever the size. The value is the closed form
``median(time / N)`` over the host-timed calibration rows of ``collective_busbw`` with
``gpus_per_thread = N > 1`` of each preset (a row that publishes only its bus bandwidth gives its time
through nccl-tests' bus factor); the table prints every row and the value. Validation rows are never used.
"""

from __future__ import annotations

import statistics

from t3.api import busbw_factor
from t3.validation.dataset import load_dataset


def call_time_us(r) -> float:
    """The row's time per iteration in us: as published, or from its published bus bandwidth (a table that
    prints busbw only: time = bytes x the collective's bus factor / busbw, nccl-tests' definition)."""
    pub, w = r.published, r.workload
    if "time_us" in pub:
        return pub["time_us"]
    return w["nbytes"] * busbw_factor(w["op"], w["gpus"]) / (pub["busbw_GBps"] * 1e9) * 1e6


def main() -> None:
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.role == "calibration"
            and r.workload["timing"] == "host" and r.workload["gpus_per_thread"] > 1]  # fmt: skip
    for name in sorted({r.hardware for r in rows}):
        mine = [r for r in rows if r.hardware == name]
        per = []
        print(f"{'row':34} {'time (us)':>10} {'GPUs/thread':>12} {'time / GPU (us)':>16}")
        for r in mine:
            t = call_time_us(r)
            g = r.workload["gpus_per_thread"]
            per.append(t / g)
            print(f"{r.id:34} {t:10.2f} {g:12d} {t / g:16.3f}")
        value = statistics.median(per)
        print(f"{name}: collective.host_call_s = {value * 1e-6:.3g} s (median of {len(per)} rows)")


if __name__ == "__main__":
    main()
