"""`t3 ficco` commands: JSON contracts, one-line errors, the selector's fitting procedure."""

import json
import math
import subprocess
import sys

import pytest

from t3 import provenance
from t3.config.hardware import load_hardware
from t3.ficco.scenarios import OPERATORS, cases
from t3.ficco.select import GRID, Rules, features, fit, rule_pick, select, within
from t3.ficco.space import FiccoOperator, legality


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


def test_explore_json_contract():
    p = _t3("ficco", "explore", "--op", "gemm-rs", "--m", "1024", "--n", "512", "--k", "256", "--gpus", "8",
            "--hw", "mi300x-8", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["best"] in {s["name"] for s in j["schedules"]}
    bulk = min(s["time_s"] for s in j["schedules"] if s["name"].startswith("bulk"))
    for s in j["schedules"]:
        assert set(s["losses"]) >= {"decomposition_s", "contention_s"}
        assert s["speedup_vs_bulk"] == pytest.approx(bulk / s["time_s"])
    assert min(s["time_s"] for s in j["schedules"]) == j["best_time_s"]


def test_select_json_contract_matches_library():
    p = _t3("ficco", "select", "--op", "ag-gemm", "--m", "8192", "--n", "3584", "--k", "4096", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    from t3.ficco.learned import select_shipped

    name, f = select_shipped(FiccoOperator("ag-gemm", 8192, 3584, 4096), load_hardware("mi300x-8"))
    prov = j.pop("provenance")
    assert j == {"schedule": name, "features": f}
    assert prov["hardware_sha256"] == provenance.hardware_hash(load_hardware("mi300x-8"))
    assert prov["command"].startswith("t3 ficco select --op ag-gemm")
    p = _t3("ficco", "select", "--op", "gemm-rs", "--m", "8192", "--n", "4096", "--k", "1792")
    assert p.returncode == 0 and "bf16 on 8 GPUs" in p.stdout, p.stderr
    p = _t3(
        "ficco",
        "select",
        "--op",
        "ag-gemm",
        "--m",
        "8192",
        "--n",
        "3584",
        "--k",
        "4096",
        "--json",
        "--runtime",
    )
    assert p.returncode == 0, p.stderr
    name, _ = select_shipped(
        FiccoOperator("ag-gemm", 8192, 3584, 4096), load_hardware("mi300x-8"), runnable=True
    )
    assert json.loads(p.stdout)["schedule"] == name and "-s2" not in name


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ficco", "explore", "--op", "foo"], "op: unknown operation 'foo'"),
        (["ficco", "select", "--m", "1001"], "m: 1001 rows"),
        (["ficco", "explore", "--hw", "nope"], "unknown preset 'nope'"),
        (["ficco", "select", "--op", "moe", "--skew", "2"], "skew"),
        (["reproduce", "ficco", "--limit", "0"], "limit"),
        (["ficco", "explore", "--gpus", "16", "--m", "8192"], "gpus: 16 GPUs exceed the mesh"),
        (["ficco", "select", "--gpus", "16", "--m", "8192"], "gpus: 16 GPUs exceed the mesh"),
        (["ficco", "explore", "--op", "moe", "--hw", "paper-80cu"], "op: moe"),
        (["ficco", "select", "--op", "moe", "--runtime"], "runtime: t3.runtime has no MoE"),
    ],
)
def test_bad_input_one_line_error(args, needle):
    p = _t3(*args)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_scenario_set_is_large_realistic_and_split():
    cs = cases()
    assert len(cs) >= 40
    assert {c.subset for c in cs} == {"design", "unseen"}
    ops = {f.op for f in OPERATORS}
    assert ops == {"ag-gemm", "gemm-rs", "moe"} and any(f.skew for f in OPERATORS)
    from t3.ficco.scenarios import DESIGN_OPERATORS, UNSEEN_OPERATORS

    assert sum(c.subset == "unseen" for c in cs) == 2 * len(UNSEEN_OPERATORS) >= 40
    for c in cs:  # same operator -> same subset on both presets
        assert c.subset == ("design" if c.fop in DESIGN_OPERATORS else "unseen")
    assert not set(DESIGN_OPERATORS) & set(UNSEEN_OPERATORS)


def test_blind_sets_are_disjoint_from_training_and_each_other():
    """Evaluated-only operator sets: none is a training operator, a design operator or in another set."""
    from t3.ficco.learned import DATA, load_rows
    from t3.ficco.scenarios import DESIGN_OPERATORS, UNSEEN_OPERATORS
    from t3.ficco.trainset import (
        FRESH2_OPERATORS,
        FRESH3_OPERATORS,
        FRESH4_OPERATORS,
        FRESH5_OPERATORS,
        FRESH6_OPERATORS,
        FRESH7_OPERATORS,
        FRESH8_OPERATORS,
        FRESH9_OPERATORS,
        FRESH10_OPERATORS,
        FRESH_OPERATORS,
        _key,
    )

    labelled = {(r["operator"]["op"], r["operator"]["m"], r["operator"]["n"], r["operator"]["k"],
                 r["operator"]["gpus"], r["operator"]["dtype"], r["operator"]["skew"]) for r in load_rows(DATA)}  # fmt: skip
    sets = [UNSEEN_OPERATORS, FRESH_OPERATORS, FRESH2_OPERATORS, FRESH3_OPERATORS, FRESH4_OPERATORS, FRESH5_OPERATORS,
            FRESH6_OPERATORS, FRESH7_OPERATORS, FRESH8_OPERATORS, FRESH9_OPERATORS, FRESH10_OPERATORS]  # fmt: skip
    keys = [{_key(f) for f in s} for s in sets]
    assert (
        len(FRESH3_OPERATORS) >= 40
        and len(FRESH4_OPERATORS) >= 30
        and len(FRESH6_OPERATORS) >= 30
        and len(FRESH7_OPERATORS) >= 30
        and len(FRESH8_OPERATORS) >= 30
        and len(FRESH9_OPERATORS) >= 30
        and len(FRESH10_OPERATORS) >= 30
        and all(len(k) == len(s) for k, s in zip(keys, sets, strict=True))
    )
    design = {_key(f) for f in DESIGN_OPERATORS}
    for i, k in enumerate(keys):
        assert not k & (labelled - design) and not k & design
        for other in keys[i + 1 :]:
            assert not k & other


def test_selector_always_returns_a_legal_schedule():
    for hwn in ("mi300x-8", "h100-8", "paper-80cu"):
        hw = load_hardware(hwn)
        for f in OPERATORS:
            if f.op == "moe" and hw.topology.kind == "ring":
                continue
            name, _ = select(f, hw)
            from t3.ficco.space import parse_name

            assert legality(f, hw, parse_name(name)) is None


def test_features_closed_forms():
    hw = load_hardware("mi300x-8")
    f = features(FiccoOperator("ag-gemm", 8192, 3584, 4096), hw)
    c = hw.compute  # the matrix peak at the sustained GEMM clock, times the inner-loop efficiency
    peak = c.cus * c.matrix_flops_per_clk_per_cu["bf16"] * c.gemm_clock_hz["bf16"] * c.gemm_efficiency
    assert f["t_compute_s"] == pytest.approx(2 * 8192 * 3584 * 4096 / peak, rel=1e-9)
    assert f["t_comm_s"] == pytest.approx(7 / 8 * 8192 * 4096 * 2 / (7 * 64e9))
    assert f["waves"] == pytest.approx(math.ceil(8192 / 256) * 14 / 304)


def test_fit_recovers_a_planted_margin():
    # synthetic cases: the overlapped schedule is really faster only when its estimate is < 0.9 x bulk
    rows = []
    for x in (0.5, 0.8, 0.85, 0.95, 1.2):
        f = {"op": "ag-gemm", "topology": "mesh", "gpus": 8, "waves": 1.0,
             "estimates_s": {"bulk": 1.0, "ficco-dma-M-s2": x}}  # fmt: skip
        rows.append(
            {"features": f, "times": {"bulk-g1-M-cu": 1.0, "ficco-g8-M-dma-s2": x if x < 0.9 else 1.5}}
        )
    r, acc = fit(rows)
    assert acc == 1.0
    # the fitted rules put the boundary between 0.85 and 0.95 of bulk (margin or DMA handicap)
    eff = (1.0 + r.dma_bias) * (1.0 + r.m_bias) / (1.0 - r.margin)
    assert 0.85 * eff < 1.0 <= 0.95 * eff
    assert all(within(row["times"], rule_pick(row["features"], r).name) for row in rows)
    bad = Rules(margin=0.0, m_bias=0.0, shard_bias=0.0)
    assert not all(within(row["times"], rule_pick(row["features"], bad).name) for row in rows)
    assert 0.05 in GRID["margin"]


def test_cross_validation_holds_out_whole_operators():
    from t3.ficco.select import cross_validate

    rows = []
    for i, x in enumerate((0.5, 0.8, 0.85, 0.95, 1.2, 0.6, 1.1, 0.7)):
        f = {"op": "ag-gemm", "topology": "mesh", "gpus": 8, "waves": 1.0,
             "estimates_s": {"bulk": 1.0, "ficco-dma-M-s2": x}}  # fmt: skip
        t = {"bulk-g1-M-cu": 1.0, "ficco-g8-M-dma-s2": x if x < 0.9 else 1.5}
        rows += [{"index": i, "features": f, "times": t}, {"index": i, "features": f, "times": t}]
    cv = cross_validate(rows, folds=4)
    assert cv["cases"] == len(rows) and len(cv["folds"]) == 4
    assert all(p["cases"] == 4 for p in cv["folds"])  # 2 operators x 2 presets per fold
    assert 0 <= cv["right"] <= len(rows)


def test_explore_is_deterministic():
    from t3.ficco.losses import explore

    hw = load_hardware("h100-8")
    f = FiccoOperator("moe", 512, 256, 256)
    a = json.dumps(explore(f, hw).to_json())
    assert a == json.dumps(explore(f, hw).to_json())


def test_characterise_json():
    p = _t3("ficco", "characterise", "--hw", "h100-8", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    row = j["gemm"][0]
    assert {"M8_loss_pct", "M64_loss_pct", "K8_loss_pct", "K64_loss_pct"} <= set(row)
    assert all(0 < d["efficiency_pct"] < 100 for d in j["dma"])


def test_reproduce_small_writes_report_and_computes_accuracy(tmp_path):
    from t3.experiments.reproduce_ficco import reproduce

    res = reproduce(tmp_path, workers=1, limit=1, progress=False)
    ev = res["evaluation"]
    u = ev["unseen"]
    assert u["cases"] == 2 and u["accuracy_pct"] == 100.0 * u["right"] / 2
    assert ev["design"]["cases"] == 2
    for c in ev["cases"]:  # a pick is right iff within 2 % of the exhaustive best
        assert c["right"] == (c["pick_s"] <= c["best_s"] * 1.02)
    # slowdown of the picks over the best: recomputed from the per-case times
    for subset in ("design", "unseen", "all"):
        sel = [c for c in ev["cases"] if subset == "all" or c["subset"] == subset]
        ratios = [c["pick_s"] / c["best_s"] for c in sel]
        geo = math.prod(ratios) ** (1 / len(ratios))
        assert ev[subset]["slowdown_vs_best_geomean_pct"] == pytest.approx(100 * (geo - 1), abs=1e-9)
        assert ev[subset]["slowdown_vs_best_max_pct"] == pytest.approx(100 * (max(ratios) - 1), abs=1e-9)
        assert ev[subset]["within_5pct_pct"] == 100 * sum(r <= 1.05 for r in ratios) / len(ratios)
        assert ev[subset]["within_5pct_pct"] >= ev[subset]["accuracy_pct"]
    for name in ("report.md", "ficco.json", "design_space_heatmaps.png", "loss_signatures.png"):
        assert (tmp_path / name).stat().st_size > 0
    text = (tmp_path / "report.md").read_text()
    assert "python3 -m t3 reproduce ficco" in text and "## Pipeline selector (shipped)" in text
    assert "third fresh blind" in text
