"""Wall time of the whole T3 reproduction (`t3 reproduce t3`, figures included), per worker count.

Run: python benchmarks/bench_reproduce.py [--repeat N] [--workers 1 2] [--gc]
Prints a table (median over N runs, seconds). Not a test: no assertion on time. Each run is a fresh
interpreter (`python -m t3 reproduce t3`), so imports and process-pool start-up are included.
``--gc`` also runs it with CPython's default collector thresholds instead of the command's own
(:mod:`t3._gc`), interleaved run by run, and prints the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# the command with the collector's default thresholds (t3._gc.tune sets those it finds)
DEFAULT_GC = (
    "import gc, sys, t3._gc as g; g.THRESHOLDS = gc.get_threshold(); from t3.cli.main import main; main()"
)


def one(workers: int, quick: bool, default_gc: bool = False) -> float:
    with tempfile.TemporaryDirectory() as d:
        head = [sys.executable, "-c", DEFAULT_GC] if default_gc else [sys.executable, "-m", "t3"]
        cmd = [*head, "reproduce", "t3", "--out", d, "--workers", str(workers)]
        if quick:
            cmd.append("--quick")
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=os.environ.copy())
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gc", action="store_true", help="also with the collector's default thresholds")
    a = ap.parse_args()
    print(f"{'command':40s} {'workers':>7s} {'median (s)':>10s} {'min (s)':>8s} {'max (s)':>8s}")
    name = "t3 reproduce t3" + (" --quick" if a.quick else "")
    for w in a.workers:
        ts, td = [], []
        for _ in range(a.repeat):
            ts.append(one(w, a.quick))
            if a.gc:
                td.append(one(w, a.quick, default_gc=True))
        print(f"{name:40s} {w:7d} {statistics.median(ts):10.2f} {min(ts):8.2f} {max(ts):8.2f}")
        if a.gc:
            label = "  (default gc thresholds)"
            print(f"{label:40s} {w:7d} {statistics.median(td):10.2f} {min(td):8.2f} {max(td):8.2f}")
            print(
                f"{'  ratio default / t3 (medians)':40s} {w:7d} {statistics.median(td) / statistics.median(ts):9.2f}x"
            )


if __name__ == "__main__":
    main()
