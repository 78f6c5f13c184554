"""Helpers shared by commands: ``--set key=value`` overrides, output paths checked before any work,
formatting with units, options every long command shares."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import typer

from t3.errors import ConfigError
from t3.size import LIMIT_OPS, LIMIT_TOTAL_OPS, PROMISE

FORCE_HELP = (
    f"run even if the estimated work is above the size limit ({LIMIT_OPS:.0e} simulated ops per "
    f"simulation, {LIMIT_TOTAL_OPS:.0e} per command: {PROMISE}; docs/architecture.md)"
)


def force_option() -> Any:
    return typer.Option(False, "--force", help=FORCE_HELP)


def parse_overrides(items: list[str] | None, what: str = "--set") -> dict[str, Any]:
    """``KEY=VALUE`` items to ``{KEY: value}``; a value is read as JSON (``1.5e11``, ``true``, ``"text"``),
    else kept as text (so ``ring`` is the string "ring"): the validators then refuse a wrong type."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"{what}: expected KEY=VALUE, got '{item}'")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k:
            raise ConfigError(f"{what}: empty key in '{item}'")
        if k in out:
            raise ConfigError(f"{what}: {k} given twice")
        try:
            val = json.loads(v)
        except json.JSONDecodeError:
            val = v
            try:  # inf, -inf, nan in any case: a number, but never a finite one
                val = float(v) if not math.isfinite(float(v)) else v
            except ValueError:
                pass
        if isinstance(val, float) and not math.isfinite(val):
            raise ConfigError(f"{what}: {k}: must be a finite number, got {v.strip()}")
        out[k] = val
    return out


def _writable(d: Path, option: str) -> None:
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(f"{option}: directory '{d}' is not writable")


def check_output_file(path: str | Path | None, option: str) -> Path | None:
    """An output file must be creatable without surprises: not a directory, in an existing writable
    directory (nothing is created on the way), and writable if it exists. Checked before any work."""
    if path is None:
        return None
    p = Path(path)
    if str(path) == "" or p.is_dir():
        raise ConfigError(f"{option}: '{p}' is a directory; give a file name")
    parent = p.parent
    if not parent.exists():
        raise ConfigError(f"{option}: directory '{parent}' does not exist")
    if not parent.is_dir():
        raise ConfigError(f"{option}: '{parent}' is not a directory")
    _writable(parent, option)
    if p.exists() and not os.access(p, os.W_OK):
        raise ConfigError(f"{option}: '{p}' exists and is not writable")
    return p


def check_output_dir(path: str | Path, option: str) -> Path:
    """An output directory is created now (with its parents) when missing, before any work; an existing
    file in its place or on its path, or a directory that cannot be created or written, is an error."""
    p = Path(path)
    if str(path) == "":
        raise ConfigError(f"{option}: empty path")
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{option}: '{p}' exists and is not a directory")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{option}: '{probe}' is a file, so '{p}' cannot be created")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{option}: cannot create directory '{p}': {err.strerror}") from None
    _writable(p, option)
    return p


def check_store(path: str | Path | None, option: str = "--store") -> Path | None:
    """A results store to write: a file path ending in .parquet (see :func:`check_output_file`)."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix != ".parquet":
        raise ConfigError(f"{option}: expected a path ending in .parquet, got '{p}'")
    return check_output_file(p, option)


def check_count(value: int | None, option: str, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise ConfigError(f"{option}: must be >= {minimum}, got {value}")


def fmt_time(s: float) -> str:
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_bytes(b: float) -> str:
    if b >= 1e9:
        return f"{b / 1e9:.3f} GB"
    return f"{b / 1e6:.2f} MB"
