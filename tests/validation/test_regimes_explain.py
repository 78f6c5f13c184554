"""Errors by regime and ``t3 validate --explain``: bands cut where they say, the per-band summary is the
brute-force median of its rows, and an explained prediction's parts add up to what the model
simulated (the engine is the oracle for the GEMM's closed form, the nccl-style alpha-beta sum for the
collective's terms)."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys

import numpy as np
import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.validation import load_dataset, run
from t3.validation.regimes import SIZE_BANDS, WAVE_BANDS, bands, size_band, summarize_bands, wave_band

MIB = 1 << 20


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


def test_size_and_wave_bands_cut_at_their_edges():
    assert [size_band(b) for b in (1, MIB - 1, MIB, 128 * MIB, 128 * MIB + 1)] == [
        "< 1 MiB", "< 1 MiB", "1-128 MiB", "1-128 MiB", "> 128 MiB",
    ]  # fmt: skip
    assert [wave_band(t, 132) for t in (1, 131, 132, 528, 529)] == [
        "< 1 wave", "< 1 wave", "1-4 waves", "1-4 waves", "> 4 waves",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def outcomes():
    rows = [r for r in load_dataset() if r.category in ("collective_busbw", "gemm_tflops", "interference")]
    return run(rows)


def test_band_summary_is_the_median_of_its_rows(outcomes):
    summary = summarize_bands(outcomes)
    for g in summary:
        mine = [o for o in outcomes if o.row.category == g["category"] and bands(o).get(g["axis"]) == g["band"]
                and o.row.role == g["role"]]  # fmt: skip
        assert len(mine) == g["rows"], g
        if not mine:
            assert g["median_abs_error"] is None
            continue
        errs = np.abs([o.error for o in mine])
        assert g["median_abs_error"] == pytest.approx(float(np.median(errs)), rel=1e-12)
        assert g["max_abs_error"] == pytest.approx(float(errs.max()), rel=1e-12)
    # every row falls in exactly one band of each of its category's axes
    for cat in ("collective_busbw", "gemm_tflops", "interference"):
        n = sum(o.row.category == cat for o in outcomes)
        for axis in {g["axis"] for g in summary if g["category"] == cat}:
            assert sum(g["rows"] for g in summary if g["category"] == cat and g["axis"] == axis) == n
    # the size bands without rows are listed (no evidence there), not dropped
    sizes = [g["band"] for g in summary if g["category"] == "collective_busbw" and g["axis"] == "size"]
    assert set(SIZE_BANDS) <= set(sizes)
    waves = [g["band"] for g in summary if g["category"] == "gemm_tflops" and g["axis"] == "waves"]
    assert set(WAVE_BANDS) <= set(waves)


@pytest.mark.parametrize("hw", ["h100-8", "mi300x-8", "paper-80cu"])
@pytest.mark.parametrize(
    "shape", [(4096, 4096, 256), (128, 8192, 8192), (8192, 1024, 8192), (1000, 3000, 700)]
)
def test_gemm_breakdown_adds_up_to_the_simulated_time(hw, shape):
    m, n, k = shape
    r = api.gemm(m, n, k, "bf16" if hw != "paper-80cu" else "fp16", hw)
    assert r["launch_s"] + r["prologue_s"] + r["body_s"] == pytest.approx(r["time_s"], rel=1e-9)
    assert r["body_s"] >= r["compute_s"] * (1 - 1e-12)
    tm, tn = map(int, r["tile"].split("x"))
    assert r["tiles"] == math.ceil(m / tm) * math.ceil(n / tn)
    assert r["waves"] == math.ceil(r["tiles"] / r["wave_size"])
    assert r["wave_size"] == load_hardware(hw).compute.cus * load_hardware(hw).compute.wg_per_cu
    # K is split only where the tiles leave more than half the CUs idle, every slice in the one wave
    assert r["split_k"] == 1 or (
        2 * r["tiles"] <= r["wave_size"] and r["tiles"] * r["split_k"] <= r["wave_size"]
    )


def test_collective_terms_are_the_alpha_beta_sum():
    hw = load_hardware("h100-8", {"compute.cu_inflight_bytes": 0.0})
    col = hw.collective
    nbytes, n = 1 << 30, 8
    r = api.collective("all_gather", nbytes, n, hw, algo="ring/simple")
    t = r["terms"]
    assert t["hops"] == n - 1
    assert t["base_latency_s"] == col.simple.base_latency_s
    assert t["hop_latency_s"] == pytest.approx((n - 1) * col.simple.step_latency_s)
    # a 1 GiB all-gather is link-bound on every step: the link's closed form, then the local copy of
    # the last block received (NCCL's recv tail: c read and c written, at most the HBM's rate)
    link = (n - 1) * (nbytes / n) / (hw.link.bandwidth_Bps * col.link_efficiency * col.simple.bw_fraction)
    assert t["resources_s"]["link"] == pytest.approx(link, rel=1e-9)
    assert t["transfer_s"] >= link + 2 * (nbytes / n) / hw.hbm.bandwidth_Bps
    # the terms add up to what the engine simulated (windows off: the closed form is exact)
    assert t["launch_s"] + t["base_latency_s"] + t["hop_latency_s"] + t["transfer_s"] == pytest.approx(
        r["time_s"], rel=1e-9
    )


def test_explain_prints_a_rows_parts(outcomes):
    gemm = next(o for o in outcomes if o.row.category == "gemm_tflops")
    coll = next(o for o in outcomes if o.row.category == "collective_busbw")
    p = _t3("validate", "--explain", gemm.row.id)
    assert p.returncode == 0, p.stderr
    assert f"{gemm.detail['tiles']} tiles in {gemm.detail['waves']} waves" in p.stdout
    assert "prologues" in p.stdout and "wave bodies" in p.stdout
    p = _t3("validate", "--explain", coll.row.id, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["row"]["id"] == coll.row.id
    what = [x["what"] for x in doc["explain"]]
    assert {"algorithm", "  hop latency", "  transfer"} <= set(what)


def test_explain_refuses_unknown_rows_and_filters():
    p = _t3("validate", "--explain", "h100-ag-2MiB-megatron")
    assert p.returncode != 0 and "--explain" in p.stderr and "h100-ag-2MiB-megatron5596" in p.stderr
    assert "Traceback" not in p.stderr
    p = _t3("validate", "--explain", "h100-ag-2MiB-megatron5596", "--category", "gemm_tflops")
    assert p.returncode != 0 and "--category" in p.stderr


def test_plots_add_a_panel_by_band(tmp_path):
    p = _t3("validate", "--category", "gemm_tflops", "--plot", str(tmp_path))
    assert p.returncode == 0, p.stderr
    q = _t3("validate", "--category", "overlap_time", "--plot", str(tmp_path))
    assert q.returncode == 0, q.stderr

    def width(name):  # PNG: the IHDR chunk's width
        return struct.unpack(">I", (tmp_path / name).read_bytes()[16:20])[0]

    assert width("validate-gemm_tflops.png") > 1.8 * width("validate-overlap_time.png")


def test_explain_lists_every_algorithms_time_where_the_library_chooses():
    """A row the library chooses the algorithm for gets the time of each algorithm the model has there, in
    the row's timing (the API's own answer for that algorithm), least first, the model's pick marked."""
    from t3 import api

    rid = "h100-ar-8MiB-2n-gjaion-nccltests309"
    p = _t3("validate", "--explain", rid, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (line,) = [x["value"] for x in doc["explain"] if x["what"] == "every algorithm"]
    (picked,) = [x["value"] for x in doc["explain"] if x["what"] == "algorithm"]
    w = doc["row"]["workload"]
    assert w["algo"] == "auto" and w["timing"] == "host"
    items = [x.strip() for x in line.split(",")]
    assert f"{picked} " in line and sum("(picked)" in x for x in items) == 1
    algos = api.collective_algos("all_reduce", "h100-2x8", 16)[1:]
    assert len(items) == len(algos)
    times = []
    for x in items:
        name, t = x.split()[0], float(x.split()[1])
        want = api.collective("all_reduce", w["nbytes"], gpus=16, hardware="h100-2x8", algo=name)["time_s"]
        assert t == pytest.approx(want * 1e6, rel=1e-3), name
        times.append(t)
    assert times == sorted(times)


def test_explain_lists_ncclss_estimates_where_its_choice_runs():
    """Across nodes on a preset with NCCL's graphs, the row also lists NCCL's own estimate of each
    algorithm (t3.ops.nccl_tuning.time_us), least first, and the least is the algorithm the prediction
    ran, not the model's fastest; a row inside one node has no such line."""
    from t3.config.hardware import load_hardware
    from t3.ops import nccl_tuning

    rid = "h100-ar-8MiB-2n-gjaion-nccltests309"
    doc = json.loads(_t3("validate", "--explain", rid, "--json").stdout)
    (line,) = [x["value"] for x in doc["explain"] if x["what"] == "NCCL's estimate"]
    (picked,) = [x["value"] for x in doc["explain"] if x["what"] == "algorithm"]
    items = [x.strip() for x in line.split(": ", 1)[1].split(",")]
    hw = load_hardware("h100-2x8")
    est = []
    for x in items:
        name, t = x.split()[0], float(x.split()[1])
        algo, proto = name.split("/")
        assert t == pytest.approx(nccl_tuning.time_us("all_reduce", algo, proto, 8 << 20, 2, 8, hw), rel=1e-3)
        est.append((t, name))
    assert est == sorted(est) and est[0][1] == picked == "nvls-tree/simple"
    (every,) = [x["value"] for x in doc["explain"] if x["what"] == "every algorithm"]
    assert not every.startswith(picked)  # the model's fastest is another algorithm
    one = json.loads(_t3("validate", "--explain", "h100-ar-256MiB-bitdeer", "--json").stdout)
    whats = [x["what"] for x in one["explain"]]
    assert "every algorithm" in whats and "NCCL's estimate" not in whats
