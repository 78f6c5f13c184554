"""Near-memory compute (NMC): an update (op-and-store) crosses the memory channel once; the bank reads,
adds and writes internally. The channel cost of one update is :func:`update_cost` times a plain
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


def update_cost(hw: Hardware) -> float:
    """Channel time of one NMC update relative to a plain write of the same bytes (>= 1).

    An op-and-store holds a bank for ``nmc.update_busy_s`` (the in-bank read, the ALU and the write:
    about ``2 tCCD_L + t_ALU + tWTR_L``); a channel streams plain writes one burst per burst time
    (``hbm.burst_bytes`` over the channel's bandwidth) and can keep ``hbm.bank_groups`` updates in
    flight, so updates cost ``max(1, t_update / (bank_groups x t_burst))`` bursts each."""
    h = hw.hbm
    t_burst = h.burst_bytes * h.channels / h.bandwidth_Bps
    return max(1.0, hw.nmc.update_busy_s / (h.bank_groups * t_burst))


def update_work(b: ScheduleBuilder, dst: int, nbytes: float) -> list[tuple[int, float]]:
    """HBM work at ``dst`` of ``nbytes`` of NMC updates: writes (for the read/write turnaround) whose
    channel time is :func:`update_cost` per byte. The traffic they count is ``nbytes`` (one channel
    write per update): the caller records it."""
    return [(b.hbm_w(dst), nbytes * update_cost(b.hw))]


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
        return update_work(b, dst, nb), nb  # one update = one channel write in the traffic

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
