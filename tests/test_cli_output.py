"""What the commands print and record: t3 run's breakdown and speed-up, loud multi-point failures,
deadlocks that name what starved, provenance, t3 --version, sweep show within 80 columns."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

import t3
from t3.api import run
from t3.cli.main import main
from t3.config.hardware import load_hardware
from t3.errors import PointsFailed, SimulationError, T3Error
from t3.sim import DeadlockError, Engine
from t3.sim.schedule import Op, Policy, Resource, Schedule, Semaphore

ROOT = Path(__file__).resolve().parents[1]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


# ---- t3 run ---------------------------------------------------------------------------------------
def test_run_json_speedup_and_breakdown_add_up(capsys):
    code, out, _ = cli(capsys, "run", "--config", "t3-mca", "--tokens", "2048", "--json")
    assert code == 0
    rec = json.loads(out)
    seq = run("t-nlg", 8, "fc2", "sequential", "paper-80cu", 2048)["time_s"]
    mine = run("t-nlg", 8, "fc2", "t3-mca", "paper-80cu", 2048)["time_s"]
    assert rec["sequential_time_s"] == seq and rec["time_s"] == mine
    assert rec["speedup_vs_sequential"] == pytest.approx(seq / mine - 1.0, rel=1e-12)
    bd = rec["breakdown_s"]
    assert bd["gemm"] + bd["exposed_comm"] == pytest.approx(rec["time_s"], rel=1e-12)
    assert "exposed" in rec["definitions"]["breakdown_s.exposed_comm"]


def test_run_table_shares_sum_to_100_and_define_exposed_comm(capsys):
    code, out, _ = cli(capsys, "run", "--config", "t3", "--tokens", "2048")
    assert code == 0
    shares = [float(x) for x in re.findall(r"│\s+([\d.]+) %\s+│", out)]
    assert shares[-1] == 100.0 and sum(shares[:-1]) == pytest.approx(100.0, abs=0.15)
    assert "exposed communication = total time - GEMM time" in out
    assert "speed-up over Sequential:" in out


def test_run_help_defines_exposed_communication_and_speedup(capsys):
    code, out, _ = cli(capsys, "run", "--help")
    text = " ".join(out.replace("│", " ").split())
    assert code == 0 and "exposed communication: total time - GEMM time" in text
    assert "T_sequential / T - 1" in text and "--force" in text


# ---- provenance and --version ---------------------------------------------------------------------
def _head() -> str | None:
    p = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT / "src" / "t3", capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def test_version_prints_version_and_commit(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.startswith(f"t3 {t3.__version__}")
    from t3.sim import engine

    want = "compiled core" if engine._native is not None else "Python"
    assert f"engine: {want}" in out
    head = _head()
    if head:  # run from a checkout: the commit (dirty or not) is printed
        assert f"(git {head}" in out


def test_provenance_records_version_commit_hardware_hash_and_command(capsys, tmp_path):
    code, out, _ = cli(capsys, "run", "--tokens", "1024", "--json", "--set", "link.latency_s=1e-6")
    assert code == 0
    pv = json.loads(out)["provenance"]
    hw = load_hardware("paper-80cu", {"link.latency_s": 1e-6})
    canonical = json.dumps(hw.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    assert pv["hardware_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert pv["hardware_sha256"] != json.loads(cli(capsys, "run", "--tokens", "1024", "--json")[1])["provenance"][
        "hardware_sha256"
    ]  # fmt: skip
    assert pv["command"] == "t3 run --tokens 1024 --json --set link.latency_s=1e-6"
    head = _head()
    assert pv["git_commit"] is None if head is None else pv["git_commit"].startswith(head)
    # the same hardware from a copied TOML file: same content, same hash
    src = (ROOT / "src" / "t3" / "config" / "presets" / "paper-80cu.toml").read_text()
    (tmp_path / "copy.toml").write_text(src)
    from t3.provenance import hardware_hash

    assert hardware_hash(load_hardware(str(tmp_path / "copy.toml"))) == hardware_hash(
        load_hardware("paper-80cu")
    )


def test_trace_records_provenance(capsys, tmp_path):
    code, _, _ = cli(capsys, "run", "--tokens", "1024", "--trace", str(tmp_path / "t.json"))
    assert code == 0
    assert code == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["otherData"]["provenance"]["command"].startswith("t3 run --tokens 1024 --trace")


def test_sweep_rows_record_provenance(tmp_path):
    from t3.experiments.sweep import execute, spec_from_dict
    from t3.provenance import hardware_hash

    sw = spec_from_dict(
        {"base": {"sublayer": "op", "tokens": 1024}, "grid": {"hardware.link.latency_s": [1e-6, 2e-6]}}
    )
    df, _ = execute(sw, workers=1, store=tmp_path / "r.parquet", progress=False)
    want = [hardware_hash(load_hardware("paper-80cu", {"link.latency_s": v})) for v in (1e-6, 2e-6)]
    assert list(df["provenance.hardware_sha256"]) == want
    assert set(df["provenance.t3_version"]) == {t3.__version__}


# ---- deadlocks name what starved ------------------------------------------------------------------
class _Nothing(Policy):
    name = "nothing"

    def available(self, capacity, remaining, level, lower_demand):
        return 0.0


def _op(i, res, work=1.0, deps=(), acquire=(), release=()):
    return Op(i, 0, f"op{i}", "x", "rs", [(res, work)], [], 0.0, list(deps), {}, 0,
              acquire=list(acquire), release=list(release))  # fmt: skip


def test_deadlock_names_the_resource_that_starved():
    res = [Resource("link:0>1", 1.0, "link", 0), Resource("hbm:0", 1.0, "hbm", 0, _Nothing())]
    ops = [_op(0, 0), _op(1, 1)]
    with pytest.raises(DeadlockError) as e:
        Engine().run(Schedule("t", ops, res, 1, [0], {}, []))
    assert isinstance(e.value, T3Error) and isinstance(e.value, SimulationError)
    assert e.value.kind == "resource" and e.value.names == ("hbm:0",)
    assert "hbm:0" in str(e.value) and "link:0>1" not in str(e.value) and "0:op1" in str(e.value)


def test_deadlock_names_the_semaphore_never_released():
    res = [Resource("r0", 1.0, "link", 0), Resource("r1", 1.0, "link", 0)]
    ops = [_op(0, 0, acquire=[(0, 1)]), _op(1, 1, deps=[0], acquire=[(0, 1)])]
    with pytest.raises(DeadlockError) as e:
        Engine().run(Schedule("t", ops, res, 1, [0], {}, [Semaphore("buffers:0", 1, 0)]))
    assert e.value.kind == "semaphore" and e.value.names == ("buffers:0",)
    assert "buffers:0 (1 of 1 units held" in str(e.value) and "0:op1" in str(e.value)


def test_t3_blames_the_tracker_only_for_a_tracker_deadlock(monkeypatch):
    """A deadlock on another resource is reported as itself, not as 'tracker.entries'."""
    import t3.schedules.t3 as t3mod

    def starve(self, sched):
        raise DeadlockError("no progress possible: resource hbm:0 ...", "resource", ("hbm:0",))

    monkeypatch.setattr(Engine, "run", starve)
    with pytest.raises(DeadlockError, match="hbm:0") as e:
        run("t-nlg", 8, "op", "t3", "paper-80cu", 1024)
    assert "tracker" not in str(e.value)

    def tracker(self, sched):
        raise DeadlockError(
            "ops wait forever for semaphore units: tracker:0 ...", "semaphore", ("tracker:0",)
        )

    monkeypatch.setattr(Engine, "run", tracker)
    with pytest.raises(t3mod.ScheduleError, match="tracker.entries: 256 entries deadlock"):
        run("t-nlg", 8, "op", "t3", "paper-80cu", 1024)


def test_non_finite_time_is_a_simulation_error():
    # a link of 1e-306 B/s is refused when the hardware is loaded (config.hardware.BOUNDS): only a model
    # built past validation reaches the simulation's own check
    from t3.api import RunOptions, resolve, simulate

    with pytest.raises(T3Error, match="link.bandwidth_Bps: 1e-306 B/s is outside"):
        run("t-nlg", 8, "fc2", "sequential", "paper-80cu", None, {"link.bandwidth_Bps": 1e-306})
    op, hw, spec = resolve("t-nlg", 8, "fc2", "sequential", "paper-80cu", None, None)
    slow = hw.model_copy(update={"link": hw.link.model_copy(update={"bandwidth_Bps": 1e-306})})
    with pytest.raises(SimulationError, match="not finite"):
        simulate(op, slow, spec, RunOptions())


# ---- loud failures of multi-point commands --------------------------------------------------------
BAD_SPEC = (
    '[base]\nsublayer = "op"\ntokens = 1024\nconfig = "concurrent"\n'
    '[grid]\n"options.comm_cus" = [8, 80]\n'  # 80 of 80 CUs: the concurrent schedule refuses it when run
)


def test_sweep_names_failed_points_and_keep_going_exits_zero(capsys, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(BAD_SPEC)
    code, _, err = cli(capsys, "sweep", str(spec), "--store", str(tmp_path / "a.parquet"), "--workers", "1")
    assert code == 1
    assert "point 1 (options.comm_cus=80): ConfigError: comm_cus: must be in 1..79, got 80" in err
    code, _, err = cli(capsys, "sweep", str(spec), "--store", str(tmp_path / "b.parquet"), "--workers", "1",
                       "--keep-going")  # fmt: skip
    assert code == 0 and "WARNING: 1 point(s) failed (--keep-going" in err


def test_reproduce_t3_reports_infeasible_tracker_points_not_failures():
    from t3.experiments import report
    from t3.experiments import reproduce_t3 as r

    plan = r.Plan(
        models=("mega-gpt-2",), tps=(8,), large_models=(), sublayers=("fc2",), tokens=2048, comm_cus=(8,),
        sweeps=(r.DEFAULT_SWEEPS[3],), timeline=None,
    )  # fmt: skip
    assert plan.sweeps[0].field == "tracker.entries" and 32 in plan.sweeps[0].values
    doc = r.reproduce(plan, workers=1, progress=False)
    assert doc["errors"] == []
    assert doc["infeasible"] and all("tracker.entries" in x["error"] for x in doc["infeasible"])
    rows = {row["value"]: row for row in doc["sensitivity"][0]["rows"]}
    assert "infeasible" in rows[32]["t3"] and rows[32]["t3"]["geomean_speedup"] is None
    assert rows[256]["t3"]["geomean_speedup"] is not None
    text = report.render(doc, [])
    assert (
        "infeasible [1]" in text and "failed" not in text.split("## Sensitivity")[1].split("## Calibrated")[0]
    )


def test_reproduce_ficco_names_the_failed_case_and_writes_nothing(monkeypatch, tmp_path):
    from t3.experiments import reproduce_ficco as rf

    cases = rf.all_cases(1)[:2]
    monkeypatch.setattr(rf, "all_cases", lambda limit=None: cases)

    def boom(case):
        if case is cases[1]:
            raise RuntimeError("engine exploded")
        return {"case": case.key}

    monkeypatch.setattr(rf, "run_case", boom)
    with pytest.raises(
        PointsFailed, match=f"case {cases[1].key} .*RuntimeError: engine exploded.*--keep-going"
    ):
        rf.reproduce(tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out").exists()


# ---- sweep show fits 80 columns -------------------------------------------------------------------
def test_sweep_show_fits_80_columns(capsys, tmp_path, monkeypatch):
    from t3.experiments.sweep import execute, spec_from_dict

    sw = spec_from_dict({
        "base": {"sublayer": "op", "tokens": 1024},
        "grid": {"config": ["sequential", "ideal-gemm-rs-overlap"], "hardware.link.bandwidth_Bps": [5e10, 1e11],
                 "hardware.link.latency_s": [1e-6, 2e-6], "tp": [4, 8]},
    })  # fmt: skip
    execute(sw, workers=1, store=tmp_path / "r.parquet", progress=False)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(capsys, "sweep", "show", str(tmp_path / "r.parquet"))
    assert code == 0
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80, out
    assert "not shown (80 columns wide)" in out  # the outputs that did not fit are named
    monkeypatch.setenv("COLUMNS", "200")
    code, wide, _ = cli(capsys, "sweep", "show", str(tmp_path / "r.parquet"))
    assert "not shown" not in wide and "exposed comm" in wide
