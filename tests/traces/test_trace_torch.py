"""A real trace: torch.profiler on a gloo group of 2 ranks (CPU) running a Megatron-style MLP; the
import must find exactly the pairs the ranks ran, with their shapes, sizes and group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime"))
from dist_harness import run_group, values  # noqa: E402
from trace_workers import megatron_mlp  # noqa: E402

from t3.config.hardware import load_hardware  # noqa: E402
from t3.traces import import_trace  # noqa: E402
from t3.traces.project import project  # noqa: E402


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("torch-trace")
    ran = values(run_group(megatron_mlp, 2, str(d), deadline_s=120.0))
    return d, ran


@pytest.mark.parametrize("rank", [0, 1])
def test_import_finds_what_ran(traces, rank):
    d, ran = traces
    t = import_trace(d / f"rank{rank}.pt.trace.json")
    assert (t.device, t.backend, t.rank, t.world_size) == ("cpu", "gloo", rank, 2)
    got = [{"kind": p.kind, "m": p.gemm.m, "n": p.gemm.n, "k": p.gemm.k, "elems": p.collective.full_elems}
           for p in t.pairs]  # fmt: skip
    assert got == ran[rank]
    for p in t.pairs:
        c = p.collective
        assert (c.group_size, c.dtype, c.timing, p.gemm.dtype) == (2, "fp32", "gloo-thread", "fp32")
        assert c.nbytes == 4 * c.full_elems and 0 <= c.exposed_s <= c.dur_s and c.dur_s > 0
        assert p.gemm.busy_s > 0 and p.gemm.kernels == 0
        assert p.measured_s == pytest.approx(p.gemm.busy_s + c.exposed_s)
    assert not t.unpaired()  # every collective of this program belongs to a GEMM


def test_project_on_cpu_preset_reports_model_error(traces):
    d, ran = traces
    t = import_trace(d / "rank0.pt.trace.json")
    pr = project(t, load_hardware("cpu-local"), ficco="select")
    assert pr.same_hw
    doc = pr.as_dict()
    err = doc["model_error"]
    assert len(err["pairs"]) == len(ran[0])
    for e in err["pairs"]:
        p = t.pairs[e["pair"]]
        assert e["gemm_measured_s"] == p.gemm.busy_s and e["collective_measured_s"] == p.collective.dur_s
        assert e["gemm_error_pct"] == pytest.approx(100 * (e["gemm_predicted_s"] / p.gemm.busy_s - 1))


def test_cli_on_the_real_trace(traces, tmp_path):
    d, _ = traces
    p = subprocess.run([sys.executable, "-m", "t3", "trace", "project", str(d / "rank1.pt.trace.json"), "--hw",
                        "h100-8", "--ficco", "select", "--out", str(tmp_path / "o"), "--json"],
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["same_hardware"] is False and len(doc["pairs"]) == 6
