"""``t3 sweep``: run a parameter sweep from a TOML spec into a resumable Parquet store; ``t3 sweep show``.

``t3 sweep SPEC.toml --store results.parquet`` is short for ``t3 sweep run SPEC.toml --store ...``.
Exit status: 0 when every point of the grid is stored with status ok, 1 when some point failed (its
row holds the error; rerunning retries it; the failed points are named), 0 with a warning instead
with ``--keep-going``, 2 on bad input (nothing runs), 130 when interrupted (finished rows are stored;
rerunning resumes).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from t3.cli.common import check_store, fmt_bytes, fmt_time, force_option
from t3.cli.main import app
from t3.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd


class _DefaultRun(TyperGroup):
    """``t3 sweep SPEC.toml ...`` runs ``t3 sweep run SPEC.toml ...``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_DefaultRun,
    no_args_is_help=True,
    help="Sweep any parameter grid (TOML spec) into a resumable Parquet store: t3 sweep SPEC.toml --store R.parquet",
)
app.add_typer(sweep_app, name="sweep")


@sweep_app.command("run")
def run_cmd(
    spec: Path = typer.Argument(
        ..., help="sweep spec (TOML): base values, grid lists, zip groups (docs/sweeps.md)"
    ),
    store: Path | None = typer.Option(
        None, "--store", help="results store (.parquet); required unless --dry-run"
    ),
    executor: str = typer.Option(
        "local", help="local (process pool) or dask (dask.distributed; extra 'dist')"
    ),
    workers: int | None = typer.Option(
        None, help="worker processes (default: CPUs, at most 8); 1 = in-process"
    ),
    scheduler: str | None = typer.Option(None, help="dask scheduler address (default: a LocalCluster)"),
    retry_errors: bool = typer.Option(
        True, "--retry-errors/--keep-errors", help="recompute points whose stored row is an error"
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show the progress bar (on stderr)"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="validate every point and print the grid size and the estimated work"
    ),
    flush_s: float = typer.Option(1.0, "--flush-s", help="journal finished rows at least this often (s)"),
    keep_going: bool = typer.Option(
        False,
        "--keep-going",
        help="exit 0 (with a warning) when some points failed; their rows hold the errors",
    ),
    force: bool = force_option(),
) -> None:
    """Run every point of SPEC not yet in the store; results stream into the store as they finish.
    Every point is validated, and the work estimated, before anything runs."""
    import json
    import math

    from t3.experiments.sweep import SweepInterrupted, execute, load_spec
    from t3.experiments.sweep.executors import check_executor
    from t3.experiments.sweep.spec import point_work

    if dry_run:  # it runs nothing: an option of the run would be ignored
        given = [("--store", store is not None), ("--workers", workers is not None),
                 ("--scheduler", scheduler is not None), ("--executor", executor != "local"),
                 ("--keep-going", keep_going), ("--keep-errors", not retry_errors), ("--flush-s", flush_s != 1.0)]  # fmt: skip
        for opt, on in given:
            if on:
                raise ConfigError(
                    f"{opt}: not used with --dry-run, which validates the spec and runs nothing"
                )
    check_executor(executor, workers, scheduler)
    if not dry_run and store is None:
        raise ConfigError("--store: required (a path ending in .parquet)")
    check_store(store)
    if not (math.isfinite(flush_s) and flush_s > 0):
        raise ConfigError(f"--flush-s: must be a finite number > 0, got {flush_s}")
    sw = load_spec(spec, force=force)  # validates every point (and the size guard) before anything runs
    con = Console(stderr=True, soft_wrap=True)
    distinct = len(set(sw.keys))
    axes = " x ".join(
        f"{'+'.join(a)} ({len({json.dumps([p.varied[k] for k in a], sort_keys=True) for p in sw.points})})"
        for a in sw.axes  # (a value may be a table: counted by its JSON text)
    )
    if dry_run:
        first = {k: p for k, p in zip(sw.keys, sw.points, strict=True)}
        ops = sum(point_work(p.point).ops for p in first.values())
        print(f"{sw.name}: {len(sw)} points ({distinct} distinct) valid; axes: {axes or 'none'}; "
              f"about {ops:.2g} simulated ops")  # fmt: skip
        return
    try:
        df, st = execute(
            sw, executor=executor, workers=workers, scheduler=scheduler, store=store, progress=progress,
            retry_errors=retry_errors, flush_s=flush_s,
        )  # fmt: skip
    except SweepInterrupted as err:
        con.print(escape(str(err)))
        sys.exit(130)
    except KeyboardInterrupt:  # outside the run loop (start-up, final compaction): the store is consistent
        con.print(f"interrupted; rerun the same command to resume (store: {escape(str(store))})")
        sys.exit(130)
    rate = st.computed / st.wall_s if st.wall_s > 0 else 0.0
    con.print(
        escape(sw.name)
        + f": {st.total} distinct points; {st.skipped} already stored, {st.computed} computed in "
        f"{st.wall_s:.2f} s ({rate:.1f} points/s); {st.errors} failed; store: {escape(str(store))}"
    )
    for e in st.error_examples:
        con.print(f"  [red]failed[/] {escape(e)}")
    if st.errors > len(st.error_examples):
        con.print(f"  ... and {st.errors - len(st.error_examples)} more (t3 sweep show {escape(str(store))})")
    if st.errors and keep_going:
        con.print(f"[bold red]WARNING: {st.errors} point(s) failed (--keep-going: exit status 0); "
                  "their rows hold the errors and a rerun retries them[/]")  # fmt: skip
    elif st.errors:
        sys.exit(1)


_UNITS = [("_Bps", "B/s"), ("_hz", "Hz"), ("_s", "s"), ("_bytes", "B"), ("_share", "fraction")]


def _unit(col: str) -> str:
    for suf, u in _UNITS:
        if col.endswith(suf):
            return u
    return ""


_LABELS = {
    "time_s": "time",
    "breakdown_s.gemm": "GEMM time",
    "breakdown_s.exposed_comm": "exposed comm",
    "dram_bytes_total": "DRAM bytes",
    "link_bytes": "link bytes",
}


def _label(col: str) -> str:
    """Short column header with its unit (formatted outputs carry their unit in each cell)."""
    if col in _LABELS:
        return _LABELS[col]
    short = col.split(".", 1)[1] if col.startswith(("hardware.", "options.")) else col
    u = _unit(col) if not col.startswith(("time_s", "breakdown_s", "dram_bytes", "link_bytes")) else ""
    return f"{short} [{u}]" if u else short


def _fmt(col: str, v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):  # None or NaN
        return "-"
    if col == "time_s" or col.startswith("breakdown_s."):
        return fmt_time(float(v))
    if col.startswith("dram_bytes") or col == "link_bytes":
        return fmt_bytes(float(v))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def varied_inputs(df: pd.DataFrame) -> list[str]:
    from t3.experiments.sweep.store import column_rank

    cols = [c for c in df.columns if column_rank(c)[0] in (1, 2, 3) and c != "hardware.name"]
    return [c for c in cols if df[c].astype(str).nunique(dropna=False) > 1]


def _header(col: str) -> str:
    """A column's label with its unit on a second line (narrower columns)."""
    return _label(col).replace(" [", "\n[")


_FOLD = 12  # a text cell (e.g. a configuration name) may wrap down to this width


def _fit_columns(
    priority: list[str], cells: dict[str, list[str]], text: set[str], width: int, keep: int
) -> set[str]:
    """The columns, taken in priority order, that fit ``width`` (the first ``keep`` always): a header
    may wrap at its spaces, a text cell down to :data:`_FOLD` characters, a number not at all."""
    shown, used = set(), 1  # the table's left border
    for i, c in enumerate(priority):
        cell = max((len(x) for x in cells[c]), default=1)
        w = max([*(len(x) for x in _header(c).splitlines()), min(cell, _FOLD) if c in text else cell]) + 3
        if i < keep or used + w <= width:
            shown.add(c)
            used += w
    return shown


@sweep_app.command("show")
def show_cmd(
    store: Path = typer.Argument(..., help="results store written by t3 sweep (.parquet)"),
    limit: int = typer.Option(50, help="rows to print (0 = all)"),
    columns: str | None = typer.Option(
        None, help="comma-separated columns to print first (others follow while they fit the width)"
    ),
) -> None:
    """Print a summary table of a results store (compacting its journal first when no sweep is running).
    The table fits the terminal (80 columns when not a terminal; COLUMNS=N to change): the point,
    its status, the inputs that vary, then the outputs while they fit; a note names the columns left out."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from t3.experiments.sweep import Store

    if limit < 0:
        raise ConfigError(f"--limit: must be >= 0 (0 = all rows), got {limit}")
    extra = [c.strip() for c in columns.split(",")] if columns is not None else []  # (the columns asked for)
    if not all(extra):
        raise ConfigError(
            f"--columns: expected comma-separated column names, got {columns!r} (an empty name)"
        )
    dup = next((c for i, c in enumerate(extra) if c in extra[:i]), None)
    if dup is not None:
        raise ConfigError(f"--columns: '{dup}' is given twice (each column once)")
    if store.is_dir():
        raise ConfigError(f"store: '{store}' is a directory, not a .parquet store")
    db = Store(store, option="store")
    if not store.exists() and not db.parts.is_dir():
        raise ConfigError(f"store: '{store}' not found")
    if db.lock():
        read = False
        try:
            table = db.compact()
            read = True
        finally:  # (a file refused as a store keeps nothing beside it: the lock file goes if this made it)
            db.unlock(discard=not read)
    else:  # a sweep is writing it: read without compacting
        table = db.table()
    df = table.to_pandas()
    if len(df) == 0:
        print(f"{store}: empty")
        return
    want = varied_inputs(df) or [c for c in ("model", "sublayer", "config", "hardware") if c in df]
    outs = [
        c
        for c in ("time_s", "breakdown_s.gemm", "breakdown_s.exposed_comm", "dram_bytes_total", "link_bytes")
        if c in df
    ]
    for c in extra:
        if c not in df.columns:
            raise ConfigError(f"--columns: unknown column '{c}' (see pandas.read_parquet('{store}').columns)")
    head = ["point", "status"]
    cols = [*head, *extra, *[c for c in want + outs if c not in extra]]
    shown_rows = df if limit == 0 else df.head(limit)
    cells = {c: [_fmt(c, v) for v in shown_rows[c]] for c in cols}
    con = Console()
    text = {c for c in cols if not (is_numeric_dtype(df[c]) and not is_bool_dtype(df[c])) and c not in outs}
    shown = _fit_columns(cols, cells, text, con.width, keep=len(head) + len(extra))
    fit = [c for c in cols if c in shown]
    ok = int((df["status"] == "ok").sum())
    t = Table()
    for c in fit:
        if c in text:
            t.add_column(escape(_header(c)), overflow="fold")
        else:
            t.add_column(escape(_header(c)), justify="right", no_wrap=True)
    for i in range(len(shown_rows)):
        t.add_row(*(cells[c][i] for c in fit))
    con.print(escape(f"{store}: {len(df)} points, {ok} ok, {len(df) - ok} failed"), soft_wrap=True)
    con.print(t)
    left = [c for c in cols if c not in fit]
    if left:
        con.print(escape(f"not shown ({con.width} columns wide): {', '.join(left)}; choose with --columns, "
                         "or widen the terminal"))  # fmt: skip
    if len(shown_rows) < len(df):
        con.print(f"... {len(df) - len(shown_rows)} more rows (--limit 0 prints all)")
    bad = df[df["status"] != "ok"]
    for p, e in zip(bad["point"][:5], bad["error"][:5], strict=True):
        con.print(f"[red]point {p} failed[/]: {escape(str(e))}", soft_wrap=True)
