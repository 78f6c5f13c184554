"""t3: tile-level simulation, schedule exploration and a runtime for fine-grained overlap of
computation and collective communication (T3, ASPLOS 2024; FiCCO, 2025).

Public API (everything else may change): :func:`run` simulates one sublayer under one configuration;
:func:`load_hardware`, :func:`get_model`, :func:`sublayer_operator` build its inputs; :data:`CONFIGS`
lists the configurations; :class:`Engine` and :class:`ScheduleBuilder` are the engine and its
schedule vocabulary. The runtime lives in :mod:`t3.runtime` (needs torch).
"""

__version__ = "0.1.0"

from t3 import _compiled  # noqa: E402

_compiled.install()  # before any compiled module is imported: a stale one runs from source

from t3.api import run  # noqa: E402
from t3.config.hardware import load_hardware  # noqa: E402
from t3.schedules import CONFIGS, RunOptions  # noqa: E402
from t3.sim import Engine, ScheduleBuilder  # noqa: E402
from t3.workload import get_model, sublayer_operator  # noqa: E402

__all__ = [
    "CONFIGS", "Engine", "RunOptions", "ScheduleBuilder", "get_model", "load_hardware", "run",
    "sublayer_operator", "__version__",
]  # fmt: skip
