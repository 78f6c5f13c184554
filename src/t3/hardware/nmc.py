"""Near-memory compute (NMC): an update (op-and-store) crosses the memory channel once; the bank reads,
adds and writes internally. The channel cost of one update is ``nmc.update_overhead`` times a plain
write of the same bytes (1.0: the bank's read-modify-write is hidden). Updates bypass the L2 (uncached
memory), so they neither evict GEMM operands nor hit in the cache.

Also: a ring / direct reduce-scatter whose reductions are NMC updates (the RS of ``ideal-rs-nmc``): the
CUs of the RS kernel read and send each chunk, the receiver's memory reduces it on arrival, so a step
costs 1 read + 1 update instead of 1 write + 2 reads + 1 write of a CU reduction.
"""

from __future__ import annotations

from t3.config.hardware import Hardware
from t3.errors import ConfigError
from t3.ops.collectives import Executor, StartFn, _no_deps, ring_step_deps
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
    """RS with NMC reductions: ring (g -> g-1, N-1 steps) on a ring, direct sends otherwise."""
    ex = ex or Executor()
    n, hw = b.n, b.hw
    c = nbytes / n
    ring = hw.topology.kind == "ring"
    offsets = [-1] * (n - 1) if ring else list(range(1, n))
    for g in b.gpus:
        for j, off in enumerate(offsets):
            deps = ring_step_deps(start, g, j, prefix) if ring else list(start(g))
            upd = update_work(b, g + off, c)
            ch = c
            work = [(r, c) for r in b.path(g, g + off)] + [(b.hbm(g), c)] + upd + ex.work(b, g, c)
            first = j == 0 or not ring
            b.add(
                g, f"{prefix}.{j}", kind="rs-step", cat=cat, work=work,
                delay_s=ex.step_delay(b, launch and first),
                deps=deps, traffic={f"{cat}_read": c, f"{cat}_write": ch, "link": c}, prio=prio,
            )  # fmt: skip
    if ring:
        return {g: [(g, f"{prefix}.{n - 2}")] for g in b.gpus}
    return {g: [(g - off, f"{prefix}.{j}") for j, off in enumerate(offsets)] for g in b.gpus}
