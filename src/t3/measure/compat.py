"""What the measurement kit takes from the rest of ``t3``, with stand-ins for a kit that runs alone.

On a lent GPU machine the Python that holds PyTorch may lack ``t3``'s own dependencies (pydantic);
``benchmarks/device_measure.sh`` then runs a copy of this package as a top-level package. Everything
the kit needs from ``t3`` comes through this module: the error type, the dataset's source constant
and row checker, the preset names and the command line. Standing alone, rows are not checked when
written (``t3 calibrate`` and ``t3 validate`` check them when they load them).
"""

from __future__ import annotations

import shlex
import sys

try:  # the whole of t3 is importable
    from t3.errors import ConfigError
    from t3.validation.dataset import MEASURED_SOURCE, parse_rows

    STANDALONE = False
except ImportError:  # a copy of this package alone (or t3 without its dependencies)

    class ConfigError(ValueError):  # type: ignore[no-redef]
        """Bad input: a one-line message naming the option or field (exit status 2)."""

        exit_code = 2

    MEASURED_SOURCE = "measured by `t3 measure`"  # as t3.validation.dataset.MEASURED_SOURCE
    parse_rows = None  # type: ignore[assignment]
    STANDALONE = True

# the presets a GPU's name maps to (a substring of the name, upper case -> preset)
GPU_PRESETS = (("H200", "h200-8"), ("H100", "h100-8"), ("MI300X", "mi300x-8"))


def preset_names() -> list[str] | None:
    """The hardware presets, or None where ``t3.config`` cannot be imported (not checked then)."""
    if STANDALONE:
        return None
    from t3.config.hardware import preset_names as names

    return names()


def command_line() -> str:
    """The command that runs now, shell-quoted (``t3 measure --out m``)."""
    if not STANDALONE:
        from t3.provenance import command

        return command()
    return shlex.join(["python", "-m", __package__ or "t3measure", *sys.argv[1:]])
