"""Memory-controller arbitration (MCA) as a :class:`~t3.sim.schedule.Policy` of a GPU's HBM.

Two priority classes share the memory: the GEMM (level 0) and communication (level 1: DMA reads,
updates arriving from a peer). Without MCA every request waits first come, first served behind all
others. With MCA (T3 paper, "memory-controller arbitration"):

- **GEMM first.** The controller serves the GEMM's requests before communication's. With one
  non-preemptive priority queue (M/D/1, Cobham) the GEMM waits ``S * rho / (2 (1 - rho_g))`` and
  communication ``S * rho / (2 (1 - rho_g) (1 - rho))`` (``rho`` total and ``rho_g`` GEMM utilisation,
  ``S`` = ``hbm.service_s``): the GEMM no longer queues behind communication's bursts.
- **A queue-occupancy gate.** Communication is admitted only while the GEMM's occupancy of the
  memory queues (Little: ``X_g * (L_g - L0)`` bytes queued, over the queues' capacity) is below a
  threshold ``theta``; communication raises the total utilisation and so the GEMM's wait, so the
  gate admits it up to the utilisation ``rho*`` at which the GEMM's occupancy reaches ``theta``.
- **theta from the GEMM's first stage.** The first stage has no communication; its HBM utilisation
  ``u`` (bytes over duration x bandwidth, :func:`first_stage_intensity`) sets
  ``theta = mca.occupancy_threshold x (1 - u)``: the more memory-intensive the GEMM, the lower the
  threshold.
- **A starvation bound.** Whatever the gate says, communication that waits gets at least
  ``mca.starvation_share`` of the bandwidth (or what it asks, if less), so it is never starved.
"""

from __future__ import annotations

import math

from t3.config.hardware import Hardware
from t3.sim.memory import HbmTiming
from t3.sim.schedule import Policy


class McaPolicy(Policy):
    name = "mca"

    def __init__(self, threshold: float, starvation_share: float, timing: HbmTiming):
        self.threshold = threshold
        self.starvation_share = starvation_share
        self.timing = timing

    def available(self, capacity: float, remaining: float, level: int, lower_demand: float) -> float:
        s = self.starvation_share * capacity
        if level == 0:  # the GEMM leaves the starvation share (or what communication asks, if less)
            return max(0.0, remaining - min(s, lower_demand))
        floor = min(remaining, s)
        x_g = capacity - remaining
        if x_g <= 0:
            return remaining
        return max(floor, min(remaining, self.admitted(capacity, x_g) - x_g))

    def admitted(self, capacity: float, gemm_Bps: float) -> float:
        """Total flow (bytes/s) up to which communication is admitted beside a GEMM moving
        ``gemm_Bps``: the GEMM's queue occupancy ``X_g * S * rho / (2 (1 - rho_g))`` over the queues'
        bytes equals ``theta`` at ``rho*``."""
        t = self.timing
        rho_g = gemm_Bps / capacity
        if rho_g >= 1:
            return gemm_Bps
        if t.service_s <= 0:
            return math.inf
        qbytes = t.queue_entries * t.channels * t.entry_bytes
        occ = gemm_Bps * t.service_s
        if occ == 0.0:  # a GEMM flow so small that its occupancy underflows: nothing is held back
            return math.inf
        rho_star = 2.0 * self.threshold * (1.0 - rho_g) * qbytes / occ
        return rho_star * capacity

    def compiled(self) -> tuple | None:
        """``(1, threshold, starvation share, queue bytes, service time)``: the compiled engine core
        runs this policy with the same arithmetic (None for a subclass that changes it)."""
        t = type(self)
        if (t.available, t.admitted, t.latency) != (
            McaPolicy.available,
            McaPolicy.admitted,
            McaPolicy.latency,
        ):
            return None
        tm = self.timing
        qbytes = tm.queue_entries * tm.channels * tm.entry_bytes
        return (1, float(self.threshold), float(self.starvation_share), float(qbytes), float(tm.service_s))

    def latency(self, timing: HbmTiming, capacity: float, level: int, flows: dict[int, float]) -> float:
        rho = sum(flows.values()) / capacity
        rho_g = flows.get(0, 0.0) / capacity
        if rho_g >= 1.0:
            return math.inf
        if level == 0:
            return timing.latency_s + timing.service_s * rho / (2.0 * (1.0 - rho_g))
        if rho >= 1.0:
            return math.inf
        return timing.latency_s + timing.service_s * rho / (2.0 * (1.0 - rho_g) * (1.0 - rho))


def first_stage_intensity(stage_bytes: float, stage_s: float, hw: Hardware) -> float:
    """HBM utilisation of the GEMM's first stage alone: its DRAM bytes over duration x bandwidth."""
    cap = hw.hbm.effective_Bps
    return min(1.0, stage_bytes / (stage_s * cap)) if stage_s > 0 else 0.0


def mca_threshold(intensity: float, hw: Hardware) -> float:
    """The occupancy threshold for a GEMM whose first stage used ``intensity`` of the bandwidth."""
    return hw.mca.occupancy_threshold * max(0.0, 1.0 - intensity)
