"""Blocks quoting the T3 reproduction, ``t3 run`` records on ``paper-80cu`` and ``t3 validate``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from t3.docs.sources import Context, Recorded, SourceError
from t3.experiments.study import DEFAULT_HARDWARE


def pct(x: float | None, nd: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{nd}f} %"


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _get(d: dict, path: str) -> Any:
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None
    return d


# (label, summary path of geomean, of max or None)
_T3_ROWS = (
    ("Ideal-GEMM-RS-Overlap, geomean / max (Mega-GPT-2, T-NLG; TP 8, 16; 4 sublayers)",
     "ideal_gemm_rs_overlap.geomean_speedup", "ideal_gemm_rs_overlap.max_speedup"),
    ("T3-MCA, geomean / max (same set)", "t3_mca.geomean_speedup", "t3_mca.max_speedup"),
    ("T3-MCA, GPT-3 / PaLM / MT-NLG at TP 32, geomean", "large_models_t3_mca.geomean_speedup", None),
    ("DRAM data-movement reduction T3-MCA vs Sequential, geomean / max", "data_movement_reduction.geomean",
     "data_movement_reduction.max"),
)  # fmt: skip


def t3_vs_paper(ctx: Context) -> str:
    from t3.experiments.paper_t3 import PUBLISHED

    s = ctx.t3_doc["summary"]
    out = [
        f"Speedup over Sequential on `{ctx.t3_doc['hardware']}`:",
        "",
        "| quantity (T3 paper) | paper | t3 | t3 − paper | role |",
        "|---|---:|---:|---:|---|",
    ]
    for label, geo, mx in _T3_ROWS:
        paths = [x for x in (geo, mx) if x]
        paper = " / ".join(pct(PUBLISHED[x].value, 0) for x in paths)
        ours = " / ".join(pct(_get(s, x)) for x in paths)
        diff = " / ".join(
            "n/a" if _get(s, x) is None else f"{100 * (_get(s, x) - PUBLISHED[x].value):+.1f} pp"
            for x in paths
        )
        role = "calibration target" if PUBLISHED[geo].role == "target" else "prediction"
        out.append(f"| {label} | {paper} | {ours} | {diff} | {role} |")
    return "\n".join(out)


def _by(points: list[dict], cfg: str) -> dict[tuple, dict]:
    return {(p["model"], p["tp"], p["sublayer"]): p for p in points if p["config"] == cfg}


def t3_observations(ctx: Context) -> str:
    """Numbers behind the uncalibrated results that differ from the paper (docs/calibration.md)."""
    d = ctx.t3_doc
    pts, large = d["points"], d["large_points"]
    seq, ideal, nmc = _by(pts, "sequential"), _by(pts, "ideal-gemm-rs-overlap"), _by(pts, "ideal-rs-nmc")
    t3, mca = _by(pts, "t3"), _by(pts, "t3-mca")
    n = len(seq)
    eq = sum(abs(nmc[k]["time_s"] - ideal[k]["time_s"]) <= 1e-9 * ideal[k]["time_s"] for k in nmc)
    reach = sum(mca[k]["speedup"] >= ideal[k]["speedup"] - 1e-3 for k in mca)
    faster = sum(mca[k]["time_s"] < t3[k]["time_s"] / 1.001 for k in mca)
    slower = sum(mca[k]["time_s"] > t3[k]["time_s"] * 1.001 for k in mca)
    s = d["summary"]
    dm = d["data_movement"]
    op = [1 - x["reduction"] for x in dm if x["sublayer"] == "op"]
    out = [
        f"- Ideal-RS+NMC equals Ideal-GEMM-RS-Overlap at {eq} of {n} main-set points; T3-MCA reaches "
        f"Ideal-GEMM-RS-Overlap (within 0.1 pp) at {reach} of {n}.",
        f"- DRAM data-movement reduction of T3-MCA: geomean {pct(s['data_movement_reduction']['geomean'])}, "
        f"max {pct(s['data_movement_reduction']['max'])}"
        + (f"; OP sublayers alone: geomean {pct(1 - _geomean(op))}." if op else "."),
        f"- T3 without MCA: geomean {pct(s['t3']['geomean_speedup'])} against T3-MCA's "
        f"{pct(s['t3_mca']['geomean_speedup'])}; T3-MCA is faster than T3 at {faster} of {n} points and "
        f"slower at {slower}.",
    ]
    if large:
        lt3, lmca = _by(large, "t3"), _by(large, "t3-mca")
        out.append(f"- TP-32 models: T3-MCA geomean {pct(s['large_models_t3_mca']['geomean_speedup'])}, T3 "
                   f"geomean {pct(s['large_models']['t3']['geomean_speedup'])}; OP sublayers, T3 / T3-MCA: "
                   + ", ".join(f"{k[0]} {pct(lt3[k]['speedup'])} / {pct(lmca[k]['speedup'])}"
                               for k in sorted(lmca) if k[2] == "op") + ".")  # fmt: skip
    return "\n".join(out)


def t3_calibrated_parameters(ctx: Context) -> str:
    from t3.experiments.report import calibration_table

    return "\n".join(calibration_table(ctx.t3_doc["calibration"]))


# -- docs/t3-mechanism.md --------------------------------------------------------------------------

_CONFIGS = ("sequential", "ideal-gemm-rs-overlap", "ideal-rs-nmc", "t3", "t3-mca")
_SUBLAYERS = ("op", "fc2", "fc1-bwd", "ip-bwd")


def _tnlg(ctx: Context, sublayer: str, config: str, tp: int = 8, **hw: Any) -> dict:
    return ctx.run(model="t-nlg", tp=tp, sublayer=sublayer, config=config, hardware="paper-80cu",
                   hw_overrides=hw or None)  # fmt: skip


def tnlg_sublayers(ctx: Context) -> str:
    tokens = _tnlg(ctx, "op", "sequential")["tokens"]
    out = [
        f"T-NLG, TP 8, {tokens} tokens (the zoo's default), µs per sublayer:",
        "",
        "| sublayer | " + " | ".join(_CONFIGS) + " | T3 speedup | T3-MCA speedup |",
        "|---|" + "---:|" * (len(_CONFIGS) + 2),
    ]
    for s in _SUBLAYERS:
        t = {c: _tnlg(ctx, s, c)["time_s"] for c in _CONFIGS}
        out.append(f"| {s} | " + " | ".join(f"{t[c] * 1e6:.1f}" for c in _CONFIGS)
                   + f" | {pct(t['sequential'] / t['t3'] - 1)} | {pct(t['sequential'] / t['t3-mca'] - 1)} |")  # fmt: skip
    return "\n".join(out)


def t3_mca_balance(ctx: Context) -> str:
    """The figures the MCA discussion of docs/t3-mechanism.md refers to."""
    out = [
        "| case | T3 (µs) | T3-MCA (µs) | T3-MCA − T3 | GEMM alone (µs) | RS in T3-MCA (µs) | tracker stall in "
        "T3-MCA (µs) | link bytes per GPU (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cases: list[tuple[str, str, int, dict[str, Any]]] = [
        ("OP, TP 8", "op", 8, {}),
        ("FC-2, TP 8", "fc2", 8, {}),
        ("FC-2, TP 16", "fc2", 16, {}),
    ]
    for label, s, tp, ov in cases:
        a, b = _tnlg(ctx, s, "t3", tp, **ov), _tnlg(ctx, s, "t3-mca", tp, **ov)
        g = _tnlg(ctx, s, "ideal-gemm-rs-overlap", tp, **ov)["breakdown_s"]["gemm"]
        out.append(f"| {label} | {a['time_s'] * 1e6:.1f} | {b['time_s'] * 1e6:.1f} | "
                   f"{(b['time_s'] - a['time_s']) * 1e6:+.1f} µs | {g * 1e6:.1f} | "
                   f"{b['breakdown_s']['reduce_scatter'] * 1e6:.1f} | {b['tracker']['stall_s'] * 1e6:.1f} | "
                   f"{b['link_bytes'] / 1e6:.1f} |")  # fmt: skip
    return "\n".join(out)


# -- docs/validation.md ----------------------------------------------------------------------------


def validation_tables(ctx: Context) -> str:
    from t3.cli.validate import to_markdown
    from t3.validation.regimes import summarize_bands

    outcomes, summary = ctx.validation
    return to_markdown(outcomes, summary, summarize_bands(outcomes))


def validation_targets(ctx: Context) -> str:
    text = ctx.script_output("benchmarks/validation_targets.py", drop=r"predicted in [0-9.]+ s$")
    return "```text\n" + text + "\n```"


def interference_mechanisms(ctx: Context) -> str:
    text = ctx.script_output("benchmarks/interference_mechanisms.py", drop=r"predictions in [0-9.]+ s$")
    return "```text\n" + text + "\n```"


def measured_interference(ctx: Context) -> str:
    text = ctx.script_output("benchmarks/measured_interference.py")
    return "```text\n" + text + "\n```"


def t3_contention_headroom(ctx: Context) -> str:
    text = ctx.script_output("benchmarks/t3_contention_headroom.py", drop=r"sublayers in [0-9.]+ s$")
    return "```text\n" + text + "\n```"


def _calibrate_collectives(ctx: Context) -> Any:
    import importlib.util

    path = ctx.root / "benchmarks" / "calibrate_collectives.py"
    spec = importlib.util.spec_from_file_location("_calibrate_collectives", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def collective_rows(ctx: Context) -> str:
    """Every calibration row of the collective model, re-simulated on the engine with the presets'
    current values and compared as ``t3 validate`` compares it (device-timed rows without the launch),
    as ``benchmarks/calibrate_collectives.py`` prints its choice."""
    from t3.config.hardware import load_hardware
    from t3.ops.collectives import simulate_collective

    mod = _calibrate_collectives(ctx)
    out = ["| row | timing | measured | model | error | algorithm |", "|---|---|---:|---:|---:|---|"]
    for hw_name, gpu in (("h100-8", "H100"), ("mi300x-8", "MI300X")):
        hw = load_hardware(hw_name)
        for row in mod.targets(hw_name):
            r = simulate_collective(row.op, row.nbytes, row.gpus, hw, str(mod.algo_for(hw, row)))
            t = r["device_s"] if row.device else r["time_s"]
            out.append(f"| {gpu} {row.op.replace('_', '-')} {_size(row.nbytes)} | {'device' if row.device else 'host'} | "
                       f"{row.time_s * 1e6:.1f} µs | {t * 1e6:.1f} µs | {100 * (t / row.time_s - 1):+.1f} % | "
                       f"{r['algo']} |")  # fmt: skip
    return "\n".join(out)


def fused_calibration(ctx: Context) -> str:
    """The fused-implementation calibration as ``benchmarks/calibrate_fused.py`` prints it."""
    return "```text\n" + ctx.script_output("benchmarks/calibrate_fused.py", drop=r" in [0-9.]+ s\b") + "\n```"


def nmc_tail(ctx: Context) -> str:
    return "```text\n" + ctx.call_output(_calibrate_collectives(ctx).paper_tail).strip("\n") + "\n```"


def _size(n: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return f"{n // f} {unit}"
    return f"{n} B"


# -- docs/calibration.md: the calibration search (recorded: a stage takes up to minutes) ------------


def calibration_stages() -> tuple[str, ...]:
    """The stages ``python -m t3.experiments.calibration --stage`` accepts (its ``TARGETS`` keys when it
    has them, else the numbered stages)."""
    from t3.experiments import calibration

    targets = getattr(calibration, "TARGETS", None)
    return tuple(targets) if isinstance(targets, dict) and targets else ("1", "2")


def calibration_record(ctx: Context, given: Path | None) -> dict[str, Any]:
    """The ranked output of every calibration stage (``given``: a folder with ``stage-<S>.txt`` files
    holding the command's output; None: run each stage)."""
    out: dict[str, Any] = {"stages": {}}
    for s in calibration_stages():
        if given is None:
            text = ctx.script_output("-m", ("t3.experiments.calibration", "--stage", s, "--top", "10")
                                     + (("--workers", str(ctx.workers)) if ctx.workers else ()))  # fmt: skip
        else:
            f = given / f"stage-{s}.txt"
            if not f.is_file():
                raise SourceError(f"calibration: no {f} (the output of `--stage {s}`)")
            text = f.read_text().strip("\n")
        out["stages"][s] = text
    return out


CALIBRATION = Recorded(
    name="calibration",
    command="PYTHONPATH=src python3 -m t3.experiments.calibration --stage STAGE --top 10",
    entries=("t3.experiments.calibration", "t3.experiments.reproduce_t3"),
    data_files=("src/t3/config/presets/paper-80cu.toml", "src/t3/workload/models/zoo.toml"),
    make=calibration_record,
)


def calibration_stages_block(ctx: Context) -> str:
    d = ctx.record(CALIBRATION)
    out = []
    for s, text in d["stages"].items():
        out += [f"Stage {s} (`python3 -m t3.experiments.calibration --stage {s} --top 10`):", "", "```text", text,
                "```", ""]  # fmt: skip
    return "\n".join(out)


# -- docs/traces.md --------------------------------------------------------------------------------

TRACE_FIXTURE = "tests/traces/data/megatron_sp_tp8_h100.constructed.pt.trace.json.gz"


def trace_fixture_projection(ctx: Context) -> str:
    """The projection of the constructed GPU fixture on h100-8 (the FiCCO selector's pick per pair)."""
    from t3.config.hardware import load_hardware
    from t3.traces import import_trace
    from t3.traces.project import project

    pr = project(import_trace(ctx.root / TRACE_FIXTURE), load_hardware("h100-8"), ficco="select").as_dict()
    w = pr["window"]
    picks: dict[str, list[str]] = {}
    for p in pr["pairs"]:
        f = p["predicted"].get("ficco") or {}
        if f.get("schedule"):
            picks.setdefault(f["schedule"], []).append(p["kind"] + (f" {p['label']}" if p["label"] else ""))
    ms = lambda k: f"{w[k]['per_step_s'] * 1e3:.3f} ms"  # noqa: E731
    hyp = " (hypothetical: no near-memory compute on h100-8)" if any(
        "hypothetical" in (p["predicted"].get("t3") or {}).get("note", "") for p in pr["pairs"]) else ""  # fmt: skip
    return (f"{len(pr['pairs'])} pairs; per step: measured {w['measured_per_step_s'] * 1e3:.3f} ms; sequential "
            f"{ms('sequential')}, ideal {ms('ideal')}, T3 / T3-MCA {ms('t3')} / {ms('t3-mca')}{hyp}, "
            f"FiCCO {ms('ficco')} (the selector's picks: "
            + "; ".join(f"`{s}` for {len(v)} pair(s)" for s, v in sorted(picks.items())) + ").")  # fmt: skip


# ---- the T3 study on today's machines (`t3 study`) ------------------------------------------------------
def _today_make(ctx: Context, given: Path | None) -> dict[str, Any]:
    import json as _json

    if given is not None:
        if not given.is_file():
            raise SourceError(f"no file {given} (the output of `t3 study --json`)")
        doc = _json.loads(given.read_text())
    else:
        from t3.experiments.study import study

        doc = study()
    return {"points": doc["points"], "skipped": doc["skipped"], "errors": doc["errors"]}


TODAY = Recorded(
    name="today",
    command="t3 study --json",
    entries=("t3.experiments.study", "t3.cli.study"),
    data_files=("src/t3/workload/models/zoo.toml", "src/t3/validation/data/gemms.toml",
                "src/t3/validation/data/collectives.toml", "src/t3/validation/data/overlap.toml",
                *(f"src/t3/config/presets/{p}.toml" for p in DEFAULT_HARDWARE)),
    make=_today_make,
)  # fmt: skip


def today_tables(ctx: Context) -> str:
    from t3.cli.study import to_markdown

    return to_markdown(ctx.record(TODAY))
