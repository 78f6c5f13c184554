"""Wall time of the whole T3 reproduction (`t3 reproduce t3`, figures included), per worker count.

Run: python benchmarks/bench_reproduce.py [--repeat N] [--workers 1 2]
Prints a table (median over N runs, seconds). Not a test: no assertion on time. Each run is a fresh
interpreter (`python -m t3 reproduce t3`), so imports and process-pool start-up are included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def one(workers: int, quick: bool) -> float:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "t3", "reproduce", "t3", "--out", d, "--workers", str(workers)]
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
    a = ap.parse_args()
    print(f"{'command':40s} {'workers':>7s} {'median (s)':>10s} {'min (s)':>8s} {'max (s)':>8s}")
    for w in a.workers:
        ts = [one(w, a.quick) for _ in range(a.repeat)]
        name = "t3 reproduce t3" + (" --quick" if a.quick else "")
        print(f"{name:40s} {w:7d} {statistics.median(ts):10.2f} {min(ts):8.2f} {max(ts):8.2f}")


if __name__ == "__main__":
    main()
