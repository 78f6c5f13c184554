"""The size guard on every entry point (issue 25 item 2): each refuses an oversized input with one line
naming the estimate and the way out, and runs it when forced; the estimate tracks the ops really
simulated. Forced runs stay small: the limit is lowered, the inputs are not raised."""

from __future__ import annotations

import pytest

from t3 import api, size
from t3.errors import TooLargeError
from t3.schedules import RunOptions

TRACE = "tests/traces/data/megatron_sp_tp8_h100.constructed.pt.trace.json.gz"


@pytest.fixture
def tiny_limit(monkeypatch):
    monkeypatch.setattr(size, "LIMIT_OPS", 10)


def cli(capsys, *args):
    from t3.cli.main import main

    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def test_api_gemm_refused_then_forced(tiny_limit):
    with pytest.raises(
        TooLargeError,
        match=r"size: about .* ops of simulation work .*GEMM 4096x4096x4096 bf16.*"
        r"above the limit of 1e\+01.*force=True to run it anyway",
    ):
        api.gemm(4096, 4096, 4096)
    assert api.gemm(4096, 4096, 4096, force=True)["time_s"] > 0


def test_api_overlap_named_and_best_refused_then_forced(tiny_limit):
    with pytest.raises(TooLargeError, match="schedule bulk-g1-M-cu of .*force=True"):
        api.overlap("ag-gemm", 4096, 4096, 4096)
    assert api.overlap("ag-gemm", 4096, 4096, 4096, force=True)["time_s"] > 0
    with pytest.raises(TooLargeError, match="candidate schedules of"):
        api.overlap("ag-gemm", 4096, 4096, 4096, schedule="best")


def test_overlap_best_refuses_what_ficco_explore_refuses(capsys):
    """Same estimate, same limit: an operator t3 ficco explore refuses is refused by api.overlap('best')."""
    from t3.config.hardware import load_hardware
    from t3.ficco.space import FiccoOperator

    m = n = k = 1 << 20
    fop = FiccoOperator("ag-gemm", m, n, k, 8, "bf16")
    hw = load_hardware("h100-8")
    assert size.overlap_work(fop, hw, "best") == size.explore_work(fop, hw)
    code, _, err = cli(
        capsys, "ficco", "explore", "--op", "ag-gemm", "--m", str(m), "--n", str(n), "--k", str(k)
    )
    assert code == 2 and "size: about" in err and "--force" in err
    with pytest.raises(TooLargeError, match="candidate schedules"):
        api.overlap("ag-gemm", m, n, k, schedule="best")


def test_api_collective_refuses_more_than_a_gpus_memory():
    with pytest.raises(
        TooLargeError,
        match=r"size: nbytes = 1e\+12 bytes .*more than one GPU's memory "
        r"\(1.92e\+11 bytes, 'h100-8' has no hbm.capacity_bytes.*force=True",
    ):
        api.collective("all_reduce", 10**12)
    # an all-to-all holds its send and its receive buffer
    with pytest.raises(TooLargeError, match="send \\+ receive buffers"):
        api.collective("all_to_all", 10**11)
    assert api.collective("all_reduce", 10**12, force=True)["time_s"] > 0
    assert api.collective("all_to_all", 10**11 // 2)["time_s"] > 0


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_force_must_be_a_bool(bad):
    from t3.errors import ConfigError

    with pytest.raises(ConfigError, match="force: must be True or False"):
        api.gemm(64, 64, 64, force=bad)


def test_api_run_refused_then_forced(tiny_limit):
    with pytest.raises(TooLargeError, match="sequential, TP 8, GEMM"):
        api.run(tokens=1024)
    assert api.run(tokens=1024, force=True)["time_s"] > 0


def test_validate_data_sums_its_rows(tmp_path, capsys, monkeypatch):
    """t3 validate estimates the sum over the rows it will run: each row alone is under the limit,
    their sum is not; --force runs them (the entry points' own guards included)."""
    from t3.validation import load_dataset

    rows = [r for r in load_dataset(None) if r.category == "gemm_tflops"][:3]
    per = [size.validation_work([r]).ops for r in rows]
    total = size.validation_work(rows).ops
    assert total == pytest.approx(sum(per)) or total < sum(per)  # distinct predictions once
    monkeypatch.setattr(size, "LIMIT_OPS", max(per) + 0.5)
    assert total > size.LIMIT_OPS
    code, _, err = cli(capsys, "validate", "--category", "gemm_tflops", "--json")
    assert code == 2 and "distinct predictions of" in err and "--force" in err, err
    code, out, err = cli(capsys, "validate", "--category", "gemm_tflops", "--json", "--force")
    assert code == 0 and '"rows"' in out, err


def test_trace_project_refused_then_forced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(size, "LIMIT_OPS", 100)
    args = ["trace", "project", TRACE, "--ficco", "select", "--out", str(tmp_path / "p")]
    code, _, err = cli(capsys, *args)
    assert code == 2 and "distinct GEMM / collective pairs" in err and "--force" in err, err
    assert not (tmp_path / "p" / "projection.json").exists()
    code, _, err = cli(capsys, *args, "--force")
    assert code == 0 and (tmp_path / "p" / "projection.json").exists(), err


def _grid():
    """Configurations x TP degrees x presets x symmetric / all-GPU (all-GPU up to TP 16), at the models'
    own tokens and at a large token count; configurations a preset refuses are left out."""
    out = [
        ("paper-80cu", "sequential", 200_000, 8, True), ("paper-80cu", "t3", 200_000, 8, True),
        ("paper-80cu", "t3-mca", 65_536, 4, False), ("paper-80cu", "concurrent", 30_000, 16, True),
        ("h100-8", "sequential", 200_000, 8, True), ("mi300x-8", "sequential", 200_000, 8, True),
        ("mi300x-8", "concurrent", 65_536, 4, False),
    ]  # fmt: skip
    nmc = ("t3", "t3-mca", "ideal-rs-nmc")
    for config in ("sequential", "concurrent", "t3", "t3-mca", "ideal-gemm-rs-overlap", "ideal-rs-nmc"):
        for tp in (2, 4, 8, 16, 32):
            for hw in ("paper-80cu", "h100-8"):
                if hw == "h100-8" and (config in nmc or tp > 8):
                    continue
                for symmetric in (True, False) if tp <= 16 else (True,):
                    out.append((hw, config, None, tp, symmetric))
    return out


@pytest.mark.parametrize("hw,config,tokens,tp,symmetric", _grid())
def test_estimate_within_2x_of_the_ops_simulated(hw, config, tokens, tp, symmetric):
    from t3.api import resolve

    op, h, spec = resolve("mt-nlg" if tokens is None else "t-nlg", tp, "fc2", config, hw, tokens)
    out = spec.run(op, h, RunOptions(symmetric=symmetric))
    built = sum(len(r.schedule.ops) for r in out.results)
    est = size.run_work(op, h, config, symmetric).ops
    assert 0.5 * built <= est <= 2 * built, (est, built)


@pytest.mark.parametrize(
    "hw,m,n,k,chunks",
    [("paper-80cu", 1_000_000, 4256, 2128, 1), ("paper-80cu", 100_000, 8192, 2128, 8),
     ("mi300x-8", 1_000_000, 4256, 2128, 1), ("mi300x-8", 100_000, 8192, 8192, 1),
     ("h100-8", 1_000_000, 3000, 512, 8)],
)  # fmt: skip
def test_waves_are_those_of_the_tile_the_plan_picks(hw, m, n, k, chunks):
    """The preset's tile is the menu's largest; the plan often picks a smaller one (2x-4x the waves)."""
    from t3.config.hardware import load_hardware
    from t3.ops.gemm import plan_gemm
    from t3.workload.sublayers import GemmShape

    h = load_hardware(hw)
    dtype = "fp16" if "fp16" in h.compute.matrix_flops_per_clk_per_cu else "bf16"
    plan = plan_gemm(GemmShape(m, n, k, dtype), h, chunks=chunks)
    assert size.gemm_waves(m, n, h, chunks=chunks, k=k, dtype=dtype) == len(plan.waves)


def test_the_issue_case_is_refused():
    """t3 run --tokens 100000000 (T-NLG fc2, paper-80cu) ran 200 s and took 5.7 GB under an estimate
    of 996,136 ops: the plan's 128x64 tiles double the waves, and planning walks every tile's waves."""
    from t3.api import resolve

    op, hw, spec = resolve("t-nlg", 8, "fc2", "sequential", "paper-80cu", 100_000_000)
    w = size.run_work(op, hw, "sequential")
    assert w.ops > 1.3e6 and w.cost > 4e6
    with pytest.raises(TooLargeError, match="128x64 tiles"):
        api.run(tokens=100_000_000)


def test_schedule_build_keeps_each_dependency_once_in_order():
    """Building a schedule drops repeated dependencies in first-seen order, in linear time (a pairwise
    test was quadratic in T3's tile groups, which rs.done all depends on, so the estimate charged it):
    the oracle is the brute-force first-occurrence filter over 2000 dependencies."""
    from t3.config.hardware import load_hardware
    from t3.sim.schedule import ScheduleBuilder

    b = ScheduleBuilder("deps", load_hardware("paper-80cu"), 2)
    keys = [f"k{i}" for i in range(50)]
    for k in keys:
        b.add(0, k, kind="x", cat="x", delay_s=1e-6)
    order = [keys[(i * 7) % 50] for i in range(2000)]
    done = b.add(0, "done", kind="x", cat="x", deps=[(0, k) for k in order])
    s = b.build()
    first = []
    for k in order:
        if k not in first:
            first.append(k)
    assert [s.ops[i].key for i in done.deps] == first


def test_cost_is_what_the_limit_applies_to(monkeypatch):
    """Planned waves count: a GEMM whose simulated ops are under the limit is refused for its planning."""
    from t3.config.hardware import load_hardware

    w = size.gemm_work(1_000_000, 8192, 8192, "bf16", load_hardware("h100-8"))
    assert w.cost == w.ops + size.PLAN_WEIGHT * w.planned and w.planned > w.ops
    monkeypatch.setattr(size, "LIMIT_OPS", (w.ops + w.cost) / 2)
    with pytest.raises(TooLargeError, match=r"simulated \+ .* GEMM waves planned x 5"):
        api.gemm(1_000_000, 8192, 8192)


def test_a_gemm_wider_than_any_model_is_estimated_on_a_probe_not_planned_whole(monkeypatch):
    # hidden = 2^36 (a model file's typo): naming the tile planned all 6.7e6 waves (minutes, GBs)
    from t3.config.hardware import load_hardware
    from t3.ops import gemm

    hw = load_hardware("paper-80cu")
    planned: list = []
    plan = gemm.plan_gemm

    def probe(shape, *a, **k):
        planned.append(shape)
        return plan(shape, *a, **k)

    monkeypatch.setattr(gemm, "plan_gemm", probe)
    with pytest.raises(TooLargeError, match="128x68719476736x512"):
        size.check(size.gemm_work(128, 2**36, 512, "fp16", hw))
    c = hw.compute
    limit = size.TILE_PROBE_WAVES * c.cus * c.wg_per_cu
    assert planned and all(-(-s.m // c.tile_m) * -(-s.n // c.tile_n) <= 2 * limit for s in planned), planned
