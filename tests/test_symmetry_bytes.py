"""Symmetric fast path = all-GPU mode; bytes are conserved; results are deterministic."""

import json
import subprocess
import sys

import pytest
from conftest import assert_same_outcome

from t3.api import run
from t3.config.hardware import load_hardware
from t3.hardware.nmc import update_cost
from t3.schedules import CONFIGS, RunOptions, get_config
from t3.workload import get_model, sublayer_operator

CASES = [("paper-80cu", 8), ("paper-80cu", 4), ("mi300x-8", 8), ("h100-8", 4)]


@pytest.mark.parametrize("hw_name,tp", CASES)
@pytest.mark.parametrize("config", ["sequential", "ideal-gemm-rs-overlap", "concurrent"])
def test_symmetric_equals_all_gpus(hw_name, tp, config):
    hw = load_hardware(hw_name)
    op = sublayer_operator(get_model("t-nlg"), "op", tp, tokens=2048)
    fast = get_config(config).run(op, hw, RunOptions(symmetric=True))
    full = get_config(config).run(op, hw, RunOptions(symmetric=False))
    assert_same_outcome(fast, full)
    assert sum(len(r.schedule.ops) for r in full.results) == tp * sum(
        len(r.schedule.ops) for r in fast.results
    )


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_bytes_conserved(config):
    """Link bytes sent = bytes the link resources carried = bytes received (landing writes);
    DRAM categories add up to the HBM work the engine served."""
    hw = load_hardware("paper-80cu")
    op = sublayer_operator(get_model("mega-gpt-2"), "fc2", 8, tokens=2048)
    out = get_config(config).run(op, hw, RunOptions(symmetric=False))
    for res in out.results:
        sched = res.schedule
        served = {}
        for o in sched.ops:
            for r, a in o.demands:
                kind = sched.resources[r].kind
                served[kind] = served.get(kind, 0.0) + a
        tr = sched.traffic_per_gpu()
        n = len(sched.gpus)
        dram = sum(v for k, v in tr.items() if k != "link")
        # HBM work = DRAM traffic, except that an NMC update costs update_cost writes of channel time
        nmc = config in ("t3", "t3-mca") or (config == "ideal-rs-nmc" and sched.name == "rs-nmc")
        extra = (update_cost(hw) - 1.0) * tr.get("rs_write", 0.0) if nmc else 0.0
        assert served.get("hbm", 0.0) / n == pytest.approx(dram + extra, rel=1e-12)
        assert served.get("link", 0.0) / n == pytest.approx(tr.get("link", 0.0), rel=1e-12)
        # every byte sent lands: per GPU, the landing writes of RS/AG equal the link bytes received
        sent = sum(a for o in sched.ops for r, a in o.demands if sched.resources[r].kind == "link")
        recv_links = {}
        for o in sched.ops:
            for r, a in o.demands:
                if sched.resources[r].kind == "link":
                    dst = int(sched.resources[r].name.split(">")[1])
                    recv_links[dst] = recv_links.get(dst, 0.0) + a
        assert sum(recv_links.values()) == pytest.approx(sent)
        if recv_links:
            assert (
                len(set(round(v) for v in recv_links.values())) == 1
            )  # symmetric: every GPU receives the same


def test_two_runs_identical_json():
    cmd = [sys.executable, "-m", "t3", "run", "--model", "t-nlg", "--tp", "8", "--sublayer", "fc2", "--json"]
    a = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    b = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert a == b
    rec = json.loads(a)
    for key in (
        "model",
        "tp",
        "sublayer",
        "config",
        "hardware",
        "tokens",
        "time_s",
        "breakdown_s",
        "dram_bytes",
        "link_bytes",
    ):
        assert key in rec
    assert set(rec["breakdown_s"]) >= {"gemm", "reduce_scatter", "all_gather", "exposed_comm"}
    assert set(rec["dram_bytes"]) >= {"gemm_read", "gemm_write", "rs_read", "rs_write", "ag_read", "ag_write"}
    assert rec["time_s"] == pytest.approx(
        sum(rec["breakdown_s"][k] for k in ("gemm", "reduce_scatter", "all_gather")), rel=1e-6
    )


def test_api_orders_configs_sensibly():
    seq = run("t-nlg", 8, "fc2", "sequential")["time_s"]
    ideal = run("t-nlg", 8, "fc2", "ideal-gemm-rs-overlap")["time_s"]
    assert ideal < seq
