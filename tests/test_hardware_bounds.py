"""Physical bounds of hardware values (config.hardware.BOUNDS): a value outside what any GPU could be
is refused when the hardware is loaded, with the field, the value, the bound and its reason."""

from __future__ import annotations

import typing
from importlib import resources

import pytest
from pydantic import BaseModel

from t3.cli.main import main
from t3.config.hardware import BOUNDS, Hardware, load_hardware, preset_names
from t3.errors import ConfigError


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def _field(path: str):
    """The pydantic field a bound's path names (walking the model classes, not BOUNDS' own lookup)."""
    model: type[BaseModel] = Hardware
    parts = path.removesuffix(".*").split(".")
    for p in parts[:-1]:
        model = model.model_fields[p].annotation
        model = next((a for a in typing.get_args(model) if a is not type(None)), model)  # Power | None
    return model.model_fields[parts[-1]]


def _preset(path: str) -> str:
    """A preset that has the section ``path`` is in (power: only the measured GPUs have one; network:
    the presets of several nodes, and NCCL's graphs across them)."""
    if path.startswith(("network.", "collective.nccl.")):
        return "h100-2x8"
    return "h100-8" if path.startswith("power.") else "paper-80cu"


def test_every_bound_names_a_numeric_field_and_says_why():
    for path, (lo, hi, why) in BOUNDS.items():
        f = _field(path)  # KeyError: a bound on a field that does not exist
        text = str(f.annotation)
        assert "int" in text or "float" in text, path
        assert lo < hi and why.strip(), path


def test_every_preset_is_within_its_bounds():
    for name in preset_names():
        load_hardware(name)  # raises if any value is out of bounds


SCALARS = [p for p in BOUNDS if not p.endswith(".*")]


def _is_int(path: str) -> bool:
    return _field(path).annotation in (int, int | None)


@pytest.mark.parametrize("path", SCALARS)
def test_above_the_bound_is_refused_and_the_bound_itself_is_accepted(path):
    lo, hi, why = BOUNDS[path]
    above = int(hi) + 1 if _is_int(path) else hi * 1.5
    # (a field checked against another is tried beside that one at its own bound)
    extra = (
        {"compute.smem_bytes": int(BOUNDS["compute.smem_bytes"][1])}
        if path == "compute.smem_epilogue_bytes"
        else {}
    )
    with pytest.raises(ConfigError) as e:
        load_hardware(_preset(path), {**extra, path: above})
    msg = str(e.value)
    assert msg.startswith(f"hardware '{_preset(path)}': {path}: "), msg
    assert "is outside what any GPU could be: must be in [" in msg and msg.endswith(f"({why})"), msg
    at = int(hi) if _is_int(path) else float(hi)
    if path == "power.idle_w":  # the bound itself, with a limit above it
        assert load_hardware(
            _preset(path), {path: at, "power.limit_w": BOUNDS["power.limit_w"][1]}
        ).model_dump()
        return
    assert load_hardware(_preset(path), {**extra, path: at}).model_dump()  # the bound itself is inside


# topology.gpus: its field's own "greater than 1" refuses 1 first
@pytest.mark.parametrize(
    "path", [p for p in SCALARS if BOUNDS[p][0] > 1 and p not in ("topology.gpus", "network.nodes")]
)
def test_below_the_lower_bound_is_refused(path):
    lo = BOUNDS[path][0]
    below = int(lo) - 1 if _is_int(path) else lo / 2
    with pytest.raises(ConfigError, match=f"{path}: .* is outside what any GPU could be"):
        load_hardware(_preset(path), {path: below})


def test_table_entries_are_bounded_one_by_one():
    with pytest.raises(
        ConfigError, match=r"compute\.gemm_clock_hz\.bf16: 2e\+10 Hz is outside what any GPU could be"
    ):
        load_hardware("paper-80cu", {"compute.gemm_clock_hz": {"bf16": 2e10}})
    with pytest.raises(ConfigError, match=r"compute\.matrix_flops_per_clk_per_cu\.fp16: 1e\+09 is outside"):
        load_hardware("paper-80cu", {"compute.matrix_flops_per_clk_per_cu": {"fp16": 1e9}})


# the issue's cases, through the CLI: one line, exit 2, the field, the value with its unit and the bound
ISSUE = [
    (
        ("run", "--set", "link.latency_s=1e308"),
        "error: hardware 'paper-80cu': link.latency_s: 1e+308 s is outside what any GPU could be: "
        "must be in [0 s, 1 s]",
    ),
    (
        ("run", "--set", "compute.cus=1000000000"),
        "error: hardware 'paper-80cu': compute.cus: 1e+09 is outside what any GPU could be: "
        "must be in [1, 10000]",
    ),
    (
        ("run", "--set", "compute.clock_hz=1e300"),
        "error: hardware 'paper-80cu': compute.clock_hz: 1e+300 Hz is outside what any GPU could be: "
        "must be in [1e+08 Hz, 1e+10 Hz]",
    ),
]


@pytest.mark.parametrize("args,start", ISSUE, ids=[" ".join(a) for a, _ in ISSUE])
def test_issue_cases_on_the_cli(args, start, capsys):
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), err


def test_a_hardware_file_out_of_bounds_is_named(tmp_path, capsys):
    body = resources.files("t3.config").joinpath("presets", "paper-80cu.toml").read_text()
    p = tmp_path / "big.toml"
    p.write_text(
        body.replace("cus = 80 ", "cus = 1000000000 ").replace('name = "paper-80cu"', 'name = "big"')
    )
    code, _, err = cli(capsys, "run", "--hw", str(p))
    assert code == 2
    assert f"hardware '{p}': compute.cus: 1e+09 is outside what any GPU could be" in err, err


# ---- a hardware file copied from a preset names itself ------------------------------------------
def _preset_text(name: str) -> str:
    return resources.files("t3.config").joinpath("presets", f"{name}.toml").read_text()


def test_an_edited_copy_that_keeps_a_presets_name_is_named_after_its_file(tmp_path, capsys):
    body = _preset_text("paper-80cu")
    assert "\ncus = 80 " in body
    p = tmp_path / "my-gpu.toml"
    p.write_text(body.replace("\ncus = 80 ", "\ncus = 96 "))
    hw = load_hardware(p)
    assert hw.name == "my-gpu (from paper-80cu)" and hw.compute.cus == 96
    assert (
        load_hardware(p, {"compute.cus": 80}).name == "my-gpu (from paper-80cu)"
    )  # the file, then overrides
    code, out, _ = cli(capsys, "run", "--hw", str(p))
    assert code in (0, None) and "on my-gpu (from paper-80cu)" in out and "on paper-80cu" not in out


def test_an_unchanged_copy_is_the_preset_and_a_file_with_its_own_name_keeps_it(tmp_path):
    same = tmp_path / "copy.toml"
    same.write_text(_preset_text("h100-8"))
    assert load_hardware(same).name == "h100-8"
    own = tmp_path / "x.toml"
    own.write_text(_preset_text("h100-8").replace('name = "h100-8"', 'name = "lab-h100"'))
    assert load_hardware(own).name == "lab-h100"


def test_a_copy_named_like_its_preset_file_is_named_by_its_path(tmp_path):
    p = tmp_path / "paper-80cu.toml"
    p.write_text(_preset_text("paper-80cu").replace("\ncus = 80 ", "\ncus = 96 "))
    assert load_hardware(p).name == f"{p} (from paper-80cu)"


# ---- FiCCO on a one-CU preset (cpu-local) ---------------------------------------------------------
def test_cu_executor_schedules_are_illegal_when_the_comm_kernel_takes_every_cu():
    from t3.ficco.space import FiccoOperator, legality, parse_name

    hw = load_hardware("cpu-local")
    assert hw.compute.cus == 1  # the preset's one GEMM thread; the communication kernel takes at least 1
    fop = FiccoOperator("gemm-rs", 8192, 4096, 1792, 2, "bf16")
    why = legality(fop, hw, parse_name("ficco-g2-M-cu"))
    assert (
        why
        == "the cu executor's communication kernel takes 1 of the 1 CUs (compute.cus): none is left for the GEMM"
    )
    assert legality(fop, hw, parse_name("ficco-g2-M-dma")) is None
    assert legality(fop, hw, parse_name("bulk-g1-M-cu")) is None  # bulk: the GEMM has every CU
    two = load_hardware("cpu-local", {"compute.cus": 2})
    assert legality(fop, two, parse_name("ficco-g2-M-cu")) is None


@pytest.mark.parametrize("extra", [(), ("--gpus", "2"), ("--gpus", "2", "--runtime")])
def test_ficco_select_on_cpu_local_picks_a_schedule_that_leaves_the_gemm_a_cu(extra, capsys):
    # it was "error: cus: GEMM needs 1..1 CUs, got 0" (exit 2): the estimate gave the GEMM 1 - 1 CUs
    code, out, err = cli(capsys, "ficco", "select", "--hw", "cpu-local", *extra)
    assert code in (0, None), err
    name = out.split()[0]
    assert name.startswith("bulk-") or "-dma" in name, out


# ---- a TP group larger than the topology (topology.gpus) ------------------------------------------
def _fits(kind: str, gpus: int, tp: int) -> bool:
    """The rule, stated independently: a mesh or switch holds at most topology.gpus GPUs; a ring holds
    one node's worth or more whole nodes."""
    if kind in ("mesh", "switch"):
        return tp <= gpus
    return tp <= gpus or tp % gpus == 0


@pytest.mark.parametrize("hw_name", ["paper-80cu", "h100-8", "mi300x-8"])
@pytest.mark.parametrize("gpus", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("tp", [2, 4, 8, 16, 32])  # mega-gpt-2 splits over these
def test_tp_above_the_topology_is_refused_naming_tp_and_topology_gpus(hw_name, gpus, tp):
    from t3.api import resolve

    hw = load_hardware(hw_name, {"topology.gpus": gpus})
    if _fits(hw.topology.kind, gpus, tp):
        resolve("mega-gpt-2", tp, "op", "sequential", hw)  # no refusal about the topology
        return
    with pytest.raises(ConfigError) as e:
        resolve("mega-gpt-2", tp, "op", "sequential", hw)
    msg = str(e.value)
    assert msg.startswith(f"tp: {tp} GPUs ") and f"(topology.gpus = {gpus}" in msg, msg


def test_the_paper_tps_on_its_8_gpu_ring_still_run():
    from t3.api import resolve

    for tp in (8, 16, 32):
        resolve("mega-gpt-2", tp, "op", "sequential", "paper-80cu")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--hw", "paper-80cu", "--set", "topology.gpus=3", "--tp", "8"),
            "error: tp: 8 GPUs are not whole nodes of the ring of hardware 'paper-80cu' (topology.gpus = 3):"
            " a ring above one node spans whole nodes (tp <= 3 or a multiple of 3: 6 or 9)",
        ),
        (
            ("--hw", "h100-8", "--set", "topology.gpus=3", "--tp", "8"),
            "error: tp: 8 GPUs exceed the switch of 3 GPUs in hardware 'h100-8'"
            " (topology.gpus = 3: a switch connects no more)",
        ),
        (
            ("--hw", "mi300x-8", "--tp", "16"),
            "error: tp: 16 GPUs exceed the mesh of 8 GPUs in hardware 'mi300x-8'"
            " (topology.gpus = 8: a mesh connects no more)",
        ),
    ],
)
def test_run_refuses_a_tp_the_topology_cannot_hold(args, message, capsys):
    code, out, err = cli(capsys, "run", *args)
    assert code == 2 and out == ""
    assert err.strip() == message


def test_a_sweep_point_whose_tp_the_topology_cannot_hold_is_refused_before_any_run(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "tp-vs-gpus"\n[base]\nmodel = "mega-gpt-2"\nhardware = "paper-80cu"\nsublayer = "op"\n'
        'config = "sequential"\n[grid]\ntp = [8]\n"hardware.topology.gpus" = [8, 3]\n'
    )
    store = tmp_path / "s.parquet"
    code, out, err = cli(capsys, "sweep", str(spec), "--store", str(store))
    assert code == 2
    assert "point 1 (tp=8, hardware.topology.gpus=3): tp: 8 GPUs are not whole nodes of the ring" in err, err
    assert not store.exists()


def test_ficco_refuses_gpus_the_topology_cannot_hold(capsys):
    code, _, err = cli(capsys, "ficco", "select", "--hw", "paper-80cu", "--gpus", "12", "--m", "12288")
    assert code == 2
    assert err.strip() == (
        "error: gpus: 12 GPUs are not whole nodes of the ring of hardware 'paper-80cu' (topology.gpus = 8):"
        " a ring above one node spans whole nodes (gpus <= 8 or a multiple of 8: 8 or 16)"
    )


@pytest.mark.parametrize("hw_name", ["paper-80cu", "h100-8", "mi300x-8"])
@pytest.mark.parametrize("gpus", [4, 12, 16])
def test_api_collective_and_overlap_follow_the_same_topology_rule(hw_name, gpus):
    """t3.api.collective / overlap take the group size t3 run's TP may take on the same hardware (a ring
    of whole nodes above one node): they refused any group above topology.gpus, even the paper's ring."""
    from t3 import api

    hw = load_hardware(hw_name)
    calls = (lambda: api.collective("reduce_scatter", 1 << 20, gpus=gpus, hardware=hw_name),
             lambda: api.overlap("gemm-rs", 4096, 1024, 1024, gpus=gpus, hardware=hw_name))  # fmt: skip
    for call in calls:
        if _fits(hw.topology.kind, hw.topology.gpus, gpus):
            assert call()["time_s"] > 0
        else:
            with pytest.raises(ConfigError, match=rf"^gpus: {gpus} GPUs .*\(topology.gpus = 8"):
                call()
