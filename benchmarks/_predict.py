"""The simulator's prediction for a runtime benchmark row, on a hardware preset.

Uses the simulator's public pieces: ``GemmShape`` / ``Operator`` (t3.workload.sublayers), the
``sequential`` schedule generator restricted to the parts the runtime executes, and a registered
tile-triggered configuration (``t3``) when one exists. Returns ``None`` when the simulator is not
importable, so the benchmark still runs on a checkout without it.
"""

from __future__ import annotations

from typing import Any

DTYPE = "fp32"


def predict(
    op: str, M: int, N: int, K: int, world: int, hardware: str = "cpu-local"
) -> dict[str, Any] | None:
    if op not in ("rs", "ar"):  # the simulator's schedules start from the GEMM (GEMM -> RS / AR)
        return None
    try:
        from t3.config.hardware import load_hardware
        from t3.schedules import CONFIGS, RunOptions, simulate_schedule
        from t3.schedules.baselines import sequential_schedule
        from t3.workload.sublayers import GemmShape, Operator
    except ImportError:
        return None
    hw = load_hardware(hardware, {"topology.gpus": world})
    oper = Operator("bench", "custom", "forward", world, M, GemmShape(M, N, K, DTYPE))
    opts = RunOptions()
    comm_parts = "rs" if op == "rs" else "rs,ag"

    def t(parts: str) -> float:
        return simulate_schedule(sequential_schedule(oper, hw, opts, parts=parts), opts).time_s

    out: dict[str, Any] = {
        "compute_s": t("gemm"),
        "comm_s": t(comm_parts),
        "sequential_s": t("gemm," + comm_parts),
    }
    out["ideal_s"] = max(out["compute_s"], out["comm_s"])
    overlapped = None
    if "t3" in CONFIGS and op == "ar":  # T3's configuration: overlapped RS, then AG (an all-reduce)
        overlapped = CONFIGS["t3"].run(oper, hw, opts).time_s
    out["overlapped_s"] = overlapped
    return out


if __name__ == "__main__":
    print(predict("rs", 2048, 2048, 128, 2))
    print(predict("ar", 2048, 2048, 256, 2))
