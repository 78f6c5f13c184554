"""Public entry points: simulate one sublayer under one configuration and get a plain record."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from t3 import size
from t3.config.hardware import Hardware, load_hardware
from t3.errors import ConfigError, SimulationError
from t3.schedules import Outcome, RunOptions, get_config
from t3.workload import get_model, sublayer_operator
from t3.workload.sublayers import Operator


def resolve(
    model: str | Path, tp: int, sublayer: str, config: str, hardware: str | Path | Hardware,
    tokens: int | None = None, hw_overrides: dict[str, Any] | None = None,
) -> tuple[Operator, Hardware, Any]:  # fmt: skip
    """Validate every input (raising :class:`t3.errors.T3Error` naming the field) before any simulation."""
    spec = get_config(config)
    if hw_overrides is not None and not isinstance(hw_overrides, dict):
        raise ConfigError(f"hw_overrides: expected a dict of dotted paths, got {hw_overrides!r}")
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    if hw_overrides:
        hw = hw.with_overrides(hw_overrides)
    op = sublayer_operator(get_model(model), sublayer, tp, tokens)
    return op, hw, spec


def check_run(op: Operator, hw: Hardware, spec: Any, options: RunOptions, force: bool = False) -> None:
    """Everything about one simulation that can be refused before it starts: the options' types, the
    configuration's parameters, functional mode, and the size guard (:mod:`t3.size`; ``force`` skips it)."""
    if not isinstance(options, RunOptions):
        raise ConfigError(f"options: expected a t3.RunOptions, got {type(options).__name__}")
    spec.check(options)
    if options.functional:
        from t3.schedules.t3 import require_functional

        require_functional(spec.name)
    size.check(size.run_work(op, hw, spec.name, options.symmetric, options.functional), force=force)


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
    hw_overrides: dict[str, Any] | None = None, options: RunOptions | None = None, force: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Simulate one sublayer and return its record (see :func:`record`). Every input is checked first
    (:class:`t3.errors.T3Error` naming the field); work above :data:`t3.size.LIMIT_OPS` is refused
    (:class:`t3.errors.TooLargeError`) unless ``force``."""
    op, hw, spec = resolve(model, tp, sublayer, config, hardware, tokens, hw_overrides)
    options = RunOptions() if options is None else options
    check_run(op, hw, spec, options, force)
    return record(op, hw, config, simulate(op, hw, spec, options))


def simulate(op: Operator, hw: Hardware, spec: Any, options: RunOptions) -> Outcome:
    """Run a checked configuration; a time that overflows (extreme hardware values, e.g. a link of
    1e-300 B/s) is a :class:`t3.errors.SimulationError`, never an ``inf`` in the output."""
    out = spec.run(op, hw, options)
    bad = {k: v for k, v in {"time_s": out.time_s, **out.breakdown_s}.items() if not math.isfinite(v)}
    if bad:
        raise SimulationError(
            f"{spec.name}: simulated {', '.join(bad)} = {next(iter(bad.values()))} is not finite; a hardware "
            "value is too extreme for double precision (check bandwidths, latencies and clocks)"
        )
    return out
