"""Accuracy targets on the validation rows of the dataset (never fitted), per category and hardware.

Run: PYTHONPATH=src python benchmarks/validation_targets.py [--strict]

Prints, for every category x hardware (and all hardware together), the number of validation rows,
the median and max |error| (error = predicted / measured - 1, as `t3 validate` computes it) and
whether the target holds (PASS) or not (MISS). Targets:

- collective bus bandwidth, 8 KiB to 16 GiB, device- and host-timed (H100 / H200 / MI300X, NVLS
  all-reduce included): median |error| <= 8 %, max <= 25 %;
- GEMM TFLOPS: median <= 8 %, max <= 20 %;
- overlap speed-up (sequential / fused): median <= 10 %, and the sign (gain or loss) right on >= 90 %
  of the rows;
- overlapped GEMM + collective times (overlap_time): median <= 10 %;
- interference (a kernel's slowdown beside a concurrent communication, in %): median |error| <= 5
  percentage points (the error of this category is predicted - measured, in points).

Rows committed before any prediction of them existed (``blind = true``) are also reported on their own
lines. Not a test: --strict only turns a MISS into exit status 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from t3.validation import load_dataset, run

KiB, GiB = 1 << 10, 1 << 30

# category -> (median limit, max limit or None, minimum share of right signs or None)
TARGETS = {
    "collective_busbw": (0.08, 0.25, None),
    "gemm_tflops": (0.08, 0.20, None),
    "overlap_speedup": (0.10, None, 0.90),
    "overlap_time": (0.10, None, None),
    "interference": (0.05, None, None),
}


def in_scope(o) -> bool:
    """Rows the targets cover (collectives: 8 KiB to 16 GiB)."""
    if o.row.category == "collective_busbw":
        return 8 * KiB <= o.row.workload["nbytes"] <= 16 * GiB
    return True


def line(cat: str, hw: str, os_: list) -> tuple[str, bool]:
    from t3.validation.conventions import ABSOLUTE_ERROR

    u = "pp" if cat in ABSOLUTE_ERROR else "%"  # interference: errors are percentage points
    errs = [abs(o.error) for o in os_]
    med, mx = statistics.median(errs), max(errs)
    lim_med, lim_max, lim_sign = TARGETS[cat]
    ok = True
    target = []
    if lim_med is not None:
        ok &= med <= lim_med
        target.append(f"median <= {lim_med * 100:.0f} {u}")
    if lim_max is not None:
        ok &= mx <= lim_max
        target.append(f"max <= {lim_max * 100:.0f} {u}")
    signs = "-"
    if lim_sign is not None:
        right = sum(o.sign_right for o in os_)
        signs = f"{right}/{len(os_)}"
        ok &= right >= lim_sign * len(os_)
        target.append(f"signs >= {lim_sign * 100:.0f} %")
    verdict = ("PASS" if ok else "MISS") if target else "-"
    text = (f"{cat:18s} {hw:11s} {len(os_):5d} {med * 100:9.1f} {u:2s}{mx * 100:8.1f} {u:2s}{signs:>7s}   "
            f"{', '.join(target) or 'no target':38s} {verdict}")  # fmt: skip
    return text, ok or not target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strict", action="store_true", help="exit with status 1 if any target is missed")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for r in load_dataset() if r.role == "validation"]
    outcomes = [o for o in run(rows) if in_scope(o)]
    wall = time.perf_counter() - t0
    print(f"{'category':18s} {'hardware':11s} {'rows':>5s} {'median|err|':>11s} {'max|err|':>10s} "
          f"{'signs':>7s}   {'target':38s} verdict")  # fmt: skip
    all_ok = True
    for cat in TARGETS:
        os_ = [o for o in outcomes if o.row.category == cat]
        if not os_:
            continue
        for hw in sorted({o.row.hardware for o in os_}):
            print(line(cat, hw, [o for o in os_ if o.row.hardware == hw])[0])
        text, ok = line(cat, "all", os_)
        print(text)
        all_ok &= ok
        blind = [o for o in os_ if o.row.blind]
        if blind:
            print(line(cat, "blind", blind)[0])
    print(f"{len(outcomes)} validation rows predicted in {wall:.1f} s")
    return 0 if all_ok or not a.strict else 1


if __name__ == "__main__":
    sys.exit(main())
