"""Decomposition-loss characterisation: a GEMM cut 8 or 64 ways along M or along K.

For each GEMM shape, the loss of an s-way split along M is ``s x T_alone(M/s, N, K) - T_alone(M, N, K)``
and along K ``T_alone(M, N, K/s) + (s-1) x T_alone(M, N, K/s, accumulating) - T_alone(M, N, K)``,
every GEMM alone on one GPU with all CUs and its own launch (the engine's tile/wave model with the
library tile choice of :func:`t3.schedules.ficco.gemm_plan`). Also the efficiency of one DMA command
of a given size (per-command overhead vs. bytes) — the small-transfer loss of DMA offload.
"""

from __future__ import annotations

from t3.config.hardware import Hardware
from t3.schedules.ficco import gemm_alone_schedule
from t3.sim.engine import Engine
from t3.workload.sublayers import GemmShape

SHAPES: tuple[tuple[int, int, int], ...] = (
    (1024, 4096, 4096),
    (2048, 4096, 4096),
    (4096, 4096, 4096),
    (8192, 4096, 4096),
    (8192, 8192, 8192),
    (16384, 8192, 8192),
    (8192, 16384, 16384),
    (32768, 8192, 4096),
)
SPLITS = (8, 64)


def _alone(shapes: list[tuple[GemmShape, bool]], hw: Hardware) -> float:
    return Engine().run(gemm_alone_schedule(shapes, hw, hw.topology.gpus)).makespan


def characterise(hw: Hardware, shapes=SHAPES, splits=SPLITS, dtype: str = "bf16") -> list[dict]:
    rows = []
    for m, n, k in shapes:
        whole = _alone([(GemmShape(m, n, k, dtype), False)], hw)
        row = {"m": m, "n": n, "k": k, "whole_s": whole}
        for s in splits:
            if m % s == 0:
                t = s * _alone([(GemmShape(m // s, n, k, dtype), False)], hw)
                row[f"M{s}_loss_s"] = t - whole
                row[f"M{s}_loss_pct"] = 100.0 * (t - whole) / whole
            if k % s == 0:
                first = _alone([(GemmShape(m, n, k // s, dtype), False)], hw)
                acc = _alone([(GemmShape(m, n, k // s, dtype), True)], hw)
                t = first + (s - 1) * acc
                row[f"K{s}_loss_s"] = t - whole
                row[f"K{s}_loss_pct"] = 100.0 * (t - whole) / whole
        rows.append(row)
    return rows


def dma_efficiency(hw: Hardware, sizes=(64e3, 256e3, 1e6, 4e6, 16e6, 64e6)) -> list[dict]:
    """Achieved bandwidth of one DMA command of ``size`` bytes over one link (closed form of the model)."""
    bw = min(hw.dma.bandwidth_Bps, hw.link.bandwidth_Bps)
    out = []
    for s in sizes:
        t = hw.dma.command_overhead_s + hw.link.latency_s + s / bw
        out.append({"bytes": s, "time_s": t, "efficiency_pct": 100.0 * (s / bw) / t})
    return out
