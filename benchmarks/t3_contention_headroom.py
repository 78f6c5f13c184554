"""Why T3 without MCA barely falls short of Ideal on the paper's system: the headroom of the GEMM's loads.

Run: PYTHONPATH=src python benchmarks/t3_contention_headroom.py

For every sublayer of the T3 paper's main set on ``paper-80cu`` (Mega-GPT-2 and T-NLG, TP 8 and 16), the
GEMM alone (its plan, ``t3.ops.gemm``) and its simulated runs under Ideal-GEMM-RS-Overlap, T3 and
T3-MCA (``t3.api.run``), it prints:

- the HBM utilisation of the GEMM alone (its DRAM bytes over its time, of ``hbm.effective_Bps``);
- what T3's reduce-scatter adds while the GEMM runs (T3's DRAM work less the GEMM's, over the GEMM's
  time under T3, NMC updates at their channel-time cost);
- the utilisation at which the GEMM's loads would start to wait: a wave keeps ``W`` bytes in flight and
  needs ``D`` bytes/s while it computes, so it is slowed once the loaded latency ``L(rho) = L0 + S rho /
  (2 (1 - rho))`` exceeds ``W / D`` (the memory model's closed stream, docs/memory-model.md);
- T3's and T3-MCA's time over Ideal's.

Every number is a closed form of the model or a simulation of it; nothing is fitted. Not a test.
"""

from __future__ import annotations

import sys
import time

from t3 import api
from t3.config.hardware import load_hardware
from t3.ops.gemm import plan_gemm
from t3.workload import get_model, sublayer_operator

POINTS = [
    (m, tp, s) for m in ("mega-gpt-2", "t-nlg") for tp in (8, 16) for s in ("op", "fc2", "fc1-bwd", "ip-bwd")
]


def bind_rho(hw, plan) -> float:
    """The HBM utilisation above which the GEMM's busiest wave is slowed by its window (1: never)."""
    h = hw.hbm
    worst = 1.0
    for w in plan.waves:
        body = w.read_bytes - w.prologue_bytes
        if body <= 0 or w.window_bytes <= 0:
            continue
        lat = w.window_bytes / (body / w.compute_s)  # the latency at which W / L equals the demand
        extra = lat - h.latency_s
        if extra <= 0:
            return 0.0
        rho = 2 * extra / (h.service_s + 2 * extra) if h.service_s > 0 else 1.0
        worst = min(worst, rho)
    return worst


def main() -> int:
    t0 = time.perf_counter()
    hw = load_hardware("paper-80cu")
    cap = hw.hbm.effective_Bps
    print("The GEMM's loads and T3's reduce-scatter on paper-80cu (HBM utilisation in % of the effective "
          f"{cap / 1e9:.0f} GB/s; times in % of Ideal-GEMM-RS-Overlap's)")  # fmt: skip
    print(f"{'sublayer':24s} {'GEMM alone':>11s} {'T3 RS adds':>11s} {'loads wait above':>17s} "
          f"{'T3 / Ideal':>11s} {'T3-MCA / Ideal':>15s}")  # fmt: skip
    for model, tp, sub in POINTS:
        op = sublayer_operator(get_model(model), sub, tp, None)
        plan = plan_gemm(op.gemm, hw)
        alone = plan.alone_s(hw)
        gemm_bytes = plan.read_bytes + sum(sum(w.write_bytes.values()) for w in plan.waves)
        use = gemm_bytes / alone / cap
        kw = dict(model=model, tp=tp, sublayer=sub, hardware="paper-80cu")
        ideal = api.run(config="ideal-gemm-rs-overlap", **kw)
        t3 = api.run(config="t3", **kw)
        mca = api.run(config="t3-mca", **kw)
        g_t3 = t3["breakdown_s"]["gemm"]
        added = max(0.0, t3["hbm_work_bytes"] - gemm_bytes - ideal["dram_bytes"].get("ag_read", 0.0)
                    - ideal["dram_bytes"].get("ag_write", 0.0)) / g_t3 / cap  # fmt: skip
        print(f"{f'{model} TP {tp} {sub}':24s} {100 * use:10.1f}% {100 * added:10.1f}% {100 * bind_rho(hw, plan):16.1f}% "
              f"{100 * t3['time_s'] / ideal['time_s']:10.1f}% {100 * mca['time_s'] / ideal['time_s']:14.1f}%")  # fmt: skip
    print(f"{len(POINTS)} sublayers in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
