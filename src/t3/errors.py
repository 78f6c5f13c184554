"""Error types the command line turns into one-line messages (no tracebacks)."""


class T3Error(ValueError):
    """Base class for user-facing errors: bad configuration, workload or arguments."""


class ConfigError(T3Error):
    """A hardware/workload/sweep configuration is invalid; the message names the field."""


class WorkloadError(T3Error):
    """A model / parallel layout / token count cannot be turned into operator shapes."""


class ScheduleError(T3Error):
    """A schedule cannot be built for this hardware and workload (e.g. illegal split)."""
