"""``t3 study``: the T3 study on today's machines (:mod:`t3.experiments.study`)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from t3.cli.main import app
from t3.errors import ConfigError
from t3.experiments.study import DEFAULT_HARDWARE, DEFAULT_MODELS, DESIGNS, study

_HEAD = {
    "sequential": "Sequential",
    "nvls": "NVLS AR",
    "ideal": "Ideal",
    "t3": "T3 (+NMC)",
    "t3_mca": "T3-MCA (+NMC)",
    "ficco": "best FiCCO",
}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.1f}"


def _err(e: dict | None) -> str:
    return "-" if not e else f"{100 * e['median_abs_error']:.1f} % ({e['rows']} rows)"


def to_markdown(doc: dict) -> str:
    """The study's tables as Markdown (``docs/today.md``)."""
    lines = [
        "| preset | model | TP | Sequential | "
        + " | ".join(_HEAD[d] for d in DESIGNS[1:])
        + " | FiCCO schedule |",
        "|---|---|---:|---:|" + "---:|" * (len(DESIGNS) - 1) + "---|",
    ]
    for p in doc["points"]:
        s = p["speedup"]
        lines.append(
            f"| {p['hardware']} | {p['model']} | {p['tp']} | {1e6 * p['time_s']['sequential']:.1f} us | "
            + " | ".join(_pct(s[d]) for d in DESIGNS[1:])
            + f" | {p['ficco']['schedule'] if p['ficco'] else '-'} |"
        )
    lines += [
        "",
        "| preset | GEMM error | collective error | overlap speed-up error |",
        "|---|---:|---:|---:|",
    ]
    seen = list(dict.fromkeys(p["hardware"] for p in doc["points"]))
    order = seen + sorted(h for h in doc["errors"] if h not in seen)  # a record read back is key-sorted
    for hw in order:
        e = doc["errors"][hw]
        lines.append(
            f"| {hw} | {_err(e['gemm_tflops'])} | {_err(e['collective_busbw'])} | {_err(e['overlap_speedup'])} |"
        )
    for s in doc["skipped"]:
        lines.append(f"\nLeft out: {s['hardware']} {s['model']} TP {s['tp']}: {s['why']}")
    for p in doc["points"]:
        for d, why in p.get("not_modelled", {}).items():
            lines.append(f"\nNot modelled: {_HEAD[d]} on {p['hardware']} {p['model']} TP {p['tp']}: {why}")
    return "\n".join(lines) + "\n"


@app.command(
    "study",
    help="The T3 study on today's machines: per preset, model and TP, one sublayer (GEMM + all-reduce) as "
    "Sequential, GEMM then an NVLS all-reduce, Ideal-GEMM-RS-Overlap, T3 and T3-MCA (with near-memory compute "
    "added) and the best FiCCO schedule run it, with the model's median error on the preset's validation "
    "rows beside it (docs/today.md).",
)
def study_cmd(
    hw: list[str] = typer.Option(
        None, "--hw", help=f"preset (repeatable; default: {', '.join(DEFAULT_HARDWARE)})"
    ),
    model: list[str] = typer.Option(
        None, "--model", help=f"model (repeatable; default: {', '.join(DEFAULT_MODELS)})"
    ),
    tp: list[int] = typer.Option(None, "--tp", help="tensor-parallel degree (repeatable; default 8)"),
    sublayer: str = typer.Option("fc2", help="op, fc2 (forward), fc1-bwd, ip-bwd (backward)"),
    no_ficco: bool = typer.Option(False, "--no-ficco", help="leave out the FiCCO search (the slowest part)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    markdown: bool = typer.Option(False, "--markdown", help="print the tables as Markdown"),
) -> None:
    from t3.provenance import run_fields

    if as_json and markdown:
        raise ConfigError("--json and --markdown: choose one output format")
    doc = study(
        tuple(hw) if hw else DEFAULT_HARDWARE, tuple(model) if model else DEFAULT_MODELS,
        tuple(tp) if tp else (8,), sublayer, ficco=not no_ficco,
    )  # fmt: skip
    if as_json:
        print(json.dumps({**doc, "provenance": run_fields()}, indent=2))
        return
    if markdown:
        print(to_markdown(doc), end="")
        return
    c = Console()
    t = Table(title=f"sublayer {sublayer}: speed-up over Sequential")
    cols = ("preset", "model", "TP", "Seq.", "NVLS", "Ideal", "T3", "T3-MCA", "FiCCO")
    for col in cols:
        t.add_column(col)
    for p in doc["points"]:
        s = p["speedup"]
        t.add_row(
            p["hardware"], p["model"], str(p["tp"]), f"{1e6 * p['time_s']['sequential']:.0f} µs",
            *(_pct(s[d]) for d in DESIGNS[1:]),
        )  # fmt: skip
    c.print(t)
    e = Table(title="expected error: median |error| on each preset's validation rows")
    for col in ("preset", "GEMM", "collectives", "overlap speed-up"):
        e.add_column(col)
    for name, errs in doc["errors"].items():
        e.add_row(
            name, _err(errs["gemm_tflops"]), _err(errs["collective_busbw"]), _err(errs["overlap_speedup"])
        )
    c.print(e)
    for s in doc["skipped"]:
        c.print(f"left out: {s['hardware']} {s['model']} TP {s['tp']}: {s['why']}")
    for p in doc["points"]:
        for d, why in p.get("not_modelled", {}).items():
            c.print(f"not modelled: {_HEAD[d]} on {p['hardware']} {p['model']} TP {p['tp']}: {why}")
    c.print("columns:")
    for line in (
        "preset, model, TP: the point (the sublayer's tokens are the model's)",
        "Seq.: Sequential's time: the GEMM, then reduce-scatter + all-gather (us)",
        "NVLS: the GEMM, then one NVLS all-reduce (presets whose switch reduces; NVLS-Tree across nodes)",
        "Ideal: Ideal-GEMM-RS-Overlap (the T3 paper's bound)",
        "T3, T3-MCA: with the paper's near-memory compute added to the GPU",
        "FiCCO: best FiCCO schedule of GEMM + reduce-scatter vs its bulk baseline",
        "speed-ups: T_sequential / T - 1 (FiCCO: T_bulk / T_best - 1), in %",
        "GEMM, collectives, overlap speed-up: t3 validate's median |error| (rows)",
    ):
        name, _, what = line.partition(": ")
        c.print(f"  {name}: {what}")
