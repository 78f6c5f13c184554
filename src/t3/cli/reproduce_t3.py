"""``t3 reproduce t3``: the T3 paper's evaluation in one command (report, figures, JSON)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console

from t3.cli.common import (
    OUTPUT_DIR_RULE,
    OUTPUT_RULE,
    check_apart,
    check_count,
    check_output_dir,
    check_output_file,
    check_store,
    force_option,
    parse_overrides,
)
from t3.cli.reproduce import reproduce_app
from t3.files import staged, write_text

KEEP_GOING = (
    "a simulation point that fails is listed in the report and JSON and its configuration left out of "
    "the summaries of its set (exit status 0 with a warning); without it, a failed point stops the command "
    "(exit status 1, naming the point) and nothing is written"
)


@reproduce_app.command("t3")
def reproduce_t3(
    out: Path = typer.Option(
        Path("results/t3"),
        "--out",
        help=f"output directory (report, figures, JSON; {OUTPUT_DIR_RULE} unless --overwrite)",
    ),
    json_file: Path | None = typer.Option(
        None, "--json", help=f"also write the JSON document to this file ({OUTPUT_RULE} or with --overwrite)"
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="replace an existing --json file, and the files it writes in --out, of any kind",
    ),
    workers: int | None = typer.Option(None, help="worker processes (default: CPU count, at most 8)"),
    hw: str = typer.Option("paper-80cu", "--hw", help="hardware preset name or TOML file"),
    quick: bool = typer.Option(False, "--quick", help="TP 8 only, no TP-32 models, no sensitivity sweeps"),
    no_figures: bool = typer.Option(False, "--no-figures", help="skip the PNG figures"),
    overrides: list[str] = typer.Option(None, "--set", help="hardware override KEY=VALUE for every point"),
    executor: str = typer.Option("local", help="where simulation points run: local (process pool) or dask"),
    scheduler: str | None = typer.Option(None, help="dask scheduler address (default: a LocalCluster)"),
    store: Path | None = typer.Option(
        None, help="resumable Parquet store of the simulation points (an interrupted run resumes from it)"
    ),
    keep_going: bool = typer.Option(False, "--keep-going", help=KEEP_GOING),
    force: bool = force_option(),
) -> None:
    """Sublayer speedups, data movement, end-to-end projection, contention and sensitivity vs the paper.
    Shows a progress bar on stderr. Points of the tracker-entries sweep whose tracker cannot hold one
    wave of tiles are expected to be infeasible: the report lists them with the reason."""
    from t3.config.hardware import load_hardware
    from t3.experiments import report
    from t3.experiments.parallel import WarmPool, default_workers
    from t3.experiments.reproduce_t3 import FIGURES, Plan, figure_jobs, reproduce
    from t3.experiments.sweep.executors import check_executor
    from t3.provenance import provenance

    check_count(workers, "--workers")
    check_executor(executor, workers, scheduler)
    # (--overwrite also covers the files it writes in --out)
    check_output_file(json_file, "--json", "reproduce-json", overwrite=overwrite and json_file is not None)
    check_store(store)
    check_apart({"--json": json_file, "--store": store}, ("--out", out, "reproduce-t3"))
    plan = Plan(hardware=hw, hw_overrides=parse_overrides(overrides))
    if quick:
        plan = Plan(hardware=hw, hw_overrides=plan.hw_overrides, tps=(8,), large_models=(), sweeps=())
    plan.validate()  # before the output directory is created
    check_output_dir(out, "--out", "reproduce-t3", overwrite=overwrite)
    t0 = time.perf_counter()
    # the figure processes import matplotlib (~0.3 s) while the size guard and the validation run on
    # one core; they draw once the document is there (the same bytes as figures.make_all)
    n_fig = 0 if no_figures else min(default_workers() if workers is None else workers, len(FIGURES))
    with WarmPool("t3.experiments.figures", n_fig) as figure_pool:
        doc = reproduce(
            plan, workers=workers, executor=executor, scheduler=scheduler, store=store, keep_going=keep_going,
            force=force,
        )  # fmt: skip
        doc = {"provenance": provenance(load_hardware(hw, plan.hw_overrides or None)), **doc}
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(doc, indent=1)
        with staged(out, last="t3.json") as stage:  # (the folder's files appear together, t3.json last)
            write_text(stage / "t3.json", text + "\n")
            jobs = [] if no_figures else figure_jobs(doc, stage)
            figs = sorted(figure_pool.map("_render", [(j,) for j in jobs]))
            write_text(stage / "report.md", report.render(doc, figs) + "\n")
        if json_file is not None:
            write_text(json_file, text + "\n")
    c = Console()
    err = Console(stderr=True)
    s = doc["summary"]
    if doc["configs"]["missing"]:
        err.print(f"[bold red]WARNING: configurations not registered: {', '.join(doc['configs']['missing'])} "
                  "(their numbers are n/a)[/]")  # fmt: skip
    if doc["errors"]:
        err.print(f"[bold red]WARNING: {len(doc['errors'])} simulation point(s) failed (--keep-going; listed in "
                  "the report); their configurations are left out of the summaries of their set[/]")  # fmt: skip
    if doc["infeasible"]:
        err.print(f"{len(doc['infeasible'])} point(s) of the sensitivity sweeps are infeasible, as expected "
                  f"(e.g. {doc['infeasible'][0]['error']}); the report lists them")  # fmt: skip
    for name in ("ideal_gemm_rs_overlap", "t3", "t3_mca", "ideal_rs_nmc", "large_models_t3_mca"):
        g, m = s[name]["geomean_speedup"], s[name]["max_speedup"]
        c.print(f"{name:24s} geomean {report.pct(g)}  max {report.pct(m)}")
    d = s["data_movement_reduction"]
    c.print(f"{'data movement reduction':24s} geomean {report.pct(d['geomean'])}  max {report.pct(d['max'])}")
    c.print(f"wrote {out / 'report.md'}, {out / 't3.json'} and {len(figs)} figures")
    # (the wall time on stderr: the same inputs print the same standard output, byte for byte)
    err.print(f"took {time.perf_counter() - t0:.1f} s")
