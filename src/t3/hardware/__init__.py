"""T3's hardware mechanism as objects on top of the generic engine (:mod:`t3.sim`).

- :mod:`~t3.hardware.address_map`: the output address-space configuration (``remote_map``,
  ``dma_map``, unmapped) and the staggered chunk order, for ring and direct reduce-scatter;
- :mod:`~t3.hardware.tracker`: the finite tracker table (a counting semaphore of the engine);
- :mod:`~t3.hardware.nmc`: near-memory-compute updates (one channel write per update);
- :mod:`~t3.hardware.mca`: memory-controller arbitration (an HBM :class:`~t3.sim.schedule.Policy`).
"""

from t3.hardware.address_map import AddressMap, Mapping, direct_rs_maps, ring_rs_maps, stagger_order
from t3.hardware.mca import McaPolicy, first_stage_intensity, mca_threshold
from t3.hardware.tracker import TrackerModel

__all__ = [
    "AddressMap",
    "Mapping",
    "McaPolicy",
    "TrackerModel",
    "direct_rs_maps",
    "first_stage_intensity",
    "mca_threshold",
    "ring_rs_maps",
    "stagger_order",
]
