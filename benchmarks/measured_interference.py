"""The model beside the interference rows `t3 measure` took on a GPU (`measurements/`): how far the
engine's slowdown of a GEMM beside a kernel holding k SMs is from the GPU's, arrangement by arrangement.

    python benchmarks/measured_interference.py                      # every run under measurements/
    python benchmarks/measured_interference.py measurements/h200/h200-8-20261126-223152

Prints (1) per arrangement and victim: rows, median |error| in percentage points, and how many rows the
model puts on the same side of 10 % (a slowdown a user would notice or not); (2) the GEMM's slowdown
beside a held copy on k thread blocks, k by k, measured and predicted, for each GEMM of the runs (the
staircase of lost SMs), per GPU. Predictions are `t3 validate`'s (t3.validation.runner.Predictor) on the preset
each row is filed under; nothing is fitted here. Rows whose interferer did not outlast the GEMM are
left out of (2) and counted in (1) like any other.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from t3.errors import T3Error
from t3.validation import load_dataset
from t3.validation.runner import Predictor

ROOT = Path(__file__).resolve().parent.parent / "measurements"
NOTICE_PCT = 10.0  # a slowdown above this a user notices


def runs(args: list[str]) -> list[Path]:
    if args:
        out = [Path(a) / "measured.toml" if Path(a).is_dir() else Path(a) for a in args]
        for p in out:
            if not p.is_file():
                sys.exit(f"error: {p}: no measured.toml there")
        return out
    return sorted(ROOT.glob("*/*/measured.toml"))


def main(argv: list[str]) -> None:
    files = runs(argv)
    rows = [r for r in load_dataset(files) if r.category == "interference" and r.workload["gpus"] == 1]
    pred = Predictor()
    by: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    held: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    refused: dict[str, int] = defaultdict(int)
    for r in rows:
        w = r.workload
        try:
            o = pred.predict(r)
        except T3Error as err:  # e.g. a comm on every CU leaves the GEMM none: said, never guessed
            why = " ".join(str(err).split()).removeprefix(f"{r.id}: ")  # one line per cause, not per row
            refused[why] += 1
            by[(w["arrangement"], w["victim"] + " (not predicted)")].append((r.measured, r.measured))
            continue
        by[(w["arrangement"], w["victim"])].append((o.measured, o.predicted))
        cov = r.published.get("coverage", 1.0)
        if w["arrangement"] == "held" and w["victim"] == "compute" and w["comm"] == "sm_copy" and cov >= 1.0:
            size = f"{w['nbytes'] / 2**20:.0f} MiB"
            gpu = r.hardware.split("-")[0].upper()
            held[(f"{gpu} {w['m']}x{w['n']}x{w['k']}", size, w["cus"])].append((o.measured, o.predicted))

    print(
        f"{len(rows)} interference rows from {len(files)} run(s): "
        + ", ".join(str(f.parent.name) for f in files)
    )
    print()
    print(f"{'arrangement':12s} {'victim':24s} {'rows':>5s} {'median |err|':>13s} {'same side of 10 %':>18s}")
    for (arr, victim), pairs in sorted(by.items()):
        if victim.endswith("(not predicted)"):
            print(f"{arr:12s} {victim:24s} {len(pairs):5d} {'-':>13s} {'-':>18s}")
            continue
        err = statistics.median(abs(p - m) for m, p in pairs)
        side = sum((m > NOTICE_PCT) == (p > NOTICE_PCT) for m, p in pairs)
        print(f"{arr:12s} {victim:24s} {len(pairs):5d} {err:10.1f} pp {side:11d} of {len(pairs):3d}")
    for why, n in sorted(refused.items()):
        print(f"  not predicted ({n} rows): {why}")
    print()
    print(
        "GEMM slowdown beside a held copy on k thread blocks (median over runs and repeats; % measured / predicted)"
    )
    shapes = sorted({(s, z) for s, z, _ in held}, key=lambda t: (t[0], t[1]))
    ks = sorted({k for _, _, k in held})
    print(f"{'GPU, GEMM':21s} {'copy':>8s} " + " ".join(f"{'k=' + str(k):>11s}" for k in ks))
    for shape, size in shapes:
        cells = []
        for k in ks:
            v = held.get((shape, size, k))
            if not v:
                cells.append(f"{'':>11s}")
                continue
            m = statistics.median(x for x, _ in v)
            p = statistics.median(y for _, y in v)
            cells.append(f"{m:5.0f}/{p:<5.0f}")
        print(f"{shape:21s} {size:>8s} " + " ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
