"""``t3 calibrate --measured``: the fit recovers known parameters from rows made by the project's own
predictors on a known hardware; the preset it writes loads and names its measurements; refusals."""

from __future__ import annotations

import json
import math
import tomllib

import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.measure.calibrate import search
from t3.measure.preset import Edit, apply
from t3.measure.rows import RowContext, RowWriter, gemm_row, hbm_row, latency_row

TRUE = {
    "compute.gemm_efficiency": 0.7,
    "hbm.turnaround": 0.3,
    "hbm.efficiency": 0.9,
    "compute.stream_inflight_bytes": 12e3,  # 2 x 12 KB per ~0.4 us loaded latency: ~60 GB/s per block, under cu_copy_Bps
    "compute.kernel_launch_s": 2.5e-6,
    "compute.stream_wait_s": 1.5e-6,
    "compute.flag_latency_s": 0.9e-6,
}
CLOCKS = {"fp16": 1.6e9, "fp8": 1.5e9}
LARGE = [(6144, 6144, 6144), (8192, 8192, 2048)]
THIN = (1024, 8192, 8192)  # under 4 waves: never used by the fit


def _true_hw():
    hw = load_hardware("h100-8").with_overrides(TRUE)
    return hw.with_overrides({"compute.gemm_clock_hz": {**hw.compute.gemm_clock_hz, **CLOCKS}})


def synthetic(d, device, hardware="h100-8"):
    """measured.toml with rows predicted by t3.api on the true hardware (3 equal samples each)."""
    hw = _true_hw()
    d.mkdir(parents=True, exist_ok=True)
    ctx = RowContext("syn", hardware, device, "synthetic")
    w = RowWriter(d / "measured.toml", "synthetic rows from t3.api")
    for m, n, k in [*LARGE, THIN]:
        t = api.gemm(m, n, k, "bf16", hardware=hw)["time_s"]
        w.write(gemm_row(ctx, m, n, k, "bf16", [t] * 3, "api.gemm"))
    for dtype in CLOCKS:
        m, n, k = LARGE[0]
        w.write(
            gemm_row(ctx, m, n, k, dtype, [api.gemm(m, n, k, dtype, hardware=hw)["time_s"]] * 3, "api.gemm")
        )
    for stream in ("read", "write", "copy", "triad"):
        nbytes = {"read": 1, "write": 1, "copy": 2, "triad": 3}[stream] << 30
        t = api.memory_stream(stream, nbytes, 0, hardware=hw)["time_s"]
        w.write(hbm_row(ctx, stream, nbytes, 0, [t] * 3, "api.memory_stream"))
    for k in (1, 4, 16, 32, 132):
        t = api.memory_stream("copy", 1 << 29, k, hardware=hw)["time_s"]
        w.write(hbm_row(ctx, "copy", 1 << 29, k, [t] * 3, "api.memory_stream"))
    for what in ("kernel_launch", "event_wait", "flag"):
        w.write(latency_row(ctx, what, [api.latency(what, hardware=hw)["time_s"]] * 3, {}, "api.latency"))
    return d


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from t3.cli.main import main

    d = synthetic(tmp_path_factory.mktemp("cal") / "m", dict(_device()))
    out = d.parent / "my-gpu.toml"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as e:
        main(["calibrate", "--measured", str(d), "--base", "h100-8", "--out", str(out), "--json"])
    assert e.value.code in (0, None)
    return d, out, json.loads(buf.getvalue())


def _device():
    return {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580", "runtime": "CUDA 13.0", "torch": "2.11.0",
            "command": "t3 measure --out m", "date": "2026-01-01T00:00:00Z"}  # fmt: skip


def test_the_fit_recovers_the_parameters_the_rows_were_made_with(fitted):
    _, out, doc = fitted
    hw = load_hardware(out)
    assert hw.name == "my-gpu"
    for path, want in TRUE.items():
        sec, key = path.split(".")
        assert getattr(getattr(hw, sec), key) == pytest.approx(want, rel=0.01), path
    for dtype, want in CLOCKS.items():
        assert hw.compute.gemm_clock(dtype) == pytest.approx(want, rel=0.01), dtype
    assert hw.compute.gemm_clock("bf16") == 1.83e9  # not fitted: as the base
    fits = {f["parameter"]: f for f in doc["fits"]}
    assert set(fits) == {*TRUE, "compute.gemm_clock_hz.fp16", "compute.gemm_clock_hz.fp8"}
    for f in fits.values():
        assert f["median_abs_error_after"] < 0.01 <= f["median_abs_error_before"] or f["parameter"] in (
            "hbm.turnaround",  # the base's 0.2 is already close on the copy / triad rows
        ), f
    eff = fits["compute.gemm_efficiency"]
    assert len(eff["rows"]) == len(LARGE) and not any("1024x8192x8192" in r for r in eff["rows"])
    window_rows = fits["compute.stream_inflight_bytes"][
        "rows"
    ]  # k = 1..32 below saturation; every SM saturates
    assert len(window_rows) == 4 and not any(r.endswith("-cus132") for r in window_rows), window_rows
    assert "compute.cu_copy_Bps" not in fits and any(
        s.startswith("compute.cu_copy_Bps:") for s in doc["skipped"]
    )


def test_the_preset_names_its_measurements_and_keeps_the_rest(fitted):
    d, out, _ = fitted
    text = out.read_text()
    base = load_hardware("h100-8")
    hw = load_hardware(out)
    assert (
        hw.link == base.link
        and hw.collective == base.collective
        and hw.hbm.bandwidth_Bps == base.hbm.bandwidth_Bps
    )
    lines = {ln.split("=")[0].strip(): ln for ln in text.splitlines() if "=" in ln and not ln.startswith("#")}
    for key in (
        "gemm_efficiency",
        "turnaround",
        "stream_inflight_bytes",
        "kernel_launch_s",
        "stream_wait_s",
        "flag_latency_s",
    ):
        assert "# measured by t3 measure on NVIDIA H100 80GB HBM3 (2026-01-01T00:00:00Z):" in lines[key], key
        assert "fitted by t3 calibrate --measured" in lines[key]
    assert "fp16, fp8: measured by t3 measure" in lines["gemm_clock_hz"]
    assert "BabelStream on Azure ND H100 v5: Copy" not in text  # the replaced comment's continuation is gone
    assert "datasheet: 132 SMs" in text  # untouched lines keep theirs
    assert tomllib.loads(text)["name"] == "my-gpu"


def test_refusals_are_one_line_errors_naming_the_option(fitted, tmp_path, t3cli):
    d, out, _ = fitted
    mine = (
        tmp_path / "mine.toml"
    )  # a user's file: only --overwrite replaces it (an earlier --out is replaced)
    mine.write_text("x = 1\n")
    cases = [
        (
            ["--measured", tmp_path / "nope", "--base", "h100-8", "--out", tmp_path / "a.toml"],
            "--measured: '",
        ),
        (["--measured", d, "--base", "h100-8", "--out", mine], "--out: '"),
        (
            ["--measured", d, "--base", "h100-8", "--out", tmp_path / "a.txt"],
            "--out: expected a file name ending",
        ),
        (
            ["--measured", d, "--base", "x999-8", "--out", tmp_path / "a.toml"],
            "--base: unknown preset 'x999-8'",
        ),
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "measured.toml").write_text("# no rows\n")
    cases.append(
        (["--measured", empty, "--base", "h100-8", "--out", tmp_path / "a.toml"], "--measured: no rows in")
    )
    cpu = synthetic(tmp_path / "cpu", {**_device(), "gpu": "CPU x86_64 (plumbing run, not GPU data)",
                                       "runtime": "CPU (no GPU runtime)"})  # fmt: skip
    cases.append(
        (
            ["--measured", cpu, "--base", "h100-8", "--out", tmp_path / "a.toml"],
            "--measured: 17 of the 17 rows",
        )
    )
    for argv, needle in cases:
        code, so, se = t3cli("calibrate", *argv)
        assert code == 2 and so == "", (argv, se)
        assert se.startswith(f"error: {needle}") and se.count("\n") == 1, (argv, se)
    assert not (tmp_path / "a.toml").exists()
    code, so, se = t3cli(
        "calibrate", "--measured", cpu, "--base", "h100-8", "--out", tmp_path / "a.toml", "--allow-cpu"
    )
    assert code == 0, se
    assert "hbm.efficiency" in so and "median |error| before" in so


def test_rows_of_another_preset_are_fitted_on_the_base_with_a_note(tmp_path, t3cli):
    d = synthetic(tmp_path / "m", _device(), hardware="h200-8")
    code, so, se = t3cli("calibrate", "--measured", d, "--base", "h100-8", "--out", tmp_path / "x.toml")
    assert code == 0, se
    assert "rows are filed under h200-8, the base is h100-8" in so


def test_the_preset_edit_replaces_inserts_and_drops_continuations():
    base = 'name = "b"\n[compute]\na = 1.0  # old\n            #   more old\nb = 2\n[hbm]\nc = 3.0\n'
    new = apply(base, "x", ["head"], [Edit("compute", "a", 0.5, "new"), Edit("compute", "z", 7e-6, "added"),
                                       Edit("hbm", "t", {"fp8": 1.5e9}, "table")])  # fmt: skip
    doc = tomllib.loads(new)
    assert doc == {
        "name": "x",
        "compute": {"a": 0.5, "b": 2, "z": 7e-6},
        "hbm": {"c": 3.0, "t": {"fp8": 1.5e9}},
    }
    assert new.startswith("# head\n") and "more old" not in new and "# new" in new


def test_search_finds_the_minimum_of_a_v():
    for x_true, x0 in ((0.7, 0.82), (0.31, 0.9), (1.6e9, 1.83e9)):
        got = search(lambda x, x_true=x_true: abs(x / x_true - 1.0), x0, 1e-4 * x_true, 10 * x_true)
        assert math.isclose(got, x_true, rel_tol=1e-4)
    assert search(lambda x: -x, 0.5, 0.0, 1.0) == pytest.approx(1.0, rel=1e-3)  # at the bound
