"""``t3 reproduce t3``: the T3 paper's evaluation as one list of simulation tasks, then a summary.

Flow: :func:`build_tasks` lists every simulation the evaluation needs (sublayer points on the
paper's system, the concurrent-kernel motivation, sensitivity sweeps, one traced run for the HBM
timeline, the non-sliced GEMMs of the end-to-end projection), deduplicated; :func:`execute_all` runs
them with one call (an ordered process pool); :func:`summarize` turns the records into the JSON
document (points, summary, end-to-end, concurrent, sensitivity, calibration).

Speedup of a configuration at a point = ``T_sequential / T_config - 1`` (a fraction: 0.30 = 30 %),
against Sequential at the same model, TP, sublayer, tokens and hardware. Geomean speedup =
``geomean(1 + s) - 1``. Configurations that are not registered are listed under ``missing`` and
their numbers are ``null``: nothing is ever filled in for them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t3.config.hardware import load_hardware, tp_refusal
from t3.errors import ConfigError, PointsFailed, T3Error
from t3.experiments import endtoend
from t3.schedules import CONFIGS
from t3.sim.schedule import DRAM_CATEGORIES
from t3.workload import get_model, sublayer_operator

PAPER_CONFIGS = ("sequential", "t3", "t3-mca", "ideal-gemm-rs-overlap", "ideal-rs-nmc")
COMPARED = ("ideal-gemm-rs-overlap", "ideal-rs-nmc", "t3", "t3-mca")
SUBLAYERS = ("op", "fc2", "fc1-bwd", "ip-bwd")
DRAM_CATS = tuple(c for c in DRAM_CATEGORIES if not c.startswith("a2a"))
# the figures t3.experiments.figures.make_all writes (figure_jobs) (the CLI's output-folder rule replaces only these)
FIGURES = {
    "main": "speedup_main.png", "dram": "dram_traffic.png", "large": "speedup_large.png",
    "timeline": "hbm_timeline.png", "end_to_end": "end_to_end.png", "sensitivity": "sensitivity.png",
}  # fmt: skip


def key(config: str) -> str:
    return config.replace("-", "_")


def figure_jobs(doc: dict[str, Any], out: Path) -> list[tuple[str, tuple]]:
    """The figures of a reproduction document as ``(t3.experiments.figures function, arguments)``
    jobs, the slowest first (so that two processes stay busy); creates ``out``. Kept free of
    matplotlib, so a caller can hand them to processes that imported it ahead of time."""
    out.mkdir(parents=True, exist_ok=True)
    missing = doc["configs"]["missing"]
    jobs: list[tuple[str, tuple]] = [
        ("speedup_bars", (doc["points"], out / FIGURES["main"],
                          "Sublayer speedup over Sequential: Mega-GPT-2 (MG2), T-NLG (TNLG)", missing)),
        ("dram_stacked", (doc["points"], out / FIGURES["dram"], missing)),
    ]  # fmt: skip
    if doc["large_points"]:
        jobs.append(
            (
                "speedup_bars",
                (doc["large_points"], out / FIGURES["large"], "Sublayer speedup, TP 32 models", missing),
            )
        )
    if doc["timeline"]:
        jobs.append(
            ("hbm_timeline", (doc["timeline"], out / FIGURES["timeline"], doc.get("timeline_label", "")))
        )
    if doc["end_to_end"]["per_model"]:
        jobs.append(("end_to_end", (doc["end_to_end"], out / FIGURES["end_to_end"])))
    if doc["sensitivity"]:
        jobs.append(("sensitivity", (doc["sensitivity"], out / FIGURES["sensitivity"])))
    jobs.sort(key=lambda j: j[0] != "sensitivity")
    return jobs


@dataclass(frozen=True)
class Sweep:
    """A sensitivity sweep: ``values`` of a hardware field (or tokens) applied to the main set."""

    name: str
    label: str
    field: str  # dotted hardware path, or "tokens"
    values: tuple[Any, ...]
    relative: bool = False  # values multiply the preset's value
    affects_baselines: bool = True  # False: sequential/ideal are unchanged (T3-only knobs)
    configs: tuple[str, ...] = COMPARED
    also: tuple[str, ...] = ()  # (relative sweeps) fields scaled by the same factor
    # a value of this field too small for a schedule is an expected outcome, not a failure: a point
    # whose ScheduleError names the field is reported as infeasible, with its reason
    infeasible: str = ""


def _mca_sweep() -> Sweep:
    """The MCA threshold sweep: ``mca.occupancy_threshold``, the occupancy the gate allows a GEMM with
    no memory intensity (the threshold is ``occupancy_threshold x (1 - first-stage intensity)``)."""
    return Sweep(
        "mca_threshold", "MCA occupancy threshold", "mca.occupancy_threshold", (0.2, 0.4, 0.6, 0.8, 1.0),
        affects_baselines=False, configs=("t3-mca",),
    )  # fmt: skip


DEFAULT_SWEEPS = (
    Sweep("link_bw", "link bandwidth (x preset)", "link.bandwidth_Bps", (0.5, 1.0, 2.0), relative=True),
    Sweep(
        "cus",
        "compute units and tracker entries (x preset)",
        "compute.cus",
        (1.0, 2.0),
        relative=True,
        also=("tracker.entries",),
    ),  # fmt: skip
    Sweep(
        "cus_fixed_tracker",
        "compute units (x preset), tracker fixed",
        "compute.cus",
        (1.0, 2.0),
        relative=True,
    ),
    Sweep(
        "tracker_entries",
        "tracker entries",
        "tracker.entries",
        (32, 64, 128, 256, 512, 1024),
        affects_baselines=False,
        configs=("t3", "t3-mca"),
        infeasible="tracker.entries",  # fewer entries than the tiles of one wave: T3 cannot run
    ),  # fmt: skip
    _mca_sweep(),
    Sweep("tokens", "tokens (batch x sequence)", "tokens", (2048, 4096, 8192, 16384)),
)


@dataclass(frozen=True)
class Plan:
    """What to reproduce. The defaults are the paper's evaluation; tests use smaller plans."""

    hardware: str = "paper-80cu"
    models: tuple[str, ...] = ("mega-gpt-2", "t-nlg")
    tps: tuple[int, ...] = (8, 16)
    large_models: tuple[str, ...] = ("gpt-3", "palm", "mt-nlg")
    large_tps: tuple[int, ...] = (32,)
    sublayers: tuple[str, ...] = SUBLAYERS
    tokens: int | None = None  # None: each model's calibrated default (zoo)
    comm_cus: tuple[int, ...] = (8, 16)
    sweeps: tuple[Sweep, ...] = DEFAULT_SWEEPS
    timeline: tuple[str, int, str] | None = ("t-nlg", 8, "fc2")
    timeline_bins: int = 200
    configs: tuple[str, ...] = PAPER_CONFIGS
    hw_overrides: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Fail before any simulation, naming the field."""
        hw = load_hardware(self.hardware, self.hw_overrides or None)
        topo = hw.topology
        for tp in (*self.tps, *(self.large_tps if self.large_models else ())):
            if why := tp_refusal(hw, tp):
                hint = "; use a ring preset such as paper-80cu" if topo.kind != "ring" else ""
                raise ConfigError(f"{why} (the T3 evaluation needs TP 8, 16 and 32{hint})")
        for m in (*self.models, *self.large_models):
            spec = get_model(m)
            tps = self.tps if m in self.models else self.large_tps
            for tp in tps:
                for s in self.sublayers:
                    sublayer_operator(spec, s, tp, self.tokens)
        for sw in self.sweeps:
            if sw.field != "tokens":
                v = sw.values[0] * _get(hw.model_dump(), sw.field) if sw.relative else sw.values[0]
                hw.with_overrides({sw.field: _cast(hw, sw.field, v)})
        if "sequential" not in self.configs:
            raise ConfigError("configs: 'sequential' is required (every speedup is over it)")

    def nmc_refusal(self) -> str | None:
        """Why the configurations that need near-memory compute cannot run on this plan's GPU (None if
        they can): said before any point runs, where every one of their points would fail."""
        hw = load_hardware(self.hardware, self.hw_overrides or None)
        nmc = [c for c in self.configs if c in ("ideal-rs-nmc", "t3", "t3-mca")]
        if not nmc or hw.nmc.present:
            return None
        return (
            f"nmc.present: '{hw.name}' has no near-memory compute, which {', '.join(nmc)} need (the T3 proposal;"
            " --set nmc.present=true studies it on this GPU, --keep-going runs the other configurations)"
        )


def _get(d: dict, path: str) -> Any:
    for p in path.split("."):
        if not isinstance(d, dict) or p not in d:
            raise ConfigError(f"hardware.{path}: unknown field")
        d = d[p]
    return d


def _cast(hw, path: str, v: Any) -> Any:
    return int(round(v)) if isinstance(_get(hw.model_dump(), path), int) else v


def available(configs: Sequence[str]) -> tuple[list[str], list[str]]:
    have = [c for c in configs if c in CONFIGS]
    return have, [c for c in configs if c not in CONFIGS]


# ---- tasks ---------------------------------------------------------------------------------
def _run_task(model, tp, sublayer, config, plan: Plan, tokens=None, overrides=None, **options) -> dict:
    ov = dict(plan.hw_overrides)
    ov.update(overrides or {})
    return {
        "kind": "run",
        "point": {
            "model": model, "tp": tp, "sublayer": sublayer, "config": config, "hardware": plan.hardware,
            "tokens": plan.tokens if tokens is None else tokens, "hw_overrides": ov or None,
            "options": dict(options),
        },
    }  # fmt: skip


def task_id(task: dict) -> str:
    return json.dumps(task, sort_keys=True)


def sweep_overrides(plan: Plan, sw: Sweep, value: Any) -> tuple[dict, int | None]:
    if sw.field == "tokens":
        return {}, int(value)
    hw = load_hardware(plan.hardware, plan.hw_overrides or None)
    d = hw.model_dump()
    v = value * _get(d, sw.field) if sw.relative else value
    out = {sw.field: _cast(hw, sw.field, v)}
    for f in sw.also:
        out[f] = _cast(hw, f, value * _get(d, f))
    return out, None


def build_tasks(plan: Plan) -> dict[str, list[dict]]:
    """Every simulation of the evaluation, grouped by study (a task may appear in several studies)."""
    have, _ = available(plan.configs)
    studies: dict[str, list[dict]] = {"main": [], "large": [], "concurrent": [], "timeline": [], "gemm": []}
    sets = [("main", plan.models, plan.tps), ("large", plan.large_models, plan.large_tps)]
    for study, models, tps in sets:
        for m in models:
            for tp in tps:
                for s in plan.sublayers:
                    for c in have:
                        studies[study].append(_run_task(m, tp, s, c, plan))
    for m in plan.models:
        for tp in plan.tps:
            for s in plan.sublayers:
                for k in plan.comm_cus:
                    studies["concurrent"].append(_run_task(m, tp, s, "concurrent", plan, comm_cus=k))
    for sw in plan.sweeps:
        lst = studies.setdefault(f"sweep:{sw.name}", [])
        cfgs = [c for c in sw.configs if c in have]
        for v in sw.values:
            ov, tok = sweep_overrides(plan, sw, v)
            for m in plan.models:
                for tp in plan.tps:
                    for s in plan.sublayers:
                        base_ov, base_tok = (ov, tok) if sw.affects_baselines else ({}, None)
                        lst.append(_run_task(m, tp, s, "sequential", plan, base_tok, base_ov))
                        for c in cfgs:
                            lst.append(_run_task(m, tp, s, c, plan, tok, ov))
    if plan.timeline:
        m, tp, s = plan.timeline
        for c in [c for c in ("sequential", "t3", "t3-mca") if c in have]:
            studies["timeline"].append(
                {"kind": "trace", "point": _run_task(m, tp, s, c, plan)["point"], "bins": plan.timeline_bins}
            )
    for m in plan.models:
        spec = get_model(m)
        tokens = plan.tokens or spec.tokens
        for tp in plan.tps:
            for phase in endtoend.PHASE_SUBLAYERS:
                for name, g in endtoend.other_gemms(spec, tp, tokens, phase).items():
                    studies["gemm"].append(
                        {
                            "kind": "gemm", "model": m, "tp": tp, "name": name,
                            "m": g.m, "n": g.n, "k": g.k, "dtype": g.dtype,
                            "hardware": plan.hardware, "hw_overrides": dict(plan.hw_overrides) or None,
                        }
                    )  # fmt: skip
    return studies


def unique_tasks(studies: dict[str, list[dict]]) -> list[dict]:
    seen: dict[str, dict] = {}
    for lst in studies.values():
        for t in lst:
            seen.setdefault(task_id(t), t)

    # heaviest first keeps the pool busy to the end (traces and large models are the long ones)
    def weight(t: dict) -> tuple:
        p = t.get("point", {})
        return (t["kind"] != "trace", -get_model(p["model"]).hidden if p else 0)

    return sorted(seen.values(), key=weight)


# ---- workers (module level: picklable) ------------------------------------------------------
def execute(task: dict) -> dict:
    """Run one task. Any failure (a configuration that rejects its input, e.g. a tracker too small for
    one wave, a schedule that cannot progress, a bug) returns ``{"error": "Type: message"}`` (one
    line, as the sweep runner records it): the reproduction reports it, never a number."""
    try:
        return _execute(task)
    except Exception as err:  # noqa: BLE001 - recorded and reported by reproduce()
        msg = " ".join(str(err).split())
        return {"error": f"{type(err).__name__}: {msg}" if msg else type(err).__name__}


def _execute(task: dict) -> dict:
    kind = task["kind"]
    if kind == "run":
        from t3.experiments.parallel import run_point

        return _run_result(run_point(task["point"]))
    if kind == "gemm":
        return {"time_s": gemm_alone_s(task)}
    if kind == "trace":
        return hbm_timeline(task["point"], task["bins"])
    raise ValueError(f"task kind '{kind}'")


def _run_result(rec: dict) -> dict:
    """The fields of a run record the study needs, in a fixed key order (stored records are key-sorted)."""
    bd = rec["breakdown_s"]
    return {
        "time_s": rec["time_s"],
        "breakdown_s": {k: bd[k] for k in ("gemm", "reduce_scatter", "all_gather", "exposed_comm")},
        "dram_bytes": {k: rec["dram_bytes"][k] for k in DRAM_CATEGORIES if k in rec["dram_bytes"]},
        "link_bytes": rec["link_bytes"],
        "hbm_work_bytes": rec["hbm_work_bytes"],
        "tokens": rec["tokens"],
    }


def gemm_alone_s(task: dict) -> float:
    """Time of one GEMM alone on a GPU (launch included), simulated with the same GEMM model."""
    from t3.ops.gemm import add_gemm, plan_gemm
    from t3.sim.engine import Engine
    from t3.sim.schedule import ScheduleBuilder
    from t3.workload.sublayers import GemmShape

    hw = load_hardware(task["hardware"], task.get("hw_overrides"))
    b = ScheduleBuilder("gemm", hw, 2, symmetric=True)
    add_gemm(b, 0, plan_gemm(GemmShape(task["m"], task["n"], task["k"], task["dtype"]), hw))
    return Engine().run(b.build()).makespan


def hbm_timeline(point: dict, bins: int) -> dict:
    """HBM use of GPU 0 by traffic category and direction over time (bytes/s of channel time, averaged
    into ``bins`` bins): ``gemm read``, ``gemm write``, ``rs read`` (DMA / RS kernel reads), ``rs write``
    (landing writes, NMC updates at their channel cost), ``ag read`` / ``ag write``."""
    from t3.api import resolve
    from t3.schedules import RunOptions

    p = dict(point)
    opts = RunOptions(trace=True, **p.pop("options", {}))
    op, hw, spec = resolve(
        p["model"], p["tp"], p["sublayer"], p["config"], p["hardware"], p["tokens"], p["hw_overrides"]
    )
    out = spec.run(op, hw, opts)
    res = out.results[0]
    hbm = [i for i, r in enumerate(res.schedule.resources) if r.kind == "hbm" and r.gpu == 0]
    t_end = res.makespan
    dt = t_end / bins
    series: dict[str, list[float]] = {}
    for t0, t1, snap in res.usage or []:
        for (r, cat), rate in snap.items():
            if r not in hbm or rate <= 0:
                continue
            s = series.setdefault(cat, [0.0] * bins)
            b0, b1 = int(t0 / dt), min(bins - 1, int(t1 / dt))
            for b in range(b0, b1 + 1):
                lo, hi = max(t0, b * dt), min(t1, (b + 1) * dt)
                if hi > lo:
                    s[b] += rate * (hi - lo) / dt
    return {
        "config": p["config"], "time_s": out.time_s, "bin_s": dt,
        "capacity_Bps": hw.hbm.effective_Bps, "peak_Bps": hw.hbm.bandwidth_Bps,
        "series_Bps": {k: series[k] for k in sorted(series)},
    }  # fmt: skip


def execute_all(
    tasks: list[dict], *, workers: int | None = None, progress: bool = True,
    runner: Callable[..., list] | None = None, executor: str = "local", scheduler: str | None = None,
    store: str | Path | None = None, label: Callable[[dict, str], str] | None = None,
) -> dict[str, dict]:  # fmt: skip
    """Run every task; results by task id (``{"error": "Type: message"}`` for a task that failed;
    ``label(task, error)`` names such outcomes on the progress bar, default "failed").

    Simulation points (``kind == "run"``) go through the sweep runner (:mod:`t3.experiments.sweep`):
    local process pool or Dask (``executor``/``scheduler``), and with ``store`` a resumable Parquet
    store, so an interrupted reproduction resumes where it stopped. The few other tasks (GEMM-alone
    times, traced timelines) run on the ordered local pool. A custom ``runner`` (pmap's signature) runs
    everything instead."""
    from t3.experiments.parallel import pmap

    if runner is not None:
        out = runner(execute, tasks, workers=workers, desc="t3 reproduce t3", progress=progress)
        return {task_id(t): r for t, r in zip(tasks, out, strict=True)}
    from t3.experiments.sweep.run import RECORD_COLUMN, as_sweep, execute_records

    runs = [t for t in tasks if t["kind"] == "run"]
    rest = [t for t in tasks if t["kind"] != "run"]
    results: dict[str, dict] = {}
    if runs:
        # the size guard ran on every task already (check_size)
        sweep = as_sweep([t["point"] for t in runs], name="t3 reproduce t3", force=True)
        rows, _ = execute_records(
            sweep, ("key", "status", "error", RECORD_COLUMN), executor=executor, workers=workers,
            scheduler=scheduler, store=store, progress=progress, description="t3 reproduce t3: points",
            classify=(lambda i, err: label(runs[i], err)) if label else None,
        )  # fmt: skip
        by_key = {r["key"]: (r["status"], r["error"], r[RECORD_COLUMN]) for r in rows}
        for t, k in zip(runs, sweep.keys, strict=True):
            status, error, rec = by_key[k]
            if status != "ok":
                results[task_id(t)] = {"error": error}
            else:
                results[task_id(t)] = _run_result(json.loads(rec))
    out = pmap(execute, rest, workers=workers, desc="t3 reproduce t3: timelines, GEMMs", progress=progress)
    results.update({task_id(t): r for t, r in zip(rest, out, strict=True)})
    return results


# ---- summary --------------------------------------------------------------------------------
def geomean_speedup(speedups: Sequence[float]) -> float:
    """geomean(1 + s) - 1 over speedup fractions."""
    if not speedups:
        raise ValueError("geomean of no speedups")
    return math.exp(sum(math.log1p(s) for s in speedups) / len(speedups)) - 1.0


def _stats(xs: Sequence[float]) -> dict[str, float | None]:
    if not xs:
        return {"geomean_speedup": None, "max_speedup": None}
    return {"geomean_speedup": geomean_speedup(xs), "max_speedup": max(xs)}


def is_infeasible(error: str, field: str) -> bool:
    """Whether ``error`` (``Type: message``) is the expected ScheduleError of a too small ``field``."""
    return bool(field) and error.startswith(f"ScheduleError: {field}:")


def expected_infeasible(plan: Plan, studies: dict[str, list[dict]]) -> dict[str, str]:
    """Task id -> the field whose too small value may make it infeasible (tasks that only belong to a
    sweep of that field; a task also needed elsewhere is expected to run)."""
    fields = {f"sweep:{sw.name}": sw.infeasible for sw in plan.sweeps}
    out: dict[str, str] = {}
    needed: set[str] = set()
    for name, lst in studies.items():
        f = fields.get(name, "")
        for t in lst:
            if f:
                out[task_id(t)] = f
            else:
                needed.add(task_id(t))
    return {k: v for k, v in out.items() if k not in needed}


def describe_task(t: dict) -> str:
    """A task in words, for messages: ``mega-gpt-2 TP 8 fc2 t3 (tracker.entries=32)``."""
    if t["kind"] == "gemm":
        return f"GEMM alone {t['model']} TP {t['tp']} {t['name']} ({t['m']}x{t['n']}x{t['k']})"
    p = t["point"]
    extra = dict(p.get("hw_overrides") or {})
    if p.get("tokens") is not None:
        extra["tokens"] = p["tokens"]
    extra.update({f"options.{k}": v for k, v in (p.get("options") or {}).items()})
    what = f"{p['model']} TP {p['tp']} {p['sublayer']} {p['config']}"
    what += f" ({', '.join(f'{k}={v}' for k, v in extra.items())})" if extra else ""
    return what + (" timeline" if t["kind"] == "trace" else "")


def classify_failures(
    plan: Plan, studies: dict[str, list[dict]], results: dict[str, dict]
) -> tuple[list[dict], list[dict]]:
    """(failures, expected infeasible points), each ``{"point": words, "error": "Type: message"}``
    (run points also carry model, tp, sublayer, config and overrides), in a fixed order."""
    exp = expected_infeasible(plan, studies)
    failed, infeasible = [], []
    for t in sorted(unique_tasks(studies), key=task_id):
        err = results[task_id(t)].get("error")
        if not err:
            continue
        row: dict[str, Any] = {"point": describe_task(t), "error": err}
        if "point" in t:
            p = t["point"]
            row.update({k: p[k] for k in ("model", "tp", "sublayer", "config")}, overrides=p["hw_overrides"])
        (infeasible if is_infeasible(err, exp.get(task_id(t), "")) else failed).append(row)
    return failed, infeasible


def _errors(study: list[dict], results: dict[str, dict]) -> list[dict]:
    return [
        {k: t["point"][k] for k in ("model", "tp", "sublayer", "config")}
        | {"overrides": t["point"]["hw_overrides"], "error": results[task_id(t)]["error"]}
        for t in study
        if "error" in results[task_id(t)]
    ]


def _point_records(plan: Plan, study: list[dict], results: dict[str, dict]) -> list[dict]:
    """Records of a study with speedups; a configuration with any failed point is left out entirely
    (its failures are in :func:`_errors`) so that no summary is computed over a partial set."""
    bad = {t["point"]["config"] for t in study if "error" in results[task_id(t)]}
    if "sequential" in bad:
        e = next(x for x in _errors(study, results) if x["config"] == "sequential")
        raise PointsFailed(
            f"sequential: baseline failed at {e['model']} TP {e['tp']} {e['sublayer']}: {e['error']} "
            "(every speedup is over it: nothing to report)"
        )
    recs = [dict(t["point"], **results[task_id(t)]) for t in study if t["point"]["config"] not in bad]
    seq = {(r["model"], r["tp"], r["sublayer"]): r["time_s"] for r in recs if r["config"] == "sequential"}
    out = []
    for r in recs:
        from t3.workload.sublayers import SUBLAYERS as SL

        out.append(
            {
                "model": r["model"], "tp": r["tp"], "sublayer": r["sublayer"], "phase": SL[r["sublayer"]][0],
                "config": r["config"], "tokens": r["tokens"], "time_s": r["time_s"],
                "speedup": seq[(r["model"], r["tp"], r["sublayer"])] / r["time_s"] - 1.0,
                "breakdown_s": r["breakdown_s"], "dram_bytes": r["dram_bytes"], "link_bytes": r["link_bytes"],
                "hbm_work_bytes": r["hbm_work_bytes"],
            }
        )  # fmt: skip
    return out


def _by(points: list[dict], config: str) -> dict[tuple, dict]:
    return {(p["model"], p["tp"], p["sublayer"]): p for p in points if p["config"] == config}


def data_movement(points: list[dict]) -> dict[str, Any]:
    seq, mca = _by(points, "sequential"), _by(points, "t3-mca")
    if not mca:
        return {"geomean": None, "max": None, "per_point": []}
    per = []
    for k, s in seq.items():
        ts, tm = sum(s["dram_bytes"].values()), sum(mca[k]["dram_bytes"].values())
        per.append({"model": k[0], "tp": k[1], "sublayer": k[2], "sequential_B": ts, "t3_mca_B": tm,
                    "reduction": 1.0 - tm / ts})  # fmt: skip
    g = math.exp(sum(math.log(p["t3_mca_B"] / p["sequential_B"]) for p in per) / len(per))
    return {"geomean": 1.0 - g, "max": max(p["reduction"] for p in per), "per_point": per}


def concurrent_summary(plan: Plan, studies, results, points: list[dict]) -> dict[str, Any]:
    seq, ideal = _by(points, "sequential"), _by(points, "ideal-gemm-rs-overlap")
    ratios: dict[str, list[float]] = {"ideal": []}
    for t in studies["concurrent"]:
        p = t["point"]
        k = (p["model"], p["tp"], p["sublayer"])
        res = results[task_id(t)]
        if "error" in res:  # listed in the document's errors (--keep-going)
            continue
        ratios.setdefault(f"comm_{p['options']['comm_cus']}cu", []).append(seq[k]["time_s"] / res["time_s"])
    for k, s in seq.items():
        if k not in ideal:
            continue
        b = ideal[k]["breakdown_s"]  # isolated GEMM / RS / AG times
        ratios["ideal"].append(s["time_s"] / max(b["gemm"], b["reduce_scatter"] + b["all_gather"]))
    out: dict[str, Any] = {}
    for name, xs in ratios.items():
        out[name] = math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
        out[f"{name}_max"] = max(xs) if xs else None
    return out


def end_to_end(plan: Plan, studies, results, points: list[dict], have: list[str]) -> dict[str, Any]:
    gemm: dict[tuple, float] = {}
    failed: set[tuple] = set()  # (model, TP) with a failed GEMM-alone task: no projection (--keep-going)
    for t in studies["gemm"]:
        k = (t["model"], t["tp"])
        res = results[task_id(t)]
        if "error" in res:
            failed.add(k)
        else:
            gemm.setdefault(k, {})[t["name"]] = res["time_s"]
    seq = _by(points, "sequential")
    out: dict[str, Any] = {"assumptions": {"attention_share": endtoend.ATTENTION_SHARE,
                                           "attention_share_range": list(endtoend.ATTENTION_SHARE_RANGE)},
                           "by_config": {}, "per_model": []}  # fmt: skip
    for cfg in [c for c in COMPARED if c in have]:
        pts = _by(points, cfg)
        agg: dict[str, list[float]] = {}
        for m in plan.models:
            for tp in [tp for tp in plan.tps if (m, tp) not in failed]:
                for phase, sls in endtoend.PHASE_SUBLAYERS.items():
                    sls = [s for s in sls if s in plan.sublayers]
                    if not sls:
                        continue
                    names = endtoend.other_gemms(get_model(m), tp, 1, phase)
                    other = sum(gemm[(m, tp)][n] for n in names)
                    args = (
                        {s: seq[(m, tp, s)]["time_s"] for s in sls},
                        {s: pts[(m, tp, s)]["time_s"] for s in sls},
                        {s: seq[(m, tp, s)]["breakdown_s"]["gemm"] for s in sls},
                        other,
                    )
                    pr = endtoend.project(*args)
                    lo, hi = (
                        endtoend.project(*args, attention_share=a) for a in endtoend.ATTENTION_SHARE_RANGE
                    )
                    agg.setdefault(phase, []).append(pr.speedup)
                    out["per_model"].append(
                        {
                            "config": cfg,
                            "model": m,
                            "tp": tp,
                            "phase": phase,
                            "speedup": pr.speedup,
                            "speedup_range": [hi.speedup, lo.speedup],
                            "comm_share": pr.comm_share,
                            "layer_seq_s": pr.layer_seq_s,
                            "layer_cfg_s": pr.layer_cfg_s,
                            "sliced_s": pr.sliced_s,
                            "other_gemm_s": pr.other_gemm_s,
                            "attention_s": pr.attention_s,
                        }  # fmt: skip
                    )
        out["by_config"][key(cfg)] = {
            ph: {"geomean": geomean_speedup(v), "max": max(v)} for ph, v in agg.items()
        }
    primary = out["by_config"].get("t3_mca", {})
    for ph in endtoend.PHASE_SUBLAYERS:
        out[ph] = primary.get(ph, {"geomean": None, "max": None})
    comm = [p["comm_share"] for p in out["per_model"] if p["config"] == "ideal-gemm-rs-overlap"]
    out["comm_share_max"] = {
        ph: max((p["comm_share"] for p in out["per_model"]
                 if p["phase"] == ph and p["config"] == "ideal-gemm-rs-overlap"), default=None)
        for ph in endtoend.PHASE_SUBLAYERS
    } if comm else {}  # fmt: skip
    return out


def sensitivity(plan: Plan, studies, results, have: list[str]) -> list[dict]:
    out = []
    for sw in plan.sweeps:
        tasks = studies[f"sweep:{sw.name}"]
        rows = []
        for v in sw.values:
            ov, tok = sweep_overrides(plan, sw, v)
            base_ov, base_tok = (ov, tok) if sw.affects_baselines else ({}, None)
            row: dict[str, Any] = {"value": v, "overrides": ov or ({"tokens": tok} if tok else {})}
            for c in [c for c in sw.configs if c in have]:
                sp: list[float] = []
                errs: list[str] = []
                for m in plan.models:
                    for tp in plan.tps:
                        for s in plan.sublayers:
                            t_seq = results[
                                task_id(_run_task(m, tp, s, "sequential", plan, base_tok, base_ov))
                            ]
                            t_c = results[task_id(_run_task(m, tp, s, c, plan, tok, ov))]
                            err = t_c.get("error") or t_seq.get("error")
                            if err:
                                errs.append(err)
                                continue
                            sp.append(t_seq["time_s"] / t_c["time_s"] - 1.0)
                row[key(c)] = _stats([] if errs else sp)
                if errs:
                    expected = sw.infeasible and all(is_infeasible(e, sw.infeasible) for e in errs)
                    row[key(c)]["infeasible" if expected else "error"] = errs[0]
                    row[key(c)]["points_not_run"] = len(errs)
            rows.append(row)
        out.append({"name": sw.name, "label": sw.label, "field": sw.field, "relative": sw.relative,
                    "configs": [key(c) for c in sw.configs], "missing": [c for c in sw.configs if c not in have],
                    "rows": rows, "tasks": len(tasks)})  # fmt: skip
    return out


FC_SUBLAYERS = ("fc2", "fc1-bwd")
GAP_PP = 2.0  # "falls well short of" / "close to": differences of speed-up beyond / within 2 pp


def observations(points: list[dict], hbm_Bps: float | None = None) -> dict[str, Any]:
    """The paper's qualitative results, checked point by point (main + large sets). Each check lists
    the points where the result emerges and, for the others, why not, read from the simulated numbers
    (speed-ups in pp; the GEMM's HBM use when alone and the RS traffic T3 adds, as fractions of the
    sustainable HBM bandwidth ``hbm_Bps``)."""

    def name(k: tuple) -> str:
        return f"{k[0]} TP {k[1]} {k[2]}"

    seq, t3, mca = _by(points, "sequential"), _by(points, "t3"), _by(points, "t3-mca")
    ideal, nmc = _by(points, "ideal-gemm-rs-overlap"), _by(points, "ideal-rs-nmc")
    out: dict[str, Any] = {"points": len(seq), "checks": []}

    def load(k: tuple) -> str:
        """Why the memory does or does not bind at point k: the GEMM's HBM use alone and T3's RS traffic."""
        if hbm_Bps is None or k not in seq or k not in t3:
            return ""
        g = seq[k]["breakdown_s"]["gemm"]
        gemm_u = (seq[k]["dram_bytes"]["gemm_read"] + seq[k]["dram_bytes"]["gemm_write"]) / g / hbm_Bps
        rs = t3[k]["dram_bytes"].get("rs_read", 0.0) + t3[k]["dram_bytes"].get("rs_write", 0.0)
        return f"GEMM alone uses {100 * gemm_u:.0f} % of HBM, T3's RS traffic adds {100 * rs / g / hbm_Bps:.0f} %"

    def check(claim: str, keys: list[tuple], ok, why) -> None:
        held = [name(k) for k in keys if ok(k)]
        missed = {name(k): why(k) for k in keys if not ok(k)}
        out["checks"].append({"claim": claim, "held": held, "missed": missed, "of": len(keys)})

    if t3 and mca and ideal:
        fc = sorted(k for k in t3 if k[2] in FC_SUBLAYERS and k in mca and k in ideal)

        def gap(k, c):  # pp below ideal
            return 100 * (ideal[k]["speedup"] - c[k]["speedup"])

        check(
            "on large FC sublayers T3 without MCA falls well short of Ideal (> 2 pp)",
            fc, lambda k: gap(k, t3) > GAP_PP,
            lambda k: f"T3 is {gap(k, t3):.1f} pp below Ideal: contention barely slows the GEMM ({load(k)})",
        )  # fmt: skip
        short = [k for k in fc if gap(k, t3) > GAP_PP]
        check(
            "... and MCA recovers most of it (T3-MCA closes more than half of T3's gap to Ideal)",
            short, lambda k: gap(k, mca) < 0.5 * gap(k, t3),
            lambda k: f"T3 {gap(k, t3):.1f} pp, T3-MCA {gap(k, mca):.1f} pp below Ideal ({load(k)})",
        )  # fmt: skip
        op = sorted(k for k in t3 if k[2] == "op" and k in ideal)
        check(
            "on OP sublayers T3 is close to (within 2 pp) or beats Ideal",
            op, lambda k: gap(k, t3) <= GAP_PP,
            lambda k: f"T3 is {gap(k, t3):.1f} pp below Ideal ({load(k)})",
        )  # fmt: skip
        check(
            "T3-MCA is never slower than T3",
            sorted(k for k in t3 if k in mca), lambda k: mca[k]["time_s"] <= t3[k]["time_s"] * 1.0005,
            lambda k: f"T3-MCA {100 * (mca[k]['time_s'] / t3[k]['time_s'] - 1):.1f} % slower: the gate "
            "holds communication to the starvation share while the GEMM's queue occupancy is above the "
            "threshold, and the DMAs' tracker entries or the remote stores hold the GEMM back",
        )  # fmt: skip
    if nmc and ideal:
        ks = sorted(k for k in nmc if k in ideal)
        check(
            "Ideal-RS+NMC's RS is faster than the CU RS",
            ks, lambda k: nmc[k]["breakdown_s"]["reduce_scatter"] < ideal[k]["breakdown_s"]["reduce_scatter"],
            lambda k: "equal RS times",
        )  # fmt: skip
    if t3 and seq:
        ks = sorted(k for k in t3 if k in seq)
        check(
            "under T3 the GEMM reads no more from DRAM than under Sequential",
            ks, lambda k: t3[k]["dram_bytes"]["gemm_read"] <= seq[k]["dram_bytes"]["gemm_read"] * (1 + 1e-9),
            lambda k: "T3 reads more",
        )  # fmt: skip
        check(
            "... and strictly less where the GEMM re-reads operands (output stores bypass the L2)",
            [k for k in ks if seq[k]["dram_bytes"]["gemm_read"] > 0],
            lambda k: t3[k]["dram_bytes"]["gemm_read"] < seq[k]["dram_bytes"]["gemm_read"] * (1 - 1e-3),
            lambda k: "its operands already stay in the L2 between uses (read once), so there is nothing to save",
        )  # fmt: skip
        check(
            "the all-gather's traffic is unchanged under T3",
            ks, lambda k: all(abs(t3[k]["dram_bytes"][c] - seq[k]["dram_bytes"][c]) <= 1e-9 * seq[k]["dram_bytes"][c]
                              for c in ("ag_read", "ag_write")),
            lambda k: "the all-gather moves different bytes",
        )  # fmt: skip
    return out


def summarize(plan: Plan, studies: dict[str, list[dict]], results: dict[str, dict]) -> dict[str, Any]:
    from t3.experiments import calibration_evidence

    have, missing = available(plan.configs)
    points = _point_records(plan, studies["main"], results)
    large = _point_records(plan, studies["large"], results) if studies["large"] else []
    errors, infeasible = classify_failures(plan, studies, results)
    summary: dict[str, Any] = {}
    for c in COMPARED:
        summary[key(c)] = _stats([p["speedup"] for p in points if p["config"] == c])
    summary["large_models_t3_mca"] = _stats([p["speedup"] for p in large if p["config"] == "t3-mca"])
    summary["large_models"] = {
        key(c): _stats([p["speedup"] for p in large if p["config"] == c]) for c in COMPARED
    }
    dm = data_movement(points)
    summary["data_movement_reduction"] = {"geomean": dm["geomean"], "max": dm["max"]}
    ran = [c for c in have if any(p["config"] == c for p in points)]
    e2e = end_to_end(plan, studies, results, points, ran)
    summary["end_to_end"] = {ph: e2e[ph] for ph in endtoend.PHASE_SUBLAYERS}
    summary["concurrent"] = concurrent_summary(plan, studies, results, points)
    hw = load_hardware(plan.hardware, plan.hw_overrides or None)
    doc = {
        "hardware": plan.hardware,
        "hw_overrides": dict(plan.hw_overrides),
        "configs": {"registered": have, "missing": missing},
        "errors": errors,
        "infeasible": infeasible,
        "definitions": {
            "speedup": "T_sequential / T_config - 1 (fraction; 0.30 = 30%)",
            "geomean_speedup": "geomean(1 + speedup) - 1 over the set",
            "data_movement_reduction": "1 - DRAM bytes(T3-MCA) / DRAM bytes(Sequential), per GPU; "
            "geomean = 1 - geomean of the byte ratios",
            "concurrent": "T_sequential / T (ratio); ideal = T_sequential / max(T_gemm, T_rs + T_ag)",
            "main_set": f"{list(plan.models)} x TP {list(plan.tps)} x {list(plan.sublayers)}",
            "large_set": f"{list(plan.large_models)} x TP {list(plan.large_tps)} x {list(plan.sublayers)}",
        },
        "summary": summary,
        "points": points,
        "large_points": large,
        "data_movement": dm["per_point"],
        "observations": observations(points + large, hw.hbm.effective_Bps),
        "end_to_end": e2e,
        "sensitivity": sensitivity(plan, studies, results, have),
        "timeline": [results[task_id(t)] for t in studies["timeline"] if "error" not in results[task_id(t)]],
        "timeline_label": "{0} {2} TP {1}".format(*plan.timeline) if plan.timeline else "",
    }
    doc["calibration"] = calibration_evidence.evidence(doc, hw)  # computed from this document
    return doc


def check_size(plan: Plan, tasks: list[dict], force: bool = False) -> None:
    """The size guard (:mod:`t3.size`) for every task and for their sum, before anything runs."""
    from t3 import size

    total = size.Work(0.0, "")
    hws: dict[str, Any] = {}

    def hardware(name: str, ov: dict | None) -> Any:
        k = json.dumps([name, ov or {}], sort_keys=True)
        if k not in hws:
            hws[k] = load_hardware(name, ov or None)
        return hws[k]

    for t in tasks:
        if t["kind"] == "gemm":
            hw = hardware(t["hardware"], t.get("hw_overrides"))
            w = size.Work(3.0 * size.gemm_waves(t["m"], t["n"], hw) + 8, describe_task(t))
        else:
            p = t["point"]
            hw = hardware(p["hardware"], p["hw_overrides"])
            op = sublayer_operator(get_model(p["model"]), p["sublayer"], p["tp"], p["tokens"])
            w = size.run_work(op, hw, p["config"])
        try:
            size.check(w, force=force)
        except T3Error as err:
            raise type(err)(f"{describe_task(t)}: {err}") from None
        total += w  # simulated ops and planned waves both count (Work.cost)
    size.check(
        size.Work(total.ops, f"{len(tasks)} tasks", total.planned, total.mapped),
        force=force,
        limit=size.LIMIT_TOTAL_OPS,
    )


def reproduce(
    plan: Plan | None = None, *, workers: int | None = None, progress: bool = True,
    runner: Callable[..., list] | None = None, keep_going: bool = False, force: bool = False,
    **sweep_kw: Any,
) -> dict[str, Any]:  # fmt: skip
    """Validate, build every task, run them with one call, summarise. Returns the JSON document.
    ``sweep_kw`` (``executor``, ``scheduler``, ``store``) go to :func:`execute_all`.

    A point that fails raises :class:`PointsFailed` naming it (after every point ran), unless
    ``keep_going``: then the document lists it under ``errors`` and leaves its configuration out of
    the summaries of its set. Points a sweep expects to be infeasible (:attr:`Sweep.infeasible`) are
    listed under ``infeasible`` with their reason, never as failures. ``force`` skips the size guard."""
    plan = plan or Plan()
    plan.validate()
    if not keep_going and (why := plan.nmc_refusal()):
        raise ConfigError(why)
    studies = build_tasks(plan)
    tasks = unique_tasks(studies)
    check_size(plan, tasks, force)
    exp = expected_infeasible(plan, studies)

    def label(t: dict, error: str) -> str:
        return "infeasible (expected)" if is_infeasible(error, exp.get(task_id(t), "")) else "failed"

    results = execute_all(tasks, workers=workers, progress=progress, runner=runner, label=label, **sweep_kw)
    failed, _ = classify_failures(plan, studies, results)
    if failed and not keep_going:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise PointsFailed(
            f"{len(failed)} simulation point(s) failed: {failed[0]['point']}: {failed[0]['error']}{more}; "
            "--keep-going writes the report with them listed and left out of the summaries"
        )
    return summarize(plan, studies, results)
