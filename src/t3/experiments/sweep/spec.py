"""Sweep specifications: a TOML file naming base values and a parameter grid, expanded to points.

A spec has three parts (see ``docs/sweeps.md``)::

    name = "link-bandwidth"                      # optional
    [base]                                       # one value per parameter (defaults of ``t3 run``)
    model = "t-nlg"
    hardware = "paper-80cu"
    "hardware.link.latency_s" = 1e-6             # any hardware field, by dotted path
    [grid]                                       # one list per parameter; cartesian product
    config = ["sequential", "concurrent"]
    "hardware.link.bandwidth_Bps" = [5e10, 1e11]
    [[zip]]                                      # lists of equal length that vary together (one axis)
    model = ["t-nlg", "gpt-3"]
    tp = [8, 16]

Parameters are addressed by dotted path: the workload (``model``, ``tp``, ``sublayer``, ``tokens``), the
schedule (``config``, ``options.<RunOptions field>``, ``options.params.<name>`` for configuration-specific
parameters) and the hardware (``hardware`` = preset name or TOML file, ``hardware.<section>.<field>`` =
override). Every point is resolved (workload shapes, hardware validation, options types) before any
simulation; the first bad value raises :class:`t3.errors.ConfigError` naming its key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from t3 import size
from t3.errors import ConfigError, T3Error, TooLargeError

WORKLOAD_KEYS = ("model", "tp", "sublayer", "tokens")
TOP_KEYS = ("model", "tp", "sublayer", "config", "hardware", "tokens")
DEFAULTS: dict[str, Any] = {
    "model": "t-nlg",
    "tp": 8,
    "sublayer": "fc2",
    "config": "sequential",
    "hardware": "paper-80cu",
    "tokens": None,
}
_TOP_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "tp": (int,),
    "sublayer": (str,),
    "config": (str,),
    "hardware": (str,),
    "tokens": (int, type(None)),
}


class SpecFile(BaseModel):
    """The TOML schema; unknown top-level keys are errors."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""
    description: str = ""
    base: dict[str, Any] = {}
    grid: dict[str, Any] = {}
    zip: list[dict[str, Any]] = []


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"hardware": {"link": {"bandwidth_Bps": v}}}`` -> ``{"hardware.link.bandwidth_Bps": v}``.

    Quoted dotted keys and nested tables are equivalent. A configuration parameter
    (``options.params.<name>``) keeps a table value whole.
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and not key.startswith("options.params."):
            out.update(_flatten(v, f"{key}."))
        else:
            out[key] = v
    return out


@lru_cache(maxsize=1)
def _run_options_types() -> dict[str, Any]:
    from t3.schedules import RunOptions

    hints = typing.get_type_hints(RunOptions)
    return {f.name: hints[f.name] for f in dataclasses.fields(RunOptions)}


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def check_key(key: str) -> None:
    """Reject a parameter path that no point could use (hardware paths are checked on resolution)."""
    if key in TOP_KEYS:
        return
    head, _, rest = key.partition(".")
    if head == "hardware" and rest:
        return
    if head == "options" and rest:
        field, _, sub = rest.partition(".")
        fields = _run_options_types()
        if field == "params" and sub:
            return
        if field in fields and field != "params" and not sub:
            return
        raise ConfigError(
            f"{key}: unknown option (RunOptions fields: {', '.join(f for f in fields if f != 'params')}, "
            "or options.params.<name>)"
        )
    raise ConfigError(
        f"{key}: unknown parameter (expected {', '.join(TOP_KEYS)}, hardware.<section>.<field>, "
        "options.<field> or options.params.<name>)"
    )


def check_values(values: dict[str, Any], prefix: str) -> None:
    """:func:`check_key` and :func:`check_value` for every item; errors are prefixed with ``prefix``."""
    for k, v in values.items():
        try:
            check_key(k)
            check_value(k, v)
        except ConfigError as err:
            raise ConfigError(f"{prefix}{err}") from None


def check_value(key: str, value: Any) -> None:
    if key in _TOP_TYPES:
        if not isinstance(value, _TOP_TYPES[key]) or isinstance(value, bool):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in _TOP_TYPES[key])
            raise ConfigError(f"{key}: expected {want}, got {value!r}")
        return
    head, _, rest = key.partition(".")
    if head == "options" and not rest.startswith("params."):
        hint = _run_options_types()[rest]
        if not _type_ok(value, hint):
            raise ConfigError(f"{key}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


@dataclass(frozen=True)
class Point:
    """One grid point: its position, the parameters it sets (grid values) and its ``run_point`` dict."""

    index: int
    varied: dict[str, Any]  # the grid values of this point (path -> value), in axis order
    point: dict[str, Any]  # the t3.experiments.parallel.run_point contract


def build_point(index: int, values: dict[str, Any], varied: dict[str, Any] | None = None) -> Point:
    """Turn a flat ``{path: value}`` mapping into a run_point dict (no validation beyond the key paths)."""
    p: dict[str, Any] = dict(DEFAULTS)
    hw: dict[str, Any] = {}
    opts: dict[str, Any] = {}
    for key, v in values.items():
        if key in TOP_KEYS:
            p[key] = v
        elif key.startswith("hardware."):
            hw[key[len("hardware.") :]] = v
        elif key.startswith("options.params."):
            opts.setdefault("params", {})[key[len("options.params.") :]] = v
        elif key.startswith("options."):
            name = key[len("options.") :]
            if _run_options_types().get(name) is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)  # jitter = 1 and 1.0 are one configuration (one key)
            opts[name] = v
    p["hw_overrides"] = hw
    p["options"] = opts
    return Point(index, dict(values if varied is None else varied), p)


@dataclass
class Sweep:
    """An expanded, validated sweep: points in grid order, each with its content key."""

    name: str
    axes: list[list[str]]  # each axis: the paths that vary together
    points: list[Point]
    keys: list[str]  # content hash per point (see point_key)
    inputs: list[dict[str, Any]]  # resolved input columns per point (see resolved_inputs)

    def __len__(self) -> int:
        return len(self.points)


def expand(base: dict[str, Any], grid: dict[str, list[Any]], zips: list[dict[str, list[Any]]]) -> list[Point]:
    """Cartesian product over grid keys (spec order), then zip groups; the last axis varies fastest."""
    axes: list[tuple[list[str], list[tuple[Any, ...]]]] = []
    for k, vals in grid.items():
        axes.append(([k], [(v,) for v in vals]))
    for z in zips:
        ks = list(z)
        axes.append((ks, list(zip(*(z[k] for k in ks), strict=True))))
    points = []
    for i, combo in enumerate(itertools.product(*(vals for _, vals in axes))):
        varied: dict[str, Any] = {}
        for (ks, _), tup in zip(axes, combo, strict=True):
            varied.update(dict(zip(ks, tup, strict=True)))
        points.append(build_point(i, {**base, **varied}, varied))
    return points


def _check_grid(section: str, grid: dict[str, Any], seen: set[str]) -> dict[str, list[Any]]:
    out = _flatten(grid)
    for k, v in out.items():
        where = f"{section}.{k}" if section else k
        if k in seen:
            raise ConfigError(f"{where}: parameter appears twice in the grid")
        seen.add(k)
        try:
            check_key(k)
        except ConfigError as err:
            raise ConfigError(f"{section}.{err}") from None
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{where}: expected a non-empty list of values, got {v!r}")
        for x in v:
            try:
                check_value(k, x)
            except ConfigError as err:
                raise ConfigError(f"{section}.{err}") from None
    return out


def load_spec(path: str | Path, force: bool = False) -> Sweep:
    """Read, expand and fully validate a sweep spec file (``force``: skip the size guard)."""
    from t3.config.toml_file import read_toml

    p = Path(path)
    data = read_toml(p, "sweep spec")
    if not data:  # an empty file (or comments only) would run t3 run's defaults once, unasked
        raise ConfigError(
            f"sweep spec '{p}': the file holds no keys: give [base] values and a [grid] of lists to sweep "
            "(docs/sweeps.md)"
        )
    return spec_from_dict(data, origin=str(p), root=p.parent, force=force)


def grid_size(grid: dict[str, list[Any]], zips: list[dict[str, list[Any]]]) -> int:
    """Points of a grid (product of the axis lengths), without expanding it."""
    n = 1
    for v in grid.values():
        n *= len(v)
    for z in zips:
        n *= len(next(iter(z.values()))) if z else 1
    return n


def spec_from_dict(
    data: dict[str, Any], origin: str = "<spec>", root: Path | None = None, force: bool = False
) -> Sweep:
    try:
        spec = SpecFile.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        raise ConfigError(f"sweep spec '{origin}': {loc}: {msg}") from None
    try:
        base = _flatten(spec.base)
        check_values(base, "base.")
        seen: set[str] = set()
        grid = _check_grid("grid", spec.grid, seen)
        zips = []
        for i, z in enumerate(spec.zip):
            if not z:
                raise ConfigError(
                    f"zip[{i}]: an empty table; give its keys lists of equal length, or remove it"
                )
            zg = _check_grid(f"zip[{i}]", z, seen)
            lengths = {len(v) for v in zg.values()}
            if len(lengths) > 1:
                raise ConfigError(f"zip[{i}]: lists must have equal lengths, got {sorted(lengths)}")
            zips.append(zg)
        npts = grid_size(grid, zips)
        if npts > size.LIMIT_POINTS and not force:
            raise TooLargeError(
                f"size: the grid has {npts} points, above the limit of {size.LIMIT_POINTS}; "
                "split the sweep, or --force to run it anyway"
            )
        if root is not None:
            base = _rebase_files(base, root)
            grid = {k: [_rebase_file(k, x, root) for x in v] for k, v in grid.items()}
            zips = [{k: [_rebase_file(k, x, root) for x in v] for k, v in z.items()} for z in zips]
        points = expand(base, grid, zips)
    except ConfigError as err:
        raise ConfigError(f"sweep spec '{origin}': {err}") from None
    except TooLargeError as err:
        raise TooLargeError(f"sweep spec '{origin}': {err}") from None
    axes = [[k] for k in grid] + [list(z) for z in zips]
    keys, inputs = validate_points(points, origin, force)
    return Sweep(spec.name or Path(origin).stem, axes, points, keys, inputs)


def _rebase_file(key: str, v: Any, root: Path) -> Any:
    """Model / hardware TOML files (and model config.json files) named in a spec are relative to the
    spec's directory."""
    if (
        key in ("model", "hardware")
        and isinstance(v, str)
        and (v.endswith(".toml") or (key == "model" and v.endswith(".json")))
    ):
        p = Path(v)
        return str(p if p.is_absolute() else (root / p).resolve())
    return v


def _rebase_files(d: dict[str, Any], root: Path) -> dict[str, Any]:
    return {k: _rebase_file(k, v, root) for k, v in d.items()}


# ---- resolution and content keys -------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    op: Any
    hw: Any
    op_dict: dict[str, Any]
    hw_dict: dict[str, Any]
    hw_columns: dict[str, Any]
    hw_sha256: str
    op_json: str  # canonical_json(op_dict), computed once per operator (the content key's bulk)
    hw_json: str  # canonical_json(hw_dict), computed once per hardware


def _stamp(name: str) -> tuple[int, int] | None:
    """A file's (mtime, size), so cached resolutions of model / hardware files notice edits."""
    try:
        st = os.stat(name)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=256)
def _hardware_base(name: str, stamp: tuple[int, int] | None):
    from t3.config.hardware import load_hardware

    return load_hardware(name)


@lru_cache(maxsize=4096)
def _hardware(
    name: str, stamp: tuple[int, int] | None, overrides: str
) -> tuple[Any, dict[str, Any], dict[str, Any], str, str]:
    from t3.provenance import hardware_hash

    hw = _hardware_base(name, stamp)
    ov = json.loads(overrides)
    if ov:
        hw = hw.with_overrides(ov)
    hwd = hw.model_dump(mode="json")
    cols = _flatten({k: v for k, v in hwd.items() if k != "description"})
    return hw, hwd, {f"hardware.{k}": v for k, v in cols.items()}, hardware_hash(hw), canonical_json(hwd)


@lru_cache(maxsize=4096)
def _operator(
    model: str, stamp: tuple[int, int] | None, sublayer: str, tp: int, tokens: int | None
) -> tuple[Any, dict[str, Any], str]:
    from t3.workload import get_model, sublayer_operator

    op = sublayer_operator(get_model(model), sublayer, tp, tokens)
    d = dataclasses.asdict(op)
    if d["gemm"].get("out_dtype") is None:  # (the library's default output: keys as before the field)
        del d["gemm"]["out_dtype"]
    return op, d, canonical_json(d)


def _resolve(point: dict[str, Any]) -> tuple[_Resolved, Any]:
    """Same checks, in the same order, as :func:`t3.api.resolve` (config, hardware, workload), cached;
    then the options and the configuration's parameters (:meth:`ConfigSpec.check`)."""
    from t3.config.hardware import tp_refusal
    from t3.schedules import RunOptions, get_config

    p = point
    spec = get_config(p["config"])
    name, model = p["hardware"], p["model"]
    hw, hwd, cols, sha, hwj = _hardware(
        name, _stamp(name), json.dumps(p.get("hw_overrides") or {}, sort_keys=True)
    )
    op, opd, opj = _operator(model, _stamp(model), p["sublayer"], p["tp"], p["tokens"])
    if why := tp_refusal(hw, op.tp):
        raise ConfigError(why)
    opts = RunOptions(**(p.get("options") or {}))
    spec.check(opts)
    if opts.functional:  # (the run would refuse it on every such point, after the dry run passed)
        from t3.schedules.t3 import require_functional

        require_functional(spec.name)
    return _Resolved(op, hw, opd, hwd, cols, sha, opj, hwj), opts


def resolve_point(point: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(Operator, Hardware, RunOptions) of a run_point dict; raises T3Error naming the bad field."""
    r, opts = _resolve(point)
    return r.op, r.hw, opts


def run_resolved(point: dict[str, Any]) -> dict[str, Any]:
    """``t3.experiments.parallel.run_point(point)`` through ``t3.api.run`` with the validated hardware
    cached per process (a sweep resolves the same few presets thousands of times); the same record."""
    from t3.api import run

    r, opts = _resolve(point)
    p = point
    # the size guard ran when the sweep was validated (validate_points), with the sweep's --force
    return run(p["model"], p["tp"], p["sublayer"], p["config"], r.hw, p["tokens"], None, opts, force=True)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def _options_dict(opts: Any) -> dict[str, Any]:
    d = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}
    d["params"] = dict(d["params"])
    return d


def point_key(point: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the point's resolved configuration, what the simulation depends
    on and the version: ``{config, hardware, operator, options, t3_version}`` (the store's primary
    key). The operator's and hardware's canonical JSON are serialised once per process (a sweep's points
    share a few of them) and joined as :func:`canonical_json` would write the whole document."""
    import t3

    r, opts = _resolve(point)
    parts = {
        "t3_version": canonical_json(t3.__version__),
        "config": canonical_json(point["config"]),
        "operator": r.op_json,
        "hardware": r.hw_json,
        "options": canonical_json(_options_dict(opts)),
    }
    doc = "{" + ",".join(f"{canonical_json(k)}:{parts[k]}" for k in sorted(parts)) + "}"
    return hashlib.sha256(doc.encode()).hexdigest()


def resolved_inputs(point: dict[str, Any]) -> dict[str, Any]:
    """Input columns of a point's row: workload, schedule, options and every hardware field, flattened."""
    r, opts = _resolve(point)
    op = r.op
    row: dict[str, Any] = {
        "model": op.model,
        "tp": op.tp,
        "sublayer": op.sublayer,
        "config": point["config"],
        "hardware": point["hardware"],
        "tokens": op.tokens,
    }
    o = _options_dict(opts)
    params = o.pop("params")
    row.update({f"options.{k}": v for k, v in o.items()})
    row.update({f"options.params.{k}": v for k, v in params.items()})
    row.update(r.hw_columns)
    row["provenance.hardware_sha256"] = r.hw_sha256
    return row


def point_work(point: dict[str, Any]) -> size.Work:
    """Estimated ops of one point (:mod:`t3.size`)."""
    r, opts = _resolve(point)
    return size.run_work(r.op, r.hw, point["config"], opts.symmetric, opts.functional)


def validate_points(
    points: list[Point], origin: str = "<points>", force: bool = False
) -> tuple[list[str], list[dict[str, Any]]]:
    """Resolve every point before anything runs, and apply the size guard to each point and to their
    sum (``force`` skips it); return content keys and input columns."""
    for cache in (_hardware_base, _hardware, _operator):  # files may have changed since the last sweep
        cache.cache_clear()
    keys, inputs = [], []
    total = size.Work(0.0, "")
    seen: set[str] = set()
    for pt in points:
        try:
            k = point_key(pt.point)
            keys.append(k)
            inputs.append(resolved_inputs(pt.point))
            if k not in seen:
                seen.add(k)
                if not force:  # the estimate is only the guard's: forced, nothing to estimate
                    w = point_work(pt.point)
                    size.check(w)
                    total += w  # simulated ops and planned waves both count (Work.cost)
        except TooLargeError as err:
            raise TooLargeError(f"sweep '{origin}': point {pt.index} ({_varied(pt)}): {err}") from None
        except T3Error as err:
            raise ConfigError(f"sweep '{origin}': point {pt.index} ({_varied(pt)}): {err}") from None
        except TypeError as err:  # RunOptions(**bad)
            raise ConfigError(f"sweep '{origin}': point {pt.index}: options: {err}") from None
    # `t3 run --comm-cus` is refused where the configuration is not `concurrent`; a sweep may give it to
    # a grid of configurations, but to none that uses it is a value without effect. Of the shipped
    # configurations (t3.schedules) only `concurrent` reads it; one registered elsewhere may read any option
    from t3.schedules import get_config

    given = [pt for pt in points if "comm_cus" in (pt.point.get("options") or {})]
    readers = [
        pt for pt in given
        if pt.point["config"] == "concurrent"
        or not get_config(pt.point["config"]).run.__module__.startswith("t3.schedules")
    ]  # fmt: skip
    if given and not readers:
        raise ConfigError(
            f"sweep '{origin}': options.comm_cus: only the 'concurrent' configuration uses it, and no point"
            f" that gives it runs it (configurations: {', '.join(sorted({pt.point['config'] for pt in given}))})"
        )
    size.check(
        size.Work(total.ops, f"{len(seen)} distinct points of {origin}", total.planned, total.mapped),
        force=force,
        limit=size.LIMIT_TOTAL_OPS,
    )
    return keys, inputs


def _varied(pt: Point) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in pt.varied.items())
