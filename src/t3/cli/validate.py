"""``t3 validate``: every published measurement of the dataset beside ``t3``'s prediction of it."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from t3.cli.common import OUTPUT_DIR_RULE, check_output_dir, force_option
from t3.cli.main import app

_ROLE = typer.Option(None, "--role", help="calibration or validation (default: both)")
_CAT = typer.Option(
    None,
    "--category",
    help="collective_busbw, gemm_tflops, overlap_speedup, overlap_time, interference, hbm_bandwidth or latency"
    " (default: all)",
)
_HW = typer.Option(None, "--hardware", help="only rows of this preset (e.g. h100-8)")
_JSON = typer.Option(False, "--json", help="print one JSON object (rows and summary)")
_PLOT = typer.Option(
    None,
    "--plot",
    help="write one predicted-vs-measured PNG per category (validate-CATEGORY.png) into this folder "
    f"({OUTPUT_DIR_RULE})",
)
_MD = typer.Option(False, "--markdown", help="print the summary and the per-row table as Markdown")
_DATA = typer.Option(
    None, "--data", help="dataset file(s) to use instead of the shipped dataset (repeatable)"
)
_EXPLAIN = typer.Option(
    None,
    "--explain",
    help="print one row's prediction taken apart (algorithm, latency and bandwidth terms; GEMM"
    " tile, waves, K split, clock) instead of the tables",
)
_FORCE = force_option()

PROGRESS_AFTER_S = 2.0  # the progress bar appears once a run has taken this long


def _size(nbytes: int) -> str:
    for unit, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= b and nbytes % b == 0:
            return f"{nbytes // b} {unit}"
    return f"{nbytes} B"


def describe(row) -> str:
    """A short human description of a row's workload."""
    w = row.workload
    if row.category == "collective_busbw":
        algo = "" if w["algo"] == "auto" else f" {w['algo']}"
        return f"{w['op']} {_size(w['nbytes'])}{algo}"
    if row.category == "gemm_tflops":
        out = f" -> {w['out_dtype']}" if w.get("out_dtype") else ""
        return f"GEMM {w['m']}x{w['n']}x{w['k']} {w['dtype']}{out}"
    if row.category == "interference":
        if w["comm"] in ("sm_copy", "sm_reduce", "memcpy", "ce_copy"):
            comm = f"{w['comm']} {_size(w['nbytes'])}" + (f" on {w['cus']} CUs" if w["cus"] else "")
        else:
            comm = f"{w['comm']} {_size(w['nbytes'])} x{w['gpus']}" + (
                " dma" if w["executor"] == "dma" else ""
            )
        who = {"compute": "GEMM", "comm": "comm", "pair": "pair"}[w["victim"]]
        return f"{who}: GEMM {w['m']}x{w['n']}x{w['k']} {w['dtype']} | {comm} ({w['arrangement']})"
    if row.category == "hbm_bandwidth":
        return f"{w['stream']} {_size(w['nbytes'])}" + (f" on {w['cus']} CUs" if w["cus"] else "")
    if row.category == "latency":
        return w["what"]
    s = f"{w['op']} M={w['m']} N={w['n']} K={w['k']} {w['schedule']}"
    return s + (f" vs {w['baseline']}" if row.category == "overlap_speedup" else "")


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def err_unit(category: str) -> str:
    """How an error of ``category`` reads: per cent of the measurement, or percentage points."""
    from t3.validation.conventions import ABSOLUTE_ERROR

    return "pp" if category in ABSOLUTE_ERROR else "%"


class _Progress:
    """A progress bar on stderr that only shows once the run has taken ``PROGRESS_AFTER_S``."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bar = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.perf_counter() - self.t0 < PROGRESS_AFTER_S or not sys.stderr.isatty():
                return
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("predicting rows", total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command()
def validate(
    role: str = _ROLE, category: str = _CAT, hardware: str = _HW, as_json: bool = _JSON,
    plot: Path = _PLOT, markdown: bool = _MD, data: list[Path] = _DATA, explain: str = _EXPLAIN,
    force: bool = _FORCE,
) -> None:  # fmt: skip
    """Predict every published measurement of the dataset and print measured, predicted and error."""
    from t3.errors import ConfigError
    from t3.validation import load_dataset, run, select, summarize
    from t3.validation.regimes import summarize_bands

    if as_json and markdown:
        raise ConfigError("--json and --markdown: choose one output format")
    if explain is not None:
        given = [f for f, v in (("--role", role), ("--category", category), ("--hardware", hardware),
                                ("--plot", plot), ("--markdown", markdown)) if v]  # fmt: skip
        if given:
            raise ConfigError(f"--explain takes one row by its id: {', '.join(given)} cannot go with it")
    every = load_dataset(data or None)
    if not every:
        raise ConfigError(f"data: {', '.join(map(str, data)) or 'the dataset'} has no rows")
    if explain is not None:
        _explain(every, explain, as_json, force)
        return
    rows = select(every, role=role, category=category, hardware=hardware)
    if not rows:  # no empty success: say what the filters left out and what there is
        asked = ", ".join(
            f"{k} {v}" for k, v in (("role", role), ("category", category), ("hardware", hardware)) if v
        )
        # what exists under the other filters (the hardware's rows where one is named)
        near = [r for r in every if not hardware or r.hardware == hardware] or every
        have = sorted({(r.category, r.role) for r in near})
        where = f" on {hardware}" if hardware and near is not every else ""
        raise ConfigError(
            f"no rows match {asked}; rows exist{where} for: " + ", ".join(f"{c} ({r})" for c, r in have)
        )
    from t3 import size

    size.check(size.validation_work(rows), force=force)  # the rows' sum, before any of them runs
    if plot is not None:  # its folder and figures, before any row runs
        check_output_dir(plot, "--plot", "validate-plot", overwrite_flag=False)
    prog = _Progress()
    # a user's rows (--data: a whole t3 measure run, say) may hold some the model refuses: listed with
    # their reasons; the shipped dataset has none (a refusal there is an error)
    refused: list | None = [] if data else None
    try:
        with size.forced(force):
            outcomes = run(rows, progress=prog, refused=refused)
    finally:
        prog.close()
    if not outcomes:
        raise ConfigError(f"data: the model predicts none of the {len(rows)} rows selected ({refused[0][1]})")
    refusals = _refusals(refused or [])
    summary = summarize(outcomes)
    by_band = summarize_bands(outcomes)
    plots: list[str] = []
    if plot is not None:
        from t3.validation.plots import write_plots

        plots = write_plots(outcomes, plot)
    if as_json:
        doc = {"rows": [o.as_dict() for o in outcomes], "summary": summary, "bands": by_band}
        if plot is not None:
            doc["plots"] = plots
        if refused:
            doc["not_predicted"] = [{"id": r.id, "reason": why} for r, why in refused]
        print(json.dumps(doc, indent=1))
        return
    if markdown:
        print(to_markdown(outcomes, summary, by_band) + "".join(f"\n{line}" for line in refusals))
        return
    print_tables(outcomes, summary, plots, by_band)
    for line in refusals:
        print(line)


def _refusals(refused: list) -> list[str]:
    """Lines saying which rows the model did not predict and why: each reason once (its rows' ids
    differ only in the measurement), with how many rows it covers and the first of them."""
    if not refused:
        return []
    by: dict[str, list[str]] = {}
    for r, why in refused:
        # the reason without the row's own id, so that rows refused for one cause group together
        by.setdefault(why.removeprefix(f"{r.id}: "), []).append(r.id)
    out = [f"not predicted: {len(refused)} row(s) the model refuses, by reason:"]
    for why, ids in by.items():
        out.append(f"  {len(ids)} row(s), e.g. {ids[0]}: {why}")
    return out


def _explain(every, row_id: str, as_json: bool, force: bool) -> None:
    """``--explain ROW``: the row's prediction taken apart (:mod:`t3.validation.explain`)."""
    import difflib

    from t3 import size
    from t3.errors import ConfigError
    from t3.validation import Predictor
    from t3.validation.explain import explain

    by_id = {r.id: r for r in every}
    row = by_id.get(row_id)
    if row is None:
        near = difflib.get_close_matches(row_id, list(by_id), n=3, cutoff=0.5)
        hint = f" (closest: {', '.join(near)})" if near else " (t3 validate lists every row's id)"
        raise ConfigError(f"--explain: no row '{row_id}' in the dataset{hint}")
    size.check(size.validation_work([row]), force=force)
    with size.forced(force):  # (the explanation runs the row's collective on every algorithm too)
        o = Predictor().predict(row)
        lines = explain(o)
    if as_json:
        print(
            json.dumps({"row": o.as_dict(), "explain": [{"what": k, "value": v} for k, v in lines]}, indent=1)
        )
        return
    c = Console()
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        text = textwrap.fill(f"{k.ljust(width)}  {v}", width=max(c.width, 40), subsequent_indent=" " * (width + 2),
                             break_on_hyphens=False)  # fmt: skip
        c.print(escape(text), soft_wrap=True)


#: Every column of the per-row and per-category tables, with what it means (printed as the legend).
ROW_LEGEND = {
    "row": "the dataset row's id",
    "workload": "what was measured, on which hardware preset",
    "role": "cal = calibration (may be fitted), val = validation (never fitted)",
    "measured": "the published value, in the unit column's unit",
    "predicted": "t3's prediction of it, in the same unit",
    "unit": "the unit of measured and predicted",
    "error": "predicted / measured - 1 in %; interference rows: predicted - measured in"
    " percentage points (pp)",
}
SUMMARY_LEGEND = {
    "category": "the kind of measurement",
    "role": "calibration or validation; blind: its rows written down before any prediction of them existed",
    "rows": "number of rows (count)",
    "median": "median |error| of the rows, % (pp for interference)",
    "max": "largest |error| of the rows, % (pp for interference)",
    "signs": "overlap speed-ups: rows whose prediction agrees with the measurement on gain (> 1x)"
    " or loss (< 1x), of all such rows",
}


def _legend(c: Console, title: str, legend: dict[str, str]) -> None:
    c.print(title)
    for col, what in legend.items():  # continuation lines indented under the column's name
        text = textwrap.fill(
            f"  {col}: {what}", width=c.width, subsequent_indent="    ", break_on_hyphens=False
        )
        c.print(escape(text), soft_wrap=True)


BAND_LEGEND = {
    "category": "the kind of measurement",
    "axis": "what the rows are split by: size (message bytes), timing (device, host or call), gpus; GEMMs: waves"
    " (output tiles per wave of the chosen kernel), K, dtype",
    "band": "the rows' range on that axis",
    "role": "calibration (may be fitted) or validation (never fitted); -: no row in the band",
    "rows": "number of rows (count)",
    "median": "median |error| of the rows, % (pp for interference)",
    "max": "largest |error| of the rows, % (pp for interference)",
}


def print_tables(outcomes, summary, plots: list[str], by_band=()) -> None:
    """The per-row and per-category tables, fitted to the terminal's width (80 columns when the output
    is not a terminal; COLUMNS=N to change): text cells wrap, numbers never do; a legend follows each."""
    from rich import box

    c = Console()
    t = Table(title=f"{len(outcomes)} published measurements: measured vs predicted", box=box.SIMPLE_HEAD,
              pad_edge=False)  # fmt: skip
    for col in ROW_LEGEND:
        if col == "workload":  # shares the row's cell
            continue
        if col == "row":
            t.add_column("row / workload", overflow="fold", ratio=1)
        else:
            t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left",
                         no_wrap=True)  # fmt: skip
    for o in outcomes:
        t.add_row(escape(f"{o.row.id}\n  {describe(o.row)} ({o.row.hardware})"), o.row.role[:3],
                  _fmt(o.measured), _fmt(o.predicted), o.unit, f"{o.error * 100:+.1f} {err_unit(o.row.category)}")  # fmt: skip
    c.print(t)
    _legend(c, "columns:", ROW_LEGEND)
    s = Table(title="per category: |error| (calibration rows may be fitted, validation rows never are)",
              box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for col in SUMMARY_LEGEND:
        s.add_column(col, justify="left" if col in ("category", "role") else "right", overflow="fold",
                     no_wrap=col != "role")  # fmt: skip
    worst = []
    for g in summary:
        signs = f"{g['sign_right']} / {g['sign_rows']}" if "sign_rows" in g else "-"
        u = err_unit(g["category"])
        role = g["role"] + (", blind" if g.get("blind") else "")
        s.add_row(g["category"], role, str(g["rows"]), f"{g['median_abs_error'] * 100:.1f} {u}",
                  f"{g['max_abs_error'] * 100:.1f} {u}", signs)  # fmt: skip
        worst.append(f"  {g['category']} ({role}): {g['worst']}")
    c.print(s)
    _legend(c, "columns:", SUMMARY_LEGEND)
    c.print("worst row (largest |error|) per category and role:")
    for w in worst:
        c.print(escape(w), overflow="fold")
    if by_band:
        b = Table(title="errors by regime: where the model holds for your sizes", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
        for col in BAND_LEGEND:
            b.add_column(col, justify="right" if col in ("rows", "median", "max") else "left", no_wrap=True)
        for g in by_band:
            u = err_unit(g["category"])
            b.add_row(g["category"], g["axis"], g["band"], g["role"], str(g["rows"]), *_band_errors(g, u))
        c.print(b)
        _legend(c, "columns:", BAND_LEGEND)
    for p in plots:
        c.print(escape(f"wrote {p}"), soft_wrap=True)


def _band_errors(g: dict, u: str) -> tuple[str, str]:
    if not g["rows"]:
        return "-", "-"
    return f"{g['median_abs_error'] * 100:.1f} {u}", f"{g['max_abs_error'] * 100:.1f} {u}"


def to_markdown(outcomes, summary, by_band=()) -> str:
    """The summary and the per-row table as Markdown (what docs/validation.md shows)."""
    out = [
        "| category | role | rows | median \\|error\\| | max \\|error\\| | signs right | worst row |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for g in summary:
        signs = f"{g['sign_right']} / {g['sign_rows']}" if "sign_rows" in g else "-"
        u = err_unit(g["category"])
        out.append(f"| {g['category']} | {g['role']}{', blind' if g.get('blind') else ''} | {g['rows']} | {g['median_abs_error'] * 100:.1f} {u} | "
                   f"{g['max_abs_error'] * 100:.1f} {u} | {signs} | {g['worst']} |")  # fmt: skip
    if by_band:
        out += ["", "| category | axis | band | role | rows | median \\|error\\| | max \\|error\\| | worst row |",
                "|---|---|---|---|---:|---:|---:|---|"]  # fmt: skip
        for g in by_band:
            u = err_unit(g["category"])
            med, mx = _band_errors(g, u)
            out.append(f"| {g['category']} | {g['axis']} | {g['band']} | {g['role']} | {g['rows']} | {med} | {mx} | "
                       f"{g['worst'] or 'no rows'} |")  # fmt: skip
    out += [
        "",
        "| row | role | workload | measured | predicted | unit | error |",
        "|---|---|---|---:|---:|---|---:|",
    ]
    for o in outcomes:
        out.append(f"| {o.row.id} | {o.row.role} | {describe(o.row)} | {_fmt(o.measured)} | {_fmt(o.predicted)} | "
                   f"{o.unit} | {o.error * 100:+.1f} {err_unit(o.row.category)} |")  # fmt: skip
    return "\n".join(out)
