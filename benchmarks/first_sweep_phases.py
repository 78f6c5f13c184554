"""Where a first sweep of new configurations spends its CPU time: Sequential on bench_peers.py's grid (GPT-3
FC-2 on paper-80cu, TP 2-32, 512-65,536 tokens), phase by phase, in a fresh process per repeat.

Run: PYTHONPATH=src python benchmarks/first_sweep_phases.py [--repeat N]
Prints milliseconds of CPU per configuration for each phase (medians over N fresh processes) and the
configurations per CPU-second they add up to. Not a test: no assertion on time.

Phases, as ``t3.schedules.baselines.sequential_schedule`` runs them: ``plan`` (the builder and the GEMM plan:
tile choice, waves, L2 reuse), ``add_gemm`` (the waves' ops on every materialised GPU), ``collectives``
(reduce-scatter and all-gather ops), ``build`` (dependencies resolved), ``simulate`` (the engine's run and
the outcome's summary).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import TOKENS, TP  # noqa: E402  (the same grid as the peers' comparison)

PHASES = ("plan", "add_gemm", "collectives", "build", "simulate")

CHILD = """
import json, sys, time
from t3.config.hardware import load_hardware
from t3.ops.collectives import all_gather, reduce_scatter
from t3.ops.gemm import add_gemm, plan_gemm
from t3.schedules import RunOptions
from t3.schedules.base import builder, simulate_schedule
from t3.workload import get_model, sublayer_operator
grid = json.loads(sys.argv[1])
hw, model, opts = load_hardware("paper-80cu"), get_model("gpt-3"), RunOptions()
clock, spent = time.process_time, dict.fromkeys(json.loads(sys.argv[2]), 0.0)
for tp, tokens in grid:
    op = sublayer_operator(model, "fc2", tp, tokens)
    t0 = clock()
    b = builder("sequential", op, hw, opts)
    plan = plan_gemm(op.gemm, hw)
    t1 = clock()
    last = {g: add_gemm(b, g, plan)[-1:] for g in b.gpus}
    t2 = clock()
    last = reduce_scatter(b, op.comm_bytes, start=lambda g, prev=last: prev[b.canon(g)])
    all_gather(b, op.comm_bytes, start=lambda g, prev=last: prev[b.canon(g)])
    b.meta["gemm_plan"] = plan
    t3 = clock()
    s = b.build()
    t4 = clock()
    simulate_schedule(s, opts)
    t5 = clock()
    for k, a, z in zip(spent, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5)):
        spent[k] += z - a
print(json.dumps({"n": len(grid), "spent_s": spent}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    grid = [(tp, t) for tp in TP for t in TOKENS]
    runs = []
    for _ in range(a.repeat):
        p = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(grid), json.dumps(PHASES)],
            capture_output=True,
            text=True,
        )
        if p.returncode:
            sys.exit(f"error: the sweeping process failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    n = len(grid)
    print(
        f"Sequential, first sweep of {n} configurations (GPT-3 FC-2, paper-80cu); medians of {a.repeat} fresh processes"
    )
    print(f"{'phase':12s} {'CPU ms per configuration':>25s}")
    total = []
    for ph in PHASES:
        ms = [1e3 * r["spent_s"][ph] / n for r in runs]
        print(f"{ph:12s} {statistics.median(ms):25.2f}")
    total = [1e3 * sum(r["spent_s"].values()) / n for r in runs]
    med = statistics.median(total)
    print(f"{'total':12s} {med:25.2f}   ({1e3 / med:.0f} configurations per CPU-second)")


if __name__ == "__main__":
    main()
