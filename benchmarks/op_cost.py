"""What one op costs on the way from a builder to a result, against what the same facts cost as flat lists:
the numbers behind issue 24's finding that a first sweep needs ops carried as columns.

Run: PYTHONPATH=src python benchmarks/op_cost.py [--repeat N]

Prints (1) microseconds per op of ``ScheduleBuilder.add_like`` (the copies that make most of a schedule's ops:
a GEMM's repeated waves) with and without ``build()``'s dependency pass, beside appending the same template,
key and dependency to three lists; (2) CPU milliseconds per configuration of a Sequential first sweep
(bench_peers.py's 40 GPT-3 FC-2 configurations on paper-80cu) in a fresh process with the cyclic garbage
collector as Python sets it, with ``t3``'s thresholds (``t3._gc``) and off, the runs interleaved; medians
of N. Not a test: no assertion on time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import TOKENS, TP  # noqa: E402  (the same grid as the peers' comparison)

N_OPS = 440  # about a Sequential first-sweep configuration's ops (first_sweep_phases.py's grid)

SWEEP = """
import gc, json, sys, time
mode = sys.argv[1]
if mode == "off":
    gc.disable()
elif mode == "t3":
    from t3._gc import tune
    tune()
from t3.config.hardware import load_hardware
from t3.schedules import RunOptions, get_config
from t3.workload import get_model, sublayer_operator
grid = json.loads(sys.argv[2])
hw, model, spec, opts = load_hardware("paper-80cu"), get_model("gpt-3"), get_config("sequential"), RunOptions()
t0 = time.process_time()
for tp, tokens in grid:
    spec.run(sublayer_operator(model, "fc2", tp, tokens), hw, opts)
print(json.dumps({"ms": 1e3 * (time.process_time() - t0) / len(grid)}))
"""


def per_op_us(repeat: int) -> dict[str, float]:
    from t3.config.hardware import load_hardware
    from t3.sim.schedule import ScheduleBuilder

    hw = load_hardware("h100-8")

    def builder(resolve: bool) -> None:
        b = ScheduleBuilder("ops", hw, 8)
        load = b.add(0, "L0", kind="gemm-load", cat="gemm", work=[(b.hbm(0), 1.0)])
        body = b.add(0, "C0", kind="gemm-compute", cat="gemm", work=[(b.cu(0), 1.0)], deps=[(0, "L0")])
        cref = (0, "C0")
        for i in range(1, N_OPS // 2):
            lref = (0, f"gemm.L{i}")
            b.add_like(load, 0, lref[1], (cref,))
            cref = (0, f"gemm.C{i}")
            b.add_like(body, 0, cref[1], (lref,))
        if resolve:
            b.build()

    def columns() -> None:
        tmpl, keys, deps = [], [], []
        for i in range(1, N_OPS // 2):
            tmpl.append(0)
            keys.append(f"gemm.L{i}")
            deps.append(2 * i - 1)
            tmpl.append(1)
            keys.append(f"gemm.C{i}")
            deps.append(2 * i)

    out = {}
    for name, fn in (("add_like", lambda: builder(False)), ("add_like + build", lambda: builder(True)),
                     ("three lists", columns)):  # fmt: skip
        ts = timeit.repeat(fn, number=50, repeat=repeat)
        out[name] = statistics.median(ts) / 50 / N_OPS * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    print(f"(1) microseconds per op, {N_OPS} copies of a GEMM wave's two ops (medians of {a.repeat})")
    for name, us in per_op_us(a.repeat).items():
        print(f"  {name:18s} {us:8.3f} us per op")
    grid = json.dumps([(tp, t) for tp in TP for t in TOKENS])
    modes = ("python", "t3", "off")
    ms: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(a.repeat):
        for m in modes:
            p = subprocess.run([sys.executable, "-c", SWEEP, m, grid], capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"error: the sweep failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
            ms[m].append(json.loads(p.stdout.strip().splitlines()[-1])["ms"])
    print(f"(2) Sequential first sweep, CPU ms per configuration (medians of {a.repeat} fresh processes)")
    labels = {
        "python": "collector as Python sets it",
        "t3": "t3's thresholds (t3._gc)",
        "off": "collector off",
    }
    for m in modes:
        print(f"  {labels[m]:30s} {statistics.median(ms[m]):8.2f} ms")


if __name__ == "__main__":
    main()
