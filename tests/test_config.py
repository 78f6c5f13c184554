import pytest
from pydantic import ValidationError

from t3.config.hardware import load_hardware, preset_names
from t3.errors import ConfigError


def test_presets_exist_and_validate():
    names = preset_names()
    for required in ("paper-80cu", "mi300x-8", "h100-8"):
        assert required in names
    hw = load_hardware("paper-80cu")
    assert hw.compute.cus == 80 and hw.compute.clock_hz == 1.4e9
    assert hw.hbm.bandwidth_Bps == 1e12 and hw.link.latency_s == 500e-9
    assert hw.tracker.entries == 256


def test_unknown_preset_names_choices():
    with pytest.raises(ConfigError, match="unknown preset 'nope'.*paper-80cu"):
        load_hardware("nope")


def _write(tmp_path, text):
    p = tmp_path / "hw.toml"
    base = (
        load_hardware.__globals__["resources"].files("t3.config") / "presets" / "paper-80cu.toml"
    ).read_text()
    p.write_text(text(base))
    return p


def test_user_file_loads(tmp_path):
    p = _write(tmp_path, lambda b: b.replace('name = "paper-80cu"', 'name = "mine"'))
    assert load_hardware(str(p)).name == "mine"


def test_unknown_key_is_named(tmp_path):
    p = _write(tmp_path, lambda b: b.replace("[link]\n", "[link]\nbandwith_Bps = 3\n"))
    with pytest.raises(ConfigError, match=r"link\.bandwith_Bps: unknown field"):
        load_hardware(str(p))


def test_a_misspelled_key_is_named_before_the_field_it_leaves_missing(tmp_path):
    p = _write(tmp_path, lambda b: b.replace("bandwidth_Bps = 75e9", "bandwith_Bps = 75e9"))
    with pytest.raises(ConfigError, match=r"link\.bandwith_Bps: unknown field \(\+1 more\)$"):
        load_hardware(str(p))


def test_missing_field_is_named(tmp_path):
    p = _write(tmp_path, lambda b: b.replace("latency_s = 500e-9", ""))
    with pytest.raises(ConfigError, match=r"link\.latency_s: missing field"):
        load_hardware(str(p))


def test_negative_bandwidth_is_named(tmp_path):
    p = _write(tmp_path, lambda b: b.replace("bandwidth_Bps = 75e9", "bandwidth_Bps = -75e9"))
    with pytest.raises(ConfigError, match=r"link\.bandwidth_Bps: .*greater than 0"):
        load_hardware(str(p))


def test_overrides_validate_and_reject_unknown_paths():
    hw = load_hardware("paper-80cu", {"link.bandwidth_Bps": 150e9})
    assert hw.link.bandwidth_Bps == 150e9
    with pytest.raises(ConfigError, match=r"link\.bw: unknown field"):
        load_hardware("paper-80cu", {"link.bw": 1})
    with pytest.raises(ConfigError, match=r"hbm\.bandwidth_Bps"):
        load_hardware("paper-80cu", {"hbm.bandwidth_Bps": 0})


def test_configs_are_immutable():
    hw = load_hardware("paper-80cu")
    with pytest.raises(ValidationError):
        hw.link.bandwidth_Bps = 1.0
