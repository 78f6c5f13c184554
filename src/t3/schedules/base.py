"""Configurations: named generators of schedules, run on the engine, summarised with units.

A configuration turns (operator, hardware, options) into an :class:`Outcome`. Most build one
schedule and run it once (:func:`simulate_schedule`); composite ones (the ideal-overlap bounds) combine
isolated runs. Every configuration is registered in :data:`CONFIGS` under its stable name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from t3.config.hardware import Hardware
from t3.errors import ConfigError
from t3.sim.engine import Engine, Result
from t3.sim.schedule import DRAM_CATEGORIES, Schedule, ScheduleBuilder
from t3.workload.sublayers import Operator


@dataclass(frozen=True)
class RunOptions:
    symmetric: bool = True  # simulate one GPU + mirrored neighbours (exact for symmetric schedules)
    trace: bool = False  # keep per-resource usage over time (timelines, HBM counters)
    comm_cus: int = 16  # CUs given to the communication kernel in the `concurrent` configuration
    seed: int | None = None  # randomise simultaneous-event order (testing)
    jitter: float = 0.0  # stretch delays randomly by up to this fraction (testing)
    functional: bool = False  # carry real values through the schedule and check them
    params: dict[str, Any] = field(default_factory=dict)  # configuration-specific parameters

    def engine(self) -> Engine:
        return Engine(trace=self.trace, seed=self.seed, jitter=self.jitter)


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


CONFIGS: dict[str, ConfigSpec] = {}


def register(name: str, description: str):
    def deco(fn: Callable[[Operator, Hardware, RunOptions], Outcome]):
        CONFIGS[name] = ConfigSpec(name, description, fn)
        return fn

    return deco


def get_config(name: str) -> ConfigSpec:
    if name not in CONFIGS:
        raise ConfigError(f"config: unknown configuration '{name}' (available: {', '.join(CONFIGS)})")
    return CONFIGS[name]


def builder(name: str, op: Operator, hw: Hardware, opts: RunOptions) -> ScheduleBuilder:
    return ScheduleBuilder(name, hw, op.tp, symmetric=opts.symmetric)


def dram_bytes(traffic: dict[str, float]) -> dict[str, float]:
    return {k: traffic.get(k, 0.0) for k in DRAM_CATEGORIES if k in traffic or not k.startswith("a2a")}


def summarize(result: Result) -> Outcome:
    """Times from op spans on the critical GPU, bytes per GPU from the schedule's traffic."""
    sched: Schedule = result.schedule
    crit = max(
        sched.gpus, key=lambda g: max((result.end[o.id] for o in sched.ops if o.gpu == g), default=0.0)
    )
    t = result.makespan
    gemm = result.busy("gemm", crit)
    traffic = sched.traffic_per_gpu()
    return Outcome(
        time_s=t,
        breakdown_s={
            "gemm": gemm,
            "reduce_scatter": result.busy("rs", crit),
            "all_gather": result.busy("ag", crit),
            "exposed_comm": t - gemm,
        },
        dram_bytes=dram_bytes(traffic),
        link_bytes=traffic.get("link", 0.0),
        results=[result],
        hbm_work_bytes=hbm_work(sched),
        extra={"collectives": dict(sched.meta["algos"])} if sched.meta.get("algos") else {},
    )


def hbm_work(sched: Schedule) -> float:
    """HBM work (bytes of channel time) per materialised GPU of a schedule."""
    tot = 0.0
    for op in sched.ops:
        for r, a in op.demands:
            if sched.resources[r].kind == "hbm":
                tot += a
    return tot / len(sched.gpus)


def simulate_schedule(sched: Schedule, opts: RunOptions) -> Outcome:
    return summarize(opts.engine().run(sched))
