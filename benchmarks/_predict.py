"""The simulator's prediction for a runtime benchmark row, on a hardware preset.

- ``compute``, ``comm``, ``sequential`` and ``ideal`` of GEMM -> RS / AR come from the simulator's
  ``sequential`` schedule generator restricted to the parts the runtime executes
  (``GemmShape`` / ``Operator`` of t3.workload.sublayers);
- the tile-triggered rows of GEMM -> RS and AG -> GEMM come from the FiCCO schedule with the same
  structure: ``shard`` communication (W-1 point-to-point steps), the GEMM cut into W*pieces row
  pieces (``g``), transfers by DMA engines (on this host the kernel and gloo's I/O thread move the
  bytes, not the GEMM thread) and, for GEMM -> RS, the rank's own chunk last (``-ll``), as the
  runtime orders it; AG -> GEMM computes the own shard first (the FiCCO default);
- the ``t3`` configuration needs near-memory compute, which the cpu-local preset does not have.

Returns ``{}`` when the simulator is not importable, so the benchmark still runs without it.
"""

from __future__ import annotations

DTYPE = "fp32"


def predict(
    op: str, M: int, N: int, K: int, world: int, plans: list[tuple[str, int]], hardware: str = "cpu-local"
) -> dict[str, tuple[float, str]]:
    """``{variant: (seconds, what was simulated)}`` for the variants the simulator can express."""
    try:
        from t3.config.hardware import load_hardware
        from t3.errors import T3Error
        from t3.schedules import RunOptions, simulate_schedule
        from t3.schedules.baselines import sequential_schedule
        from t3.workload.sublayers import GemmShape, Operator
    except ImportError:
        return {}
    hw = load_hardware(hardware, {"topology.gpus": world})
    out: dict[str, tuple[float, str]] = {}
    if op in ("rs", "ar"):
        oper = Operator("bench", "custom", "forward", world, M, GemmShape(M, N, K, DTYPE))
        opts = RunOptions()
        comm = "rs" if op == "rs" else "rs,ag"

        def t(parts: str) -> float:
            return simulate_schedule(sequential_schedule(oper, hw, opts, parts=parts), opts).time_s

        out["compute"] = (t("gemm"), "gemm alone")
        out["comm"] = (t(comm), comm.replace(",", "+") + " alone")
        out["sequential"] = (t("gemm," + comm), "sequential")
        out["ideal"] = (max(out["compute"][0], out["comm"][0]), "max")
    try:
        from t3.ficco import FiccoOperator, parse_name
        from t3.ficco.losses import explore
    except ImportError:
        return out
    if op not in ("rs", "ag"):
        return out
    fop = FiccoOperator(
        "gemm-rs" if op == "rs" else "ag-gemm",
        m=M if op == "rs" else world * M,
        n=N,
        k=K,
        gpus=world,
        dtype=DTYPE,
    )
    suffix = "-ll" if op == "rs" else ""
    for gran, pieces in plans:
        name = f"shard-g{world * pieces}-M-dma{suffix}"
        try:
            ev = explore(fop, hw, [parse_name(name)]).evaluations[0]
        except T3Error:
            continue  # not expressible (e.g. more pieces than the FiCCO space has)
        key = "tile-triggered shard" if gran == "shard" else f"tile-triggered ficco(split=m, pieces={pieces})"
        out[key] = (ev.time_s, name)
    if op == "ag":
        ev = explore(fop, hw, [parse_name("bulk-g1-M-dma")])
        out["sequential"] = (ev.evaluations[0].time_s, "bulk-g1-M-dma")
        out["compute"] = (ev.gemm_alone_s, "gemm alone")
        out["comm"] = (ev.comm_alone_s, "all-gather alone")
        out["ideal"] = (max(ev.gemm_alone_s, ev.comm_alone_s), "max")
    return out


if __name__ == "__main__":
    for row in [("rs", 2048, 2048, 128), ("ar", 2048, 2048, 256), ("ag", 2048, 96, 2048)]:
        print(row, predict(*row, 2, [("shard", 1), ("ficco", 2), ("ficco", 4)]))
