"""FiCCO speed: `select` latency (a reduced model of the engine, no schedule simulated) and `explore` wall
time per operator.

Run: PYTHONPATH=src python3 benchmarks/bench_ficco.py [--repeat N] [--quick]
Prints a table (medians over N repeats; ``--quick``: the first operator on one preset). Not a test: no
assertion on time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from t3.config.hardware import load_hardware
from t3.ficco.learned import select_shipped as select
from t3.ficco.losses import explore
from t3.ficco.space import FiccoOperator

CASES = [
    FiccoOperator("ag-gemm", 8192, 3584, 4096, label="llama3-8b FC-1"),
    FiccoOperator("gemm-rs", 8192, 4096, 1792, label="llama3-8b FC-2"),
    FiccoOperator("moe", 8192, 14336, 4096, label="mixtral prefill, uniform"),
    FiccoOperator("moe", 8192, 14336, 4096, skew=0.5, label="mixtral prefill, skew 0.5 (all GPUs)"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the first operator on mi300x-8 only")
    a = ap.parse_args()
    print(f"{'operator':40s} {'hw':9s} {'select (ms)':>12s} {'explore (s)':>12s} {'schedules':>10s}")
    for hwn in ("mi300x-8",) if a.quick else ("mi300x-8", "h100-8"):
        hw = load_hardware(hwn)
        for f in CASES[:1] if a.quick else CASES:
            sel = []
            for _ in range(max(a.repeat, 5)):
                t0 = time.perf_counter()
                select(f, hw)
                sel.append(time.perf_counter() - t0)
            exs = []
            n = 0
            for _ in range(a.repeat if not f.skew else 1):
                t0 = time.perf_counter()
                n = len(explore(f, hw).evaluations)
                exs.append(time.perf_counter() - t0)
            print(
                f"{f.label:40s} {hwn:9s} {1e3 * statistics.median(sel):12.3f} {statistics.median(exs):12.2f} {n:10d}"
            )


if __name__ == "__main__":
    main()
