"""A resumable, crash-safe Parquet results store: one row per point, keyed by its content hash.

Layout for ``--store results.parquet``:

- ``results.parquet``: the compacted store, one Parquet file (``pandas.read_parquet`` loads it);
- ``results.parquet.parts/``: the journal, part files of finished rows appended during a sweep;
- ``results.parquet.lock``: an advisory lock held by the one process that writes the store.

Every file is written to a temporary name in its final directory, flushed to disk and renamed into
place (``os.replace`` is atomic), so a reader or a killed writer never sees half a file. Compaction
merges the compacted file and the journal, de-duplicates by key, writes a new compacted file and only
then deletes the merged part files; a kill between the two leaves duplicates that every read removes.
De-duplication keeps, for each key, the first ``status == "ok"`` row, or else the latest error row.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from t3.errors import ConfigError

try:  # POSIX advisory locks; released by the kernel when the holder dies
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

META_COLUMNS = ("point", "key", "status", "error")
# how and when a row was computed (excluded when comparing stores): the run, the worker, the time it
# took, when it finished, and the t3 version, git commit and command line of the run
TIMING_COLUMNS = (
    "run_id", "worker", "elapsed_s", "finished_at",
    "provenance.t3_version", "provenance.git_commit", "provenance.command",
)  # fmt: skip
INPUT_HEAD = ("model", "tp", "sublayer", "config", "hardware", "tokens")
OUTPUT_HEAD = ("phase", "time_s", "dram_bytes_total", "link_bytes")
RECORD_COLUMN = "record_json"


def column_rank(name: str) -> tuple[int, int, str]:
    """Canonical column order: meta, inputs, outputs, the raw record, timing (independent of history)."""
    if name in META_COLUMNS:
        return (0, META_COLUMNS.index(name), "")
    if name in INPUT_HEAD:
        return (1, INPUT_HEAD.index(name), "")
    if name.startswith("options."):
        return (2, 0, name)
    if name.startswith("hardware."):
        return (3, 0, name)
    if name in TIMING_COLUMNS:
        return (9, TIMING_COLUMNS.index(name), "")
    if name.startswith("provenance."):  # provenance.hardware_sha256: the point's resolved hardware
        return (10, 0, name)
    if name == RECORD_COLUMN:
        return (8, 0, "")
    if name in OUTPUT_HEAD:
        return (4, OUTPUT_HEAD.index(name), "")
    return (5, 0, name)


def _json_text(vals: list[Any]) -> pa.Array:
    return pa.array([None if v is None else json.dumps(v, sort_keys=True) for v in vals], pa.string())


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """An Arrow table of rows (union of their keys, canonical order); nested values, and values of a
    column mixing incompatible types, become JSON text."""
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    names = sorted(cols, key=column_rank)
    arrays = []
    for c in names:
        vals = [r.get(c) for r in rows]
        try:
            arr = pa.array(vals)
            if pa.types.is_nested(arr.type):
                arr = _json_text(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            arr = _json_text(vals)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=names)


def _write_atomic(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".tmp-{path.name}-{uuid.uuid4().hex[:8]}")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _concat(tables: list[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return pa.table({c: pa.array([], pa.string()) for c in META_COLUMNS})
    try:
        t = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column typed differently in two files: re-infer
        return rows_to_table([r for t in tables for r in t.to_pylist()])
    return t.select(sorted(t.column_names, key=column_rank))


def dedupe(table: pa.Table) -> pa.Table:
    """One row per key: the first ok row, else the last row; sorted by (point, key)."""
    if table.num_rows == 0:
        return table
    keys = table.column("key").to_pylist()
    ok = [s == "ok" for s in table.column("status").to_pylist()]
    chosen: dict[str, int] = {}
    for i, k in enumerate(keys):
        j = chosen.get(k)
        if j is None or not ok[j]:  # first row, or replace an error row by any later row
            chosen[k] = i
    points = table.column("point").to_pylist()
    order = sorted(chosen.values(), key=lambda i: (-1 if points[i] is None else int(points[i]), keys[i]))
    return table.take(pa.array(order, pa.int64()))


def _is_text(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


def _read_file(f: Path) -> tuple[pa.Table | None, str]:
    """(table, "") for a readable store file; (None, why) for one that is no Parquet file;
    (table, why) for a Parquet file without the store's columns. A missing file raises
    ``FileNotFoundError`` (a compaction raced the reader: read again)."""
    if f.is_dir():
        return None, "a directory, not a Parquet file"
    try:
        t = pq.read_table(f)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as err:
        text = str(err).replace(f"Could not open Parquet input source '{f}': ", "")
        return None, text.split(". ")[0].strip().rstrip(".") or type(err).__name__
    if not {"key", "status", "point"} <= set(t.column_names):
        return t, "no key/status/point columns"
    kinds = {"key": _is_text, "status": _is_text, "point": pa.types.is_integer}
    for col, ok in kinds.items():
        typ = t.schema.field(col).type
        if not (ok(typ) or (col == "point" and pa.types.is_null(typ))):
            return t, f"column '{col}' holds {typ}, not {'integers' if col == 'point' else 'text'}"
    return t, ""


def part_rows(part: Path) -> int | None:
    """Rows a journal part holds, from its name (``...-n<rows>.parquet``; None for older names)."""
    tail = part.stem.rsplit("-", 1)[-1]
    return int(tail[1:]) if tail.startswith("n") and tail[1:].isdigit() else None


def _damaged_parts(damaged: list[tuple[Path, str]]) -> str:
    """How to recover from damaged journal parts: drop them (their points are computed again by the
    next run, which never reads a part it did not write completely) and resume."""
    rows = [part_rows(f) for f, _ in damaged]
    one = len(damaged) == 1
    if all(r is not None for r in rows):
        n = sum(r for r in rows if r is not None)
        held = f"{'its' if one else 'their'} {n} point{'s' if n != 1 else ''} {'is' if n == 1 else 'are'}"
    else:
        held = f"the points {'it' if one else 'they'} held are"
    first, why = damaged[0]
    what = (
        f"journal part '{first}' is damaged ({why})"
        if one
        else f"{len(damaged)} journal parts are damaged (the first, '{first}': {why})"
    )
    names = " ".join(f"'{f}'" for f, _ in damaged)
    rm = "rm -r" if any(f.is_dir() for f, _ in damaged) else "rm"
    return (
        f"store: {what}: drop the part{'' if one else 's'} ({rm} {names}; {held} run again) "
        "and resume with the same command"
    )


class Store:
    """The results store at ``path`` (a ``.parquet`` file, its journal directory and its lock file)."""

    def __init__(self, path: str | Path, option: str = "--store") -> None:
        self.path = Path(path)
        try:  # (Parquet's writer takes UTF-8 paths only: refused before the lock and journal exist)
            str(self.path).encode("utf-8")
        except UnicodeEncodeError:
            shown = str(self.path).encode("utf-8", "backslashreplace").decode("utf-8")
            raise ConfigError(f"{option}: '{shown}' is not a valid UTF-8 path; choose another name") from None
        if self.path.suffix != ".parquet":
            raise ConfigError(f"{option}: expected a path ending in .parquet, got '{self.path}'")
        if self.path.exists() and not self.path.is_file():
            raise ConfigError(f"{option}: '{self.path}' exists and is not a file")
        self.parts = self.path.with_name(self.path.name + ".parts")
        if self.parts.exists() and not self.parts.is_dir():
            raise ConfigError(
                f"{option}: its journal '{self.parts}' exists and is not a directory; move it aside "
                f"(mv '{self.parts}' '{self.parts}.old') and run again"
            )
        self.lockfile = self.path.with_name(self.path.name + ".lock")
        self._lock_fd: int | None = None
        self._created_lock = False
        self._seq = 0
        self._tag = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"

    # ---- locking -----------------------------------------------------------------------------
    def lock(self, wait: bool = False) -> bool:
        """Take the writer lock; False if another live process holds it (and ``wait`` is False)."""
        if fcntl is None or self._lock_fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.lockfile.exists()
        fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        self._created_lock = created
        return True

    def unlock(self, discard: bool = False) -> None:
        """Release the writer lock; ``discard``: also remove the lock file if this lock created it (a run
        refused before it wrote anything leaves nothing beside the path it refused)."""
        if self._lock_fd is not None:
            if discard and self._created_lock:
                self.lockfile.unlink(missing_ok=True)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Store:
        if not self.lock():
            raise ConfigError(f"--store: '{self.path}' is in use by another sweep")
        return self

    def __exit__(self, *exc: object) -> None:
        self.unlock()

    # ---- reading -----------------------------------------------------------------------------
    def _part_files(self) -> list[Path]:
        if not self.parts.is_dir():
            return []
        return sorted(
            p for p in self.parts.iterdir() if p.name.startswith("part-") and p.suffix == ".parquet"
        )

    def _read(self) -> tuple[pa.Table, list[Path]]:
        for _ in range(10):  # a reader without the lock may race a compaction deleting parts: reread
            try:
                return self._read_once()
            except FileNotFoundError:
                continue
        return self._read_once()

    def _read_once(self) -> tuple[pa.Table, list[Path]]:
        tables = []
        parts = self._part_files()
        damaged: list[tuple[Path, str]] = []
        if self.path.is_file():
            t, why = _read_file(self.path)
            if t is None:
                raise ConfigError(
                    f"store: '{self.path}' is not a readable Parquet file ({why}); if it is a damaged "
                    f"sweep store, move it aside (mv '{self.path}' '{self.path}.damaged'; the points it "
                    "held are run again) and resume with the same command"
                )
            if why:
                raise ConfigError(f"store: '{self.path}' is not a t3 sweep store ({why})")
            tables.append(t)
        for f in parts:
            t, why = _read_file(f)
            if t is None or why:
                damaged.append((f, why))
            else:
                tables.append(t)
        if damaged:
            raise ConfigError(_damaged_parts(damaged))
        return _concat(tables), parts

    def table(self) -> pa.Table:
        """Every stored row, de-duplicated, in (point, key) order (compacted file + journal)."""
        return dedupe(self._read()[0])

    def done(self, retry_errors: bool = True) -> set[str]:
        """Keys that need no computation: ok rows (and error rows unless ``retry_errors``)."""
        t = self._read()[0]
        if t.num_rows == 0:
            return set()
        keys = t.column("key").to_pylist()
        status = t.column("status").to_pylist()
        return {k for k, s in zip(keys, status, strict=True) if s == "ok" or not retry_errors}

    # ---- writing -----------------------------------------------------------------------------
    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        """Journal finished rows (one atomic part file)."""
        rows = list(rows)
        if not rows:
            return
        self.parts.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        name = f"part-{time.time_ns():020d}-{self._tag}-{self._seq:06d}-n{len(rows)}.parquet"
        _write_atomic(rows_to_table(rows), self.parts / name)

    def compact(self, reindex: dict[str, int] | None = None) -> pa.Table:
        """Merge journal into the compacted file; ``reindex`` re-stamps ``point`` for keys of the
        current grid (so a store's content does not depend on which earlier sweeps filled it)."""
        t, parts = self._read()
        if not parts and self.path.is_file() and not reindex:
            return dedupe(t)
        t = dedupe(t)
        if reindex and t.num_rows:
            keys = t.column("key").to_pylist()
            old = t.column("point").to_pylist()
            new = [reindex.get(k, p) for k, p in zip(keys, old, strict=True)]
            t = t.set_column(t.column_names.index("point"), "point", pa.array(new, pa.int64()))
            t = dedupe(t)
        _write_atomic(t, self.path)
        for p in parts:
            p.unlink(missing_ok=True)
        stale = list(self.path.parent.glob(f".tmp-{self.path.name}-*"))
        stale += list(self.parts.glob(".tmp-*")) if self.parts.is_dir() else []
        for f in stale:  # left by a writer killed mid-write (we hold the lock)
            f.unlink(missing_ok=True)
        if self.parts.is_dir() and not any(self.parts.iterdir()):
            self.parts.rmdir()
        return t
