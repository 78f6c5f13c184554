"""The categories that `t3 measure` and the interference characterisations fill: interference, hbm_bandwidth,
latency. Good rows load with their defaults; malformed ones are one error naming the row and the field;
measured rows carry their device; the runner compares interference rows in points."""

from __future__ import annotations

import pytest

from t3.validation import DatasetError, parse_rows
from t3.validation.runner import Predictor

HEAD = """
[[row]]
id = "x-1"
role = "validation"
hardware = "h100-8"
source = "https://example.org/page"
locator = "table 1"
conventions = "events"
"""
INTERFERENCE = (
    HEAD
    + """category = "interference"
measured = 12.5
unit = "%"
[row.workload]
m = 4096
n = 4096
k = 4096
comm = "sm_copy"
nbytes = 268435456
gpus = 1
cus = 16
"""
)
PAIR = (
    HEAD
    + """category = "interference"
measured = -31.76
unit = "%"
[row.workload]
victim = "pair"
m = 8192
n = 8192
k = 8192
dtype = "fp16"
comm = "all_gather"
nbytes = 536870912
arrangement = "together"
[row.published]
alone_ms = 2.96
together_ms = 2.02
"""
)
STREAM = (
    HEAD
    + """category = "hbm_bandwidth"
measured = 2900.0
unit = "GB/s"
[row.workload]
stream = "copy"
nbytes = 1073741824
"""
)
LATENCY = (
    HEAD
    + """category = "latency"
measured = 4.5
unit = "us"
[row.workload]
what = "kernel_launch"
"""
)
MEASURED = (
    LATENCY.replace(
        'source = "https://example.org/page"', 'source = "measured by `t3 measure`, NVIDIA H100 80GB HBM3"'
    )
    + """[row.device]
gpu = "NVIDIA H100 80GB HBM3"
driver = "570.86"
runtime = "CUDA 12.8"
torch = "2.13.0"
command = "t3 measure --out m"
"""
)


def test_good_rows_load_with_their_defaults():
    (r,) = parse_rows(INTERFERENCE, "t.toml")
    assert r.workload == {"victim": "compute", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "comm": "sm_copy",
                          "nbytes": 268435456, "gpus": 1, "cus": 16, "algo": "auto", "executor": "cu",
                          "channels": 0, "lead_us": 0.0, "first": "comm", "arrangement": "background"}  # fmt: skip
    (p,) = parse_rows(PAIR, "t.toml")
    assert p.workload["gpus"] == 8 and p.published == {"alone_ms": 2.96, "together_ms": 2.02}
    (s,) = parse_rows(STREAM, "t.toml")
    assert s.workload == {"stream": "copy", "nbytes": 1073741824, "cus": 0}
    (m,) = parse_rows(MEASURED, "t.toml")
    assert m.device["gpu"] == "NVIDIA H100 80GB HBM3" and not m.blind


@pytest.mark.parametrize(
    "text,edit,field",
    [
        (INTERFERENCE, lambda t: t.replace("gpus = 1", "gpus = 8"), "workload.gpus: sm_copy is one GPU's own"),
        (PAIR, lambda t: t.replace("nbytes = 536870912", "nbytes = 536870912\ngpus = 1"), "workload.gpus: a collective"),
        (INTERFERENCE, lambda t: t.replace('comm = "sm_copy"', 'comm = "ce_copy"'), "workload.cus: only sm_copy"),
        (PAIR, lambda t: t.replace('arrangement = "together"', 'arrangement = "background"'),
         "workload.arrangement: a pair"),
        (INTERFERENCE, lambda t: t.replace("cus = 16", 'cus = 16\nfirst = "gemm"'), "workload.first: an order"),
        (PAIR, lambda t: t.replace('arrangement = "together"', 'arrangement = "together"\nfirst = "both"'),
         "workload.first: unknown value"),
        (PAIR, lambda t: t.replace("measured = -31.76", "measured = -20.0"), "measured: -20.0 %, but together / alone"),
        (PAIR, lambda t: t.replace('comm = "all_gather"', 'comm = "broadcast"'), "workload.comm: unknown value"),
        (INTERFERENCE, lambda t: t.replace("measured = 12.5", "measured = -100.0"), "measured: a slowdown in %"),
        (STREAM, lambda t: t.replace('stream = "copy"', 'stream = "scale"'), "workload.stream: unknown value"),
        (LATENCY, lambda t: t.replace('what = "kernel_launch"', 'what = "sync"'), "workload.what: unknown value"),
        (LATENCY, lambda t: t.replace('source = "https://example.org/page"', 'source = "my lab"'), "source: must be"),
        (MEASURED, lambda t: t.replace('driver = "570.86"\n', ""), "device.driver: missing field"),
        (MEASURED, lambda t: t.replace('driver = "570.86"', 'driver = 570'), "device.driver: must be a non-empty"),
        (LATENCY + '[row.device]\ngpu = "x"\n', lambda t: t, "device: only rows measured by"),
        (LATENCY, lambda t: t.replace('category = "latency"', 'category = "latency"\nblind = "yes"'), "blind: must be"),
    ],
)  # fmt: skip
def test_malformed_rows_name_the_row_and_the_field(text, edit, field):
    with pytest.raises(DatasetError) as e:
        parse_rows(edit(text), "t.toml")
    assert str(e.value).startswith("t.toml: row 1 ('x-1'): ")
    assert field in str(e.value)


def test_interference_rows_are_compared_in_points():
    (r,) = parse_rows(PAIR, "t.toml")
    o = Predictor().predict(r)
    assert o.unit == "%" and o.measured == -31.76
    assert o.error == pytest.approx((o.predicted - o.measured) / 100)
    d = o.detail
    # the pair's prediction is the pair's time against the two alone, one after the other
    assert o.predicted == pytest.approx(
        100 * (d["pair_together_s"] / (d["gemm_alone_s"] + d["comm_alone_s"]) - 1)
    )
    (x,) = parse_rows(
        PAIR.replace("measured = -31.76", "measured = 0.6824").replace('unit = "%"', 'unit = "x"'), "t"
    )
    assert Predictor().predict(x).measured == pytest.approx(-31.76)


def test_stream_and_latency_rows_are_predicted_from_the_preset():
    (s,) = parse_rows(STREAM, "t.toml")
    o = Predictor().predict(s)
    assert o.unit == "GB/s" and 1000 < o.predicted < 3350  # below the datasheet's 3.35 TB/s
    (lat,) = parse_rows(LATENCY, "t.toml")
    assert Predictor().predict(lat).predicted == pytest.approx(4.0)  # h100-8's compute.kernel_launch_s
