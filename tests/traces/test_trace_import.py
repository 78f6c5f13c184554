"""Kineto trace import: the constructed GPU fixture (NCCL schema) and bad input.

Oracle for the fixture: make_gpu_fixture.LAYER, the layer the file was built from (shapes, order,
kernel durations, which kernel overlaps which collective).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from t3.traces import TraceError, import_trace
from t3.traces.kineto import canonical, gemm_shape

sys.path.insert(0, str(Path(__file__).parent))
import make_gpu_fixture as fx  # noqa: E402

GPU = Path(__file__).parent / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
LLAMA = Path(__file__).parent / "data" / "hf" / "llama-3.1-8b.json"


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


def test_fixture_is_what_the_generator_builds():
    assert json.loads(gzip.decompress(GPU.read_bytes())) == fx.build()


def test_gpu_fixture_pairs_shapes_and_times():
    t = import_trace(GPU, LLAMA)
    assert (t.device, t.device_name, t.backend, t.rank, t.world_size, t.steps) == (
        "gpu", "NVIDIA H100 80GB HBM3", "nccl", 0, 8, 2)  # fmt: skip
    gemms = [d for k, d, _ in fx.LAYER if k == "gemm"]
    assert [(g.m, g.n, g.k, g.dtype) for g in t.gemms] == [
        (d["m"], d["n"], d["k"], "bf16") for d in gemms
    ] * 2
    assert [g.busy_s * 1e6 for g in t.gemms] == pytest.approx([u for k, _, u in fx.LAYER if k == "gemm"] * 2)
    want = [kind for kind, _ in fx.PAIRS] * 2
    assert [p.kind for p in t.pairs] == want
    names = {d["name"]: (d["m"], d["n"], d["k"]) for d in gemms}
    assert [(p.gemm.m, p.gemm.n, p.gemm.k) for p in t.pairs] == [names[n] for _, n in fx.PAIRS] * 2
    labels = {"qkv": "qkv", "fc1": "fc1", "out-proj": "op (attention out-projection)", "fc2": "fc2"}
    assert [p.label for p in t.pairs] == [labels[n] for _, n in fx.PAIRS] * 2
    for p in t.pairs:
        c = p.collective
        assert (c.group_size, c.dtype, c.timing, c.group) == (8, "bf16", "gpu-kernel", "1")
        assert c.nbytes == fx.T * fx.H * 2  # the full activation, bf16
    # exposure: the out-projection's reduce-scatter runs beside the 40 us norm kernel; nothing else overlaps
    colls = [u for k, _, u in fx.LAYER if k in ("ag", "rs")]
    exp = [u - (40.0 if i == 1 else 0.0) for i, u in enumerate(colls)]
    assert [p.collective.exposed_s * 1e6 for p in t.pairs] == pytest.approx(exp * 2)
    assert t.exposed_union_s == pytest.approx(sum(c.exposed_s for c in t.collectives))  # none overlap
    un = t.unpaired()
    assert [(c.op, c.in_elems, c.dtype, c.group_size) for c in un] == [
        ("all-reduce", fx.GRAD_BUCKET, "fp32", 8)
    ] * 2


def test_import_cli_json_and_parquet(tmp_path):
    pq = tmp_path / "pairs.parquet"
    p = _t3("trace", "import", str(GPU), "--json", "--parquet", str(pq))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["trace"]["pairs"] == 8 and len(doc["unpaired_collectives"]) == 2
    df = pd.read_parquet(pq)
    assert list(df["kind"]) == [p["kind"] for p in doc["pairs"]]
    assert list(df["gemm_k"]) == [p["gemm"]["k"] for p in doc["pairs"]]
    txt = _t3("trace", "import", str(GPU))
    assert txt.returncode == 0 and "reduce-scatter" in txt.stdout and "µs" in txt.stdout


def test_gemm_shapes_and_names():
    assert gemm_shape("aten::addmm", [[64], [8, 32], [32, 64], [], []]) == (8, 64, 32, 1)
    assert gemm_shape("aten::bmm", [[4, 8, 32], [4, 32, 16]]) == (8, 16, 32, 4)
    assert gemm_shape("aten::linear", [[2, 8, 32], [64, 32], [64]]) == (16, 64, 32, 1)
    assert gemm_shape("aten::mm", [[8, 32], [31, 64]]) is None
    assert gemm_shape("aten::mm", [[], []]) is None
    for name, op in [("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)", "reduce-scatter"),
                     ("ncclKernel_AllReduce_RING_LL_Sum_float", "all-reduce"), ("c10d::_allgather_base_", "all-gather"),
                     ("gloo:all_to_all", "all-to-all"), ("nccl:broadcast", "broadcast"), ("aten::mm", None)]:  # fmt: skip
        assert canonical(name) == op


def _trace_file(tmp_path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm"', "truncated file"),
        ("", "the file is empty"),
        ('{"model_type": "llama"}', "no 'traceEvents' list"),
        (
            '{"traceEvents": [{"ph": "X", "cat": "gemm", "name": "w0", "ts": 0, "dur": 1}]}',
            "written by another tool",
        ),
        (b"\x1f\x8b\x08\x00garbage", "damaged or truncated gzip"),
        (b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_bad_traces_are_one_line_errors(tmp_path, content, needle):
    f = _trace_file(tmp_path, "t.json", content)
    with pytest.raises(TraceError, match=needle):
        import_trace(f)
    p = _t3("trace", "import", str(f))
    assert p.returncode == 2 and "Traceback" not in p.stderr and needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_directory_and_missing_file(tmp_path):
    for path, needle in ((tmp_path, "is a directory"), (tmp_path / "x.json", "not found")):
        p = _t3("trace", "import", str(path))
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr


def test_t3s_own_simulation_trace_is_rejected(tmp_path):
    out = tmp_path / "sim.json"
    assert _t3("run", "--trace", str(out)).returncode == 0
    p = _t3("trace", "import", str(out))
    assert p.returncode == 2 and "not a torch.profiler trace" in p.stderr


def _strip(doc: dict, pred) -> dict:
    return {**doc, "traceEvents": [e for e in doc["traceEvents"] if not pred(e)]}


def test_without_shapes_or_collectives_nothing_to_pair(tmp_path):
    doc = fx.build()
    no_shapes = {**doc, "traceEvents": [{**e, "args": {k: v for k, v in e.get("args", {}).items()
                                                        if k not in ("Input Dims", "Input type")}}
                                        for e in doc["traceEvents"]]}  # fmt: skip
    f = _trace_file(tmp_path, "a.json", json.dumps(no_shapes))
    t = import_trace(f)
    assert not t.pairs and t.unshaped_gemms == 8
    assert any("record_shapes=True" in n for n in t.notes)
    p = _t3("trace", "import", str(f))
    assert p.returncode == 0 and "nothing to pair" in p.stdout and "record_shapes=True" in p.stdout
    q = _t3("trace", "project", str(f), "--out", str(tmp_path / "o"))
    assert q.returncode == 2 and "nothing to project" in q.stderr and "Traceback" not in q.stderr
    no_comm = _strip(doc, lambda e: "nccl" in e.get("name", "").lower() or e.get("name", "").startswith("c10d")
                     or e.get("name") == "record_param_comms")  # fmt: skip
    t = import_trace(_trace_file(tmp_path, "b.json", json.dumps(no_comm)))
    assert not t.pairs and not t.collectives and any("no collectives" in n for n in t.notes)


def test_exposed_communication_counts_overlapping_collectives_once(tmp_path):
    """Two gloo all-reduces on two worker threads overlap in [50, 100] us; a 10 us op computes in
    [120, 130] us. Exposed per collective: 100 and 90 us; exposed communication (union): 140 us."""

    def ev(name, cat, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    doc = {"distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2}, "traceEvents": [
        ev("gloo:all_reduce", "user_annotation", 2, 1000.0, 100.0, **{"Input Dims": [[64]], "Input type": ["float"]}),
        ev("gloo:all_reduce", "user_annotation", 3, 1050.0, 100.0, **{"Input Dims": [[64]], "Input type": ["float"]}),
        ev("aten::add", "cpu_op", 1, 1120.0, 10.0),
    ]}  # fmt: skip
    t = import_trace(_trace_file(tmp_path, "o.json", json.dumps(doc)))
    assert [c.exposed_s * 1e6 for c in t.collectives] == pytest.approx([100.0, 90.0])
    assert t.exposed_union_s * 1e6 == pytest.approx(140.0)
    assert [(c.op, c.in_elems, c.group_size, c.dtype) for c in t.collectives] == [
        ("all-reduce", 64, 2, "fp32")
    ] * 2
