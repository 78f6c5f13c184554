"""Named configurations (schedule generators). Importing this package registers all of them."""

from t3.schedules import baselines, t3  # noqa: F401  (registers sequential, ideal-gemm-rs-overlap, concurrent, t3, ...)
from t3.schedules.base import (
    CONFIGS,
    ConfigSpec,
    Outcome,
    RunOptions,
    get_config,
    register,
    simulate_schedule,
)

__all__ = ["CONFIGS", "ConfigSpec", "Outcome", "RunOptions", "get_config", "register", "simulate_schedule"]
