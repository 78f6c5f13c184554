"""Helpers shared by commands: parsing ``--set key=value`` overrides, formatting with units."""

from __future__ import annotations

import json
from typing import Any

from t3.errors import ConfigError


def parse_overrides(items: list[str] | None, what: str = "--set") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"{what}: expected KEY=VALUE, got '{item}'")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


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
