"""The calibrated cpu-local preset loads and has the same sections and keys as paper-80cu."""

from __future__ import annotations

import tomllib
from importlib import resources

from t3.config.hardware import load_hardware


def _raw(name: str) -> dict:
    return tomllib.loads(resources.files("t3.config").joinpath("presets", f"{name}.toml").read_text())


def test_cpu_local_loads() -> None:
    hw = load_hardware("cpu-local")
    assert hw.compute.cus == 1 and hw.topology.gpus == 2 and not hw.nmc.present


def test_cpu_local_has_the_keys_of_paper_80cu() -> None:
    ours, paper = _raw("cpu-local"), _raw("paper-80cu")
    assert set(ours) == set(paper)
    for section, body in paper.items():
        if isinstance(body, dict):
            assert set(ours[section]) == set(body), section
