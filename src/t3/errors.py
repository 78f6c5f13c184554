"""Error types the command line turns into one-line messages (no tracebacks).

Exit status of the ``t3`` command for each: 2 for bad input (the default of :class:`T3Error`: nothing
ran), 1 for work that ran and failed (:class:`SimulationError`, :class:`PointsFailed`).
"""


class T3Error(ValueError):
    """Base class for user-facing errors: bad configuration, workload or arguments."""

    exit_code = 2


class ConfigError(T3Error):
    """A hardware/workload/sweep configuration is invalid; the message names the field."""


class WorkloadError(T3Error):
    """A model / parallel layout / token count cannot be turned into operator shapes."""


class ScheduleError(T3Error):
    """A schedule cannot be built for this hardware and workload (e.g. illegal split)."""


class TooLargeError(T3Error):
    """The estimated work is above the documented limit (``--force`` runs it anyway)."""


class SimulationError(T3Error):
    """A simulation started and could not finish (e.g. :class:`t3.sim.engine.DeadlockError`)."""

    exit_code = 1


class PointsFailed(T3Error):
    """Some simulation points of a multi-point command failed; the message names them."""

    exit_code = 1
