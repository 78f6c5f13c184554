"""``t3 trace``: import a PyTorch profiler trace (GEMM / collective pairs, exposed communication) and
project what sequential, ideal, T3 and FiCCO overlap would take on a hardware preset."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from t3.cli.common import (
    OUTPUT_DIR_RULE,
    OUTPUT_RULE,
    TRACE_PARQUET_COLUMNS,
    check_output_dir,
    check_output_file,
    fmt_bytes,
    fmt_time,
    force_option,
)
from t3.cli.main import app
from t3.errors import ConfigError
from t3.files import replacing, staged, write_text

trace_app = typer.Typer(
    help="Your trace: import a torch.profiler trace, project T3 / FiCCO overlap on a preset.",
    no_args_is_help=True,
)
app.add_typer(trace_app, name="trace")

_MODEL = typer.Option(
    None, "--model", help="zoo name, model TOML or Hugging Face config.json: labels pairs by sublayer"
)
_JSON = typer.Option(False, "--json", help="print one JSON object")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole > 0 else "-"


def _import(trace: str, model: str | None):
    from t3.traces import import_trace

    return import_trace(trace, model)


@trace_app.command("import")
def import_cmd(
    trace: str = typer.Argument(..., help="one rank's torch.profiler trace (.json or .json.gz)"),
    model: str | None = _MODEL,
    as_json: bool = _JSON,
    parquet: str | None = typer.Option(
        None,
        "--parquet",
        help=f"write one row per pair to this Parquet file ({OUTPUT_RULE} or with --overwrite)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace an existing --parquet file of any kind"
    ),
) -> None:
    """Find the GEMMs and collectives of a trace, pair them, and show how much communication was exposed."""
    out = check_output_file(parquet, "--parquet", "trace-parquet", overwrite=overwrite)
    if model is not None:
        from t3.workload import get_model

        get_model(model)  # validated before the trace is read
    t = _import(trace, model)
    doc = t.as_dict()
    if out is not None:
        _write_parquet(doc["pairs"], out)
    if as_json:
        print(json.dumps(doc))
        return
    c = Console(width=160)
    s = doc["trace"]
    c.print(
        f"[bold]{Path(t.source).name}[/]: {t.device_name} ({t.device} trace, backend {t.backend or '-'}, rank "
        f"{t.rank if t.rank is not None else '-'} of {t.world_size or '-'}), profiled window {fmt_time(t.window_s)}"
        + (f" over {t.steps} steps" if t.steps else "")
    )
    c.print(
        f"{s['gemms']} GEMMs ({fmt_time(s['gemm_time_s'])}), {s['collectives']} collectives "
        f"({fmt_time(s['collective_time_s'])}, exposed {fmt_time(s['exposed_collective_s'])}), {len(t.pairs)} pairs; "
        f"exposed communication {fmt_time(s['exposed_communication_s'])} = "
        f"{_pct(s['exposed_communication_s'], t.window_s)} of the window"
    )
    if t.pairs:
        tb = Table(title="GEMM / collective pairs (times measured)")
        for col in ("#", "kind", "sublayer", "GEMM m x n x k", "GEMM time", "collective", "size", "GPUs",
                    "collective time", "exposed"):  # fmt: skip
            tb.add_column(col, justify="right" if col not in ("kind", "sublayer", "collective") else "left")
        for i, p in enumerate(t.pairs):
            g, co = p.gemm, p.collective
            tb.add_row(
                str(i), p.kind, p.label or "-", f"{g.shape()} {g.dtype}", fmt_time(g.busy_s), co.op,
                fmt_bytes(co.nbytes) if co.nbytes is not None else "?", str(co.group_size or "?"),
                fmt_time(co.dur_s), f"{fmt_time(co.exposed_s)} ({_pct(co.exposed_s, co.dur_s)})",
            )  # fmt: skip
        c.print(tb)
    un = t.unpaired()
    if un:
        c.print(
            f"unpaired collectives: {len(un)} ({fmt_time(sum(x.dur_s for x in un))}, exposed "
            f"{fmt_time(sum(x.exposed_s for x in un))}): " + ", ".join(sorted({x.op for x in un}))
        )
    for n in t.notes:
        c.print(f"note: {n}")
    if out is not None:
        c.print(f"pairs written to {out}")


def _write_parquet(pairs: list[dict], path: Path) -> None:
    import pandas as pd

    rows = []
    for p in pairs:
        r = {"kind": p["kind"], "relation": p["relation"], "label": p["label"], "measured_s": p["measured_s"]}
        r.update({f"gemm_{k}": v for k, v in p["gemm"].items()})
        r.update({f"collective_{k}": v for k, v in p["collective"].items()})
        for s, v in p.get("predicted", {}).items():
            if isinstance(v, dict):
                r[f"{s}_s"], r[f"{s}_schedule"] = v["time_s"], v["schedule"]
            else:
                r[s] = v
        rows.append(r)
    # (no pairs: the fixed columns still, so that a later run recognises the file as this command's)
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(TRACE_PARQUET_COLUMNS))
    with replacing(path) as tmp:
        frame.to_parquet(tmp, index=False)


@trace_app.command()
def project(
    trace: str = typer.Argument(..., help="one rank's torch.profiler trace (.json or .json.gz)"),
    hw: str = typer.Option("h100-8", "--hw", help="hardware preset name or TOML file"),
    model: str | None = _MODEL,
    gpus: int | None = typer.Option(
        None, "--gpus", help="group size of every collective (default: from the trace)"
    ),
    ficco: str = typer.Option(
        "explore", "--ficco", help="explore: simulate every schedule; select: the selector's pick"
    ),
    same_hw: bool | None = typer.Option(
        None,
        "--same-hw/--other-hw",
        help="state whether the trace was taken on the preset's hardware (default: by name)",
    ),
    out: str = typer.Option(
        "results/trace",
        "--out",
        help=f"folder for projection.json, .perfetto.json, .png ({OUTPUT_DIR_RULE} unless --overwrite)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace the files it writes in --out, of any kind"
    ),
    as_json: bool = _JSON,
    force: bool = force_option(),
) -> None:
    """Per pair: sequential, ideal overlap, T3 / T3-MCA, best FiCCO schedule; the projected step."""
    from t3.config.hardware import load_hardware
    from t3.traces.project import project as run_project
    from t3.traces.project import write_figure, write_perfetto

    if ficco not in ("explore", "select"):
        raise ConfigError(f"--ficco: expected explore or select, got '{ficco}'")
    if gpus is not None and gpus < 2:
        raise ConfigError(f"--gpus: must be >= 2, got {gpus}")
    h = load_hardware(hw)
    topo = h.topology
    if gpus is not None and topo.kind in ("mesh", "switch") and gpus > topo.gpus:  # every pair n/a
        raise ConfigError(f"--gpus: {gpus} is more than the {topo.gpus} GPUs of the {topo.kind} of hardware "
                          f"'{h.name}': no pair could be predicted; valid: 2..{topo.gpus}")  # fmt: skip
    if model is not None:
        from t3.workload import get_model

        get_model(model)
    folder = check_output_dir(out, "--out", "trace-project", overwrite=overwrite)
    t = _import(trace, model)
    from t3 import size

    size.check(size.trace_work(t, h, ficco, gpus), force=force)
    pr = run_project(t, h, ficco, gpus, same_hw)
    doc = pr.as_dict()
    names = {"json": "projection.json", "perfetto": "projection.perfetto.json", "figure": "projection.png"}
    doc["outputs"] = {k: str(folder / v) for k, v in names.items()}
    with staged(folder, last=names["json"]) as stage:  # (the three files appear together, the JSON last)
        write_perfetto(pr, stage / names["perfetto"])
        write_figure(pr, stage / names["figure"])
        write_text(stage / names["json"], json.dumps(doc, indent=1) + "\n")
    if as_json:
        print(json.dumps(doc))
        return
    _print_projection(pr, doc)


def _cell(p) -> str:
    if not p.ok:
        return "n/a"
    return fmt_time(p.time_s) + ("*" if p.note.startswith("hypothetical") else "")


def _print_projection(pr, doc: dict) -> None:
    from t3.traces.project import SHOWN

    t, c = pr.trace, Console(width=180)
    c.print(f"[bold]{Path(t.source).name}[/] ({t.device_name}) projected on [bold]{pr.hw.name}[/] "
            f"({pr.hw.description}); FiCCO: {pr.ficco}")  # fmt: skip
    tb = Table(title="per pair: measured (GEMM + exposed collective) and predicted on the preset")
    for col in ("#", "kind", "GEMM m x n x k", "GPUs", "measured", "sequential", "ideal", "t3", "t3-mca",
                "FiCCO", "FiCCO schedule"):  # fmt: skip
        tb.add_column(col, justify="left" if col in ("kind", "FiCCO schedule") else "right")
    notes: set[str] = set()
    for i, r in enumerate(pr.rows):
        p, g = r.pair, r.pair.gemm
        for s in SHOWN:
            n = r.time(s).note
            if n.startswith("n/a") or n.startswith("hypothetical"):
                notes.add(n)
        f = r.time("ficco")
        tb.add_row(str(i), f"{p.kind} {p.label.split(' ')[0]}" if p.label else p.kind, f"{g.shape()} {g.dtype}", str(r.gpus or "?"),
                   fmt_time(p.measured_s), *(_cell(r.time(s)) for s in ("sequential", "ideal", "t3", "t3-mca")),
                   _cell(f), f.schedule or "-")  # fmt: skip
    c.print(tb)
    w = doc["window"]
    unit = "step" if t.steps else "profiled window"
    tb = Table(title=f"projected {unit} time (the other work kept as measured)")
    for col in ("schedule", unit, "change", "pairs run sequential", "pairs kept as measured"):
        tb.add_column(col, justify="left" if col == "schedule" else "right")
    tb.add_row("measured", fmt_time(w["measured_per_step_s"]), "-", "-", "-")
    for s in SHOWN:
        x = w[s]
        tb.add_row(s, fmt_time(x["per_step_s"]), f"{-x['saving_pct']:+.1f} %", str(x["pairs_run_sequential"]),
                   str(x["pairs_kept_measured"]))  # fmt: skip
    c.print(tb)
    c.print(f"hardware: {'same as the trace' if pr.same_hw else 'not the trace’s'} ({pr.same_hw_reason})")
    if not pr.same_hw:
        c.print("note: the pairs' times are the preset's, the rest of the window was measured on other "
                "hardware: compare schedules with each other")  # fmt: skip
    err = doc["model_error"]
    if err and err["pairs"]:
        c.print(f"model error on this trace ({len(err['pairs'])} pairs): GEMM predicted / measured "
                f"{err['gemm_geomean_ratio']:.3f}x geomean (mean |error| {err['gemm_mean_abs_error_pct']:.1f} %), "
                f"collective {err['collective_geomean_ratio']:.3f}x (mean |error| "
                f"{err['collective_mean_abs_error_pct']:.1f} %)")  # fmt: skip
    for n in sorted(notes):
        c.print(f"* {n}" if n.startswith("hypothetical") else n)
    for n in t.notes:
        c.print(f"note: {n}")
    o = doc["outputs"]
    c.print(f"wrote {o['json']}, {o['perfetto']} (open at https://ui.perfetto.dev), {o['figure']}")
