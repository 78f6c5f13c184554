"""A config.json path is accepted wherever a model name is: t3 run, sweep specs (relative to the spec)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from t3.experiments.sweep import load_spec
from t3.experiments.sweep.spec import run_resolved

DATA = Path(__file__).parent / "data" / "hf"


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


def test_run_cli_takes_config_json():
    p = _t3("run", "--model", str(DATA / "gemma-7b.json"), "--tp", "8", "--sublayer", "op", "--tokens", "2048",
            "--hw", "h100-8", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    # Gemma 7B: the out-projection reads heads x head_dim = 16 x 256 = 4096 (not hidden 3072) / TP 8
    assert rec["model"] == "gemma-7b" and rec["gemm"] == {"m": 2048, "n": 3072, "k": 512, "dtype": "bf16"}


def test_run_cli_bad_config_is_one_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    p = _t3("run", "--model", str(bad))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "num_hidden_layers: missing key" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_sweep_spec_model_path_is_relative_to_the_spec(tmp_path):
    shutil.copy(DATA / "qwen3-8b.json", tmp_path / "qwen3-8b.json")
    spec = tmp_path / "s.toml"
    spec.write_text('[base]\nsublayer = "fc2"\ntokens = 1024\nhardware = "h100-8"\n'
                    '[grid]\nmodel = ["qwen3-8b.json", "llama-3-8b"]\n')  # fmt: skip
    sw = load_spec(spec)
    assert sw.points[0].point["model"] == str((tmp_path / "qwen3-8b.json").resolve())
    rec = run_resolved(sw.points[0].point)
    assert rec["model"] == "qwen3-8b" and rec["gemm"]["k"] == 12288 // 8
    assert run_resolved(sw.points[1].point)["gemm"]["k"] == 14336 // 8
