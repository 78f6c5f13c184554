"""``t3 run``: simulate one sublayer under one configuration."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from t3.api import record, resolve
from t3.cli.common import fmt_bytes, fmt_time, parse_overrides
from t3.cli.main import app
from t3.schedules import CONFIGS, RunOptions
from t3.schedules.t3 import require_functional
from t3.sim.trace import write_trace


@app.command()
def run(
    model: str = typer.Option("t-nlg", help="zoo model name, model TOML file or Hugging Face config.json"),
    tp: int = typer.Option(8, help="tensor-parallel degree (GPUs)"),
    sublayer: str = typer.Option("fc2", help="op, fc2 (forward), fc1-bwd, ip-bwd (backward)"),
    config: str = typer.Option("sequential", help="configuration: " + ", ".join(CONFIGS)),
    hw: str = typer.Option("paper-80cu", "--hw", help="hardware preset name or TOML file"),
    tokens: int | None = typer.Option(None, help="tokens (batch x sequence); default: the model's"),
    comm_cus: int = typer.Option(16, help="CUs of the all-reduce kernel (config 'concurrent')"),
    all_gpus: bool = typer.Option(
        False, "--all-gpus", help="simulate every GPU instead of the symmetric fast path"
    ),
    overrides: list[str] = typer.Option(
        None, "--set", help="hardware override KEY=VALUE, e.g. link.bandwidth_Bps=1.5e11"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    functional: bool = typer.Option(
        False, "--functional", help="carry real values through the schedule and check them (t3, t3-mca)"
    ),
    trace: str | None = typer.Option(None, "--trace", help="write a Chrome/Perfetto trace JSON to this file"),
) -> None:
    """Simulate a tensor-parallel sublayer (GEMM + all-reduce) and print times and bytes."""
    op, hwc, spec = resolve(model, tp, sublayer, config, hw, tokens, parse_overrides(overrides))
    if functional:
        require_functional(config)
    opts = RunOptions(
        symmetric=not all_gpus, comm_cus=comm_cus, functional=functional, trace=trace is not None
    )
    out = spec.run(op, hwc, opts)
    rec = record(op, hwc, config, out)
    if trace is not None:
        write_trace(trace, out.results)
    if as_json:
        print(json.dumps(rec, sort_keys=False))
    fn = rec.get("functional")
    if fn is not None and (fn["mismatches"] or fn.get("tiles_with_wrong_update_count")):
        Console(stderr=True).print(
            f"error: functional check failed: {fn['mismatches']} of {fn['elements']} owned elements differ from "
            f"the numpy reduce-scatter (max abs error {fn['max_abs_error']}), "
            f"{fn.get('tiles_with_wrong_update_count', 0)} tiles lost or reduced twice",
            highlight=False,
        )
        raise typer.Exit(1)
    if as_json:
        return
    c = Console()
    g = rec["gemm"]
    c.print(
        f"[bold]{rec['model']}[/] {rec['sublayer']} ({rec['phase']}), TP {rec['tp']}, {rec['tokens']} tokens, "
        f"GEMM M={g['m']} N={g['n']} K={g['k']} {g['dtype']}, config [bold]{config}[/] on {rec['hardware']}"
    )
    t = Table(title="time (critical GPU)")
    t.add_column("part")
    t.add_column("time", justify="right")
    t.add_column("share of total", justify="right")
    t.add_row("total", fmt_time(rec["time_s"]), "100.0 %")
    for k, v in rec["breakdown_s"].items():
        t.add_row(k.replace("_", " "), fmt_time(v), f"{100 * v / rec['time_s']:.1f} %")
    c.print(t)
    t = Table(title="data movement per GPU")
    t.add_column("category")
    t.add_column("bytes", justify="right")
    for k, v in rec["dram_bytes"].items():
        t.add_row(f"DRAM {k.replace('_', ' ')}", fmt_bytes(v))
    t.add_row("DRAM total", fmt_bytes(rec["dram_bytes_total"]))
    t.add_row("link (sent)", fmt_bytes(rec["link_bytes"]))
    c.print(t)
    c.print(f"simulated {rec['sim']['ops']} ops in {rec['sim']['events']} events")
    if "tracker" in rec:
        tr = rec["tracker"]
        c.print(
            f"tracker: {tr['entries']} entries, peak occupancy {tr['peak_occupancy']} entries, "
            f"{tr['triggers']:.0f} DMA triggers per GPU, stall {fmt_time(tr['stall_s'])}"
        )
    if "mca" in rec:
        m = rec["mca"]
        c.print(
            f"MCA: threshold {100 * m['threshold']:.1f} % of HBM bandwidth (first-stage GEMM intensity "
            f"{100 * m['first_stage_intensity']:.1f} %), starvation share {100 * m['starvation_share']:.1f} %"
        )
    if fn is not None:
        c.print(
            f"functional: {fn['gpus']} GPUs, {fn['elements']} owned elements checked against numpy, "
            f"{fn['mismatches']} mismatches"
        )
    if trace is not None:
        c.print(f"trace written to {trace}")
