"""Sweep specs: grid expansion against a brute-force oracle, validation before any work, content keys."""

import hashlib
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import t3
from t3.errors import ConfigError
from t3.experiments.sweep import load_spec, spec_from_dict
from t3.experiments.sweep.spec import point_key

SMALL = {"model": "t-nlg", "sublayer": "op", "tokens": 1024}


def test_grid_is_cartesian_product_in_spec_order_plus_zip():
    grid = {
        "hardware.link.bandwidth_Bps": [5e10, 1e11, 2e11],
        "config": ["sequential", "concurrent"],
    }
    zips = [{"tp": [4, 8], "hardware.topology.gpus": [4, 8]}]
    sw = spec_from_dict({"base": SMALL, "grid": grid, "zip": zips})
    # oracle: nested loops, last axis fastest
    want = [
        (bw, cfg, tp, g)
        for bw in grid["hardware.link.bandwidth_Bps"]
        for cfg in grid["config"]
        for tp, g in zip(zips[0]["tp"], zips[0]["hardware.topology.gpus"], strict=True)
    ]
    assert len(sw) == 3 * 2 * 2
    got = [
        (
            p.point["hw_overrides"]["link.bandwidth_Bps"],
            p.point["config"],
            p.point["tp"],
            p.point["hw_overrides"]["topology.gpus"],
        )
        for p in sw.points
    ]
    assert got == want
    assert [p.index for p in sw.points] == list(range(12))
    assert all(p.point["sublayer"] == "op" and p.point["tokens"] == 1024 for p in sw.points)
    assert sw.axes == [["hardware.link.bandwidth_Bps"], ["config"], ["tp", "hardware.topology.gpus"]]


def test_nested_tables_equal_quoted_dotted_keys():
    a = spec_from_dict({"base": SMALL, "grid": {"hardware.tracker.entries": [64, 256]}})
    b = spec_from_dict({"base": SMALL, "grid": {"hardware": {"tracker": {"entries": [64, 256]}}}})
    assert a.keys == b.keys
    assert [p.point for p in a.points] == [p.point for p in b.points]


def test_options_and_params_reach_run_point_contract():
    sw = spec_from_dict(
        {
            "base": {
                **SMALL,
                "config": "t3",
                "options.functional": True,
                "options.params.functional_seed": 4,
            },
            "grid": {"options.seed": [8, 16], "options.jitter": [0.0, 0.5]},
        }
    )
    assert sw.points[1].point["options"] == {
        "params": {"functional_seed": 4}, "functional": True, "seed": 8, "jitter": 0.5,
    }  # fmt: skip
    assert len(set(sw.keys)) == 4


def test_default_tokens_and_explicit_default_have_the_same_key():
    # t-nlg's default token count, spelt two ways, is one configuration
    from t3.workload import get_model

    default = get_model("t-nlg").tokens
    sw = spec_from_dict({"base": {"model": "t-nlg", "sublayer": "op"}, "grid": {"tokens": [None, default]}})
    assert sw.inputs[0]["tokens"] == default
    assert sw.keys[0] == sw.keys[1]


def test_key_is_sha256_of_the_canonical_resolved_configuration(monkeypatch):
    from t3.config.hardware import load_hardware

    p = spec_from_dict({"base": SMALL, "grid": {"hardware.link.latency_s": [2e-6]}}).points[0].point
    hw = load_hardware("paper-80cu", {"link.latency_s": 2e-6}).model_dump(mode="json")
    doc = {
        "t3_version": t3.__version__,
        "config": "sequential",
        "operator": {
            "model": "t-nlg", "sublayer": "op", "phase": "forward", "tp": 8, "tokens": 1024,
            "gemm": {"m": 1024, "n": 4256, "k": 532, "dtype": "fp16"}, "collective": "all-reduce",
        },
        "hardware": hw,
        "options": {"symmetric": True, "trace": False, "comm_cus": 16, "seed": None, "jitter": 0.0,
                    "functional": False, "params": {}},
    }  # fmt: skip
    want = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert point_key(p) == want
    monkeypatch.setattr(t3, "__version__", "9.9.9")
    assert point_key(p) != want  # a new version recomputes


def test_int_and_float_spellings_of_a_float_are_one_key():
    a = spec_from_dict({"base": {**SMALL, "options.jitter": 0, "hardware.link.bandwidth_Bps": 100000000000}})
    b = spec_from_dict({"base": {**SMALL, "options.jitter": 0.0, "hardware.link.bandwidth_Bps": 1e11}})
    assert a.keys == b.keys


def test_every_input_changes_the_key():
    base = spec_from_dict({"base": SMALL}).keys[0]
    for k, v in [
        ("hardware.link.bandwidth_Bps", 7e10), ("hardware.mca.occupancy_threshold", 0.5),
        ("hardware.tracker.entries", 64), ("config", "concurrent"), ("tp", 4), ("tokens", 2048),
        ("sublayer", "fc2"), ("options.seed", 3), ("hardware", "mi300x-8"),
    ]:  # fmt: skip
        assert spec_from_dict({"base": {**SMALL, k: v}}).keys[0] != base, k
    conc = {**SMALL, "config": "concurrent"}
    assert (
        spec_from_dict({"base": {**conc, "options.comm_cus": 8}}).keys[0]
        != spec_from_dict({"base": conc}).keys[0]
    )
    fn = {**SMALL, "config": "t3", "tp": 4, "options.functional": True}
    assert (
        spec_from_dict({"base": {**fn, "options.params.functional_seed": 1}}).keys[0]
        != spec_from_dict({"base": fn}).keys[0]
    )


@pytest.mark.parametrize(
    "data,needle",
    [
        ({"grid": {"foo": [1]}}, "grid.foo: unknown parameter"),
        ({"grid": {"hardware.link.bw": [1.0]}}, "hardware.link.bw: unknown field"),
        ({"grid": {"hardware.link.bandwidth_Bps": [1e11, -1.0]}}, "link.bandwidth_Bps"),
        ({"grid": {"options.nope": [1]}}, "options.nope: unknown option"),
        ({"grid": {"options.comm_cus": [8, "x"]}}, "grid.options.comm_cus: expected int"),
        ({"grid": {"tp": ["8"]}}, "grid.tp: expected int"),
        ({"grid": {"config": ["sequential", "nope"]}}, "unknown configuration 'nope'"),
        ({"grid": {"model": ["gpt-5"]}}, "unknown model 'gpt-5'"),
        ({"grid": {"tokens": [1001]}}, "tokens: 1001"),
        ({"grid": {"tp": []}}, "grid.tp: expected a non-empty list"),
        ({"grid": {"tp": 8}}, "grid.tp: expected a non-empty list"),
        ({"zip": [{"tp": [2, 4], "tokens": [1024]}]}, "zip[0]: lists must have equal lengths"),
        ({"zip": [{}]}, "zip[0]: an empty table; give its keys lists of equal length, or remove it"),
        ({"grid": {"tp": [2]}, "zip": [{"tp": [4]}]}, "zip[0].tp: parameter appears twice"),
        ({"base": {"hardware.hbm.nope": 1}}, "hardware.hbm.nope: unknown field"),
        ({"base": {"colour": 1}}, "base.colour: unknown parameter"),
        ({"grids": {}}, "grids: unknown key"),
        # options no point uses: a value without effect, or a run that would fail on every point
        (
            {"grid": {"options.comm_cus": [8, 16]}},
            "options.comm_cus: only the 'concurrent' configuration uses",
        ),
        (
            {"base": {"options.functional": True}},
            "functional: configuration 'sequential' has no functional mode",
        ),
    ],
)
def test_bad_spec_names_the_key(data, needle):
    data.setdefault("base", {})
    data["base"] = {**SMALL, **data["base"]}
    with pytest.raises(ConfigError) as e:
        spec_from_dict(data)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_spec_file_paths_are_relative_to_the_spec(tmp_path):
    (tmp_path / "hw").mkdir()
    src = resources.files("t3.config").joinpath("presets", "paper-80cu.toml").read_text()
    (tmp_path / "hw" / "mine.toml").write_text(src.replace('name = "paper-80cu"', 'name = "mine"'))
    (tmp_path / "s.toml").write_text(
        'name = "files"\n[base]\nsublayer = "op"\ntokens = 1024\nhardware = "hw/mine.toml"\n'
        '[grid]\n"hardware.link.latency_s" = [1e-6, 2e-6]\n'
    )
    sw = load_spec(tmp_path / "s.toml")
    assert len(sw) == 2 and sw.inputs[0]["hardware.name"] == "mine"


def test_cli_rejects_bad_spec_before_any_work(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[base]\nsublayer = "op"\n[grid]\n"hardware.link.bw" = [1.0, 2.0]\n')
    store = tmp_path / "r.parquet"
    p = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", str(spec), "--store", str(store)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert "hardware.link.bw: unknown field" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not store.exists() and not (tmp_path / "r.parquet.parts").exists()


def test_cli_dry_run_counts_points():
    spec = Path(__file__).parents[1] / "examples" / "sweeps" / "link-bandwidth.toml"
    p = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", str(spec), "--dry-run"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert "30 points (30 distinct) valid" in p.stdout  # 5 bandwidths x 3 configs x 2 sublayers


def test_comm_cus_over_a_grid_of_configurations_is_kept_for_the_concurrent_points():
    sw = spec_from_dict(
        {"base": {**SMALL, "options.comm_cus": 8}, "grid": {"config": ["sequential", "concurrent"]}}
    )
    assert len(sw) == 2


def test_cli_dry_run_of_a_grid_of_tables(tmp_path):
    # a grid value may be a whole hardware table: its points were counted in a set of the values (a
    # traceback: unhashable dict)
    spec = tmp_path / "t.toml"
    spec.write_text(
        '[base]\nmodel = "mega-gpt-2"\ntokens = 128\n[grid]\n'
        '"hardware.link" = [{bandwidth_Bps = 1e11, latency_s = 1e-6}, {bandwidth_Bps = 2e11, latency_s = 1e-6}]\n'
    )
    p = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", str(spec), "--dry-run"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert "2 points (2 distinct) valid; axes: hardware.link (2)" in p.stdout
