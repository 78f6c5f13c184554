"""``t3 measure`` on CPU tensors (the kit's plumbing): every suite writes rows that load, the numbers in
the rows are the medians of the raw samples in run.json, and bad input is a one-line error before any
work."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from t3.errors import ConfigError
from t3.measure.rows import is_cpu_row
from t3.measure.runner import guess_hardware
from t3.validation import load_dataset
from t3.validation.dataset import MEASURED_SOURCE

ROOT = Path(__file__).resolve().parents[2]
CPU = ["--device", "cpu", "--allow-cpu", "--hardware", "h100-8"]


def _main(argv):
    from t3.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            code = 0 if e.code is None else int(e.code)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure") / "m"
    code, out, err = _main(["measure", *CPU, "--out", d, "--tag", "t"])
    assert code == 0, err
    return d, out, load_dataset([d / "measured.toml"]), json.loads((d / "run.json").read_text())


def test_every_suite_writes_rows_that_load(run):
    d, out, rows, raw = run
    cats = {r.category for r in rows}
    assert cats == {"gemm_tflops", "hbm_bandwidth", "latency", "interference"}
    for r in rows:
        assert r.hardware == "h100-8" and r.role == "calibration" and r.id.startswith("t-")
        assert r.source.startswith(MEASURED_SOURCE) and is_cpu_row(r)
        assert r.device["command"].startswith("t3 measure --device cpu")
    gemms = {(r.workload["m"], r.workload["n"], r.workload["k"], r.workload["dtype"]) for r in rows
             if r.category == "gemm_tflops"}  # fmt: skip
    assert (32, 256, 256, "bf16") in gemms and (256, 256, 32, "bf16") in gemms  # thin pieces: M and K splits
    assert {r.workload["stream"] for r in rows if r.category == "hbm_bandwidth"} == {
        "read",
        "write",
        "copy",
        "triad",
    }
    assert {r.workload["cus"] for r in rows if r.category == "hbm_bandwidth"} >= {0, 1, 2}
    assert {r.workload["what"] for r in rows if r.category == "latency"} == {
        "kernel_launch",
        "event_wait",
        "flag",
    }
    intf = [r for r in rows if r.category == "interference"]
    assert {r.workload["comm"] for r in intf} == {
        "sm_copy",
        "sm_reduce",
        "memcpy",
        "ce_h2d",
    }  # the CPU plan: d2d, h2d
    assert {r.workload["victim"] for r in intf} == {"compute", "comm", "pair"}
    assert {r.workload["arrangement"] for r in intf} == {"background", "together", "held"}
    # launched together as they come, then each first with the other 20 us behind it
    ordered = {
        (r.workload["first"], r.workload["lead_us"]) for r in intf if r.workload["arrangement"] == "together"
    }
    assert ordered == {("comm", 0.0), ("comm", 20.0), ("gemm", 20.0)}
    # held: only the k-block kernels (one launch looping over its buffer), never torch.add or a copy engine
    assert {(r.workload["comm"], r.workload["cus"] > 0) for r in intf if r.workload["arrangement"] == "held"} == {
        ("sm_copy", True), ("sm_reduce", True)}  # fmt: skip
    assert raw["complete"] and raw["environment"]["gpu"].startswith("CPU")
    assert "TFLOPS" in out and "GB/s" in out and " us" in out and "wrote" in out


def test_a_tf32_gemm_runs_fp32_operands_with_tf32_on_and_restores_the_switch(run):
    import torch

    _, _, rows, _ = run
    tf32 = [r for r in rows if r.category == "gemm_tflops" and r.workload["dtype"] == "tf32"]
    assert len(tf32) == 1 and "FP32 in and out on the TF32 tensor-core path" in tf32[0].conventions
    assert "allow_tf32 = True" in tf32[0].conventions
    others = [r for r in rows if r.category == "gemm_tflops" and r.workload["dtype"] == "bf16"]
    assert others and all("allow_tf32 = False" in r.conventions for r in others)
    assert torch.backends.cuda.matmul.allow_tf32 is False  # the kit left PyTorch's default as it was


def test_rows_are_the_medians_of_the_raw_samples(run):
    _, _, rows, raw = run
    by_id = {m["id"]: m for m in raw["measurements"]}
    assert list(by_id) == [r.id for r in rows]
    for r in rows:
        m = by_id[r.id]
        if r.category == "interference":
            assert r.published["alone_us"] == pytest.approx(np.median(m["alone_s"]) * 1e6, rel=1e-5)
            assert r.published["together_us"] == pytest.approx(np.median(m["together_s"]) * 1e6, rel=1e-5)
            continue
        med = np.median(np.maximum(m["samples_s"], 1e-9))
        if r.category == "gemm_tflops":
            w = r.workload
            assert r.measured == pytest.approx(2 * w["m"] * w["n"] * w["k"] / med / 1e12, rel=1e-5)
        elif r.category == "hbm_bandwidth":
            assert r.measured == pytest.approx(r.workload["nbytes"] / med / 1e9, rel=1e-5)
        else:
            assert r.measured == pytest.approx(med * 1e6, rel=1e-5)


def test_only_and_overwrite(run, tmp_path):
    d = tmp_path / "m"
    code, _, err = _main(["measure", *CPU, "--out", d, "--only", "latency"])
    assert code == 0, err
    assert {r.category for r in load_dataset([d / "measured.toml"])} == {"latency"}
    code, _, err = _main(["measure", *CPU, "--out", d, "--only", "hbm,latency", "--overwrite"])
    assert code == 0, err
    assert {r.category for r in load_dataset([d / "measured.toml"])} == {"latency", "hbm_bandwidth"}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--device", "cpu", "--hardware", "h100-8"], "--device cpu: a CPU run measures the kit's plumbing"),
        (["--device", "cpu", "--allow-cpu"], "--hardware: a CPU run needs the preset"),
        ([*CPU, "--only", "gemm,bogus"], "--only: unknown suite 'bogus'"),
        (["--device", "tpu"], "--device: unknown device 'tpu'"),
        (["--device", "cpu", "--allow-cpu", "--hardware", "x999-8"], "--hardware: unknown preset 'x999-8'"),
        ([*CPU, "--budget", "0"], "--budget: must be a finite number > 0"),
        ([*CPU, "--budget", "1e999"], "--budget: must be a finite number > 0 seconds, got inf"),
        ([*CPU, "--tag", "a b"], "--tag: 'a b' must be letters"),
        ([*CPU, "--blocks", "1,0"], "--blocks: '0' is not a whole number of thread blocks >= 1"),
        ([*CPU, "--blocks", "4,x"], "--blocks: 'x' is not a whole number"),
        (
            [*CPU, "--only", "gemm,latency", "--blocks", "4"],
            "--blocks: the k-block copies are measured by the hbm and",
        ),
    ],
)
def test_bad_input_is_one_line_before_any_work(tmp_path, extra, needle):
    d = tmp_path / "m"
    code, out, err = _main(["measure", *extra, "--out", d])
    assert code == 2 and out == ""
    assert err.startswith(f"error: {needle}") and err.count("\n") == 1, err
    assert not d.exists()


def test_a_non_empty_out_is_refused_without_overwrite(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    code, _, err = _main(["measure", *CPU, "--out", tmp_path])
    assert code == 2 and err.startswith(f"error: --out: directory '{tmp_path}' is not empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_no_gpu_says_how_to_run_on_cpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, _, err = _main(["measure", "--out", tmp_path / "m"])
    assert code == 2 and "sees no GPU" in err and "--device cpu --allow-cpu" in err


def test_a_spent_budget_skips_the_rest_and_says_so(tmp_path):
    code, out, _ = _main(["measure", *CPU, "--out", tmp_path / "m", "--budget", "1e-9", "--json"])
    summary = json.loads(out)
    assert code == 1 and summary["rows"] == 0
    assert any("budget of" in n for n in summary["notes"])


def test_the_gpu_name_gives_the_preset():
    assert guess_hardware("NVIDIA H100 80GB HBM3") == "h100-8"
    assert guess_hardware("NVIDIA H200") == "h200-8"
    assert guess_hardware("AMD Instinct MI300X") == "mi300x-8"
    with pytest.raises(ConfigError, match="--hardware: cannot tell which preset the GPU 'NVIDIA A100"):
        guess_hardware("NVIDIA A100-SXM4-80GB")


def test_the_kit_runs_alone_without_t3s_dependencies(tmp_path):
    """benchmarks/device_measure.sh's fallback: a copy of the package as `t3measure`, with `t3` itself
    unimportable (a GPU machine's Python without pydantic); the rows it writes load here."""
    shutil.copytree(ROOT / "src" / "t3" / "measure", tmp_path / "t3measure")
    (tmp_path / "t3").mkdir()
    (tmp_path / "t3" / "__init__.py").write_text("raise ImportError('simulated: no pydantic')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "t3measure", *CPU, "--out", tmp_path / "m", "--only", "latency"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = load_dataset([tmp_path / "m" / "measured.toml"])
    assert [r.workload["what"] for r in rows] == ["kernel_launch", "event_wait", "flag"]
    assert rows[0].device["command"].startswith("python -m t3measure --device cpu")
    p = subprocess.run([sys.executable, "-m", "t3measure", "--device", "cpu", "--out", tmp_path / "x"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert p.returncode == 2 and p.stderr.startswith("error: --device cpu:")


def test_held_rate_recovers_the_rate_beside_the_gemm():
    """The closed form against a brute-force timeline: work W at rate r0 alone, at x r0 for the first S."""
    from t3.measure.interference import held_rate

    for x in (1.0, 0.5, 0.25, 0.9):
        w, r0, s = 10.0, 1.0, 4.0  # the GEMM's overlap S is shorter than the interferer
        t0 = w / r0
        t_with = s + (w - x * r0 * s) / r0  # S at the slowed rate, the remaining work alone
        assert abs(held_rate(t0, t_with, s) - x) < 1e-12


def test_blocks_replace_the_plans_k_block_counts(tmp_path):
    """--blocks 1,3: the HBM suite's k-block copies and the interference suite's on exactly those k."""
    d = tmp_path / "m"
    code, _, err = _main(["measure", *CPU, "--out", d, "--only", "hbm,interference", "--blocks", "3,1"])
    assert code == 0, err
    rows = load_dataset([d / "measured.toml"])
    assert {r.workload["cus"] for r in rows if r.category == "hbm_bandwidth"} == {0, 1, 3}
    held = {r.workload["cus"] for r in rows if r.workload.get("arrangement") == "held"}
    assert held == {1, 3}


class _Clocks:
    """A two-stream timeline for ``_overlap``: each stream has its own clock, events read the clock of the
    stream they are recorded on, a GEMM call advances stream 1's and an interferer unit stream 2's. The
    interferer's stream starts ``late`` seconds after the release (0: beside the GEMMs)."""

    concurrent = True

    def __init__(self, late: float):
        self.clock = {None: 0.0, 1: 0.0, 2: late}
        self.cur = None

    def stream(self):
        return None

    @contextlib.contextmanager
    def use(self, s):
        prev, self.cur = self.cur, s
        yield
        self.cur = prev

    def event(self):
        owner = self

        class E:
            def record(self):
                self.t = owner.clock[owner.cur]

        return E()

    def elapsed(self, a, b):
        return b.t - a.t

    def wait(self, s, e):
        pass

    def gate(self, seconds):
        pass

    def sync(self):
        pass


def test_no_interferer_sample_when_none_ran_beside_the_gemm():
    """A background whose interferer units all ran after the GEMMs' span gives no interferer sample on a
    GPU (its calls there are not its time beside the GEMM); beside them, the units inside the span count,
    and a sequential backend (CPU) counts every unit."""
    from t3.measure.interference import _overlap

    def go(late: float, concurrent: bool = True):
        bk = _Clocks(late)
        bk.concurrent = concurrent

        def vop(i):
            bk.clock[1] += 1.0

        def unit(j):
            bk.clock[2] += 0.25

        return _overlap(bk, (None, 1, 2), vop, 4, unit, 20, 0.0)

    after = go(late=10.0)  # every unit after the 4 s span of the GEMMs
    assert after.victim == [1.0] * 4 and after.comm == []
    beside = go(late=0.0)
    assert len(beside.comm) == 16 and all(c == 0.25 for c in beside.comm)  # those ending by 4 s
    cpu = go(late=10.0, concurrent=False)
    assert len(cpu.comm) == 20
