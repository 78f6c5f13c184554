"""The dataset of published measurements: the calibration rows are exactly the agreed list, every row
loads, and malformed rows fail with one error naming the file, the row and the field."""

from __future__ import annotations

import pytest

from t3.validation import DatasetError, load_dataset, parse_rows

MiB, GiB = 1 << 20, 1 << 30

# The calibration list, written out independently of the data files (the project's calibration
# targets: NVIDIA/Megatron-LM PR #5596, the ROCm blog on RCCL/xGMI, pranjalssh/fast.cu, the ROCm blog
# "Measuring Max-Achievable FLOPs - Part 2", bytedance/flux issue #90; and the host-bound sizes of a
# 4 x H100 nccl-tests -g 4 run, the calibration rows of collective.host_call_s; the 8-GPU all-to-all
# rows of 32-512 MiB of xxrjun/nccl-tests-cluster, those of collective.p2p_connection_Bps, and its 8-GPU
# all-reduce rows of 32-512 MiB, those of collective.nvls_loop_s; the 32 KiB - 1 MiB rows of
# ml-engineering's one-node B200 all_reduce_bench.py sweep and the 8 B - 1 MiB calls timed alone of its
# torch-dist-bench.py page's 8x H200 latency table, those of collective.call_alone_s; the same page's 8x B200
# calls of 8 B - 1 KiB back to back, those of b200-8's base latencies).
EXPECTED_CALIBRATION = {
    # (hardware, category, key, measured value in its published unit)
    *{("h100-8", "collective_busbw", ("all_gather", s * MiB), t)
      for s, t in ((2, 20.2), (8, 43.4), (32, 118.9), (128, 385.3))},
    *{("h100-8", "collective_busbw", ("reduce_scatter", s * MiB), t) for s, t in ((2, 18.6), (8, 47.0), (32, 112.6))},
    *{("mi300x-8", "collective_busbw", ("all_reduce", b), bw)
      for b, bw in ((1 * MiB, 66.9), (4 * MiB, 141.9), (16 * MiB, 197.3), (128 * MiB, 294.6), (1 * GiB, 314.7),
                    (16 * GiB, 319.0))},
    *{("h100-8", "collective_busbw", ("all_reduce", k * 1024), t)
      for k, t in ((8, 25.22), (16, 23.78), (32, 24.40), (64, 24.56), (128, 24.62))},
    *{("h100-8", "collective_busbw", ("all_reduce", s * MiB), t)
      for s, t in ((32, 182.87), (64, 313.66), (128, 564.78), (256, 1081.14), (512, 2115.28))},
    *{("h100-8", "collective_busbw", ("all_to_all", s * MiB), t)
      for s, t in ((32, 124.79), (64, 215.51), (128, 393.32), (256, 777.88), (512, 1511.21))},
    *{("b200-8", "collective_busbw", ("all_reduce", k * 1024), bw)
      for k, bw in ((32, 1.20), (64, 2.17), (128, 4.86), (256, 9.54), (512, 18.71), (1024, 36.06))},
    *{("b200-8", "collective_busbw", (op, b), us)
      for op, b, us in (("all_reduce", 8, 23.5), ("all_reduce", 1024, 29.7), ("all_gather", 1024, 20.5),
                        ("reduce_scatter", 1024, 20.5), ("all_to_all", 1024, 15.6))},
    *{("h200-8", "collective_busbw", ("all_reduce", b), us)
      for b, us in ((8, 36.6), (64, 38.0), (1024, 39.1), (32768, 41.7), (262144, 43.5), (1 << 20, 50.9))},
    *{("gb200-nvl72", "collective_busbw", ("all_reduce", k * 1024), bw)
      for k, bw in ((8, 0.76), (16, 1.46), (32, 2.88), (64, 5.71), (128, 11.29))},
    ("h100-8", "gemm_tflops", (6144, 6144, 6144, "bf16"), 741.1),
    ("h100-8", "gemm_tflops", (8192, 8192, 8192, "bf16"), 797.8),
    ("h100-8", "gemm_tflops", (12288, 12288, 12288, "bf16"), 822.8),
    ("mi300x-8", "gemm_tflops", (4096, 4864, 32896, "bf16"), 708.0),
    ("mi300x-8", "gemm_tflops", (4096, 4864, 32896, "fp16"), 654.0),
    # mi325x-8's GEMM clocks are read from these runs (nothing fitted to their TFLOPS)
    ("mi325x-8", "gemm_tflops", (4096, 4864, 32896, "bf16"), 843.0),
    ("mi325x-8", "gemm_tflops", (4096, 4864, 32896, "fp16"), 794.0),
}  # fmt: skip
FLUX_AG = {1024: (0.247, 0.250), 2048: (0.454, 0.426), 4096: (0.867, 0.673), 8192: (1.692, 1.315),
           16384: (3.387, 2.804), 32768: (6.831, 5.819)}  # fmt: skip
FLUX_RS = {1024: (0.180, 0.183), 2048: (0.290, 0.331), 4096: (0.542, 0.633), 8192: (1.040, 1.241),
           16384: (2.011, 2.459), 32768: (3.978, 4.986)}  # fmt: skip
for _op, _data, _n, _k in (("ag-gemm", FLUX_AG, 7168, 8192), ("gemm-rs", FLUX_RS, 8192, 3584)):
    for _m, (_torch, _flux) in _data.items():
        EXPECTED_CALIBRATION.add(("h100-8", "overlap_speedup", (_op, _m, _n, _k), round(_torch / _flux, 4)))
        EXPECTED_CALIBRATION.add(("h100-8", "overlap_time", (_op, _m, _n, _k), _torch))


def _key(r):
    w = r.workload
    if r.category == "collective_busbw":
        return (w["op"], w["nbytes"])
    if r.category == "gemm_tflops":
        return (w["m"], w["n"], w["k"], w["dtype"])
    return (w["op"], w["m"], w["n"], w["k"])


@pytest.fixture(scope="module")
def rows():
    return load_dataset()


def test_calibration_rows_are_exactly_the_agreed_list(rows):
    got = {(r.hardware, r.category, _key(r), r.measured) for r in rows if r.role == "calibration"}
    assert got == EXPECTED_CALIBRATION
    assert sum(r.role == "calibration" for r in rows) == len(EXPECTED_CALIBRATION)


def test_calibration_sources_are_the_original_publications(rows):
    sources = {r.source.split("/blob/")[0] for r in rows if r.role == "calibration"}
    assert sources == {
        "https://github.com/NVIDIA/Megatron-LM/pull/5596",
        "https://rocm.blogs.amd.com/software-tools-optimization/mi300x-rccl-xgmi/README.html",
        "https://github.com/pranjalssh/fast.cu",
        "https://rocm.blogs.amd.com/software-tools-optimization/measuring-max-achievable-flops-part2/README.html",
        "https://github.com/bytedance/flux/issues/90",
        "https://github.com/dudeperf3ct/dudeperf3ct.github.io",
        "https://github.com/Azure/AI-benchmarking-guide",
        "https://github.com/xxrjun/nccl-tests-cluster",
        "https://github.com/stas00/ml-engineering",
    }


def test_validation_rows_are_many_and_cover_every_category(rows):
    val = [r for r in rows if r.role == "validation"]
    assert len(val) >= 20
    assert {r.category for r in val} == {
        "collective_busbw", "gemm_tflops", "overlap_speedup", "overlap_time", "interference"
    }  # fmt: skip
    assert {r.hardware for r in val if r.category == "collective_busbw"} >= {"h100-8", "mi300x-8"}
    assert len({r.id for r in rows}) == len(rows)


GOOD = """
[[row]]
id = "x-1"
category = "collective_busbw"
role = "validation"
hardware = "h100-8"
measured = 27.42
unit = "us"
source = "https://example.org/page"
locator = "table 1"
conventions = "nccl-tests, out-of-place"
[row.workload]
op = "all_reduce"
nbytes = 1048576
[row.published]
time_us = 27.42
"""


def test_a_good_row_loads_with_defaults():
    (r,) = parse_rows(GOOD, "t.toml")
    assert r.workload == {
        "op": "all_reduce", "nbytes": 1048576, "gpus": 8, "algo": "auto", "timing": "host", "gpus_per_thread": 1
    }  # fmt: skip
    assert r.measured == 27.42 and r.unit == "us" and r.origin == "t.toml"


@pytest.mark.parametrize(
    "edit,field",
    [
        (
            lambda t: t.replace(
                'conventions = "nccl-tests, out-of-place"\n', 'conventions = "nccl-tests"\ncolour = "red"\n'
            ),
            "colour: unknown field",
        ),
        (lambda t: t.replace('unit = "us"', 'unit = "ms"'), "unit: 'ms' is not a unit of collective_busbw"),
        (lambda t: t.replace('source = "https://example.org/page"\n', ""), "source: missing field"),
        (lambda t: t.replace("https://example.org/page", "see the blog"), "source: must be an https:// URL"),
        (lambda t: t.replace('locator = "table 1"', 'locator = ""'), "locator: must be a non-empty string"),
        (
            lambda t: t.replace('category = "collective_busbw"', 'category = "throughput"'),
            "category: unknown category",
        ),
        (lambda t: t.replace('role = "validation"', 'role = "fitted"'), "role: unknown role 'fitted'"),
        (lambda t: t.replace('hardware = "h100-8"', 'hardware = "b200"'), "hardware: unknown preset 'b200'"),
        (lambda t: t.replace("measured = 27.42", 'measured = "fast"'), "measured: must be a number"),
        (lambda t: t.replace("measured = 27.42", "measured = -1.0"), "measured: must be > 0"),
        (
            lambda t: t.replace('op = "all_reduce"', 'op = "broadcast"'),
            "workload.op: unknown value 'broadcast'",
        ),
        (lambda t: t.replace("nbytes = 1048576", "nbytes = 1.5"), "workload.nbytes: must be an integer"),
        (lambda t: t.replace("nbytes = 1048576\n", ""), "workload.nbytes: missing field"),
        (lambda t: t.replace("nbytes = 1048576", "nbytes = 1048576\nm = 3"), "workload.m: unknown field"),
        (lambda t: t.replace("time_us = 27.42", "time_us = 30.0"), "published.time_us"),
    ],
)
def test_malformed_rows_name_the_row_and_the_field(edit, field):
    with pytest.raises(DatasetError) as e:
        parse_rows(edit(GOOD), "t.toml")
    msg = str(e.value)
    assert msg.startswith("t.toml: row 1 ('x-1'): ")
    assert field in msg
    assert "\n" not in msg


def test_published_time_and_busbw_must_satisfy_the_nccl_tests_formula():
    # 1 MiB all-reduce on 8 GPUs in 27.42 us: algbw 38.24 GB/s, busbw = x 2(8-1)/8 = 66.92 GB/s
    ok = GOOD.replace("measured = 27.42", "measured = 66.93").replace('unit = "us"', 'unit = "GB/s"')
    ok = ok.replace("time_us = 27.42", "time_us = 27.42\nbusbw_GBps = 66.93")
    assert parse_rows(ok, "t.toml")[0].measured == 66.93
    bad = ok.replace("busbw_GBps = 66.93", "busbw_GBps = 38.24").replace(
        "measured = 66.93", "measured = 38.24"
    )
    with pytest.raises(
        DatasetError, match="published.busbw_GBps: 38.24 GB/s, but size / time x factor gives 66.92 GB/s"
    ):
        parse_rows(bad, "t.toml")


def test_overlap_rows_check_schedule_names_and_speedup_arithmetic():
    row = """
[[row]]
id = "o-1"
category = "overlap_speedup"
role = "validation"
hardware = "h100-8"
measured = 1.25
unit = "x"
source = "https://example.org/o"
locator = "table 2"
conventions = "CUDA events"
[row.workload]
op = "gemm-rs"
m = 1024
n = 1024
k = 1024
schedule = "shard-g8-M-dma"
[row.published]
baseline_ms = 1.0
fused_ms = 0.8
"""
    assert parse_rows(row, "o.toml")[0].workload["baseline"] == "bulk-g1-M-cu"
    with pytest.raises(
        DatasetError, match=r"o.toml: row 1 \('o-1'\): workload.schedule: 'fast-g8' does not match"
    ):
        parse_rows(row.replace("shard-g8-M-dma", "fast-g8"), "o.toml")
    with pytest.raises(DatasetError, match="measured: 1.3 x, but baseline / fused = 1.2500"):
        parse_rows(row.replace("measured = 1.25", "measured = 1.3"), "o.toml")


def test_duplicate_ids_and_missing_files(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(GOOD)
    b.write_text(GOOD)
    with pytest.raises(DatasetError, match=r"b.toml: row 'x-1': id: duplicate \(also in a.toml\)"):
        load_dataset([a, b])
    with pytest.raises(DatasetError, match="dataset: file .*nope.toml' not found"):
        load_dataset([tmp_path / "nope.toml"])
    with pytest.raises(DatasetError, match="not valid TOML"):
        parse_rows("[[row]\nid=", "bad.toml")


def test_a_predictor_with_overrides_predicts_on_the_overridden_preset(rows):
    """Calibration scripts predict rows through Predictor(overrides): the same call t3 validate makes, on the
    preset with the overrides applied (here NVLS's per-loop cost off: a 32 MiB NVLS row gets faster)."""
    from t3 import api
    from t3.config.hardware import load_hardware
    from t3.validation.runner import Predictor

    r = next(x for x in rows if x.id == "h100-ar-32MiB-g8-xxrjun")
    base, off = Predictor().predict(r), Predictor({"collective.nvls_loop_s": 0.0}).predict(r)
    assert base.detail["algo"].startswith("nvls") and off.predicted > base.predicted
    w = r.workload
    x = api.collective(
        "all_reduce",
        w["nbytes"],
        gpus=w["gpus"],
        hardware=load_hardware("h100-8", {"collective.nvls_loop_s": 0.0}),
    )
    assert off.detail["time_s"] == x["time_s"]


def test_a_gemm_rows_output_type_is_checked_and_optional():
    row = """
[[row]]
id = "g-1"
category = "gemm_tflops"
role = "validation"
hardware = "h100-8"
measured = 700.0
unit = "TFLOPS"
source = "https://example.org/page"
locator = "table 1"
conventions = "cublasGemmEx"
[row.workload]
m = 4096
n = 4096
k = 4096
dtype = "fp16"
"""
    assert parse_rows(row, "g.toml")[0].workload["out_dtype"] == ""  # the library's default
    assert parse_rows(row + 'out_dtype = "fp32"\n', "g.toml")[0].workload["out_dtype"] == "fp32"
    with pytest.raises(
        DatasetError, match=r"g.toml: row 1 \('g-1'\): workload.out_dtype: unknown dtype 'int8'"
    ):
        parse_rows(row + 'out_dtype = "int8"\n', "g.toml")


def test_a_graph_timed_gemm_row_costs_the_devices_gap_not_the_hosts_launch():
    """timing = "graph" (calls replayed in a CUDA graph): the row is compared with the model's time less its
    launch(es) plus one compute.graph_launch_s per kernel (two for a split-K plan: the reduction kernel);
    the same GEMM as a host-timed row keeps the launch. A preset without a measured gap refuses the row by
    name before predicting anything else."""
    from t3 import api
    from t3.config.hardware import load_hardware
    from t3.validation.explain import explain
    from t3.validation.runner import Predictor

    def row(hw: str, m: int, n: int, k: int, timing: str) -> str:
        return f"""
[[row]]
id = "g-{timing}"
category = "gemm_tflops"
role = "validation"
hardware = "{hw}"
measured = 100.0
unit = "TFLOPS"
source = "https://example.org/page"
locator = "table 1"
conventions = "do_bench_cudagraph"
[row.workload]
m = {m}
n = {n}
k = {k}
dtype = "bf16"
timing = "{timing}"
"""

    for m, n, k in ((16, 4096, 4096), (128, 1024, 8192)):
        hw = load_hardware("h100-8")
        r = api.gemm(m, n, k, hardware=hw)
        kernels = 2 if r["split_k"] > 1 else 1
        assert r["kernels"] == kernels
        graph = Predictor().predict(parse_rows(row("h100-8", m, n, k, "graph"), "g.toml")[0])
        host = Predictor().predict(parse_rows(row("h100-8", m, n, k, "host"), "g.toml")[0])
        flop = 2 * m * n * k
        assert host.predicted == pytest.approx(flop / r["time_s"] / 1e12, rel=1e-12)
        t = r["time_s"] - kernels * hw.compute.kernel_launch_s + kernels * hw.compute.graph_launch_s
        assert graph.predicted == pytest.approx(flop / t / 1e12, rel=1e-12)
        assert graph.detail["compared_s"] == pytest.approx(t, rel=1e-12)
        said = dict(explain(graph))["compared time"]
        assert said.startswith(f"{t * 1e6:.4g} us: replayed in a CUDA graph") and f"plus {kernels} x" in said
    assert kernels == 2  # (the second shape is a split-K plan on h100-8)
    assert load_hardware("mi300x-8").compute.graph_launch_s is None
    with pytest.raises(DatasetError, match=r"g-graph: workload.timing: 'graph' needs compute.graph_launch_s"):
        Predictor().predict(parse_rows(row("mi300x-8", 16, 4096, 4096, "graph"), "g.toml")[0])
