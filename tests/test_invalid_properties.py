"""Property: any invalid value in any field of a hardware description, a model, the run options, the
arguments of ``t3.api.run`` or a sweep spec raises a ``T3Error`` whose message names the field, never
another exception and never a silent acceptance."""

from __future__ import annotations

import copy
import math
import os
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t3.config.hardware import Hardware, hardware_from_dict, load_hardware
from t3.errors import ConfigError, T3Error
from t3.schedules import RunOptions
from t3.workload.models import ModelSpec, _spec

SETTINGS = settings(
    max_examples=int(os.environ.get("T3_HYPOTHESIS_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

BASE = load_hardware("paper-80cu").model_dump()


def _leaves(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "matrix_flops_per_clk_per_cu":
            out += _leaves(v, f"{prefix}{k}.")
        elif k == "matrix_flops_per_clk_per_cu":
            out += [f"{prefix}{k}.{dt}" for dt in v]
        else:
            out.append(f"{prefix}{k}")
    return out


LEAVES = [p for p in _leaves(BASE) if p != "description"]

anything = st.one_of(
    st.text(max_size=8), st.booleans(), st.none(), st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip


def _get(d: dict, path: str):
    for p in path.split("."):
        d = d[p]
    return d


def _set(d: dict, path: str, v) -> None:
    *head, last = path.split(".")
    for p in head:
        d = d[p]
    d[last] = v


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _field(path: str):
    """The pydantic field of a hardware leaf (``None`` for the per-dtype entries of a dict field)."""
    model = Hardware
    *head, last = path.split(".")
    for p in head:
        if p not in getattr(model, "model_fields", {}):
            return None
        model = model.model_fields[p].annotation
    return model.model_fields.get(last) if hasattr(model, "model_fields") else None


def _optional(path: str) -> bool:
    """Whether the field declares ``None`` valid (``float | None``: the mechanism is off)."""
    f = _field(path)
    return f is not None and type(None) in typing.get_args(f.annotation)


def _int_floor(path: str) -> int:
    """The least value an integer hardware field declares valid (its ``gt``/``ge`` bound)."""
    floor = None
    for m in _field(path).metadata:
        if getattr(m, "gt", None) is not None:
            floor = m.gt + 1
        if getattr(m, "ge", None) is not None:
            floor = m.ge
    assert floor is not None, f"{path} declares no lower bound"
    return floor


def _valid_for(path: str, old, v) -> bool:
    """Whether ``v`` could be a valid value of the field (then the example is skipped)."""
    if v is None and _optional(path):
        return True
    if isinstance(old, bool):
        return isinstance(v, bool)
    if isinstance(old, str):
        return isinstance(v, str) and (path != "topology.kind" or v in ("ring", "mesh", "switch"))
    if isinstance(old, int):
        return isinstance(v, int) and not isinstance(v, bool) and v >= _int_floor(path)
    if isinstance(old, float):
        return _is_number(v) and math.isfinite(v) and v >= 0
    return True


@SETTINGS
@given(path=st.sampled_from(LEAVES), value=anything)
def test_invalid_hardware_field_is_named(path, value):
    old = _get(BASE, path)
    if _valid_for(path, old, value):
        value = "not a value"  # a string is valid only for text fields, which are excluded or checked
        if isinstance(old, str) and path != "topology.kind":
            return
    data = copy.deepcopy(BASE)
    _set(data, path, value)
    with pytest.raises(ConfigError) as e:
        hardware_from_dict(data, "x")
    assert path in str(e.value) or path.rsplit(".", 1)[0] in str(e.value), str(e.value)


@SETTINGS
@given(section=st.sampled_from([k for k, v in BASE.items() if isinstance(v, dict)] + [""]),
       key=st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True))  # fmt: skip
def test_unknown_hardware_key_is_named(section, key):
    data = copy.deepcopy(BASE)
    node = data[section] if section else data
    if key in node:
        return
    node[key] = 1
    with pytest.raises(ConfigError, match="unknown field") as e:
        hardware_from_dict(data, "x")
    assert f"{section}.{key}".strip(".") in str(e.value)


def test_toml_integers_are_accepted_where_floats_are_expected():
    data = copy.deepcopy(BASE)
    _set(data, "link.bandwidth_Bps", 75_000_000_000)
    _set(data, "compute.clock_hz", 1_400_000_000)
    hw = hardware_from_dict(data, "x")
    assert hw.link.bandwidth_Bps == 75e9 and isinstance(hw.link.bandwidth_Bps, float)
    assert isinstance(hw, Hardware)


MODEL = {"hidden": 1024, "layers": 2, "heads": 16, "ffn": 4096, "tokens": 2048}
MODEL_FIELDS = {"hidden": int, "layers": int, "heads": int, "kv_heads": int, "ffn": int, "tokens": int,
                "gated": bool, "dtype": str}  # fmt: skip


@SETTINGS
@given(field=st.sampled_from(sorted(MODEL_FIELDS)), value=anything)
def test_invalid_model_field_is_named(field, value):
    kind = MODEL_FIELDS[field]
    if kind is bool and isinstance(value, bool):
        return
    if kind is str and value in ("fp32", "fp16", "bf16", "fp8"):
        return
    if field == "kv_heads" and value is None:  # the default: as many KV heads as heads
        return
    if kind is int and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        # valid type and range: consistent only if it divides as a model must
        try:
            ModelSpec.model_validate({"name": "m", **MODEL, field: value})
            return
        except Exception:  # noqa: BLE001 - falls through to the assertion below
            pass
    with pytest.raises(ConfigError) as e:
        _spec("m", {**MODEL, field: value}, "m.toml")
    assert field in str(e.value)


OPTION_FIELDS = {"symmetric": bool, "trace": bool, "functional": bool, "comm_cus": int, "seed": int,
                 "jitter": float, "params": dict}  # fmt: skip


@SETTINGS
@given(field=st.sampled_from(sorted(OPTION_FIELDS)), value=anything)
def test_invalid_run_options_are_named(field, value):
    kind = OPTION_FIELDS[field]
    ok = {
        bool: isinstance(value, bool),
        int: (isinstance(value, int) and not isinstance(value, bool) and (value >= 1 or field == "seed"))
        or (field == "seed" and value is None),
        float: _is_number(value) and math.isfinite(value) and value >= 0,
        dict: isinstance(value, dict),
    }[kind]
    if ok:
        return
    with pytest.raises(ConfigError, match=f"options.{field}"):
        RunOptions(**{field: value})


RUN_ARGS = {"model": "t-nlg", "tp": 8, "sublayer": "fc2", "config": "sequential", "hardware": "paper-80cu",
            "tokens": None}  # fmt: skip


@SETTINGS
@given(arg=st.sampled_from(sorted(RUN_ARGS)), value=anything)
def test_invalid_api_run_argument_is_named(arg, value):
    """``t3.api.run`` with one bad argument: a T3Error naming it, before any simulation."""
    from t3.api import run

    if arg == "tokens" and value is None:
        return
    if isinstance(value, int) and not isinstance(value, bool) and arg in ("tp", "tokens"):
        value = -abs(value)  # an integer, but out of range
    with pytest.raises(T3Error) as e:
        run(**{**RUN_ARGS, arg: value})
    want = {"model": "model", "tp": "tp", "sublayer": "sublayer", "config": "config", "hardware": "hardware",
            "tokens": "tokens"}[arg]  # fmt: skip
    assert want in str(e.value), str(e.value)


SWEEP_PATHS = ["tp", "tokens", "config", "sublayer", "options.comm_cus", "options.jitter", "options.symmetric",
               "hardware.link.bandwidth_Bps", "hardware.compute.cus", "hardware.nmc.present"]  # fmt: skip


def _sweep_valid(path: str, v) -> bool:
    leaf = path.split(".")[-1]
    if leaf in ("symmetric", "present"):
        return isinstance(v, bool)
    if leaf in ("config", "sublayer"):
        return v in ("sequential", "fc2", "op", "concurrent")
    if leaf in ("tp", "comm_cus", "cus", "tokens"):
        return isinstance(v, int) and not isinstance(v, bool) and v > 0
    return _is_number(v) and math.isfinite(v) and (v >= 0 if leaf == "jitter" else v > 0)


@SETTINGS
@given(path=st.sampled_from(SWEEP_PATHS), value=anything)
def test_invalid_sweep_value_is_named(path, value):
    from t3.experiments.sweep import spec_from_dict

    if _sweep_valid(path, value) or (path == "tokens" and value is None):
        return
    with pytest.raises(ConfigError) as e:
        spec_from_dict(
            {"base": {"model": "t-nlg", "sublayer": "op", "tokens": 1024}, "grid": {path: [value]}}
        )
    leaf = path.removeprefix("hardware.")
    assert leaf in str(e.value) or path in str(e.value), str(e.value)


# ---- the runtime's arguments, journal parts, t3 trace project --gpus (issue 25 item 11) -----------

RUNTIME_ARGS = ["timeout", "min_flops", "return_stats", "check_peers", "scatter_dim", "algo", "path", "tile",
                "plan"]  # fmt: skip


def _runtime_valid(arg: str, v) -> bool:
    """An oracle written from the documentation (docs/runtime.md), not from the checks."""
    if arg == "timeout":
        return _is_number(v) and math.isfinite(v) and 0 < v <= 86400
    if arg == "min_flops":
        return _is_number(v) and math.isfinite(v) and v >= 0
    if arg in ("return_stats", "check_peers"):
        return isinstance(v, bool)
    if arg == "scatter_dim":
        return type(v) is int and v in (0, 1)
    if arg == "algo":
        return v in ("ring", "direct")
    if arg == "path":
        return v in ("auto", "tiled", "reference")
    if arg == "tile":
        return isinstance(v, list | tuple) and len(v) == 2 and all(type(x) is int and x > 0 for x in v)
    return v is None  # plan: None, a Plan, or a FiCCO schedule name (none is this short)


@pytest.fixture(scope="module")
def one_rank_group(tmp_path_factory):
    """A one-rank gloo group in this process, destroyed afterwards (other tests expect none)."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("needs torch.distributed, not yet initialized")
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@SETTINGS
@given(op=st.sampled_from(["rs", "ar", "ag"]), arg=st.sampled_from(RUNTIME_ARGS), value=anything)
def test_invalid_runtime_argument_is_named(one_rank_group, op, arg, value):
    """Any value of any argument of the three runtime ops: a ValueError naming the argument before any
    data moves, or (valid) the reference's result."""
    import torch

    from t3.runtime import all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    if arg == "scatter_dim" and op != "rs":
        return
    fn = {"rs": matmul_reduce_scatter, "ar": matmul_all_reduce, "ag": all_gather_matmul}[op]
    A, B = torch.arange(16.0).reshape(4, 4), torch.ones(4, 4)
    if _runtime_valid(arg, value):
        out = fn(A, B, **{arg: value})
        got = out[0] if arg == "return_stats" and value else out
        assert torch.equal(got, A @ B)
        return
    with pytest.raises(ValueError) as e:
        fn(A, B, **{arg: value})
    assert str(e.value).startswith(f"{arg}:"), str(e.value)


@SETTINGS
@given(data=st.binary(max_size=64))
def test_any_damaged_journal_part_is_named(tmp_path_factory, data):
    """Any bytes in a journal part: a ConfigError naming the part and saying how to recover."""
    from t3.experiments.sweep import Store

    d = tmp_path_factory.mktemp("journal")
    db = Store(d / "r.parquet")
    db.parts.mkdir()
    part = db.parts / "part-00000000000000000001-x-000001-n3.parquet"
    part.write_bytes(data)
    with pytest.raises(ConfigError) as e:
        db.table()
    assert f"journal part '{part}' is damaged" in str(e.value), str(e.value)
    assert f"drop the part (rm '{part}'; its 3 points are run again)" in str(e.value)


@SETTINGS
@given(gpus=st.one_of(st.integers(-(10**9), 1), st.integers(9, 10**9)))
def test_trace_project_gpus_out_of_range_is_named(gpus):
    """--gpus outside 2..8 on an 8-GPU switch preset: exit 2, one line naming --gpus, before any work."""
    import contextlib
    import io

    from t3.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(["trace", "project", "no-such-trace.json", "--hw", "h100-8", "--gpus", str(gpus)])
    assert e.value.code == 2
    assert err.getvalue().startswith("error: --gpus: ") and err.getvalue().count("\n") == 1, err.getvalue()
