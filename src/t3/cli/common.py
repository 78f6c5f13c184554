"""Helpers shared by commands: ``--set key=value`` overrides, output paths checked before any work,
formatting with units, options every long command shares."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import typer

from t3.errors import ConfigError
from t3.size import LIMIT_OPS, LIMIT_TOTAL_OPS, PROMISE

FORCE_HELP = (
    f"run even if the estimated work is above the size limit ({LIMIT_OPS:.0e} simulated ops per "
    f"simulation, {LIMIT_TOTAL_OPS:.0e} per command: {PROMISE}; docs/architecture.md)"
)


def force_option() -> Any:
    return typer.Option(False, "--force", help=FORCE_HELP)


def parse_overrides(items: list[str] | None, what: str = "--set") -> dict[str, Any]:
    """``KEY=VALUE`` items to ``{KEY: value}``; a value is read as JSON (``1.5e11``, ``true``, ``"text"``),
    else kept as text (so ``ring`` is the string "ring"): the validators then refuse a wrong type."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"{what}: expected KEY=VALUE, got '{item}'")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k:
            raise ConfigError(f"{what}: empty key in '{item}'")
        if k in out:
            raise ConfigError(f"{what}: {k} given twice")
        try:
            val = json.loads(v)
        except json.JSONDecodeError:
            val = v
            try:  # inf, -inf, nan in any case: a number, but never a finite one
                val = float(v) if not math.isfinite(float(v)) else v
            except ValueError:
                pass
        if isinstance(val, float) and not math.isfinite(val):
            raise ConfigError(f"{what}: {k}: must be a finite number, got {v.strip()}")
        out[k] = val
    return out


def _writable(d: Path, option: str) -> None:
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(f"{option}: directory '{d}' is not writable")


def _make_folder(p: Path, option: str) -> None:
    """Creates folder ``p`` with its missing parents (every command's rule for output paths), after
    checking that nothing on the way is a file."""
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{option}: '{probe}' is a file, so '{p}' cannot be created")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{option}: cannot create directory '{p}': {err.strerror}") from None
    _writable(p, option)


def _json_object(p: Path) -> dict:
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _is_t3_trace(p: Path) -> bool:
    """A trace `t3 run --trace` wrote (:func:`t3.sim.trace.write_trace`), not any Chrome trace: a
    profiler's trace of a real run must never be replaced by a simulated one."""
    other = _json_object(p).get("otherData")
    return (
        isinstance(other, dict) and other.get("units") == "ts/dur in microseconds" and "provenance" in other
    )


def _is_parquet(p: Path) -> bool:
    try:
        with p.open("rb") as f:
            head = f.read(4)
            f.seek(-4, os.SEEK_END)
            return head == b"PAR1" and f.read(4) == b"PAR1"
    except OSError:
        return False


# the columns every Parquet file of `t3 trace import --parquet` has, first (t3.cli.trace._write_parquet)
TRACE_PARQUET_COLUMNS = ("kind", "relation", "label", "measured_s")


def _is_trace_parquet(p: Path) -> bool:
    """A Parquet file `t3 trace import --parquet` wrote (its columns), not any Parquet file: a sweep's
    results store or another tool's table must never be replaced by a trace's pairs."""
    if not _is_parquet(p):
        return False
    try:
        import pyarrow.parquet as pq

        return set(TRACE_PARQUET_COLUMNS) <= set(pq.read_schema(p).names)
    except Exception:  # noqa: BLE001 - an unreadable footer: not ours
        return False


def _is_preset(p: Path) -> bool:
    try:
        with p.open(encoding="utf-8") as f:
            return "fitted by `t3 calibrate" in f.readline()
    except (OSError, UnicodeDecodeError):
        return False


# The kinds of file a command writes, and how an earlier one is recognised: an existing file is replaced
# only when it is of the command's own kind (an earlier run's output), otherwise only with --overwrite.
OUTPUT_KINDS = {
    "parquet": ("a Parquet file", _is_parquet),
    "trace-parquet": ("a Parquet file of t3 trace import", _is_trace_parquet),
    "trace": ("a trace written by t3 run", _is_t3_trace),
    "reproduce-json": (
        "a JSON document of t3 reproduce t3",
        lambda p: {"provenance", "summary"} <= set(_json_object(p)),
    ),
    "preset": ("a preset written by t3 calibrate", _is_preset),
}
OUTPUT_RULE = "missing folders are created; an existing file is replaced only if it is this command's output"


def check_output_file(
    path: str | Path | None, option: str, kind: str, *, overwrite: bool = False, overwrite_flag: bool = True
) -> Path | None:
    """An output file, checked before any work, by one rule for every command: not a directory; its
    missing parent folders are created; an existing file is replaced only when it is of the command's
    own ``kind`` (:data:`OUTPUT_KINDS`: an earlier run's output) or with ``--overwrite``
    (``overwrite_flag=False`` where the command has none: the file must be moved aside). A path that
    exists and is not a regular file (a device, a pipe) is written in place and never read
    (:mod:`t3.files`)."""
    if path is None:
        if overwrite:  # (said, not ignored: it names what it would replace)
            raise ConfigError(f"--overwrite: it replaces the {option} file; no {option} was given")
        return None
    p = Path(path)
    if str(path) == "":
        raise ConfigError(f"{option}: an empty name; give a file name")
    if p.is_dir():
        raise ConfigError(f"{option}: '{p}' is a directory; give a file name")
    _make_folder(p.parent, option)
    if p.exists():
        if not os.access(p, os.W_OK):
            raise ConfigError(f"{option}: '{p}' exists and is not writable")
        if not p.is_file():
            return p  # a device or a pipe (/dev/stdout, a shell's >(...)): written in place, never read
        what, own = OUTPUT_KINDS[kind]
        if not overwrite and not own(p):
            how = (
                "pass --overwrite to replace it" if overwrite_flag else "move it aside or choose another name"
            )
            raise ConfigError(f"{option}: '{p}' exists and is not {what}; {how}")
    return p


def _is_png(p: Path) -> bool:
    try:
        with p.open("rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False


# The folders a command writes: the files it puts there, and the file (with its check) that says the folder
# holds an earlier output of the same command. Only those files are ever replaced; others are not touched.
OUTPUT_DIRS: dict[str, tuple[str, str | None, Any, tuple[str, ...]]] = {
    "reproduce-t3": (
        "t3 reproduce t3",
        "t3.json",
        OUTPUT_KINDS["reproduce-json"][1],
        ("t3.json", "report.md"),  # and the figures (_names)
    ),
    "reproduce-ficco": (
        "t3 reproduce ficco",
        "ficco.json",
        lambda p: {"provenance", "evaluation", "rules_shipped"} <= set(_json_object(p)),
        ("ficco.json", "report.md", "schedules.parquet"),  # and the figures (_names)
    ),
    "trace-project": (
        "t3 trace project",
        "projection.json",
        lambda p: {"trace", "window", "outputs"} <= set(_json_object(p)),
        ("projection.json", "projection.perfetto.json", "projection.png"),
    ),
    # no document beside the figures: each one it would replace must be a PNG image
    "validate-plot": ("t3 validate", None, _is_png, ()),  # validate-<category>.png: see _names
}


def _names(kind: str) -> tuple[str, ...]:
    """The files ``kind`` writes in its folder, the figures named where they are drawn."""
    if kind == "validate-plot":  # t3.validation.plots.write_plots
        from t3.validation.dataset import CATEGORIES

        return tuple(f"validate-{c}.png" for c in CATEGORIES)
    if kind == "reproduce-t3":
        from t3.experiments.reproduce_t3 import FIGURES

        return (*OUTPUT_DIRS[kind][3], *FIGURES.values())
    if kind == "reproduce-ficco":
        from t3.experiments.reproduce_ficco import FIGURES as FICCO_FIGURES

        return (*OUTPUT_DIRS[kind][3], *FICCO_FIGURES)
    return OUTPUT_DIRS[kind][3]


OUTPUT_DIR_RULE = (
    "created if missing; an earlier run's files in it are replaced, other files of the same names refused"
)


def check_output_dir(
    path: str | Path, option: str, kind: str | None = None, *, overwrite: bool = False,
    overwrite_flag: bool = True,
) -> Path:  # fmt: skip
    """An output directory, checked before any work, by the rule of :func:`check_output_file`: it is
    created now (with its parents) when missing; an existing file in its place or on its path, or a
    directory that cannot be created or written, is an error. In an existing directory the files the
    command writes (:data:`OUTPUT_DIRS`) are replaced only when the directory holds an earlier output of
    the same command (its document, recognised by content), or with ``--overwrite``; the directory's other
    files are never touched."""
    p = Path(path)
    if str(path) == "":
        raise ConfigError(f"{option}: empty path")
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{option}: '{p}' exists and is not a directory")
    _make_folder(p, option)
    if kind is None:
        return p
    what, marker, own, _ = OUTPUT_DIRS[kind]
    names = _names(kind)
    for name in names:
        f = p / name
        if f.is_dir():
            raise ConfigError(f"{option}: '{f}' is a directory where {what} writes a file; move it aside")
        if f.exists() and not f.is_file():
            raise ConfigError(f"{option}: '{f}' is not a regular file where {what} writes one; move it aside")
        if f.exists() and not os.access(f, os.W_OK):
            raise ConfigError(f"{option}: '{f}' exists and is not writable")
    earlier = marker is not None and (p / marker).is_file() and own(p / marker)
    for name in names:
        f = p / name
        if overwrite or not f.exists() or earlier or (marker is None and own(f)):
            continue
        how = "pass --overwrite to replace it" if overwrite_flag else "move it aside or choose another folder"
        why = f"the folder has no {marker} it wrote" if marker is not None else "not a PNG image"
        raise ConfigError(f"{option}: '{f}' exists and is not from an earlier {what} ({why}); {how}")
    return p


def check_store(path: str | Path | None, option: str = "--store") -> Path | None:
    """A results store to write or resume: a path ending in .parquet; an existing file there must be a
    Parquet store (see :func:`check_output_file`)."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix != ".parquet":
        raise ConfigError(f"{option}: expected a path ending in .parquet, got '{p}'")
    return check_output_file(p, option, "parquet", overwrite_flag=False)


def check_count(value: int | None, option: str, minimum: int = 1, maximum: int | None = None) -> None:
    if value is not None and value < minimum:
        raise ConfigError(f"{option}: must be >= {minimum}, got {value}")
    if value is not None and maximum is not None and value > maximum:
        raise ConfigError(f"{option}: must be <= {maximum}, got {value}")


def fmt_time(s: float) -> str:
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_bytes(b: float) -> str:
    if b >= 1e9:
        return f"{b / 1e9:.3f} GB"
    return f"{b / 1e6:.2f} MB"


def check_apart(
    files: dict[str, Path | str | None], folder: tuple[str, Path | str, str] | None = None
) -> None:
    """Output paths of one command that must not name the same file, checked before any work: each
    file option (``{option: path}``) apart from the others, and, with ``folder`` (its option, path and
    kind of :data:`OUTPUT_DIRS`), apart from the folder itself and from every file the command writes
    in it (`--json rt/report.md` with `--out rt` would be replaced by the report, or replace it)."""
    fopt, fpath, kind = folder if folder is not None else (None, None, None)
    d = Path(os.path.abspath(fpath)) if fpath is not None else None
    seen: dict[Path, str] = {}
    for opt, p in files.items():
        if p is None:
            continue
        r = Path(os.path.abspath(p))
        if r in seen:
            raise ConfigError(f"{opt}: '{p}' is also the {seen[r]} file; give each its own path")
        seen[r] = opt
        if d is not None:
            if r == d:
                raise ConfigError(f"{opt}: '{p}' is the {fopt} folder; give a file name")
            if r.parent == d and r.name in _names(kind):
                raise ConfigError(f"{opt}: '{p}' is a file {fopt} writes ({r.name}); give another path")
