"""Run a sweep: validate every point, skip points already stored, run the rest on an executor and
journal finished rows as they arrive, with a progress bar (points done, rate, ETA).

Python entry points for other commands (reproductions, FiCCO scenarios):

- :func:`run_sweep` (points or a :class:`Sweep` -> ``pandas.DataFrame``, one row per distinct point);
- :func:`run_points` (points -> their ``t3.api.record`` dicts in input order, like ``pmap(run_point, ...)``).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from t3 import provenance
from t3.errors import ConfigError, T3Error
from t3.experiments.sweep.executors import (
    IDENTITY,
    InProcess,
    check_executor,
    deferred_interrupt,
    make_executor,
)
from t3.experiments.sweep.spec import Sweep, build_point, check_values, validate_points
from t3.experiments.sweep.store import RECORD_COLUMN, Store, dedupe, rows_to_table

if TYPE_CHECKING:  # pandas (a third of a second to import) only where a DataFrame is made
    import pandas as pd


class SweepInterrupted(T3Error):
    """Ctrl-C: finished rows are stored; rerunning the same command resumes."""


class SweepFailed(T3Error):
    """run_points: a point failed (its message is the first error)."""


class RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        s = task.speed
        return Text("-- points/s" if s is None else f"{s:.1f} points/s")


def progress_bar(disable: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[errors]}"),
        console=Console(stderr=True), disable=disable, transient=False,
    )  # fmt: skip


def make_row(
    index: int, key: str, inputs: dict[str, Any], res: dict[str, Any], run_id: str,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {"point": index, "key": key, "status": res["status"], "error": res["error"]}
    row.update(inputs)
    for k, v in (res["outputs"] or {}).items():
        row[f"out.{k}" if k in row else k] = v
    row["run_id"] = run_id
    row["worker"] = res["worker"]
    row["elapsed_s"] = res["elapsed_s"]
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="milliseconds")
    for k, v in (provenance or {}).items():
        row[f"provenance.{k}"] = v
    return row


@dataclass
class SweepStats:
    total: int = 0  # distinct points in the grid
    skipped: int = 0  # already in the store
    computed: int = 0
    errors: int = 0  # error rows among the grid's points at the end
    wall_s: float = 0.0
    run_id: str = ""
    error_examples: list[str] = field(default_factory=list)


def _batch_size(n: int, workers: int) -> int:
    if workers <= 1:
        return 1
    return max(1, min(32, math.ceil(n / (workers * 16))))


def execute(sweep: Sweep, **kw: Any) -> tuple[pd.DataFrame, SweepStats]:
    """Run the points of ``sweep`` not yet in ``store``; return (rows of the grid's distinct points in
    grid order, statistics). Raises :class:`SweepInterrupted` on Ctrl-C after storing finished rows.
    ``classify(point index, error)`` names a failed point's outcome on the progress bar (default
    "failed"; a reproduction says "infeasible (expected)" for the points it expects to fail). The
    keywords are :func:`_execute`'s."""
    rows, table, st = _execute(sweep, **kw)
    return (table if table is not None else dedupe(rows_to_table(rows))).to_pandas(), st


def execute_records(
    sweep: Sweep, columns: Sequence[str], **kw: Any
) -> tuple[list[dict[str, Any]], SweepStats]:
    """:func:`execute`'s rows as dicts of the text ``columns`` asked for (None where a row has none),
    in the same order; for a caller that reads a few columns. Without a store no table is made (and
    pandas, which Arrow imports to build one from Python lists, is not imported)."""
    rows, table, st = _execute(sweep, **kw)
    if table is None:
        return [{c: r.get(c) for c in columns} for r in rows], st
    n = table.num_rows
    vals = {c: table.column(c).to_pylist() if c in table.column_names else [None] * n for c in columns}
    return [{c: vals[c][i] for c in columns} for i in range(n)], st


def _execute(
    sweep: Sweep, *, executor: str = "local", workers: int | None = None, scheduler: str | None = None,
    store: str | Path | None = None, progress: bool = True, retry_errors: bool = True,
    batch_size: int | None = None, flush_rows: int = 1000, flush_s: float = 1.0, compact_every: int = 512,
    dask_processes: bool = True, description: str | None = None,
    classify: Callable[[int, str], str] | None = None,
) -> tuple[list[dict[str, Any]], pa.Table | None, SweepStats]:  # fmt: skip
    """Run the sweep; (rows in grid order, None, statistics) without a store, ([], the store's rows
    of this grid, statistics) with one."""
    first: dict[str, int] = {}
    for pt, k in zip(sweep.points, sweep.keys, strict=True):
        first.setdefault(k, pt.index)
    st = SweepStats(total=len(first), run_id=uuid.uuid4().hex[:12])
    prov = provenance.run_fields()  # the hardware's content hash is an input column of each row
    db = Store(store) if store is not None else None
    memory: dict[str, dict[str, Any]] = {}
    if db is not None and not db.lock():
        raise T3Error(f"--store: '{db.path}' is in use by another sweep")
    try:
        try:
            done = db.done(retry_errors) if db is not None else set()
        except Exception:
            if db is not None:  # refused before anything was written: no lock file left behind
                db.unlock(discard=True)
            raise
        todo = [(i, sweep.points[i].point) for k, i in first.items() if k not in done]
        st.skipped = st.total - len(todo)
        check_executor(executor, workers, scheduler)
        if todo:
            kw = {"processes": dask_processes} if executor == "dask" else {}
            ex = make_executor(executor, workers, scheduler, **kw)
        else:  # nothing to compute: no pool, no cluster
            ex = InProcess()
        bs = batch_size or _batch_size(len(todo), ex.workers)
        batches = [todo[j : j + bs] for j in range(0, len(todo), bs)]
        buf: list[dict[str, Any]] = []
        last_flush = time.monotonic()
        t0 = time.perf_counter()

        parts = 0

        def flush() -> None:
            nonlocal last_flush, parts
            if db is None:
                memory.update((r["key"], r) for r in buf)
            elif buf:
                db.append(buf)
                parts += 1
                if parts % compact_every == 0:  # keep the journal short on long sweeps
                    db.compact()
            buf.clear()
            last_flush = time.monotonic()

        try:
            with deferred_interrupt(), progress_bar(disable=not progress) as bar:
                task = bar.add_task(
                    description or sweep.name, total=st.total, completed=st.skipped, errors=""
                )
                outcomes: dict[str, int] = {}
                try:
                    for results in ex.map_unordered(batches):
                        for res in results:
                            i = res["i"]
                            k = sweep.keys[i]
                            buf.append(make_row(i, k, sweep.inputs[i], res, st.run_id, prov))
                            st.computed += 1
                            if res["status"] != "ok":
                                st.errors += 1
                                what = classify(i, res["error"]) if classify else "failed"
                                outcomes[what] = outcomes.get(what, 0) + 1
                                text = ", ".join(f"{n} {w}" for w, n in outcomes.items())
                                bar.update(task, errors=f"[red]{text}")
                        bar.advance(task, len(results))
                        if len(buf) >= flush_rows or time.monotonic() - last_flush >= flush_s:
                            flush()
                finally:
                    ex.close()
        except KeyboardInterrupt:
            flush()
            if db is not None:
                db.compact(reindex=first)
            raise SweepInterrupted(
                f"interrupted: {st.skipped + st.computed} of {st.total} points stored"
                + (f" in '{db.path}'; rerun the same command to resume" if db is not None else "")
            ) from None
        flush()
        st.wall_s = time.perf_counter() - t0
        rows: list[dict[str, Any]] = []
        table: pa.Table | None = None
        if db is not None:
            table = db.compact(reindex=first)
            if table.num_rows:  # the rows of this grid's points (a store may hold other sweeps')
                keep = [k in first for k in table.column("key").to_pylist()]
                table = table.filter(pa.array(keep, pa.bool_()))
        else:  # one row per key (each point ran once), in dedupe's order: by point, then key
            rows = sorted(memory.values(), key=lambda r: (r["point"], r["key"]))
    finally:
        if db is not None:
            db.unlock()
    if table is None:
        bad = [(r["point"], r["error"]) for r in rows if r["status"] != "ok"]
    elif table.num_rows:
        cols = [table.column(c).to_pylist() for c in ("status", "point", "error")]
        bad = [(p, e) for s, p, e in zip(*cols, strict=True) if s != "ok"]
    else:
        bad = []
    st.errors = len(bad)
    st.error_examples = [f"point {p} ({describe_point(sweep, int(p))}): {e}" for p, e in bad[:5]]
    return rows, table, st


def describe_point(sweep: Sweep, index: int) -> str:
    """The values a point sets, for messages: its grid values, else its identity (model, TP, ...)."""
    pt = sweep.points[index]
    vals = pt.varied or {k: pt.point[k] for k in IDENTITY if pt.point.get(k) is not None}
    return ", ".join(f"{k}={v!r}" for k, v in vals.items())


def as_sweep(points: Sequence[dict[str, Any]], name: str = "points", force: bool = False) -> Sweep:
    """Validate a list of run_point dicts (as built by reproduction/FiCCO code) into a Sweep
    (``force``: skip the size guard)."""
    pts = []
    allowed = {*IDENTITY, "hw_overrides", "options"}
    for i, p in enumerate(points):
        unknown = sorted(set(p) - allowed)
        if unknown:
            raise ConfigError(
                f"{name}: point {i}: unknown key '{unknown[0]}' (expected {', '.join(sorted(allowed))})"
            )
        values = {k: p[k] for k in IDENTITY if k in p}
        values.update({f"hardware.{k}": v for k, v in (p.get("hw_overrides") or {}).items()})
        opts = dict(p.get("options") or {})
        values.update({f"options.params.{k}": v for k, v in opts.pop("params", {}).items()})
        values.update({f"options.{k}": v for k, v in opts.items()})
        check_values(values, f"{name}: point {i}: ")
        pts.append(build_point(i, values))
    keys, inputs = validate_points(pts, name, force)
    return Sweep(name, [], pts, keys, inputs)


def run_sweep(
    points: Sequence[dict[str, Any]] | Sweep, *, executor: str = "local", workers: int | None = None,
    scheduler: str | None = None, store: str | Path | None = None, progress: bool = True, **kw: Any,
) -> pd.DataFrame:  # fmt: skip
    """Run points (run_point dicts, or a loaded spec) through the sweep runner; one row per distinct
    point in input order, with every input parameter and every output figure as columns."""
    sweep = points if isinstance(points, Sweep) else as_sweep(points)
    df, _ = execute(
        sweep, executor=executor, workers=workers, scheduler=scheduler, store=store, progress=progress, **kw
    )
    return df


def run_points(
    points: Sequence[dict[str, Any]], *, executor: str = "local", workers: int | None = None,
    scheduler: str | None = None, store: str | Path | None = None, progress: bool = True, **kw: Any,
) -> list[dict[str, Any]]:  # fmt: skip
    """``[run_point(p) for p in points]`` through the sweep runner (any executor, optional resumable
    store); raises :class:`SweepFailed` if a point failed."""
    sweep = as_sweep(points)
    df, _ = execute(
        sweep, executor=executor, workers=workers, scheduler=scheduler, store=store, progress=progress, **kw
    )
    recs = df[RECORD_COLUMN] if RECORD_COLUMN in df else [None] * len(df)
    by_key = dict(zip(df["key"], zip(df["status"], df["error"], recs, strict=True), strict=True))
    out = []
    for pt, k in zip(sweep.points, sweep.keys, strict=True):
        status, error, rec = by_key[k]
        if status != "ok":
            raise SweepFailed(f"point {pt.index}: {error}")
        out.append(json.loads(rec))
    return out
