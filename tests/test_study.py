"""``t3 study``: every design of a point is the run it names, FiCCO's best is no slower than its bulk
baseline, the errors are ``t3 validate``'s, and what a preset cannot run is left out with the reason."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from t3.api import overlap, run
from t3.errors import ConfigError
from t3.experiments.study import study
from t3.validation import load_dataset
from t3.validation.runner import run as validate


@pytest.fixture(scope="module")
def doc():
    return study(("h100-8", "mi300x-8", "b200-8"), ("llama-3-8b",), (8, 16))


def test_each_design_is_the_run_it_names(doc):
    p = next(p for p in doc["points"] if p["hardware"] == "h100-8")
    kw = dict(model="llama-3-8b", tp=8, sublayer="fc2", hardware="h100-8")
    seq = run(config="sequential", **kw)["time_s"]
    assert p["time_s"]["sequential"] == seq
    assert p["time_s"]["ideal"] == run(config="ideal-gemm-rs-overlap", **kw)["time_s"]
    t3 = run(config="t3-mca", hw_overrides={"nmc.present": True}, **kw)["time_s"]
    assert p["time_s"]["t3_mca"] == t3
    assert p["speedup"]["t3_mca"] == pytest.approx(seq / t3 - 1)
    # NVLS: the GEMM, then one NVLS all-reduce, one after the other (h100-8's switch reduces)
    assert p["time_s"]["nvls"] > run(config="sequential", **kw)["breakdown_s"]["gemm"]


def test_ficco_best_is_no_slower_than_its_bulk_baseline(doc):
    for p in doc["points"]:
        f = p["ficco"]
        assert f["time_s"] <= f["bulk_s"] * (1 + 1e-12), p["hardware"]
        assert p["speedup"]["ficco"] == pytest.approx(f["bulk_s"] / f["time_s"] - 1)


def test_nvls_only_where_the_switch_reduces(doc):
    by = {p["hardware"]: p for p in doc["points"]}
    assert by["mi300x-8"]["time_s"]["nvls"] is None and by["mi300x-8"]["speedup"]["nvls"] is None
    assert by["b200-8"]["time_s"]["nvls"] is not None


def test_what_a_preset_cannot_run_is_left_out_with_the_reason(doc):
    skipped = {(s["hardware"], s["tp"]): s["why"] for s in doc["skipped"]}
    assert {(p["hardware"], p["tp"]) for p in doc["points"]} == {
        ("h100-8", 8),
        ("mi300x-8", 8),
        ("b200-8", 8),
    }
    assert "exceed the switch of 8 GPUs" in skipped[("h100-8", 16)]
    assert "exceed the switch of 8 GPUs" in skipped[("b200-8", 16)]


def test_errors_are_t3_validates(doc):
    rows = [r for r in load_dataset() if r.hardware == "h100-8" and r.role == "validation"]
    outs = validate(rows)
    for cat in ("gemm_tflops", "collective_busbw", "overlap_speedup"):
        errs = [abs(o.error) for o in outs if o.row.category == cat]
        assert doc["errors"]["h100-8"][cat]["median_abs_error"] == statistics.median(errs)
        assert doc["errors"]["h100-8"][cat]["rows"] == len(errs)
    assert doc["errors"]["mi300x-8"]["overlap_speedup"] is None  # no overlap rows on that preset


def test_bad_input_is_named_before_any_work():
    with pytest.raises(ConfigError, match="tp: must be an integer >= 2"):
        study(("h100-8",), ("llama-3-8b",), (1,))
    with pytest.raises(ConfigError, match="unknown preset 'h999-8'"):
        study(("h999-8",), ("llama-3-8b",))


def test_cli_json():
    p = subprocess.run(
        [sys.executable, "-m", "t3", "study", "--hw", "h200-8", "--model", "llama-3-8b", "--no-ficco", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert [x["hardware"] for x in d["points"]] == ["h200-8"] and d["points"][0]["ficco"] is None
    bad = subprocess.run(
        [sys.executable, "-m", "t3", "study", "--hw", "nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown preset 'nope'" in bad.stderr


def test_a_tp_the_model_cannot_split_is_left_out_with_the_models_reason():
    d = study(("h100-2x8",), ("llama-3-8b", "gpt-3"), (16,), ficco=False)
    assert [(x["model"], x["tp"]) for x in d["points"]] == [("gpt-3", 16)]
    assert "kv_heads = 8 is not divisible by tp=16" in d["skipped"][0]["why"]


def test_a_study_of_no_runnable_point_or_an_unknown_sublayer_is_refused():
    """Nothing to compute is an error naming why (exit 2 on the command line), not an empty table."""
    with pytest.raises(ConfigError, match="no point can run.*kv_heads = 8 is not divisible by tp=16"):
        study(("h100-2x8",), ("llama-3-8b",), (16,), ficco=False)
    with pytest.raises(ConfigError, match="sublayer: unknown sublayer 'bogus'"):
        study(("h100-8",), ("llama-3-8b",), (8,), "bogus", ficco=False)
    bad = subprocess.run(
        [sys.executable, "-m", "t3", "study", "--hw", "h100-8", "--sublayer", "bogus", "--no-ficco"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2 and "unknown sublayer 'bogus'" in bad.stderr


def test_across_nodes_what_is_modelled_runs_and_the_rest_says_why():
    """TP 16 on two nodes: Sequential and Ideal are their runs, the NVLS design is NCCL's NVLS-Tree (the
    GEMM, then that all-reduce), and T3, T3-MCA and FiCCO, whose own transfers are modelled within one
    node, are None with the reason."""
    from t3.config.hardware import load_hardware
    from t3.ops.collectives import simulate_collective
    from t3.workload import get_model, sublayer_operator

    d = study(("h100-2x8",), ("gpt-3",), (16,))
    (p,) = d["points"]
    kw = dict(model="gpt-3", tp=16, sublayer="fc2", hardware="h100-2x8")
    seq = run(config="sequential", **kw)
    assert p["time_s"]["sequential"] == seq["time_s"]
    assert p["time_s"]["ideal"] == run(config="ideal-gemm-rs-overlap", **kw)["time_s"]
    nbytes = sublayer_operator(get_model("gpt-3"), "fc2", 16).comm_bytes
    ar = simulate_collective(
        "all_reduce", float(nbytes), 16, load_hardware("h100-2x8"), algo="nvls-tree/simple"
    )
    assert p["nvls_algo"] == "nvls-tree/simple"
    assert p["time_s"]["nvls"] == seq["breakdown_s"]["gemm"] + ar["time_s"]
    for design, config in (("t3", "t3"), ("t3_mca", "t3-mca")):  # the reason: what t3 run itself refuses
        assert p["speedup"][design] is None
        with pytest.raises(ConfigError) as err:
            run(config=config, hw_overrides={"nmc.present": True}, **kw)
        assert p["not_modelled"][design] == str(err.value)
        assert "spans the nodes of 'h100-2x8'" in p["not_modelled"][design]
    assert p["ficco"] is None and p["speedup"]["ficco"] is None
    with pytest.raises(ConfigError) as err:
        overlap("gemm-rs", p["gemm"]["m"], p["gemm"]["n"], p["gemm"]["k"], gpus=16, hardware="h100-2x8")
    assert p["not_modelled"]["ficco"] == str(err.value)
    assert "span nodes of 'h100-2x8'" in p["not_modelled"]["ficco"]


def test_a_users_hardware_file_runs_under_its_own_name_with_no_rows_of_its_own(tmp_path):
    """An edited copy of a preset (the README's way to add a GPU) is studied from its file, as every other
    command takes it (it said: unknown preset), and no preset's validation errors are lent to it."""
    from importlib import resources

    text = (
        resources.files("t3.config")
        .joinpath("presets", "h100-8.toml")
        .read_text()
        .replace('name = "h100-8"', 'name = "my-h100"')
    )
    assert 'name = "my-h100"' in text
    f = tmp_path / "mine.toml"
    f.write_text(text)
    doc = study((str(f),), ("llama-3-8b",), (8,), ficco=False)
    (p,) = doc["points"]
    assert p["hardware"] == "my-h100"
    assert (
        p["time_s"]["sequential"]
        == run(model="llama-3-8b", tp=8, config="sequential", hardware=str(f))["time_s"]
    )
    assert all(v is None for v in doc["errors"]["my-h100"].values())
