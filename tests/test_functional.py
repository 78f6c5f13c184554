"""Functional verification: values carried through the T3 schedule match a numpy reduce-scatter."""

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t3.api import run
from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.schedules import RunOptions, get_config
from t3.workload.sublayers import GemmShape, Operator

SMALL = {"compute.cus": 3, "compute.tile_m": 4, "compute.tile_n": 4}


def _run(config, tp, m_per, n, k, *, hw="paper-80cu", over=None, **params):
    hwc = load_hardware(hw, {**SMALL, **(over or {})})
    op = Operator("x", "fc2", "forward", tp, m_per * tp, GemmShape(m_per * tp, n, k))
    seed = params.pop("seed", None)
    jitter = params.pop("jitter", 0.0)
    opts = RunOptions(functional=True, seed=seed, jitter=jitter, params=params)
    return get_config(config).run(op, hwc, opts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=st.sampled_from(["t3", "t3-mca"]),
    tp=st.sampled_from([2, 3, 4, 8]),
    m_per=st.integers(1, 9),
    n=st.integers(1, 13),
    k=st.integers(1, 7),
    cus=st.integers(1, 5),
    tile=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    seed=st.integers(0, 2**16),
    jitter=st.sampled_from([0.0, 0.3, 2.0]),
    entries=st.sampled_from([None, 64, 4096]),
)
def test_any_interleaving_reduces_exactly(config, tp, m_per, n, k, cus, tile, seed, jitter, entries):
    """Random shapes, TP, event tie-breaking and latency jitter: the owned chunks are exact."""
    over = {"compute.cus": cus, "compute.tile_m": tile[0], "compute.tile_n": tile[1]}
    if entries:
        over["tracker.entries"] = entries
    try:
        out = _run(config, tp, m_per, n, k, over=over, seed=seed, jitter=jitter, functional_seed=seed)
    except ConfigError as err:  # a table smaller than one wave's tiles is refused up front
        assert "tracker.entries" in str(err)
        return
    f = out.extra["functional"]
    assert f["checked"] and f["gpus"] == tp
    assert f["mismatches"] == 0 and f["max_abs_error"] == 0.0
    assert f["tiles_with_wrong_update_count"] == 0
    # every tile of every non-owned chunk travelled exactly once per hop: (N-1) chunks' worth of updates
    assert out.dram_bytes["rs_write"] == pytest.approx(m_per * tp * n * 2 * (tp - 1) / tp)


@pytest.mark.parametrize("fault", ["drop", "duplicate"])
@pytest.mark.parametrize("config,hw,over", [("t3", "paper-80cu", {}), ("t3-mca", "paper-80cu", {}),
                                           ("t3", "mi300x-8", {"nmc.present": True})])  # fmt: skip
@pytest.mark.parametrize("tp", [2, 4])
def test_dropped_or_duplicated_update_is_detected(fault, config, hw, over, tp):
    out = _run(config, tp, 8, 6, 3, hw=hw, over=over, functional_fault=fault)
    f = out.extra["functional"]
    assert f["mismatches"] > 0 and f["max_abs_error"] > 0
    assert f["tiles_with_wrong_update_count"] > 0
    clean = _run(config, tp, 8, 6, 3, hw=hw, over=over)
    assert clean.extra["functional"]["mismatches"] == 0


def test_column_chunks_functional():
    """M/N shorter than a tile: chunks along the output columns (transposed plan), still exact."""
    from t3.schedules.t3 import staggered_plan

    hwc = load_hardware("paper-80cu", SMALL)
    op = Operator("x", "fc2", "forward", 4, 8, GemmShape(8, 32, 5))
    assert staggered_plan(op, hwc)[1]
    out = get_config("t3").run(op, hwc, RunOptions(functional=True, seed=3, jitter=0.4))
    assert out.extra["chunks"] == "columns" and out.extra["functional"]["mismatches"] == 0


def test_direct_mapping_functional_all_tp():
    for tp in (2, 3, 4, 8):
        out = _run("t3", tp, 4, 5, 3, hw="mi300x-8", over={"nmc.present": True}, seed=tp, jitter=0.5)
        assert out.extra["functional"]["mismatches"] == 0


def test_functional_runs_all_gpus_and_keeps_timing():
    """Functional mode forces the all-GPU schedule; its timing equals the symmetric run."""
    hwc = load_hardware("paper-80cu", SMALL)
    op = Operator("x", "fc2", "forward", 4, 32, GemmShape(32, 12, 8))
    f = get_config("t3").run(op, hwc, RunOptions(functional=True))
    s = get_config("t3").run(op, hwc, RunOptions())
    assert len(f.results[0].schedule.gpus) == 4 and len(s.results[0].schedule.gpus) == 1
    assert f.time_s == pytest.approx(s.time_s, rel=1e-9)


def test_reference_is_numpy_reduce_scatter():
    from t3.functional import FunctionalRun
    from t3.ops.gemm import plan_gemm

    hwc = load_hardware("paper-80cu", SMALL)
    plan = plan_gemm(GemmShape(12, 5, 4), hwc, chunks=3)
    fr = FunctionalRun(plan, 3, seed=1)
    want = fr.A[0] @ fr.B[0] + fr.A[1] @ fr.B[1] + fr.A[2] @ fr.B[2]
    assert np.array_equal(fr.reference(), want)
    # an all-zero buffer fails the check on every non-zero element
    rep = fr.check({0: 0, 1: 1, 2: 2})
    assert rep["mismatches"] == int(np.count_nonzero(want))


def test_functional_errors():
    with pytest.raises(ConfigError, match="functional_fault"):
        _run("t3", 2, 4, 4, 4, functional_fault="explode")
    with pytest.raises(ConfigError, match="functional: configuration 'sequential'"):
        run("t-nlg", 8, "fc2", "sequential", options=RunOptions(functional=True))
    with pytest.raises(ConfigError, match="too large"):
        get_config("t3").run(
            Operator("x", "fc2", "forward", 8, 8192, GemmShape(8192, 4256, 64)),
            load_hardware("paper-80cu"),
            RunOptions(functional=True),
        )


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "t3", "run", *args], capture_output=True, text=True)


TINY = "hidden = 48\nlayers = 1\nheads = 4\nffn = 192\ntokens = 64\n"


def test_cli_functional_json(tmp_path):
    model = tmp_path / "tiny.toml"
    model.write_text(TINY)
    p = _cli("--config", "t3-mca", "--model", str(model), "--tp", "4",
             "--set", "compute.tile_m=4", "--set", "compute.tile_n=8", "--functional", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    f = json.loads(p.stdout)["functional"]
    assert f == {**f, "checked": True, "gpus": 4, "elements": 64 * 48, "mismatches": 0, "max_abs_error": 0.0}


def test_cli_functional_rejects_other_configs():
    p = _cli("--config", "sequential", "--functional")
    assert p.returncode == 2 and "functional" in p.stderr and "Traceback" not in p.stderr


def test_cli_mismatch_is_nonzero_exit(tmp_path, monkeypatch):
    """A functional mismatch (here: a dropped update injected in-process) fails the command."""
    from typer.testing import CliRunner

    import t3.schedules.t3 as t3mod
    from t3.cli.main import _register, app
    from t3.functional import FunctionalRun

    class Dropping(FunctionalRun):
        def __init__(self, *a, **kw):
            super().__init__(*a, **{**kw, "fault": "drop"})

    _register()
    monkeypatch.setattr(t3mod, "FunctionalRun", Dropping)
    model = tmp_path / "tiny.toml"
    model.write_text(TINY)
    r = CliRunner().invoke(app, ["run", "--config", "t3", "--model", str(model), "--tp", "4", "--functional"])
    assert r.exit_code == 1
    assert "functional check failed" in r.output


def test_dma_without_its_upstream_dependency_is_detected(monkeypatch):
    """Mutation: DMAs that do not wait for the upstream update fire on partial sums -> mismatches."""
    import t3.schedules.t3 as t3mod

    orig = t3mod.T3Builder.incoming

    def no_upstream(self, g, p, lo, hi):
        return [] if p < self.n - 1 else orig(self, g, p, lo, hi)

    monkeypatch.setattr(t3mod.T3Builder, "incoming", no_upstream)
    out = _run("t3", 4, 8, 10, 6, seed=1, jitter=0.5)
    assert out.extra["functional"]["mismatches"] > 0
