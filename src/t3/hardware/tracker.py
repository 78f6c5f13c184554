"""T3's tracker: a finite table next to the memory controller that counts updates per wavefront tile.

The table has ``tracker.entries`` entries; one entry tracks ``tracker.granularity_tiles`` wavefront
output tiles, and a GEMM macro-tile holds ``tracker.wavefront_tiles_per_tile`` of them. An entry is
occupied from the first update of its tiles to the completion of the DMA it triggers.

Schedules keep ops at *tile-group* granularity (the tiles of one wave that belong to one chunk, cut
where the downstream GPU's groups start), and the bookkeeping is aggregated per group: the engine's
counting semaphore for the tracker of GPU r is acquired (``entries_for(tiles)`` units) when an
update group headed for r starts and released when r's DMA of those tiles finishes. By the stagger
the upstream update of a tile arrives one stage before the local one, so it is the first update. When
the table is full, the update group that would open new entries waits (backpressure to its producer:
the remote stores of a GEMM wave or an upstream DMA) until DMAs free entries, first come first served.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.config.hardware import Hardware
from t3.errors import ScheduleError
from t3.sim.engine import Result

SEMAPHORE_KIND = "tracker"


@dataclass(frozen=True)
class TrackerModel:
    entries: int
    wavefront_tiles_per_tile: int
    granularity_tiles: int

    @classmethod
    def from_hardware(cls, hw: Hardware) -> TrackerModel:
        t = hw.tracker
        return cls(t.entries, t.wavefront_tiles_per_tile, t.granularity_tiles)

    def entries_for(self, tiles: int) -> int:
        """Table entries needed to track ``tiles`` GEMM macro-tiles."""
        return math.ceil(tiles * self.wavefront_tiles_per_tile / self.granularity_tiles)

    def check_fits(self, largest_group_entries: int) -> None:
        """A tile group that needs more entries than the table has could never be tracked."""
        if largest_group_entries > self.entries:
            raise ScheduleError(
                f"tracker.entries: {self.entries} entries cannot hold one group of "
                f"{largest_group_entries} entries (the tiles of one wave); need >= {largest_group_entries}"
            )

    def stats(self, result: Result, n_gpus_materialised: int) -> dict[str, float | int]:
        """Peak occupancy (entries, busiest GPU), stall time per GPU (s) of updates waiting for entries."""
        sems = {k: v for k, v in result.meta.get("semaphores", {}).items() if k.startswith(SEMAPHORE_KIND)}
        peak = max((v["peak"] for v in sems.values()), default=0)
        stall = sum(v["wait_s"] for v in sems.values()) / n_gpus_materialised
        waits = sum(v["waits"] for v in sems.values()) / n_gpus_materialised
        return {"entries": self.entries, "peak_occupancy": peak, "stall_s": stall, "stalled_groups": waits}
