"""The T3 reproduction pipeline on a reduced plan: keys, arithmetic against independent recomputation,
report contents, determinism, and the end-to-end projection against its closed form."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t3.errors import ConfigError
from t3.experiments import endtoend, figures, report
from t3.experiments import reproduce_t3 as r
from t3.experiments.paper_t3 import PUBLISHED

SMALL = r.Plan(
    models=("mega-gpt-2",),
    tps=(8,),
    large_models=("gpt-3",),
    large_tps=(8,),
    sublayers=("op", "fc2"),
    tokens=1024,
    comm_cus=(8, 16),
    sweeps=(
        r.Sweep("link_bw", "link bandwidth (x preset)", "link.bandwidth_Bps", (0.5, 2.0), relative=True),
    ),
    timeline=("mega-gpt-2", 8, "fc2"),
    timeline_bins=16,
)


@pytest.fixture(scope="module")
def doc():
    return r.reproduce(SMALL, workers=1, progress=False)


def test_json_has_required_keys(doc):
    s = doc["summary"]
    for k in ("ideal_gemm_rs_overlap", "ideal_rs_nmc", "t3", "t3_mca", "large_models_t3_mca"):
        assert set(s[k]) >= {"geomean_speedup", "max_speedup"}
    assert set(s["data_movement_reduction"]) == {"geomean", "max"}
    for ph in ("training", "prompt_inference"):
        assert set(s["end_to_end"][ph]) == {"geomean", "max"}
    assert {"ideal", "comm_8cu", "comm_16cu"} <= set(s["concurrent"])
    assert doc["points"]
    for p in doc["points"]:
        assert {"model", "tp", "sublayer", "phase", "config", "time_s", "speedup", "dram_bytes"} <= set(p)
        assert {"gemm_read", "gemm_write", "rs_read", "rs_write", "ag_read", "ag_write"} <= set(
            p["dram_bytes"]
        )
    json.dumps(doc)  # serialisable


def test_missing_configs_are_null_never_filled(doc):
    for c in doc["configs"]["missing"]:
        assert doc["summary"][r.key(c)]["geomean_speedup"] is None
        assert not [p for p in doc["points"] if p["config"] == c]


def test_speedups_recomputed_from_points(doc):
    pts = doc["points"]
    seq = {(p["model"], p["tp"], p["sublayer"]): p["time_s"] for p in pts if p["config"] == "sequential"}
    for c in r.COMPARED:
        mine = [seq[(p["model"], p["tp"], p["sublayer"])] / p["time_s"] - 1 for p in pts if p["config"] == c]
        got = doc["summary"][r.key(c)]
        if not mine:
            assert got["geomean_speedup"] is None
            continue
        assert got["geomean_speedup"] == pytest.approx(np.exp(np.mean(np.log1p(mine))) - 1, rel=1e-12)
        assert got["max_speedup"] == pytest.approx(max(mine), rel=1e-12)
    for p in pts:
        if p["config"] == "sequential":
            assert p["speedup"] == 0.0


def test_ideal_is_max_of_isolated_parts(doc):
    for p in doc["points"]:
        if p["config"] == "ideal-gemm-rs-overlap":
            b = p["breakdown_s"]
            assert p["time_s"] == pytest.approx(max(b["gemm"], b["reduce_scatter"]) + b["all_gather"])


def test_concurrent_ideal_ratio(doc):
    pts = {(p["model"], p["tp"], p["sublayer"], p["config"]): p for p in doc["points"]}
    ratios = []
    for (m, tp, s, c), p in pts.items():
        if c == "ideal-gemm-rs-overlap":
            b = p["breakdown_s"]
            ratios.append(
                pts[(m, tp, s, "sequential")]["time_s"]
                / max(b["gemm"], b["reduce_scatter"] + b["all_gather"])
            )
    assert doc["summary"]["concurrent"]["ideal"] == pytest.approx(np.exp(np.mean(np.log(ratios))))
    # the concurrent kernels are never better than the ideal overlap of the same work
    assert doc["summary"]["concurrent"]["comm_16cu_max"] <= doc["summary"]["concurrent"]["ideal_max"] + 1e-12


def test_timeline_integrates_to_dram_bytes(doc):
    """HBM bandwidth over time, integrated, is the point's DRAM bytes (every configuration traced)."""
    pts = {p["config"]: p for p in doc["points"] if p["sublayer"] == "fc2"}
    assert {t["config"] for t in doc["timeline"]} == {c for c in ("sequential", "t3", "t3-mca") if c in pts}
    for tl in doc["timeline"]:
        total = sum(sum(v) for v in tl["series_Bps"].values()) * tl["bin_s"]
        assert total == pytest.approx(pts[tl["config"]]["hbm_work_bytes"], rel=1e-9)
        assert {"gemm read", "gemm write", "rs read", "ag read"} <= set(tl["series_Bps"])


def test_sensitivity_rows(doc):
    (sw,) = doc["sensitivity"]
    assert [row["value"] for row in sw["rows"]] == [0.5, 2.0]
    lo, hi = (row["overrides"]["link.bandwidth_Bps"] for row in sw["rows"])
    assert hi == pytest.approx(4 * lo)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-0.5, max_value=3.0), min_size=1, max_size=20))
def test_geomean_helper_matches_numpy(xs):
    assert r.geomean_speedup(xs) == pytest.approx(np.exp(np.mean(np.log1p(np.array(xs)))) - 1, abs=1e-12)


def test_projection_closed_form():
    seq = {"op": 2.0, "fc2": 3.0}
    cfg = {"op": 1.5, "fc2": 2.0}
    gemm = {"op": 0.5, "fc2": 1.5}
    pr = endtoend.project(seq, cfg, gemm, other_gemm_s=4.0, attention_share=0.5)
    base = (2.0 + 3.0 + 4.0) / 0.5
    assert pr.layer_seq_s == pytest.approx(base)
    assert pr.speedup == pytest.approx(base / (base - 1.5) - 1)
    assert pr.comm_share == pytest.approx((1.5 + 1.5) / base)
    assert endtoend.project(seq, seq, gemm, 4.0).speedup == 0.0


def test_other_gemms_flops_balance():
    """Training's non-sliced GEMMs + the sliced ones = 3x the forward FLOPs (fwd + dgrad + wgrad)."""
    from t3.workload import get_model, sublayer_operator

    m, tp, t = get_model("mega-gpt-2"), 8, 1024
    other = endtoend.other_gemms(m, tp, t, "training")
    sliced = [sublayer_operator(m, s, tp, t).gemm for s in r.SUBLAYERS]
    fwd = sum(g.flops for g in endtoend.other_gemms(m, tp, t, "prompt_inference").values())
    fwd += sum(sublayer_operator(m, s, tp, t).gemm.flops for s in ("op", "fc2"))
    assert sum(g.flops for g in other.values()) + sum(g.flops for g in sliced) == pytest.approx(3 * fwd)


def test_data_movement_arithmetic():
    def pt(cfg, tot):
        return {"model": "m", "tp": 8, "sublayer": "op", "config": cfg, "dram_bytes": {"gemm_read": tot}}

    def pt2(cfg, tot):
        return dict(pt(cfg, tot), sublayer="fc2")

    dm = r.data_movement(
        [pt("sequential", 100.0), pt("t3-mca", 80.0), pt2("sequential", 50.0), pt2("t3-mca", 20.0)]
    )
    assert dm["max"] == pytest.approx(0.6)
    assert dm["geomean"] == pytest.approx(1 - math.sqrt(0.8 * 0.4))


def test_report_has_paper_and_our_numbers(doc):
    text = report.render(doc, [])
    for k in ("ideal_gemm_rs_overlap.geomean_speedup", "t3_mca.max_speedup", "data_movement_reduction.max"):
        assert f"{100 * PUBLISHED[k].value:.0f} %" in text
    s = doc["summary"]["ideal_gemm_rs_overlap"]
    assert report.pct(s["geomean_speedup"]) in text and report.pct(s["max_speedup"]) in text
    for p in doc["calibration"]:
        assert f"`{p['parameter']}`" in text
    if doc["configs"]["missing"]:
        assert "WARNING: configurations not registered" in text


def test_unregistered_config_is_reported_loudly():
    plan = r.Plan(
        models=("mega-gpt-2",), tps=(8,), large_models=(), sublayers=("op",), tokens=1024, comm_cus=(8,),
        sweeps=(), timeline=None, configs=("sequential", "ideal-gemm-rs-overlap", "no-such-config"),
    )  # fmt: skip
    d = r.reproduce(plan, workers=1, progress=False)
    assert "no-such-config" in d["configs"]["missing"]
    assert "no-such-config" in report.render(d, [])


def test_deterministic_json_and_figures(doc, tmp_path):
    again = r.reproduce(SMALL, workers=2, progress=False)
    assert json.dumps(again) == json.dumps(doc)
    a = figures.make_all(doc, tmp_path / "a")
    b = figures.make_all(again, tmp_path / "b")
    assert a == b and "speedup_main.png" in a and "hbm_timeline.png" in a
    for f in a:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_figures_from_processes_warmed_ahead_are_the_same_bytes(doc, tmp_path):
    from t3.experiments.parallel import WarmPool

    want = figures.make_all(doc, tmp_path / "a", workers=1)
    with WarmPool("t3.experiments.figures", 2) as pool:
        got = sorted(pool.map("_render", [(j,) for j in r.figure_jobs(doc, tmp_path / "b")]))
    assert got == want and len(want) >= 4
    for f in want:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_bad_plan_fails_before_work():
    with pytest.raises(Exception, match="tokens"):
        r.reproduce(r.Plan(tokens=1001, sweeps=()), workers=1, progress=False)


def test_cli_bad_hardware_one_line():
    p = subprocess.run(
        [sys.executable, "-m", "t3", "reproduce", "t3", "--hw", "nope"], capture_output=True, text=True
    )
    assert p.returncode == 2 and "unknown preset 'nope'" in p.stderr and "Traceback" not in p.stderr


def test_cli_quick_writes_report_json(tmp_path):
    out, js = tmp_path / "out", tmp_path / "x" / "t3.json"
    # neither folder exists: every command creates the missing folders of its outputs
    p = subprocess.run(
        [sys.executable, "-m", "t3", "reproduce", "t3", "--quick", "--no-figures", "--workers", "1",
         "--out", str(out), "--json", str(js)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    d = json.loads(js.read_text())
    assert d == json.loads((out / "t3.json").read_text())
    assert {p["tp"] for p in d["points"]} == {8} and not d["large_points"]
    text = (out / "report.md").read_text()
    assert "| Ideal-GEMM-RS-Overlap, geomean | 35 % |" in text
    assert "geomean" in p.stdout and "%" in p.stdout
    assert "t3 reproduce t3:" not in p.stdout  # progress bars go to stderr
    # the wall time too: the same inputs print the same standard output, byte for byte
    assert "wrote " in p.stdout and re.search(r"\d s\b", p.stdout) is None and re.search(r"took \d", p.stderr)
    pv = d["provenance"]
    assert pv["command"].startswith("t3 reproduce t3 --quick") and len(pv["hardware_sha256"]) == 64
    assert f"Produced by `{pv['command']}`" in text


def test_failing_configuration_is_reported_not_summarised():
    plan = r.Plan(
        models=("mega-gpt-2",), tps=(8,), large_models=(), sublayers=("op",), tokens=1024, comm_cus=(8,),
        sweeps=(), timeline=None, hw_overrides={"nmc.present": False},
    )  # fmt: skip
    # without --keep-going the configurations no point of which can run are refused before any runs
    with pytest.raises(
        ConfigError, match=r"nmc.present: 'paper-80cu' has no near-memory compute.*--keep-going"
    ):
        r.reproduce(plan, workers=1, progress=False)
    d = r.reproduce(plan, workers=1, progress=False, keep_going=True)
    failed = {e["config"] for e in d["errors"]}
    assert failed == {"t3", "t3-mca", "ideal-rs-nmc"} & set(d["configs"]["registered"])
    for c in failed:
        assert d["summary"][r.key(c)]["geomean_speedup"] is None
    assert d["summary"]["ideal_gemm_rs_overlap"]["geomean_speedup"] is not None
    assert "simulation(s) failed" in report.render(d, [])


def test_tp_beyond_mesh_fails_before_work():
    with pytest.raises(Exception, match="tp: 16 GPUs exceed the mesh"):
        r.reproduce(r.Plan(hardware="mi300x-8", sweeps=()), workers=1, progress=False)


def test_store_resumes_and_matches_the_pool_path(doc, tmp_path):
    """Through the sweep runner with a store, a second run computes nothing and both equal the
    in-process pool path (the custom runner) byte for byte."""
    import json

    from t3.experiments.parallel import pmap
    from t3.experiments.sweep.store import Store

    store = tmp_path / "points.parquet"
    first = r.reproduce(SMALL, workers=1, progress=False, store=store)
    before = Store(store).table().to_pandas()
    again = r.reproduce(SMALL, workers=1, progress=False, store=store)
    after = Store(store).table().to_pandas()
    assert len(after) == len(before)
    assert sorted(after["run_id"]) == sorted(before["run_id"])  # nothing recomputed
    pool = r.reproduce(SMALL, workers=1, progress=False, runner=pmap)
    assert json.dumps(first) == json.dumps(again) == json.dumps(pool) == json.dumps(doc)
