"""Chrome/Perfetto trace: structure of the JSON (what the Trace Event Format requires) and content."""

import json
import subprocess
import sys

import pytest

from t3.config.hardware import load_hardware
from t3.schedules import RunOptions, get_config
from t3.sim.trace import trace_events, write_trace
from t3.workload import get_model, sublayer_operator

PH_KEYS = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "C": {"name", "ph", "ts", "pid", "args"},
           "M": {"name", "ph", "pid", "args"}}  # fmt: skip


def validate(doc: dict) -> list[dict]:
    """Checks a Perfetto-loadable JSON trace: event fields and types, finite non-negative times,
    numeric counters, named tracks, and slices on one track that nest (never partly overlap)."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    ev = doc["traceEvents"]
    named = set()
    for e in ev:
        assert e["ph"] in PH_KEYS, e
        assert PH_KEYS[e["ph"]] <= set(e), e
        assert isinstance(e["name"], str) and isinstance(e["pid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            if e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
        if e["ph"] in ("X", "C"):
            assert isinstance(e["ts"], float | int) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["tid"], int)
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, float | int) for v in e["args"].values())
    by_track: dict = {}
    for e in ev:
        if e["ph"] == "X":
            assert (e["pid"], e["tid"]) in named
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for iv in by_track.values():
        iv.sort()
        for (_, e0), (s1, e1) in zip(iv, iv[1:], strict=False):
            assert s1 >= e0 - 1e-6 or e1 <= e0 + 1e-6  # disjoint or nested
    return ev


@pytest.mark.parametrize("config", ["t3", "t3-mca", "sequential", "ideal-rs-nmc"])
def test_trace_structure(config, tmp_path):
    hw = load_hardware("paper-80cu")
    op = sublayer_operator(get_model("t-nlg"), "fc2", 4, tokens=2048)
    out = get_config(config).run(op, hw, RunOptions(trace=True))
    path = tmp_path / "t.json"
    n = write_trace(path, out.results)
    ev = validate(json.loads(path.read_text()))
    assert len(ev) == n
    # one slice per op, every op present
    assert sum(e["ph"] == "X" and e.get("cat") != "span" for e in ev) == sum(
        len(r.schedule.ops) for r in out.results
    )
    hbm = [e for e in ev if e["ph"] == "C" and e["name"].startswith("HBM")]
    assert hbm and all(
        v <= hw.hbm.effective_Bps / 1e9 * (1 + 1e-9) for e in hbm for v in [sum(e["args"].values())]
    )
    # counters return to zero at the end
    last = {}
    for e in hbm:
        last[(e["pid"], e["name"])] = e
    assert all(sum(e["args"].values()) == 0 for e in last.values())


def test_t3_trace_tracks():
    hw = load_hardware("paper-80cu")
    op = sublayer_operator(get_model("t-nlg"), "fc2", 4, tokens=2048)
    out = get_config("t3").run(op, hw, RunOptions(trace=True, symmetric=False))
    ev = trace_events(out.results)
    tracks = {(e["pid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
    for g in range(4):
        for name in ("GEMM stages", "gemm-load", "gemm-compute", "dma", "remote-store", "ag-step"):
            assert (g, name) in tracks
    stages = [e for e in ev if e.get("cat") == "span" and e["pid"] == 0]
    assert len(stages) == 4 and stages[0]["name"].startswith("stage 1: chunk 0 (remote)")
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert any(n.startswith("link:") for n in counters) and any(n.startswith("tracker") for n in counters)
    # link counter peaks at the link bandwidth
    link = [sum(e["args"].values()) for e in ev if e["ph"] == "C" and e["name"].startswith("link:0>3")]
    assert max(link) == pytest.approx(hw.link.bandwidth_Bps / 1e9)


def test_cli_trace(tmp_path):
    path = tmp_path / "out.json"
    p = subprocess.run([sys.executable, "-m", "t3", "run", "--config", "t3-mca", "--tp", "4", "--tokens", "2048",
                        "--trace", str(path)], capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0, p.stderr
    validate(json.loads(path.read_text()))
    assert "trace written" in p.stdout
