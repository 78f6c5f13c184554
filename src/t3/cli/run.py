"""``t3 run``: simulate one sublayer under one configuration."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from t3 import size
from t3.api import check_run, record, resolve, simulate
from t3.cli.common import OUTPUT_RULE, check_output_file, fmt_bytes, fmt_time, force_option, parse_overrides
from t3.cli.main import app
from t3.errors import ConfigError
from t3.schedules import CONFIGS, RunOptions, get_config
from t3.sim.trace import write_trace

EXPOSED = (
    "exposed communication = total time - GEMM time: what the all-reduce adds beyond the GEMM, i.e. "
    "the communication that overlap did not hide (0 = fully hidden)"
)
SPEEDUP = "speed-up over Sequential = T_sequential / T - 1 (same model, TP, sublayer, tokens, hardware)"
_SLOW_OPS = 50_000  # estimated ops above which a run takes about 2 s (20-60 µs per op): show progress


@app.command(
    help="Simulate a tensor-parallel sublayer (GEMM + all-reduce) and print times and bytes.\n\n"
    "The time (on the critical GPU) splits into the GEMM and the exposed communication: total time - "
    "GEMM time, the communication that overlap did not hide. The speed-up over Sequential is "
    "T_sequential / T - 1; Sequential is simulated too, so a run costs about twice one simulation. "
    "Bytes are per GPU. Inputs whose estimated work is above the size limit are refused unless --force."
)
def run(
    model: str = typer.Option("t-nlg", help="zoo model name, model TOML file or Hugging Face config.json"),
    tp: int = typer.Option(8, help="tensor-parallel degree (GPUs)"),
    sublayer: str = typer.Option("fc2", help="op, fc2 (forward), fc1-bwd, ip-bwd (backward)"),
    config: str = typer.Option("sequential", help="configuration: " + ", ".join(CONFIGS)),
    hw: str = typer.Option("paper-80cu", "--hw", help="hardware preset name or TOML file"),
    tokens: int | None = typer.Option(None, help="tokens (batch x sequence); default: the model's"),
    comm_cus: int | None = typer.Option(
        None, help="CUs of the all-reduce kernel (config 'concurrent' only; default 16)"
    ),
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
    trace: str | None = typer.Option(
        None,
        "--trace",
        help=f"write a Chrome/Perfetto trace JSON to this file ({OUTPUT_RULE} or with --overwrite)",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing --trace file of any kind"),
    force: bool = force_option(),
) -> None:
    from t3.experiments.parallel import progress_bar
    from t3.provenance import provenance

    op, hwc, spec = resolve(model, tp, sublayer, config, hw, tokens, parse_overrides(overrides))
    if comm_cus is not None and config != "concurrent":
        raise ConfigError(f"comm_cus: only the 'concurrent' configuration uses it (config is '{config}')")
    opts = RunOptions(
        symmetric=not all_gpus, comm_cus=16 if comm_cus is None else comm_cus, functional=functional,
        trace=trace is not None,
    )  # fmt: skip
    check_run(op, hwc, spec, opts, force)
    trace_path = check_output_file(trace, "--trace", "trace", overwrite=overwrite)
    runs = [(config, opts)]
    if config != "sequential":  # the baseline of the speed-up
        runs.append(("sequential", RunOptions(symmetric=not all_gpus)))
    slow = size.run_work(op, hwc, config, opts.symmetric, functional).ops > _SLOW_OPS
    outs = {}
    with progress_bar(disable=not slow, transient=True) as bar:
        task = bar.add_task(f"t3 run: {config}", total=len(runs))
        for name, o in runs:
            bar.update(task, description=f"t3 run: simulating {name}")
            outs[name] = simulate(op, hwc, get_config(name), o)
            bar.advance(task)
    out = outs[config]
    rec = record(op, hwc, config, out)
    t_seq = outs["sequential"].time_s
    rec["sequential_time_s"] = t_seq
    rec["speedup_vs_sequential"] = t_seq / rec["time_s"] - 1.0
    rec["definitions"] = {"speedup_vs_sequential": SPEEDUP, "breakdown_s.exposed_comm": EXPOSED}
    prov = provenance(hwc)
    rec["provenance"] = prov
    if trace_path is not None:
        write_trace(trace_path, out.results, other={"provenance": prov})
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
    _print(rec, config, trace)


def _print(rec: dict, config: str, trace: str | None) -> None:
    c = Console()
    g = rec["gemm"]
    c.print(
        f"[bold]{rec['model']}[/] {rec['sublayer']} ({rec['phase']}), TP {rec['tp']}, {rec['tokens']} tokens, "
        f"GEMM M={g['m']} N={g['n']} K={g['k']} {g['dtype']}, config [bold]{config}[/] on {rec['hardware']}"
    )
    bd = rec["breakdown_s"]
    total = rec["time_s"]
    t = Table(title="time on the critical GPU")
    t.add_column("part")
    t.add_column("time", justify="right")
    t.add_column("% of total", justify="right")
    t.add_row("GEMM", fmt_time(bd["gemm"]), f"{100 * bd['gemm'] / total:.1f} %")
    t.add_row(
        "exposed communication", fmt_time(bd["exposed_comm"]), f"{100 * bd['exposed_comm'] / total:.1f} %"
    )
    t.add_row("total", fmt_time(total), "100.0 %", style="bold")
    c.print(t)
    t = Table(title="collectives (overlap the GEMM where hidden)")
    t.add_column("collective")
    t.add_column("first start to last end", justify="right")
    t.add_row("reduce-scatter", fmt_time(bd["reduce_scatter"]))
    t.add_row("all-gather", fmt_time(bd["all_gather"]))
    c.print(t)
    c.print(f"{EXPOSED}.")
    if config == "sequential":
        c.print("speed-up over Sequential: 0.0 % (this is Sequential)")
    else:
        c.print(
            f"speed-up over Sequential: [bold]{100 * rec['speedup_vs_sequential']:.1f} %[/] "
            f"(Sequential {fmt_time(rec['sequential_time_s'])}; T_sequential / T - 1)"
        )
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
    fn = rec.get("functional")
    if fn is not None:
        c.print(
            f"functional: {fn['gpus']} GPUs, {fn['elements']} owned elements checked against numpy, "
            f"{fn['mismatches']} mismatches"
        )
    if trace is not None:
        c.print(f"trace written to {trace}")
