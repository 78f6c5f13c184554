"""The public prediction API (t3.api.gemm / collective / overlap): its conventions against closed forms
and its input errors, which name the field before anything is simulated."""

from __future__ import annotations

import pytest

from t3 import api
from t3.config.hardware import load_hardware
from t3.errors import T3Error
from t3.ficco.space import FiccoOperator, enumerate_space

MiB, GiB = 1 << 20, 1 << 30


@pytest.mark.parametrize(
    "op,factor",
    [("all_reduce", 2 * 7 / 8), ("reduce_scatter", 7 / 8), ("all_gather", 7 / 8), ("all_to_all", 7 / 8)],
)
@pytest.mark.parametrize("nbytes", [1 * MiB, 48 * MiB + 4096, 16 * GiB])
def test_busbw_follows_the_nccl_tests_closed_form(op, factor, nbytes):
    r = api.collective(op, nbytes, gpus=8, hardware="h100-8")
    assert r["time_s"] > 0
    assert r["algbw_Bps"] == pytest.approx(nbytes / r["time_s"], rel=1e-12)
    assert r["busbw_Bps"] == pytest.approx(nbytes / r["time_s"] * factor, rel=1e-12)
    assert api.busbw_factor(op, 8) == pytest.approx(factor)


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_busbw_factor_depends_on_the_gpu_count(gpus):
    r = api.collective("all_reduce", 64 * MiB, gpus=gpus, hardware="mi300x-8")
    assert r["gpus"] == gpus
    assert r["busbw_Bps"] / r["algbw_Bps"] == pytest.approx(2 * (gpus - 1) / gpus)


def test_auto_reports_the_algorithm_that_ran_and_explicit_algorithms_run():
    auto = api.collective("reduce_scatter", 32 * MiB, hardware="h100-8")
    assert auto["algo"] in api.collective_algos("reduce_scatter", "h100-8")[1:]
    for algo in api.collective_algos("reduce_scatter", "h100-8")[1:]:
        r = api.collective("reduce_scatter", 32 * MiB, hardware="h100-8", algo=algo)
        assert r["algo"] == algo and r["time_s"] > 0
    same = api.collective("reduce_scatter", 32 * MiB, hardware="h100-8", algo=auto["algo"])
    assert same["time_s"] == auto["time_s"]


def test_collective_time_grows_with_size():
    for op in api.COLLECTIVE_OPS:
        small, big = (api.collective(op, b, hardware="mi300x-8")["time_s"] for b in (1 * MiB, 1 * GiB))
        assert big > small


def test_gemm_tflops_is_two_mnk_over_time():
    r = api.gemm(4096, 3072, 2048, dtype="bf16", hardware="h100-8")
    assert r["tflops"] == pytest.approx(2 * 4096 * 3072 * 2048 / r["time_s"] / 1e12, rel=1e-12)
    peak = load_hardware("h100-8").compute.peak_flops("bf16")
    assert 0 < r["tflops"] * 1e12 <= peak  # never above the datasheet peak


def test_overlap_runs_the_named_schedule_and_best_is_the_fastest():
    kw = dict(op="gemm-rs", m=1024, n=512, k=256, gpus=8, hardware="mi300x-8")
    bulk = api.overlap(**kw)
    assert bulk["schedule"] == "bulk-g1-M-cu" and bulk["time_s"] > 0
    assert bulk["gemm_alone_s"] > 0 and bulk["comm_alone_s"] > 0
    best = api.overlap(**kw, schedule="best")
    legal, _ = enumerate_space(FiccoOperator("gemm-rs", 1024, 512, 256, 8, "bf16"), load_hardware("mi300x-8"))
    assert best["schedule"] in {a.name for a in legal}
    for name in ("bulk-g1-M-cu", "shard-g8-M-dma", "ficco-g8-M-cu"):
        assert best["time_s"] <= api.overlap(**kw, schedule=name)["time_s"]


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda: api.collective("broadcast", MiB), "op: unknown op 'broadcast' (available: all_reduce"),
        (lambda: api.collective("all_reduce", 0), "nbytes: must be >= 1, got 0"),
        (lambda: api.collective("all_reduce", -5), "nbytes: must be >= 1"),
        (lambda: api.collective("all_reduce", 1.5e6), "nbytes: must be an integer"),
        (
            lambda: api.collective("all_reduce", MiB, gpus=16),
            "gpus: 16 GPUs exceed the switch of 8 GPUs in hardware 'h100-8'",
        ),
        (lambda: api.collective("all_reduce", MiB, gpus=1), "gpus: must be >= 2"),
        (
            lambda: api.collective("all_reduce", MiB, algo="nvls", hardware="mi300x-8"),
            "algo: unknown algo 'nvls' (available: auto, ring/ll",
        ),
        (
            lambda: api.collective("all_to_all", MiB, algo="ring"),
            "algo: unknown algo 'ring' (available: auto, direct/ll, direct/ll128, direct/simple)",
        ),
        (
            lambda: api.collective("all_to_all", MiB, hardware="paper-80cu"),
            "op: all_to_all is modelled on mesh",
        ),
        (lambda: api.collective("all_reduce", MiB, hardware="h900"), "unknown preset 'h900'"),
        (lambda: api.gemm(0, 1, 1), "m: must be >= 1, got 0"),
        (lambda: api.gemm(8, 8, "8"), "k: must be an integer"),
        (lambda: api.gemm(8, 8, 8, dtype="int4"), "dtype: unknown dtype 'int4'"),
        (lambda: api.gemm(8, 8, 8, out_dtype="int8"), "out_dtype: unknown out_dtype 'int8'"),
        (lambda: api.overlap("allgather-gemm", 8, 8, 8), "op: unknown op 'allgather-gemm'"),
        (lambda: api.overlap("gemm-rs", 8, 8, 8, gpus=9), "gpus: 9 GPUs exceed"),
        (lambda: api.overlap("gemm-rs", 1001, 8, 8), "m: 1001 rows do not split over 8 GPUs"),
        (
            lambda: api.overlap("gemm-rs", 64, 64, 64, schedule="fastest"),
            "schedule: 'fastest' does not match",
        ),
        (
            lambda: api.overlap("gemm-rs", 64, 64, 64, schedule="shard-g8-K-cu"),
            "schedule: shard-g8-K-cu cannot run",
        ),
        (
            lambda: api.overlap("gemm-rs", 64, 64, 64, schedule=3),
            "schedule: must be a schedule name or 'best'",
        ),
    ],
)
def test_bad_inputs_raise_one_line_errors_naming_the_field(call, needle, monkeypatch):
    import t3.sim.engine

    def boom(*a, **k):
        raise AssertionError("inputs must be checked before any simulation")

    monkeypatch.setattr(t3.sim.engine.Engine, "run", boom)
    with pytest.raises(T3Error) as e:
        call()
    assert needle in str(e.value)
    assert "\n" not in str(e.value)
