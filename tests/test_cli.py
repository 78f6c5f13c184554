"""Bad input gives a one-line error naming the field and a non-zero exit, before any simulation."""

import subprocess
import sys

import pytest


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "--hw", "nope"], "unknown preset 'nope'"),
        (["run", "--config", "foo"], "config: unknown configuration 'foo'"),
        (["run", "--model", "gpt-5"], "model: unknown model 'gpt-5'"),
        (["run", "--sublayer", "fc3"], "sublayer: unknown sublayer"),
        (["run", "--tokens", "1001"], "tokens: 1001"),
        (["run", "--set", "link.bandwidth_Bps=-1"], "link.bandwidth_Bps"),
        (["run", "--set", "link.bw=1"], "link.bw: unknown field"),
        (["run", "--config", "concurrent", "--comm-cus", "80"], "comm_cus"),
    ],
)
def test_bad_input_one_line_error(args, needle):
    p = _t3(*args)
    assert p.returncode == 2
    assert needle in p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_bad_option_type_is_usage_error():
    p = _t3("run", "--tp", "abc")
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_presets_lists_required():
    p = _t3("presets")
    assert p.returncode == 0
    for name in ("paper-80cu", "mi300x-8", "h100-8"):
        assert name in p.stdout


def test_human_table_has_units():
    p = _t3("run", "--sublayer", "op")
    assert p.returncode == 0
    assert "ms" in p.stdout or "µs" in p.stdout
    assert "MB" in p.stdout
