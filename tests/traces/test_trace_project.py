"""Projection of a trace's pairs onto a preset: the step arithmetic, the schedules' meaning, the
outputs (Perfetto trace, figure, JSON), output checks before work, determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from t3.config.hardware import load_hardware
from t3.ficco.losses import explore
from t3.ficco.space import FiccoOperator
from t3.traces import import_trace
from t3.traces.predict import Predictor
from t3.traces.project import SHOWN, project, timeline

GPU = Path(__file__).parent / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def proj():
    return project(import_trace(GPU), load_hardware("h100-8"), ficco="select")


def test_window_is_measured_minus_pair_savings(proj):
    doc = proj.as_dict()
    w = doc["trace"]["window_s"]
    for s in SHOWN:
        want = w
        for p in doc["pairs"]:
            t = p["predicted"][s]["time_s"]
            if t is None and s in ("t3", "t3-mca"):  # does not apply: the pair runs sequential
                t = p["predicted"]["sequential"]["time_s"]
            want -= p["measured_s"] - t
        assert doc["window"][s]["time_s"] == pytest.approx(want, rel=1e-12)
        blocks, end = timeline(proj, s)  # the drawn timeline ends at the same time
        assert end == pytest.approx(want, rel=1e-9)
        assert all(d >= 0 for _, _, d, _ in blocks)


def test_schedule_meanings(proj):
    for r in proj.rows:
        pr, kind = r.pred, r.pair.kind
        seq, ideal = pr.schedules["sequential"].time_s, pr.schedules["ideal"].time_s
        assert ideal <= seq + 1e-15
        if kind == "ag-gemm":
            assert seq == pytest.approx(pr.gemm_s + pr.comm_s) and ideal == pytest.approx(
                max(pr.gemm_s, pr.comm_s)
            )
            assert not pr.schedules["t3"].ok and not pr.schedules["t3"].applies
        else:  # gemm-rs on h100-8: T3 on the preset plus near-memory compute, labelled
            assert ideal == pytest.approx(max(pr.gemm_s, pr.comm_s), rel=1e-9)
            assert pr.schedules["t3-mca"].ok and pr.schedules["t3-mca"].note.startswith("hypothetical")
        best = r.time("best")
        assert best.time_s == min(pr.schedules[s].time_s for s in ("sequential", "ficco"))


def test_ficco_is_the_simulated_best(tmp_path):
    """--ficco explore reports what `t3 ficco explore` finds best for the same operator."""
    t = import_trace(GPU)
    p = t.pairs[1]  # out-projection GEMM -> reduce-scatter
    g = p.gemm
    got = (
        Predictor(load_hardware("h100-8"), "explore")
        .predict(p.kind, g.m, g.n, g.k, 1, g.dtype, 8)
        .schedules["ficco"]
    )
    ex = explore(FiccoOperator("gemm-rs", g.m, g.n, g.k, 8, "bf16"), load_hardware("h100-8"))
    assert (got.schedule, got.time_s) == (ex.best().name, ex.best().time_s)


def test_t3_not_hypothetical_where_nmc_exists():
    pr = project(
        import_trace(GPU), load_hardware("h100-8").with_overrides({"nmc.present": True}), ficco="select"
    )
    rs = [r for r in pr.rows if r.pair.kind == "gemm-rs"]
    assert all(r.pred.schedules["t3"].ok and not r.pred.schedules["t3"].note for r in rs)
    assert all(r.time("best").time_s <= r.pred.schedules["t3-mca"].time_s for r in rs)


def test_same_hardware_detection(proj):
    assert proj.same_hw and "H100" in proj.same_hw_reason
    other = project(import_trace(GPU), load_hardware("mi300x-8"), ficco="select")
    assert not other.same_hw and other.model_error() is None
    err = proj.model_error()
    assert len(err["pairs"]) == 8
    for e in err["pairs"]:
        g = proj.rows[e["pair"]]
        assert e["collective_error_pct"] == pytest.approx(100 * (g.pred.comm_s / g.pair.collective.dur_s - 1))


def test_cli_outputs_and_determinism(tmp_path):
    outs = []
    for d in ("a", "b"):
        p = _t3("trace", "project", str(GPU), "--ficco", "select", "--out", str(tmp_path / d))
        assert p.returncode == 0, p.stderr
        assert "ms" in p.stdout or "µs" in p.stdout
        outs.append([(tmp_path / d / f).read_bytes() for f in ("projection.perfetto.json", "projection.png")])
    assert outs[0] == outs[1]
    doc = json.loads((tmp_path / "a" / "projection.json").read_text())
    pf = json.loads(outs[0][0])
    names = {e["args"]["name"] for e in pf["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("measured") for n in names) and any(
        n.startswith("projected: ficco") for n in names
    )
    win = [e for e in pf["traceEvents"] if e.get("name") == "projected window (sequential)"][0]
    assert win["dur"] == pytest.approx(doc["window"]["sequential"]["time_s"] * 1e6, abs=1e-3)
    assert outs[0][1][:8] == b"\x89PNG\r\n\x1a\n"


def test_outputs_checked_before_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    p = _t3("trace", "project", str(tmp_path / "missing.json"), "--out", str(f))
    assert p.returncode == 2 and "--out" in p.stderr and "not a directory" in p.stderr
    p = _t3("trace", "import", str(tmp_path / "missing.json"), "--parquet", str(f / "x.parquet"))
    assert p.returncode == 2 and "--parquet" in p.stderr and "is a file" in p.stderr
    p = _t3("trace", "project", str(GPU), "--ficco", "maybe", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "--ficco" in p.stderr and not (tmp_path / "o").exists()


def test_gpus_override_is_the_group_shown_and_predicted(tmp_path):
    # --gpus 4: every pair is predicted on 4 GPUs, and the table and the JSON say 4, not the trace's 8
    p = _t3("trace", "project", str(GPU), "--ficco", "select", "--gpus", "4", "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "o" / "projection.json").read_text())
    assert doc["pairs"] and {q["collective"]["group_size"] for q in doc["pairs"]} == {8}  # (the trace's)
    assert {q["predicted"]["gpus"] for q in doc["pairs"]} == {4}
    on4 = project(import_trace(GPU), load_hardware("h100-8"), ficco="select", gpus=4)
    assert [r.time("sequential").time_s for r in on4.rows] == [
        q["predicted"]["sequential"]["time_s"] for q in doc["pairs"]
    ]
    table = p.stdout.split("per pair")[1].split("projected")[0]
    head = next(ln for ln in table.splitlines() if "GPUs" in ln).split("┃")
    at = [c.strip() for c in head].index("GPUs")
    cells = {ln.split("│")[at].strip() for ln in table.splitlines() if ln.count("│") > 5}
    assert cells == {"4"}
