"""t3: tile-level simulation, schedule exploration and a runtime for fine-grained overlap of
computation and collective communication (T3, ASPLOS 2024; FiCCO, 2025)."""

__version__ = "0.1.0"
