"""Baseline configurations (T3 paper, "Configurations compared").

- ``sequential``: the sliced GEMM, then the RS (CU kernel, all CUs), then the AG.
- ``ideal-gemm-rs-overlap``: GEMM and RS perfectly overlapped without contention, from their
  isolated times, then the AG: ``max(T_gemm, T_rs) + T_ag``.
- ``concurrent``: the paper's motivation experiment: a GEMM and an all-reduce (RS then AG) of the
  same sizes run as concurrent kernels from t=0 (independent data) that split the CUs (``comm_cus``
  for the all-reduce, the rest for the GEMM) and share HBM. Compare with ``max(T_gemm, T_rs + T_ag)``.
"""

from __future__ import annotations

from t3.config.hardware import Hardware
from t3.errors import ConfigError
from t3.ops.collectives import Executor, all_gather, reduce_scatter
from t3.ops.gemm import add_gemm, cus_beside, plan_gemm
from t3.schedules.base import Outcome, RunOptions, builder, register, simulate_schedule
from t3.sim.schedule import Schedule
from t3.workload.sublayers import Operator


def sequential_schedule(
    op: Operator, hw: Hardware, opts: RunOptions, *, parts: str = "gemm,rs,ag"
) -> Schedule:
    """GEMM -> RS -> AG on every GPU; ``parts`` selects a subset (isolated runs use one part)."""
    want = set(parts.split(","))
    b = builder("sequential", op, hw, opts)
    plan = plan_gemm(op.gemm, hw)
    last: dict[int, list] = {g: [] for g in b.gpus}
    if "gemm" in want:
        for g in b.gpus:
            last[g] = add_gemm(b, g, plan)[-1:]
    nbytes = op.comm_bytes
    if "rs" in want:
        last = reduce_scatter(b, nbytes, start=lambda g, prev=last: prev[b.canon(g)])
    if "ag" in want:
        all_gather(b, nbytes, start=lambda g, prev=last: prev[b.canon(g)])
    b.meta["gemm_plan"] = plan
    return b.build()


@register("sequential", "GEMM, then ring/direct reduce-scatter on CUs, then all-gather, serialized")
def run_sequential(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    return simulate_schedule(sequential_schedule(op, hw, opts), opts)


def isolated_times(op: Operator, hw: Hardware, opts: RunOptions) -> dict[str, Outcome]:
    return {
        p: simulate_schedule(sequential_schedule(op, hw, opts, parts=p), opts) for p in ("gemm", "rs", "ag")
    }


def ideal_overlap(parts: dict[str, Outcome]) -> Outcome:
    tg, tr, ta = (parts[p].time_s for p in ("gemm", "rs", "ag"))
    t = max(tg, tr) + ta
    dram: dict[str, float] = {}
    for o in parts.values():
        for k, v in o.dram_bytes.items():
            dram[k] = dram.get(k, 0.0) + v
    return Outcome(
        time_s=t,
        breakdown_s={"gemm": tg, "reduce_scatter": tr, "all_gather": ta, "exposed_comm": t - tg},
        dram_bytes=dram,
        link_bytes=sum(o.link_bytes for o in parts.values()),
        results=[r for o in parts.values() for r in o.results],
        hbm_work_bytes=sum(o.hbm_work_bytes for o in parts.values()),
        extra={
            "collectives": {k: v for o in parts.values() for k, v in o.extra.get("collectives", {}).items()}
        },
    )


@register(
    "ideal-gemm-rs-overlap", "GEMM and RS perfectly overlapped (isolated times, no contention), then AG"
)
def run_ideal(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    return ideal_overlap(isolated_times(op, hw, opts))


def concurrent_schedule(op: Operator, hw: Hardware, opts: RunOptions) -> Schedule:
    k = opts.comm_cus
    if hw.compute.cus < 2:
        raise ConfigError(
            f"compute.cus: 'concurrent' splits the CUs between the GEMM and the all-reduce kernel; "
            f"{hw.compute.cus} CU cannot be split"
        )
    if not 0 < k < hw.compute.cus:
        raise ConfigError(f"comm_cus: must be in 1..{hw.compute.cus - 1}, got {k}")
    if cus_beside(hw, k) < 1:
        raise ConfigError(
            f"comm_cus: {k} held CUs leave the GEMM's thread-block clusters of {hw.compute.cluster_ctas}"
            f" (compute.cluster_ctas) no slot on {hw.compute.cus} CUs, got {k}"
        )
    b = builder("concurrent", op, hw, opts)
    plan = plan_gemm(op.gemm, hw, cus=cus_beside(hw, k))
    ex = Executor("cu", cus=k, name="allreduce")
    for g in b.gpus:
        add_gemm(b, g, plan)
    done = reduce_scatter(b, op.comm_bytes, ex=ex)
    all_gather(b, op.comm_bytes, ex=ex, start=lambda g: done[b.canon(g)])
    b.meta["gemm_plan"] = plan
    return b.build()


@register(
    "concurrent", "GEMM and an all-reduce as concurrent kernels splitting the CUs (comm_cus) and sharing HBM"
)
def run_concurrent(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    return simulate_schedule(concurrent_schedule(op, hw, opts), opts)
