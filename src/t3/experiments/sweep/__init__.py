"""Parameter sweeps: TOML specs over any parameter grid, local or Dask executors, a resumable store."""

from t3.experiments.sweep.run import SweepFailed, SweepInterrupted, execute, run_points, run_sweep
from t3.experiments.sweep.spec import Sweep, load_spec, spec_from_dict
from t3.experiments.sweep.store import Store

__all__ = [
    "Store",
    "Sweep",
    "SweepFailed",
    "SweepInterrupted",
    "execute",
    "load_spec",
    "run_points",
    "run_sweep",
    "spec_from_dict",
]
