"""Near-memory compute (NMC): an update (op-and-store) crosses the memory channel once; the bank reads,
adds and writes internally. The channel cost of one update is ``nmc.update_overhead`` times a plain
write of the same bytes (1.0: the bank's read-modify-write is hidden). Updates bypass the L2 (uncached
memory), so they neither evict GEMM operands nor hit in the cache.

Also: a ring / direct reduce-scatter whose reductions are NMC updates (the RS of ``ideal-rs-nmc``): the
same library collective as :mod:`t3.ops.collectives` (protocol, latencies, channels, link efficiency),
but the receiver's memory reduces each chunk on arrival. A ring step reads c (the chunk, which already
holds the upstream sum) and sends it as c of updates: per GPU (N-1)c read, (N-1)c of updates (each
counted as one channel write in the traffic, whatever its HBM cost), and no final reduction, hence no
reduction tail.
"""

from __future__ import annotations

from t3.config.hardware import Hardware
from t3.errors import ConfigError
from t3.ops.collectives import (
    SEND,
    Algo,
    Executor,
    StartFn,
    _no_deps,
    base_latency,
    choose,
    run_ring,
    step_latency,
    step_op,
)
from t3.sim.schedule import Ref, ScheduleBuilder


def require_nmc(hw: Hardware, config: str) -> None:
    if not hw.nmc.present:
        raise ConfigError(
            f"nmc.present: configuration '{config}' needs near-memory compute; '{hw.name}' has none"
        )


def update_work(b: ScheduleBuilder, dst: int, nbytes: float) -> tuple[list[tuple[int, float]], float]:
    """HBM work at ``dst`` of ``nbytes`` of NMC updates, and the DRAM bytes it counts (channel bytes)."""
    ch = nbytes * b.hw.nmc.update_overhead
    return [(b.hbm(dst), ch)], ch


def nmc_reduce_scatter(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "rs", cat: str = "rs", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """RS with NMC reductions: ring (g -> g-1, N-1 steps) on a ring, direct sends otherwise; the protocol
    is the one the library picks for the CU reduce-scatter of the same size."""
    ex = ex or Executor()
    n, hw = b.n, b.hw
    c = nbytes / n
    proto = choose("reduce_scatter", nbytes, hw, n, ex).proto if ex.kind == "cu" else "simple"
    algo = Algo("ring" if hw.topology.kind == "ring" else "direct", proto)
    b.meta.setdefault("algos", {})[prefix] = f"{algo.name}-nmc/{proto}"

    def land(dst: int, nb: float):
        return update_work(b, dst, nb)[0], nb  # one update = one channel write in the traffic

    if algo.name == "ring":
        return run_ring(
            b, c, [SEND] * (n - 1), None, algo=algo, ex=ex, start=start, prefix=prefix, cats=lambda j: cat,
            prio=prio, launch=launch, land=land,
        )  # fmt: skip
    delay = (
        step_latency(hw, algo, ex)
        + base_latency(hw, algo, ex)
        + (hw.compute.kernel_launch_s if launch else 0.0)
    )
    offsets = list(range(1, n))
    for g in b.gpus:
        for j, off in enumerate(offsets):
            step_op(
                b, g, f"{prefix}.{j}", SEND, c, [off], algo=algo, ex=ex, cat=cat, delay=delay,
                deps=list(start(g)), prio=prio, land=land,
            )  # fmt: skip
    return {g: [(g - off, f"{prefix}.{j}") for j, off in enumerate(offsets)] for g in b.gpus}
