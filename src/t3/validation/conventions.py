"""Measurement conventions: what a published number means and how it compares with a prediction.

Collectives follow nccl-tests (``doc/PERFORMANCE.md`` of NVIDIA/nccl-tests): a test of ``size`` bytes
(all_reduce: the buffer; reduce_scatter: the full input; all_gather: the full output; all_to_all: one
GPU's whole send buffer) that takes ``time`` has ``algbw = size / time`` and
``busbw = algbw x 2(n-1)/n`` for all_reduce, ``x (n-1)/n`` for the others. GEMMs: ``TFLOPS = 2 M N K /
time / 1e12``. Overlap: ``speed-up = sequential time / fused time`` (> 1 a gain, < 1 a loss).

Every row is compared in its category's first unit (GB/s of busbw, TFLOPS, x, ms); a row published as
a time is converted with these closed forms.
"""

from __future__ import annotations

from t3.validation.dataset import Row

COMPARED_UNIT = {
    "collective_busbw": "GB/s",
    "gemm_tflops": "TFLOPS",
    "overlap_speedup": "x",
    "overlap_time": "ms",
    "interference": "%",
    "hbm_bandwidth": "GB/s",
    "latency": "us",
}
# categories whose error is the difference in the compared unit (percentage points), not a ratio
ABSOLUTE_ERROR = ("interference",)
QUANTITY = {
    "collective_busbw": "collective bus bandwidth",
    "gemm_tflops": "GEMM throughput",
    "overlap_speedup": "overlap speed-up (sequential / fused)",
    "overlap_time": "GEMM + collective time",
    "interference": "slowdown beside a concurrent communication",
    "hbm_bandwidth": "memory stream bandwidth",
    "latency": "runtime latency",
}


def busbw_factor(op: str, gpus: int) -> float:
    """nccl-tests bus-bandwidth factor (the public API's, so both sides use one definition)."""
    from t3.api import busbw_factor as f

    return f(op, gpus)


def busbw_Bps(op: str, nbytes: int, gpus: int, time_s: float) -> float:
    """busbw of a collective of ``nbytes`` (nccl-tests size) taking ``time_s`` on ``gpus`` GPUs."""
    return nbytes / time_s * busbw_factor(op, gpus)


def tflops(m: int, n: int, k: int, time_s: float) -> float:
    return 2.0 * m * n * k / time_s / 1e12


def measured_compared(row: Row) -> float:
    """The row's measurement in its category's compared unit."""
    w = row.workload
    if row.category == "collective_busbw":
        if row.unit == "us":
            return busbw_Bps(w["op"], w["nbytes"], w["gpus"], row.measured * 1e-6) / 1e9
        return row.measured
    if row.category == "gemm_tflops":
        return tflops(w["m"], w["n"], w["k"], row.measured * 1e-3) if row.unit == "ms" else row.measured
    if row.category == "overlap_time":
        return row.measured / 1e3 if row.unit == "us" else row.measured
    if row.category == "interference" and row.unit == "x":
        return 100.0 * (row.measured - 1.0)
    return row.measured
