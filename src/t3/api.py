"""Public entry points: simulate one sublayer under one configuration and get a plain record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t3.config.hardware import Hardware, load_hardware
from t3.schedules import Outcome, RunOptions, get_config
from t3.workload import get_model, sublayer_operator
from t3.workload.sublayers import Operator


def resolve(
    model: str | Path, tp: int, sublayer: str, config: str, hardware: str | Path | Hardware,
    tokens: int | None = None, hw_overrides: dict[str, Any] | None = None,
) -> tuple[Operator, Hardware, Any]:  # fmt: skip
    """Validate every input (raising :class:`t3.errors.T3Error` naming the field) before any simulation."""
    spec = get_config(config)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    if hw_overrides:
        hw = hw.with_overrides(hw_overrides)
    op = sublayer_operator(get_model(model), sublayer, tp, tokens)
    return op, hw, spec


def record(op: Operator, hw: Hardware, config: str, out: Outcome) -> dict[str, Any]:
    """The JSON record of ``t3 run`` (times in seconds, bytes per GPU)."""
    rec: dict[str, Any] = {
        "model": op.model,
        "tp": op.tp,
        "sublayer": op.sublayer,
        "phase": op.phase,
        "config": config,
        "hardware": hw.name,
        "tokens": op.tokens,
        "gemm": {"m": op.gemm.m, "n": op.gemm.n, "k": op.gemm.k, "dtype": op.gemm.dtype},
        "time_s": out.time_s,
        "breakdown_s": dict(out.breakdown_s),
        "dram_bytes": dict(out.dram_bytes),
        "dram_bytes_total": sum(out.dram_bytes.values()),
        "link_bytes": out.link_bytes,
        "sim": {"events": out.events, "ops": sum(len(r.schedule.ops) for r in out.results)},
    }
    rec.update(out.extra)
    return rec


def run(
    model: str | Path = "t-nlg", tp: int = 8, sublayer: str = "fc2", config: str = "sequential",
    hardware: str | Path | Hardware = "paper-80cu", tokens: int | None = None,
    hw_overrides: dict[str, Any] | None = None, options: RunOptions | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Simulate one sublayer and return its record (see :func:`record`)."""
    op, hw, spec = resolve(model, tp, sublayer, config, hardware, tokens, hw_overrides)
    options = options or RunOptions()
    if options.functional:
        from t3.schedules.t3 import require_functional

        require_functional(config)
    out = spec.run(op, hw, options)
    return record(op, hw, config, out)
