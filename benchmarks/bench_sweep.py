"""Sweep throughput: points per second through the whole runner (validation excluded; execution,
journaling to the Parquet store and the final compaction included) on the local pool.

Run: PYTHONPATH=src python3 benchmarks/bench_sweep.py [--points N] [--repeat R] [--dask]
Prints a table (medians over R runs, each into a fresh store). Not a test: no assertion on time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from t3.experiments.sweep import execute, spec_from_dict

CASES = {  # name -> (base, per-point cost class)
    "small (op, 1024 tokens)": {"model": "t-nlg", "sublayer": "op", "tokens": 1024},
    "paper (fc2, 8192 tokens)": {"model": "t-nlg", "sublayer": "fc2"},
}


def grid(base: dict, n: int):
    bws = [1e10 * (1 + i / 7) for i in range(max(1, n // 2))]
    return spec_from_dict(
        {"base": base, "grid": {"hardware.link.bandwidth_Bps": bws, "config": ["sequential", "concurrent"]}}
    )


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bench(base: dict, n: int, executor: str, workers: int, repeat: int) -> tuple[float, float, float, int]:
    sw = grid(base, n)
    rates, sim, cpu = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            c0 = _cpu()
            t0 = time.perf_counter()
            df, st = execute(
                sw, executor=executor, workers=workers, store=Path(d) / "r.parquet", progress=False,
                **({"dask_processes": True} if executor == "dask" else {}),
            )  # fmt: skip
            dt = time.perf_counter() - t0
            cpu.append((_cpu() - c0) / len(sw))
        assert st.errors == 0 and st.computed == len(sw)
        rates.append(len(sw) / dt)
        sim.append(float(df["elapsed_s"].median()))
    return statistics.median(rates), statistics.median(sim), statistics.median(cpu), len(sw)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=400, help="points per small-case sweep (paper case: 1/4)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--dask", action="store_true", help="also time a 2-worker dask LocalCluster (startup included)"
    )
    a = ap.parse_args()
    runs = [("local", 1), ("local", 2)] + ([("dask", 2)] if a.dask else [])
    print(
        f"{'case':26} {'executor':9} {'workers':>7} {'points':>6} {'points/s':>9} {'speed-up':>8} "
        f"{'sim/point':>10} {'runner CPU/point':>16}"
    )
    for name, base in CASES.items():
        n = a.points if name.startswith("small") else max(2, a.points // 4)
        ref = None
        for ex, w in runs:
            rate, sim, cpu, npts = bench(base, n, ex, w, a.repeat)
            ref = ref or rate
            print(
                f"{name:26} {ex:9} {w:7d} {npts:6d} {rate:9.1f} {rate / ref:7.2f}x {sim * 1e3:7.2f} ms "
                f"{cpu * 1e3:13.3f} ms"
            )
    print(
        f"(median of {a.repeat} runs; points/s = points / wall time from first submission to compacted store; "
        "sim/point = median wall time of one point in its worker; runner CPU/point = CPU time of the sweep "
        "process per point (includes the simulations when workers=1, which runs in-process); "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end)"
    )


if __name__ == "__main__":
    main()
