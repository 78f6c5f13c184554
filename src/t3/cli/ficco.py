"""``t3 ficco``: explore FiCCO's schedule design space for one operator, select, characterise."""

from __future__ import annotations

import json
import textwrap
import time

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from t3.cli.common import check_count, fmt_time, force_option
from t3.cli.main import app
from t3.config.hardware import load_hardware
from t3.ficco.space import FiccoOperator

ficco_app = typer.Typer(
    help="FiCCO schedule design space: explore, select, characterise.", no_args_is_help=True
)
app.add_typer(ficco_app, name="ficco")


def _operator(op: str, m: int, n: int, k: int, gpus: int, dtype: str, skew: float) -> FiccoOperator:
    return FiccoOperator(op, m, n, k, gpus, dtype, skew)


_OP = typer.Option("gemm-rs", "--op", help="ag-gemm, gemm-rs or moe")
_M = typer.Option(8192, "--m", help="GEMM M (rows; MoE: routed rows per GPU)")
_N = typer.Option(4096, "--n", help="GEMM N (columns; MoE: expert FFN width)")
_K = typer.Option(1792, "--k", help="GEMM K (inner; MoE: hidden width)")
_G = typer.Option(8, "--gpus", help="GPUs")
_HW = typer.Option("mi300x-8", "--hw", help="hardware preset name or TOML file")
_DT = typer.Option("bf16", "--dtype", help="fp16, bf16, fp8, tf32, fp32")
_SK = typer.Option(0.0, "--skew", help="MoE routing skew in [0, 1)")
_J = typer.Option(False, "--json", help="print one JSON object")


def _loss(s: float, pct: float) -> str:
    """A loss as time over its share of the schedule's time (two lines: the table fits 80 columns)."""
    if abs(s) < 1e-12:  # float noise of a difference of two equal times
        s, pct = 0.0, 0.0
    return f"{fmt_time(s)}\n{pct:.1f} %"


#: ``t3 ficco explore``'s columns (key: the name the legend explains; value: the header, on two lines
#: where it is wider than its numbers) and what each means.
EXPLORE_HEADERS = {
    "schedule": "schedule", "time": "time", "vs bulk": "vs\nbulk", "vs best shard": "vs best\nshard",
    "decomposition": "decomp-\nosition", "contention": "conten-\ntion",
}  # fmt: skip
EXPLORE_LEGEND = {
    "schedule": "the schedule's name (docs/ficco.md: comm kind, pieces g, split axis, executor, options)",
    "time": "its simulated time",
    "vs bulk": "bulk's time / its time (x; > 1x is faster than bulk)",
    "vs best shard": "the fastest shard-level schedule's time / its time (x; - without one)",
    "decomposition": "decomposition loss: time the pieces cost over the whole GEMM and collective, and"
    " its % of the schedule's time",
    "contention": "contention loss: its time minus its contention-free time, and its % of the"
    " schedule's time",
}


@ficco_app.command(
    help="Simulate every legal schedule of one operator with its decomposition and contention losses. "
    "Shows a progress bar on stderr; an operator whose estimated work is above the size limit is refused "
    "unless --force."
)
def explore(
    op: str = _OP, m: int = _M, n: int = _N, k: int = _K, gpus: int = _G, hw: str = _HW,
    dtype: str = _DT, skew: float = _SK, as_json: bool = _J,
    top: int | None = typer.Option(None, "--top", help="show only the fastest TOP schedules (default: all)"),
    force: bool = force_option(),
) -> None:  # fmt: skip
    from t3 import size
    from t3.experiments.parallel import progress_bar
    from t3.ficco.losses import explore as run_explore
    from t3.ficco.space import check_fits
    from t3.provenance import provenance

    check_count(top, "--top")
    fop = _operator(op, m, n, k, gpus, dtype, skew)
    h = load_hardware(hw)
    check_fits(fop, h)
    size.check(size.explore_work(fop, h), force=force)
    with progress_bar(transient=True) as bar:
        task = bar.add_task("t3 ficco explore: schedules", total=None)
        res = run_explore(fop, h, progress=lambda done, total: bar.update(task, completed=done, total=total))
        res = res.to_json()
    if as_json:
        if top is not None:  # the fastest TOP, fastest first (and how many there were)
            fast = sorted(res["schedules"], key=lambda r: (r["time_s"], r["name"]))
            res = {**res, "schedules": fast[:top], "schedules_total": len(fast)}
        print(json.dumps({**res, "provenance": provenance(h)}))
        return
    c = Console()  # the terminal's width; 80 columns when the output is not a terminal
    c.print(f"[bold]{escape(fop.describe())}[/] on {escape(h.name)}: GEMM alone {fmt_time(res['gemm_alone_s'])}, "
            f"collective alone {fmt_time(res['comm_alone_s'])}, bulk {fmt_time(res['bulk_s'])}")  # fmt: skip
    t = Table(title=f"{len(res['schedules'])} legal schedules ({len(res['skipped'])} skipped), fastest first",
              box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for col, header in EXPLORE_HEADERS.items():
        if col == "schedule":
            t.add_column(header, overflow="fold")
        else:
            t.add_column(header, justify="right", no_wrap=True)
    rows = sorted(res["schedules"], key=lambda r: (r["time_s"], r["name"]))
    negative = False
    for r in rows[:top]:
        lo = r["losses"]
        vs = f"{r['speedup_vs_shard']:.3f}x" if r["speedup_vs_shard"] else "-"
        negative |= lo["decomposition_s"] < -1e-12 or lo["contention_s"] < -1e-12
        t.add_row(escape(r["name"]), fmt_time(r["time_s"]), f"{r['speedup_vs_bulk']:.3f}x", vs,
                  _loss(lo["decomposition_s"], lo["decomposition_pct"]),
                  _loss(lo["contention_s"], lo["contention_pct"]))  # fmt: skip
    c.print(t)
    c.print("columns:")
    for col, what in EXPLORE_LEGEND.items():  # continuation lines indented under the column's name
        text = textwrap.fill(
            f"  {col}: {what}", width=c.width, subsequent_indent="    ", break_on_hyphens=False
        )
        c.print(escape(text), soft_wrap=True)
    if negative:
        from t3.ficco.losses import NEGATIVE_LOSS

        c.print(f"note: {NEGATIVE_LOSS}.")
    c.print(f"best: [bold]{res['best']}[/] {fmt_time(res['best_time_s'])}")


@ficco_app.command()
def select(
    op: str = _OP, m: int = _M, n: int = _N, k: int = _K, gpus: int = _G, hw: str = _HW,
    dtype: str = _DT, skew: float = _SK, as_json: bool = _J,
    runtime: bool = typer.Option(
        False, "--runtime", help="only schedules t3.runtime executes (one compute stream, no prefetch bound, -dma)"
    ),
    force: bool = force_option(),
) -> None:  # fmt: skip
    """The selector's schedule: a reduced model of the engine times every legal schedule (none is simulated)."""
    from t3 import size
    from t3.errors import ConfigError
    from t3.ficco.learned import select_shipped as pick
    from t3.provenance import provenance

    fop = _operator(op, m, n, k, gpus, dtype, skew)
    if runtime and fop.op == "moe":
        raise ConfigError(
            "runtime: t3.runtime has no MoE (all-to-all) op; --runtime takes ag-gemm or gemm-rs"
        )
    h = load_hardware(hw)
    size.check(size.select_work(fop, h), force=force)
    t0 = time.perf_counter()
    name, feats = pick(fop, h, runtime)
    dt = time.perf_counter() - t0
    if as_json:
        print(json.dumps({"schedule": name, "features": feats, "provenance": provenance(h)}))
        return
    c = Console()  # the terminal's width; 80 columns when the output is not a terminal
    c.print(f"[bold]{name}[/] for {fop.describe()} on {h.name}")
    # (a timing: on stderr, so that stdout is the same for the same inputs)
    Console(stderr=True).print(f"decided in {dt * 1e3:.2f} ms")
    for key, v in feats.items():
        if isinstance(v, dict):
            c.print(f"  {key.removesuffix('_s')}:")
            for k2, v2 in v.items():
                c.print(f"    {k2}: {fmt_time(v2)}" if key.endswith("_s") else f"    {k2}: {v2:.4g}")
        elif isinstance(v, list):
            c.print(f"  {key}: {'; '.join(v)}")
        elif key.endswith("_s"):
            c.print(f"  {key.removesuffix('_s')}: {fmt_time(v)}")
        else:
            c.print(f"  {key}: {v:.4g}" if isinstance(v, float) else f"  {key}: {v}")


@ficco_app.command()
def characterise(
    hw: str = _HW,
    as_json: bool = _J,
) -> None:
    """Decomposition loss of 8- and 64-way splits along M and K over a range of GEMM shapes."""
    from t3.ficco.characterise import characterise as char
    from t3.ficco.characterise import dma_efficiency
    from t3.provenance import provenance

    h = load_hardware(hw)
    rows = char(h)
    dma = dma_efficiency(h)
    if as_json:
        print(json.dumps({"hardware": h.name, "gemm": rows, "dma": dma, "provenance": provenance(h)}))
        return
    c = Console()  # the terminal's width; 80 columns when the output is not a terminal
    t = Table(title=f"decomposition loss on {h.name} (% of the whole GEMM's time, bf16)")
    for col in ("GEMM MxNxK", "whole", "M/8", "M/64", "K/8", "K/64"):
        t.add_column(col, justify="right")
    for r in rows:
        cells = [
            f"{r[f'{x}_loss_pct']:.1f} %" if f"{x}_loss_pct" in r else "-" for x in ("M8", "M64", "K8", "K64")
        ]
        t.add_row(f"{r['m']}x{r['n']}x{r['k']}", fmt_time(r["whole_s"]), *cells)
    c.print(t)
    t = Table(title="one DMA command over one link")
    for col in ("bytes", "time", "efficiency"):
        t.add_column(col, justify="right")
    for r in dma:
        t.add_row(f"{r['bytes'] / 1e6:.3f} MB", fmt_time(r["time_s"]), f"{r['efficiency_pct']:.1f} %")
    c.print(t)
