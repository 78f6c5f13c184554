"""The memory model of one GPU's DRAM (HBM) as the engine uses it: the closed forms, no state.

Three mechanisms decide how much of a GPU's HBM each stream gets (values: ``[hbm]`` of the preset):

- **Read/write turnaround.** A channel that switches between reads and writes idles for the bus
  turnaround (tRTW + tWTR), once per batch of same-direction bursts. With ``w`` the write share of the
  bytes flowing, the deliverable capacity is ``C * eta(w)``, ``eta(w) = 1 / (1 + k * min(w, 1 - w))``
  and ``k = hbm.turnaround`` = turnaround time / (bursts per batch x burst time). Pure read or pure
  write streams lose nothing (``eta(0) = eta(1) = 1``).
- **Latency under load.** A request waits ``L(rho) = L0 + S * rho / (2 * (1 - rho))`` (``L0`` =
  ``hbm.latency_s``, unloaded; ``S`` = ``hbm.service_s``, the service time of the burst a request
  queues behind; ``rho`` the utilisation): the M/D/1 waiting time. A stream that keeps at most ``W``
  bytes in flight (a GEMM's loads, a DMA engine, a copy kernel: a *closed* stream) moves at most
  ``W / L(rho)`` bytes/s, so it slows as the queues fill; a stream paced from outside (updates
  arriving over a link: an *open* stream) keeps its rate while the memory keeps up.
- **At saturation** every closed stream waits the same latency, so their throughputs are in
  proportion to their bytes in flight (Little's law), not to the rate each could use: the engine
  grows a closed stream's share of the HBM in proportion to its window.

Memory-controller arbitration (:mod:`t3.hardware.mca`) is a policy on top: the GEMM's requests are
served first, so it sees the latency of its own load only, and communication is admitted while the
GEMM's queue occupancy (Little: ``X * (L - L0)`` bytes queued) stays below a threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HbmTiming:
    """Closed forms of one GPU's DRAM: turnaround ``k``, unloaded latency ``L0`` (s), burst service
    time ``S`` (s) and the queue geometry (entries per channel, channels, bytes per entry) that
    turns queued bytes into queue occupancy."""

    turnaround: float
    latency_s: float
    service_s: float
    queue_entries: int = 64
    channels: int = 32
    entry_bytes: int = 64

    def eta(self, write_share: float) -> float:
        """Deliverable fraction of the peak rate at this write share of the bytes (0..1)."""
        return 1.0 / (1.0 + self.turnaround * min(write_share, 1.0 - write_share))

    def latency(self, rho: float) -> float:
        """Loaded latency (s) at utilisation ``rho`` (inf at or above 1)."""
        if rho >= 1.0:
            return math.inf
        return self.latency_s + self.service_s * rho / (2.0 * (1.0 - rho))

    def rho_at(self, latency_s: float) -> float:
        """Inverse of :meth:`latency`: the utilisation at which requests wait ``latency_s``."""
        q = max(0.0, latency_s - self.latency_s)
        return 2.0 * q / (self.service_s + 2.0 * q) if self.service_s > 0 else (1.0 if q > 0 else 0.0)

    def occupancy(self, rate_Bps: float, latency_s: float) -> float:
        """Queue occupancy (fraction of the queue entries) of a stream of ``rate_Bps`` that waits
        ``latency_s``: its queued bytes ``rate * (L - L0)`` (Little) over the queues' capacity."""
        queued = rate_Bps * max(0.0, latency_s - self.latency_s)
        return queued / (self.queue_entries * self.channels * self.entry_bytes)

    def latency_at_occupancy(self, rate_Bps: float, occupancy: float) -> float:
        """The latency at which a stream of ``rate_Bps`` fills ``occupancy`` of the queues."""
        if rate_Bps <= 0:
            return math.inf
        return self.latency_s + occupancy * self.queue_entries * self.channels * self.entry_bytes / rate_Bps


def closed_stream_rate(window_bytes: float, demand_Bps: float, timing: HbmTiming, rho: float) -> float:
    """Bytes/s a closed stream with ``window_bytes`` in flight gets at utilisation ``rho``."""
    return min(demand_Bps, window_bytes / timing.latency(rho)) if rho < 1 else 0.0


def equilibrium(
    timing: HbmTiming, capacity_Bps: float, closed: list[tuple[float, float]], open_Bps: float
) -> tuple[float, float]:
    """Utilisation and latency (rho, L) where closed streams ``(window, demand)`` and open traffic
    ``open_Bps`` meet the queue: ``rho * C = open + sum(min(demand, W / L(rho)))``. Solved by bisection
    on rho (the right side falls as rho grows, the left rises: one root). At saturation the closed
    streams share what the open ones leave in proportion to their windows and ``L = sum(W) / left``."""
    total = open_Bps + sum(d for _, d in closed)
    if total < capacity_Bps and all(d <= w / timing.latency(total / capacity_Bps) for w, d in closed):
        rho = total / capacity_Bps
        return rho, timing.latency(rho)
    lo, hi = 0.0, 1.0
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        lat = timing.latency(mid)
        served = open_Bps + sum(min(d, w / lat) for w, d in closed)
        if served > mid * capacity_Bps:
            lo = mid
        else:
            hi = mid
    rho = 0.5 * (lo + hi)
    if rho > 1.0 - 1e-9:
        left = max(capacity_Bps - open_Bps, 0.0)
        w = sum(w for w, _ in closed)
        return 1.0, (w / left if left > 0 else math.inf)
    return rho, timing.latency(rho)
