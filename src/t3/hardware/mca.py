"""Memory-controller arbitration (MCA) as an HBM :class:`~t3.sim.schedule.Policy`.

Two priority classes share a GPU's HBM: the GEMM (level 0) and communication (level 1: remote-store
updates arriving from a peer, DMA reads, NMC updates). With the engine's default policy every stream
is served in proportion to what it asks (first come): DMA bursts take bandwidth from the GEMM's read
phases. MCA serves the GEMM first and lets communication issue only while the GEMM's occupancy of the
channel is below a threshold theta (a fraction of the HBM bandwidth); while communication is waiting,
``starvation_share`` of the bandwidth (or what it asks, if less: the policy stays work-conserving) is
guaranteed to it (the starvation bound).

theta is set from the GEMM's memory intensity measured in its first stage, which has no DMA traffic
(:func:`first_stage_intensity`: HBM bytes of the first stage's waves over their isolated duration,
as a fraction of HBM bandwidth):
``theta = clamp(mca.intensity_scale x intensity, mca.starvation_share, mca.occupancy_threshold)``.
All three are named parameters of :class:`t3.config.hardware.Mca` (values unknown, calibrated).
"""

from __future__ import annotations

from t3.config.hardware import Hardware
from t3.ops.gemm import GemmPlan
from t3.sim.schedule import Policy


class McaPolicy(Policy):
    name = "mca"

    def __init__(self, threshold: float, starvation_share: float):
        self.threshold = threshold
        self.starvation_share = starvation_share

    def available(self, capacity: float, remaining: float, level: int, lower_demand: float) -> float:
        if level == 0:  # the GEMM leaves the starvation share (or what communication asks, if less)
            return max(0.0, remaining - min(self.starvation_share * capacity, lower_demand))
        used_by_gemm = capacity - remaining
        if used_by_gemm < self.threshold * capacity:
            return remaining
        return min(remaining, self.starvation_share * capacity)


def first_stage_intensity(plan: GemmPlan, hw: Hardware) -> float:
    """HBM bytes / (duration x bandwidth) of the waves of the GEMM's first stage, run alone."""
    cap = hw.hbm.effective_Bps
    first = plan.order[0]
    nbytes = t = 0.0
    for w in plan.waves:
        if any(c == first for c, _, _ in w.segments):
            b = w.read_bytes + sum(w.write_bytes.values())
            nbytes += b
            t += max(w.compute_s, b / cap)
    return nbytes / (t * cap) if t > 0 else 0.0


def mca_threshold(plan: GemmPlan, hw: Hardware) -> tuple[float, float]:
    """(theta, first-stage intensity) for ``plan`` on ``hw``."""
    m = hw.mca
    u = first_stage_intensity(plan, hw)
    theta = min(m.occupancy_threshold, max(m.starvation_share, m.intensity_scale * u))
    return theta, u
