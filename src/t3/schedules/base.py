"""Configurations: named generators of schedules, run on the engine, summarised with units.

A configuration turns (operator, hardware, options) into an :class:`Outcome`. Most build one
schedule and run it once (:func:`simulate_schedule`); composite ones (the ideal-overlap bounds) combine
isolated runs. Every configuration is registered in :data:`CONFIGS` under its stable name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from t3.config.hardware import Hardware
from t3.errors import ConfigError
from t3.sim.engine import Engine, Result
from t3.sim.schedule import DRAM_CATEGORIES, Schedule, ScheduleBuilder
from t3.workload.sublayers import Operator


def _kind(v: Any) -> str:
    return f"{v!r} ({type(v).__name__})"


# the largest options.jitter: delays stretched by up to 1 + JITTER_MAX times (a test of a schedule's order of
# events; far larger stretches overflow the float clock)
JITTER_MAX = 100.0


@dataclass(frozen=True)
class RunOptions:
    """How to simulate; checked on construction (a wrongly typed or out-of-range field raises
    :class:`ConfigError` naming ``options.<field>``; nothing is coerced). ``params`` are checked
    against the configuration's declared parameters by :meth:`ConfigSpec.check`."""

    symmetric: bool = True  # simulate one GPU + mirrored neighbours (exact for symmetric schedules)
    trace: bool = False  # keep per-resource usage over time (timelines, HBM counters)
    comm_cus: int = 16  # CUs given to the communication kernel in the `concurrent` configuration
    seed: int | None = None  # randomise simultaneous-event order (testing)
    jitter: float = 0.0  # stretch delays randomly by up to this fraction (testing; at most JITTER_MAX)
    functional: bool = False  # carry real values through the schedule and check them
    params: dict[str, Any] = field(default_factory=dict)  # configuration-specific parameters

    def __post_init__(self) -> None:
        for name in ("symmetric", "trace", "functional"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"options.{name}: expected true or false, got {_kind(getattr(self, name))}")
        for name, none_ok in (("comm_cus", False), ("seed", True)):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool)) and not (none_ok and v is None):
                raise ConfigError(f"options.{name}: expected an integer, got {_kind(v)}")
        if self.comm_cus < 1:
            raise ConfigError(f"options.comm_cus: must be >= 1, got {self.comm_cus}")
        j = self.jitter
        if not isinstance(j, int | float) or isinstance(j, bool):
            raise ConfigError(f"options.jitter: expected a number, got {_kind(j)}")
        if not math.isfinite(j) or j < 0:
            raise ConfigError(f"options.jitter: must be a finite number >= 0, got {j}")
        if j > JITTER_MAX:  # (1e308 stretched every delay past the float range: times of inf)
            raise ConfigError(
                f"options.jitter: must be <= {JITTER_MAX:g} (delays stretched up to {1 + JITTER_MAX:g}x test a"
                f" schedule's order; more only overflows its clock), got {j:g}"
            )
        if not isinstance(self.params, dict) or not all(isinstance(k, str) for k in self.params):
            raise ConfigError(
                f"options.params: expected a table of named parameters, got {_kind(self.params)}"
            )

    def engine(self) -> Engine:
        return Engine(trace=self.trace, seed=self.seed, jitter=self.jitter)


@dataclass(frozen=True)
class Param:
    """A configuration-specific parameter (``RunOptions.params[name]``): accepted types, allowed
    values, and the boolean ``RunOptions`` field it needs (it means nothing otherwise)."""

    types: tuple[type, ...]
    description: str
    choices: tuple[Any, ...] | None = None
    needs: str | None = None


@dataclass
class Outcome:
    time_s: float
    breakdown_s: dict[str, float]
    dram_bytes: dict[str, float]
    link_bytes: float
    results: list[Result] = field(default_factory=list)
    # channel time of the HBM per GPU, in bytes at the peak rate: DRAM traffic plus what NMC updates
    # cost beyond one write each (what takes time; dram_bytes is what is counted)
    hbm_work_bytes: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(r.events for r in self.results)


@dataclass(frozen=True)
class ConfigSpec:
    name: str
    description: str
    run: Callable[[Operator, Hardware, RunOptions], Outcome]
    params: dict[str, Param] = field(default_factory=dict)
    # what the configuration needs of the operator and the hardware, checked before any work (raises a
    # ConfigError naming the field): e.g. T3's near-memory compute and one node's fabric
    requires: Callable[[Operator, Hardware], None] | None = None

    def check(self, opts: RunOptions) -> None:
        """Reject parameters this configuration does not take, wrongly typed or out of its choices."""
        for k, v in opts.params.items():
            p = self.params.get(k)
            if p is None:
                takes = ", ".join(self.params) or "none"
                raise ConfigError(
                    f"options.params.{k}: unknown parameter of configuration '{self.name}' (it takes: {takes})"
                )
            ok = any(v is None if t is type(None) else isinstance(v, t) and not (isinstance(v, bool) and t is not bool)
                     for t in p.types)  # fmt: skip
            if not ok:
                want = " or ".join("null" if t is type(None) else t.__name__ for t in p.types)
                raise ConfigError(f"options.params.{k}: expected {want}, got {_kind(v)}")
            if p.choices is not None and v not in p.choices:
                raise ConfigError(f"options.params.{k}: must be one of {list(p.choices)}, got {v!r}")
            if p.needs and not getattr(opts, p.needs):
                raise ConfigError(f"options.params.{k}: only used with options.{p.needs} = true")


CONFIGS: dict[str, ConfigSpec] = {}


def register(
    name: str, description: str, params: dict[str, Param] | None = None,
    requires: Callable[[Operator, Hardware], None] | None = None,
):  # fmt: skip
    def deco(fn: Callable[[Operator, Hardware, RunOptions], Outcome]):
        CONFIGS[name] = ConfigSpec(name, description, fn, dict(params or {}), requires)
        return fn

    return deco


def get_config(name: str) -> ConfigSpec:
    if not isinstance(name, str) or name not in CONFIGS:
        raise ConfigError(f"config: unknown configuration {name!r} (available: {', '.join(CONFIGS)})")
    return CONFIGS[name]


def builder(name: str, op: Operator, hw: Hardware, opts: RunOptions) -> ScheduleBuilder:
    return ScheduleBuilder(name, hw, op.tp, symmetric=opts.symmetric)


def dram_bytes(traffic: dict[str, float]) -> dict[str, float]:
    return {k: traffic.get(k, 0.0) for k in DRAM_CATEGORIES if k in traffic or not k.startswith("a2a")}


def _picker(ids: list[int]) -> Callable[[list[float]], tuple[float, ...]]:
    """The values at ``ids`` of a list, as a tuple (one C call)."""
    return itemgetter(*ids) if len(ids) > 1 else (lambda seq, i=ids[0]: (seq[i],))


def _span_groups(sched: Schedule) -> tuple[list[tuple[int, Callable]], dict[int, list[tuple[str, Callable]]]]:
    """The op ids of each GPU and of each (GPU, category), as pickers: computed once per schedule and kept
    with it (a schedule is not modified once run)."""
    hit = sched.__dict__.get("_summary_groups")
    if hit is None:
        of_gpu: dict[int, list[int]] = {}
        of_cat: dict[int, dict[str, list[int]]] = {}
        for o in sched.ops:
            of_gpu.setdefault(o.gpu, []).append(o.id)
            of_cat.setdefault(o.gpu, {}).setdefault(o.cat, []).append(o.id)
        hit = sched.__dict__["_summary_groups"] = (
            [(g, _picker(ids)) for g, ids in of_gpu.items()],
            {g: [(c, _picker(ids)) for c, ids in cats.items()] for g, cats in of_cat.items()},
        )
    return hit


def summarize(result: Result) -> Outcome:
    """Times from op spans on the critical GPU, bytes per GPU from the schedule's traffic."""
    sched: Schedule = result.schedule
    start, end = result.start, result.end
    of_gpu, of_cat = _span_groups(sched)
    last = {g: max(pick(end)) for g, pick in of_gpu}  # per GPU: the end of its last op
    crit = max(sched.gpus, key=lambda g: last.get(g, 0.0))  # (the critical GPU's spans)
    busy = {c: max(pick(end)) - min(pick(start)) for c, pick in of_cat.get(crit, ())}
    t = result.makespan
    gemm = busy.get("gemm", 0.0)
    traffic, work = sched.sums_per_gpu()
    return Outcome(
        time_s=t,
        breakdown_s={
            "gemm": gemm,
            "reduce_scatter": busy.get("rs", 0.0),
            "all_gather": busy.get("ag", 0.0),
            "exposed_comm": t - gemm,
        },
        dram_bytes=dram_bytes(traffic),
        link_bytes=traffic.get("link", 0.0),
        results=[result],
        hbm_work_bytes=work,
        extra={"collectives": dict(sched.meta["algos"])} if sched.meta.get("algos") else {},
    )


def simulate_schedule(sched: Schedule, opts: RunOptions) -> Outcome:
    return summarize(opts.engine().run(sched))
