"""The row writer: rows load with the dataset's loader and round-trip; the numbers written are the
samples' medians and percentiles (numpy is the oracle); malformed rows are refused."""

from __future__ import annotations

import numpy as np
import pytest

from t3.measure import compat
from t3.measure.rows import (
    RowContext,
    RowWriter,
    gemm_row,
    hbm_row,
    interference_rows,
    is_cpu_row,
    latency_row,
)
from t3.validation import DatasetError, load_dataset
from t3.validation.dataset import MEASURED_SOURCE


def _ctx(device, cpu=False):
    return RowContext("h100-8-test", "h100-8", device, "t3 measure run 2026-01-01T00:00:00Z", cpu=cpu)


def _samples(seed, n, scale):
    return list(np.random.default_rng(seed).lognormal(0.0, 0.2, n) * scale)


def _write(tmp_path, device, cpu=False):
    ctx = _ctx(device, cpu)
    w = RowWriter(tmp_path / "measured.toml", "a test run\nsecond line")
    g = _samples(0, 30, 1.4e-3)
    h = _samples(1, 20, 3.5e-4)
    lat = _samples(2, 15, 2.1e-6)
    a, t = _samples(3, 24, 1.4e-3), _samples(4, 24, 1.9e-3)
    ca, ct = _samples(5, 10, 2e-4), _samples(6, 40, 3e-4)
    rows = [
        gemm_row(ctx, 8192, 8192, 8192, "bf16", g, 'cuBLAS "NT", \\ é'),
        hbm_row(ctx, "copy", 2 << 30, 0, h, "copy_"),
        hbm_row(ctx, "copy", 1 << 29, 16, h, "Triton on 16 blocks"),
        latency_row(ctx, "kernel_launch", lat, {"host_us": 5.3}, "chain"),
        *interference_rows(
            ctx,
            "sm_copy-256MiB-cus32-background-8192x8192x8192",
            {
                "m": 8192,
                "n": 8192,
                "k": 8192,
                "dtype": "bf16",
                "comm": "sm_copy",
                "nbytes": 1 << 28,
                "gpus": 1,
                "cus": 32,
                "arrangement": "background",
            },
            [("compute", a, t, "gemm"), ("comm", ca, ct, "copy")],
            {"coverage": 1.3},
        ),  # fmt: skip
    ]
    for r in rows:
        w.write(r)
    return w, rows, {"gemm": g, "hbm": h, "lat": lat, "a": a, "t": t, "ca": ca, "ct": ct}


def test_rows_load_with_the_dataset_loader_and_round_trip(tmp_path, gpu_device):
    w, rows, _ = _write(tmp_path, gpu_device)
    text = w.path.read_text()
    assert text.startswith("# a test run\n# second line\n")
    loaded = load_dataset([w.path])
    assert [r.id for r in loaded] == [r["id"] for r in rows]
    for got, want in zip(loaded, rows, strict=True):
        for k in ("id", "category", "role", "hardware", "unit", "source", "locator", "conventions"):
            assert getattr(got, k) == want[k], k
        assert got.measured == want["measured"]
        assert got.published == want["published"]
        assert got.device == gpu_device
        assert {k: got.workload[k] for k in want["workload"]} == want["workload"]
        assert got.source == f"{MEASURED_SOURCE}, {gpu_device['gpu']}"
        assert got.role == "calibration" and not is_cpu_row(got)
    assert loaded[0].conventions == 'cuBLAS "NT", \\ é'
    assert [r.locator.rsplit(", ", 1)[1] for r in loaded] == [
        "gemm grid row 1", "hbm row 1", "hbm row 2", "latency row 1", "interference row 1", "interference row 2"
    ]  # fmt: skip


def test_numbers_written_are_the_samples_medians_numpy_oracle(tmp_path, gpu_device):
    _, _, s = _write(tmp_path, gpu_device)
    gemm, hbm, hbm16, lat, intf_c, intf_m = load_dataset([tmp_path / "measured.toml"])
    us = lambda x: np.median(x) * 1e6  # noqa: E731
    assert gemm.published["time_us"] == pytest.approx(us(s["gemm"]), rel=1e-5)
    assert gemm.published["p10_us"] == pytest.approx(np.percentile(s["gemm"], 10) * 1e6, rel=1e-5)
    assert gemm.published["p90_us"] == pytest.approx(np.percentile(s["gemm"], 90) * 1e6, rel=1e-5)
    assert gemm.published["samples"] == 30
    assert gemm.measured == pytest.approx(2 * 8192**3 / np.median(s["gemm"]) / 1e12, rel=1e-5)
    assert hbm.measured == pytest.approx((2 << 30) / np.median(s["hbm"]) / 1e9, rel=1e-5)
    assert hbm16.workload["cus"] == 16 and hbm16.id.endswith("-cus16")
    assert lat.measured == pytest.approx(us(s["lat"]), rel=1e-5) == lat.published["median_us"]
    assert lat.published["host_us"] == 5.3
    assert intf_c.workload["victim"] == "compute" and intf_m.workload["victim"] == "comm"
    assert intf_c.published["alone_us"] == pytest.approx(us(s["a"]), rel=1e-5)
    assert intf_c.published["together_us"] == pytest.approx(us(s["t"]), rel=1e-5)
    assert intf_c.measured == pytest.approx(100 * (np.median(s["t"]) / np.median(s["a"]) - 1), abs=1e-3)
    assert intf_m.measured == pytest.approx(100 * (np.median(s["ct"]) / np.median(s["ca"]) - 1), abs=1e-3)
    assert intf_m.published["samples_together"] == 40 and intf_m.published["coverage"] == 1.3


def test_cpu_rows_are_marked(tmp_path):
    dev = {"gpu": "CPU x86_64 (plumbing run, not GPU data)", "driver": "none (CPU)",
           "runtime": "CPU (no GPU runtime)", "torch": "2.13.0", "command": "t3 measure --device cpu"}  # fmt: skip
    _write(tmp_path, dev, cpu=True)
    rows = load_dataset([tmp_path / "measured.toml"])
    assert all(is_cpu_row(r) and r.conventions.startswith("CPU plumbing run (not GPU data): ") for r in rows)


def test_the_writer_refuses_a_duplicate_id_and_a_malformed_row(tmp_path, gpu_device):
    ctx = _ctx(gpu_device)
    w = RowWriter(tmp_path / "measured.toml", "x")
    row = latency_row(ctx, "flag", [1e-6, 2e-6], {}, "c")
    w.write(row)
    with pytest.raises(ValueError, match="written twice"):
        w.write(row)
    bad = dict(row, id="h100-8-test-other", unit="GB/s")
    with pytest.raises(DatasetError, match="unit: 'GB/s' is not a unit of latency"):
        w.write(bad)
    assert len(load_dataset([w.path])) == 1  # nothing of the refused rows reached the file


def test_the_stand_alone_source_constant_is_the_datasets():
    assert not compat.STANDALONE
    assert compat.MEASURED_SOURCE == MEASURED_SOURCE
    text = (compat.__file__ and open(compat.__file__).read()) or ""
    assert f'MEASURED_SOURCE = "{MEASURED_SOURCE}"' in text  # the stand-in (kit run alone) says the same
