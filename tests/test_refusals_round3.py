"""Inputs that were taken silently (a repeat, an option without effect, a name that prints garbage, two
overrides of one value, a key given twice) are refused with one line naming the field, before any work;
and `t3 reproduce t3` keeps its wall time off standard output (the same inputs print the same bytes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t3.cli.main import main
from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.measure.runner import parse_blocks, parse_only
from t3.schedules import RunOptions
from t3.workload import get_model

ROOT = Path(__file__).resolve().parent.parent
GPU_RUN = ROOT / "measurements" / "h100" / "h100-8-20261126-232539"


def one_line_error(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.count("\n") == 1, err
    return err


def test_sweep_show_refuses_a_column_named_twice_before_reading_the_store(capsys, tmp_path):
    err = one_line_error(
        ["sweep", "show", str(tmp_path / "none.parquet"), "--columns", "time_s, time_s"], capsys
    )
    assert err.startswith("error: --columns: 'time_s' is given twice")


def test_measure_refuses_a_suite_or_a_block_count_named_twice():
    with pytest.raises(ConfigError, match="--only: suite 'gemm' is named twice"):
        parse_only("gemm,hbm,gemm")
    with pytest.raises(ConfigError, match="--blocks: 4 is given twice"):
        parse_blocks("1,4,4")
    assert parse_only("hbm,gemm") == ["gemm", "hbm"]  # (the kit's order)
    assert parse_blocks("8,1,4") == (1, 4, 8)


def test_calibrate_refuses_allow_cpu_on_rows_measured_on_a_gpu(capsys, tmp_path):
    assert (GPU_RUN / "measured.toml").is_file()
    args = ["calibrate", "--measured", str(GPU_RUN), "--base", "h100-8", "--out", str(tmp_path / "a.toml")]
    err = one_line_error([*args, "--allow-cpu"], capsys)
    assert "--allow-cpu: no row of" in err and "no effect on GPU rows" in err
    assert not (tmp_path / "a.toml").exists()


def test_a_jitter_beyond_the_bound_is_refused_and_the_bound_runs():
    with pytest.raises(ConfigError, match="options.jitter: must be <= 100"):
        RunOptions(jitter=1e308)
    RunOptions(jitter=100.0)  # (the bound itself is allowed)


@pytest.mark.parametrize("name", ["", "  ", "gpu\x07", "a\nb"])
def test_a_hardware_name_that_is_empty_or_not_printable_is_refused(name):
    with pytest.raises(ConfigError, match="name: expected a non-empty name of printable characters"):
        load_hardware("h100-8", {"name": name})


def test_two_overrides_of_one_value_are_refused_naming_both(capsys):
    err = one_line_error(
        ["run", "--set", "link.bandwidth_Bps=1e11", "--set", "link={bandwidth_Bps=2e11, latency_s=1e-6}"],
        capsys,
    )
    assert "hardware.link.bandwidth_Bps: also set by 'link'" in err
    with pytest.raises(ConfigError, match="also set by 'hbm'"):
        load_hardware("h100-8", {"hbm": {}, "hbm.efficiency": 0.9})
    # siblings do not overlap
    hw = load_hardware("h100-8", {"link.bandwidth_Bps": 1e11, "link.latency_s": 1e-6})
    assert hw.link.bandwidth_Bps == 1e11


def test_a_config_json_with_a_key_given_twice_is_refused(tmp_path):
    good = {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
    }  # fmt: skip
    d = tmp_path / "m"
    d.mkdir()
    f = d / "config.json"
    f.write_text(json.dumps(good))
    assert get_model(str(f)).name == "m"
    text = json.dumps(good)[:-1] + ', "hidden_size": 8192}'
    f.write_text(text)
    with pytest.raises(ConfigError, match="key 'hidden_size' is given twice"):
        get_model(str(f))


def test_a_model_name_with_control_characters_is_refused(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('name = "bad\\u001b[31m"\nhidden = 4096\nheads = 32\nffn = 16384\nlayers = 2\n')
    with pytest.raises(ConfigError, match="name: expected a non-empty string of printable characters"):
        get_model(str(f))
