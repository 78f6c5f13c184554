"""What an operation did: which path ran and why, where the time went, how many bytes moved."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class RuntimeStats:
    op: str
    path: str  # "tile-triggered" or "reference"
    reason: str  # why this path ran
    world_size: int
    algo: str = ""
    plan: str = ""
    tile: tuple[int, int] = (0, 0)
    tiles: int = 0  # GEMM tiles computed by this rank
    regions: int = 0  # communicated regions (tracker entries)
    total_s: float = 0.0  # wall time of the call on this rank
    produce_s: float = 0.0  # main thread inside GEMM tiles
    wait_s: float = 0.0  # main thread blocked: on arrivals (AG->GEMM) or on communication after the GEMM
    comm_wait_s: float = 0.0  # communication thread blocked waiting for peers (transfers to complete)
    bytes_sent: int = 0  # payload bytes this rank sent (reference path: not measured, 0)
    reductions: int = 0  # reduction operations on received partial sums (a batched one counts once)
    handshake_s: float = 0.0  # the agreement all-gather before any data moved (0 when skipped)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.op}: {self.path} ({self.reason}); world {self.world_size}, algo {self.algo or '-'}, "
            f"plan {self.plan or '-'}, {self.tiles} tiles, {self.regions} regions; total {self.total_s * 1e3:.3f} ms, "
            f"producing {self.produce_s * 1e3:.3f} ms, waiting {self.wait_s * 1e3:.3f} ms, "
            f"comm waiting {self.comm_wait_s * 1e3:.3f} ms, sent {self.bytes_sent} B, "
            f"{self.reductions} reductions, handshake {self.handshake_s * 1e3:.3f} ms"
        )
