"""Simulator speed: simulations per second and events per second for representative sublayers.

Run: python benchmarks/bench_sim.py [--repeat N]
Prints a table (medians over N repeats of a batch). Not a test: no assertion on time.

The T3 configurations reuse a built schedule for the same (configuration, operator, hardware,
symmetric mode) (:func:`t3.schedules.t3.built_schedule`), so a repeated simulation builds nothing:
``sims/s`` is that repeated call (every run still simulates every event: allocations are memoised
within one run only), ``cold sims/s`` clears that cache before every simulation (schedule built and
simulated each time). GEMM plans are memoised across calls in both columns.
"""

from __future__ import annotations

import argparse
import statistics
import time

from t3.config.hardware import load_hardware
from t3.schedules import RunOptions, get_config
from t3.schedules.t3 import clear_schedule_cache
from t3.workload import get_model, sublayer_operator

CASES = [
    ("t-nlg", 8, "fc2", "sequential", "paper-80cu", True),
    ("t-nlg", 8, "fc2", "concurrent", "paper-80cu", True),
    ("t-nlg", 16, "op", "sequential", "paper-80cu", True),
    ("gpt-3", 32, "fc2", "sequential", "paper-80cu", True),
    ("t-nlg", 8, "fc2", "sequential", "paper-80cu", False),
    ("llama-3-70b", 8, "fc2", "sequential", "mi300x-8", True),
    ("t-nlg", 8, "fc2", "t3", "paper-80cu", True),
    ("t-nlg", 8, "fc2", "t3-mca", "paper-80cu", True),
    ("t-nlg", 16, "op", "t3-mca", "paper-80cu", True),
    ("gpt-3", 32, "fc2", "t3-mca", "paper-80cu", True),
    ("mt-nlg", 32, "fc2", "t3-mca", "paper-80cu", True),  # (Llama 3 405B: 8 KV heads, TP <= 8)
    ("t-nlg", 8, "fc2", "t3-mca", "paper-80cu", False),
]


def bench(case, batch: int, repeat: int, cold: bool = False) -> tuple[float, float, int, int]:
    model, tp, sl, cfg, hwn, sym = case
    hw = load_hardware(hwn)
    op = sublayer_operator(get_model(model), sl, tp)
    spec = get_config(cfg)
    opts = RunOptions(symmetric=sym)
    rates, events, ops = [], 0, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(batch):
            if cold:
                clear_schedule_cache()
            out = spec.run(op, hw, opts)
        dt = time.perf_counter() - t0
        rates.append(batch / dt)
        events = out.events
        ops = sum(len(r.schedule.ops) for r in out.results)
    sims = statistics.median(rates)
    return sims, sims * events, events, ops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=20)
    a = ap.parse_args()
    print(f"{'model':12} {'tp':>3} {'sublayer':8} {'config':12} {'hardware':11} {'mode':9} "
          f"{'ops':>6} {'events':>7} {'sims/s':>9} {'events/s':>10} {'cold sims/s':>11}")  # fmt: skip
    for case in CASES:
        sims, evs, events, ops = bench(case, a.batch, a.repeat)
        cold = bench(case, a.batch, a.repeat, cold=True)[0]
        model, tp, sl, cfg, hwn, sym = case
        mode = "symmetric" if sym else "all-GPU"
        print(
            f"{model:12} {tp:3d} {sl:8} {cfg:12} {hwn:11} {mode:9} {ops:6d} {events:7d} {sims:9.1f} {evs:10.0f} {cold:11.1f}"
        )
    print(f"(median of {a.repeat} batches of {a.batch} simulations, one process, one core; units: 1/s;")
    print(" cold: built schedules forgotten before every simulation)")


if __name__ == "__main__":
    main()
