"""Every bad input, across every command, is refused before any work with one line naming the field
(exit status 2; 1 for a simulation that cannot give a finite answer): never accepted silently, never a
traceback, never a hang. The pathological sizes are refused quickly unless --force."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from t3.cli.main import main

PRESET = Path(str(resources.files("t3.config").joinpath("presets", "paper-80cu.toml")))
MODEL = "hidden = 1024\nlayers = 2\nheads = 16\nffn = 4096\ntokens = 2048\n"
SPEC = '[base]\nmodel = "t-nlg"\nsublayer = "op"\ntokens = 1024\n[grid]\nconfig = ["sequential"]\n'


HW_FILES = {
    "cus_str": lambda b: b.replace("cus = 80 ", 'cus = "80" '),
    "cus_float": lambda b: b.replace("cus = 80 ", "cus = 80.0 "),
    "bidir_str": lambda b: b.replace("gpus = 8 ", 'gpus = 8\nbidirectional_ring = "no"\n'),
    "present_str": lambda b: b.replace("present = true", 'present = "yes"'),
    "nan": lambda b: b.replace("bandwidth_Bps = 75e9", "bandwidth_Bps = nan"),
    "inf": lambda b: b.replace("latency_s = 500e-9", "latency_s = inf"),
    "flops_str": lambda b: b.replace("fp16 = 1024.0", 'fp16 = "1024"'),
    "flops_nan": lambda b: b.replace("fp16 = 1024.0", "fp16 = nan"),
    "flops_dtype": lambda b: b.replace("fp16 = 1024.0", "fp16 = 1024.0, int4 = 5.0"),
    "unknown_section": lambda b: b + "\n[foo]\nx = 1\n",
    "unknown_key": lambda b: b.replace("[hbm]\n", "[hbm]\nbw = 1\n"),
    "missing_section": lambda b: b.replace("[dma]", "[dmax]"),
    "name_int": lambda b: b.replace('name = "paper-80cu"', "name = 5"),
    "garbage": lambda b: "[[[ not toml",
    "tiles1": lambda b: b.replace("tile_m = 128", "tile_m = 1").replace("tile_n = 128", "tile_n = 1"),
}
MODEL_FILES = {
    "heads0": MODEL.replace("heads = 16", "heads = 0"),
    "kv_nodiv": MODEL + "kv_heads = 5\n",
    "kv_gt": MODEL + "kv_heads = 32\n",
    "head_frac": MODEL.replace("heads = 16", "heads = 3"),
    "heads_gt_hidden": MODEL.replace("heads = 16", "heads = 2048"),
    "hidden_str": MODEL.replace("hidden = 1024", 'hidden = "1024"'),
    "hidden_nan": MODEL.replace("hidden = 1024", "hidden = nan"),
    "gated_str": MODEL + 'gated = "yes"\n',
    "gated_int": MODEL + "gated = 1\n",
    "dtype_bad": MODEL + 'dtype = "fp64"\n',
    "tokens_float": MODEL.replace("tokens = 2048", "tokens = 2048.0"),
    "unknown": MODEL + "foo = 1\n",
    "table": MODEL + "[sub]\nx = 1\n",
    "ffn_nodiv": MODEL.replace("ffn = 4096", "ffn = 4097"),
    # GPT-3's widths and tokens with 4096 heads: splits over 4096 GPUs (GPT-3's 96 heads do not)
    "tp4096": "hidden = 12288\nlayers = 96\nheads = 4096\nffn = 49152\ntokens = 12288\n",
}
SWEEP_FILES = {
    "unknown_top": SPEC + "foo = 1\n",
    "base_unknown": SPEC.replace("[base]\n", "[base]\nfoo = 1\n"),
    "grid_scalar": '[grid]\nconfig = "sequential"\n',
    "grid_empty": "[grid]\nconfig = []\n",
    "param_unknown": SPEC + '"options.params.foo" = [1]\n',
    "param_fault": SPEC + '"options.params.functional_fault" = ["explode"]\n',
    "opt_str_bool": SPEC.replace("[base]\n", '[base]\n"options.symmetric" = "no"\n'),
    "opt_str_int": SPEC.replace("[base]\n", '[base]\n"options.comm_cus" = "8"\n'),
    "hw_str": SPEC + '"hardware.compute.cus" = ["80"]\n',
    "hw_nan": SPEC + '"hardware.link.bandwidth_Bps" = [nan]\n',
    "tokens_float": SPEC + "tokens = [1e3]\n",
    "zip_unequal": '[[zip]]\nmodel = ["t-nlg"]\ntp = [8, 16]\n',
    "jitter_inf": SPEC + '"options.jitter" = [inf]\n',
    "jitter_neg": SPEC + '"options.jitter" = [-1.0]\n',
    "seed_float": SPEC + '"options.seed" = [1.5]\n',
    "comm_cus0": SPEC + '"options.comm_cus" = [0]\n',
    "tp4096": SPEC.replace('model = "t-nlg"', 'model = "m_tp4096.toml"')
    .replace("tokens = 1024", "tokens = 12288")
    .replace('"sequential"', '"t3"')
    + "tp = [4096]\n",
    "huge": "[grid]\n"
    + "tokens = ["
    + ", ".join(str(8 * i) for i in range(1, 400))
    + "]\n"
    + '"options.seed" = ['
    + ", ".join(str(i) for i in range(300))
    + "]\n",
    "garbage": "[[[",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bad")
    base = PRESET.read_text()
    out = {}
    for name, edit in HW_FILES.items():
        (d / f"hw_{name}.toml").write_text(edit(base))
        out[f"hw:{name}"] = str(d / f"hw_{name}.toml")
    for name, text in MODEL_FILES.items():
        (d / f"m_{name}.toml").write_text(text)
        out[f"model:{name}"] = str(d / f"m_{name}.toml")
    for name, text in SWEEP_FILES.items():
        (d / f"s_{name}.toml").write_text(text)
        out[f"sweep:{name}"] = str(d / f"s_{name}.toml")
    (d / "s_good.toml").write_text(SPEC)
    out["sweep:good"] = str(d / "s_good.toml")
    (d / "adir").mkdir()
    (d / "adir.toml").mkdir()
    (d / "afile").write_text("x")
    (d / "latin1.toml").write_bytes(b"name = \xe9\n")
    (d / "garbage.parquet").write_text("not parquet")
    out.update(dir=str(d / "adir"), dirtoml=str(d / "adir.toml"), file=str(d / "afile"),
               latin1=str(d / "latin1.toml"), garbage_store=str(d / "garbage.parquet"),
               missing=str(d / "nodir" / "x"), store=str(d / "st.parquet"), tmp=str(d))  # fmt: skip
    return out


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def _expand(args: tuple[str, ...], files: dict[str, str]) -> list[str]:
    return [re.sub(r"\{([\w:]+)\}", lambda m: files[m.group(1)], a) for a in args]


# (arguments, text the one-line error must contain); {name} is a file of the fixture
CASES = [
    # t3 run: workload, options, paths, overrides
    (("run", "--tp", "0"), "tp: must be >= 2"),
    (("run", "--tp", "3"), "not divisible by tp=3"),
    (("run", "--tp", "abc"), "--tp: 'abc' is not an integer written in digits"),
    (("run", "--tp", "1_6"), "--tp: '1_6' is not an integer written in digits"),
    (("run", "--tokens", " 512"), "--tokens: ' 512' is not an integer"),
    (("run", "--tp", "8", "--tp", "16"), "--tp: given twice; give it once"),
    (
        ("trace", "project", "t.json", "--same-hw", "--other-hw"),
        "--other-hw: given twice (also as --same-hw)",
    ),
    (("sweep", "s.toml", "--flush-s", "inf"), "--flush-s: 'inf' is not a number written in digits"),
    (("run", "--bogus"), "--bogus"),
    (("run", "--tokens", "0"), "tokens: must be > 0"),
    (("run", "--tokens", "1001"), "tokens: 1001"),
    (("run", "--config", "concurrent", "--comm-cus", "0"), "options.comm_cus: must be >= 1"),
    (("run", "--config", "concurrent", "--comm-cus", "80"), "comm_cus"),
    (("run", "--comm-cus", "8"), "comm_cus: only the 'concurrent' configuration"),
    (("run", "--config", "sequential", "--functional"), "functional"),
    (("run", "--config", "foo"), "config: unknown configuration 'foo'"),
    (("run", "--hw", "nope.toml"), "hardware: file 'nope.toml' not found"),
    (("run", "--hw", "{dirtoml}"), "is a directory"),
    (("run", "--hw", "/dev/null"), "hardware: '/dev/null' is not a regular file"),  # (it said: not found)
    (("run", "--hw", "{latin1}"), "not a UTF-8 text file"),
    (("run", "--model", "x.toml"), "model: file 'x.toml' not found"),
    (("run", "--trace", "{file}/x.json"), "is a file, so"),  # missing folders are created, files are not
    (("run", "--trace", "{file}"), "--trace: '"),  # a file that is not a t3 trace: --overwrite
    (("run", "--trace", "{dir}"), "--trace: "),
    (("run", "--set", "bad"), "--set: expected KEY=VALUE"),
    (("run", "--set", "=1"), "--set: empty key"),
    (
        ("run", "--set", "hbm.efficiency=1e-300"),
        "hbm.efficiency: Input should be greater than or equal to 0.0001",
    ),
    (
        ("run", "--set", "compute.gemm_efficiency=1e-9"),
        "compute.gemm_efficiency: Input should be greater than",
    ),
    (("run", "--set", "link.latency_s=1e-6", "--set", "link.latency_s=2e-6"), "link.latency_s given twice"),
    (("run", "--set", "link.bw=1"), "link.bw: unknown field"),
    (("run", "--set", "link.bandwidth_Bps=-1"), "link.bandwidth_Bps"),
    (
        ("run", "--set", "link.bandwidth_Bps=inf"),
        "--set: link.bandwidth_Bps: must be a finite number, got inf",
    ),
    (("run", "--set", "link.latency_s=-INF"), "--set: link.latency_s: must be a finite number, got -INF"),
    (("run", "--set", "link.bandwidth_Bps=NaN"), "link.bandwidth_Bps: must be a finite number"),
    (("run", "--set", "link.bandwidth_Bps=Infinity"), "link.bandwidth_Bps: must be a finite number"),
    (
        ("run", "--set", 'compute.cus="80"'),
        "compute.cus: Input should be a valid integer, got '80' (a string)",
    ),
    (("run", "--set", "compute.cus=80.5"), "compute.cus"),
    (("run", "--set", "compute.cus=1e9"), "compute.cus: Input should be a valid integer"),
    (("run", "--set", "compute.cus=true"), "compute.cus"),
    (("run", "--set", 'topology.bidirectional_ring="no"'), "topology.bidirectional_ring"),
    (("run", "--set", "topology.bidirectional_ring=1"), "topology.bidirectional_ring"),
    (
        ("run", "--set", "compute.matrix_flops_per_clk_per_cu.fp16=0"),
        "matrix_flops_per_clk_per_cu.fp16: must be > 0",
    ),
    (("run", "--set", "compute.matrix_flops_per_clk_per_cu.fp99=5"), "fp99: unknown field"),
    (("run", "--set", "link.bandwidth_Bps=1e-300"), "link.bandwidth_Bps: 1e-300 B/s is outside"),
    # pathological sizes: refused in well under a second, unless --force
    (("run", "--model", "{model:tp4096}", "--tp", "4096", "--config", "t3"), "size: about"),
    (("run", "--model", "{model:tp4096}", "--tp", "4096", "--all-gpus"), "size: about"),
    (("run", "--set", "compute.tile_m=1", "--set", "compute.tile_n=1"), "size: about"),
    (("run", "--tokens", "8000000000"), "size: about"),
    # hardware TOML
    (("run", "--hw", "{hw:cus_str}"), "compute.cus: Input should be a valid integer, got '80'"),
    (("run", "--hw", "{hw:cus_float}"), "compute.cus: Input should be a valid integer"),
    (("run", "--hw", "{hw:bidir_str}"), "topology.bidirectional_ring: Input should be a valid boolean"),
    (("run", "--hw", "{hw:present_str}"), "nmc.present"),
    (("run", "--hw", "{hw:nan}"), "link.bandwidth_Bps: must be a finite number"),
    (("run", "--hw", "{hw:inf}"), "link.latency_s: must be a finite number"),
    (("run", "--hw", "{hw:flops_str}"), "matrix_flops_per_clk_per_cu.fp16"),
    (("run", "--hw", "{hw:flops_nan}"), "matrix_flops_per_clk_per_cu.fp16: must be a finite number"),
    (("run", "--hw", "{hw:flops_dtype}"), "matrix_flops_per_clk_per_cu.int4: unknown dtype"),
    (("run", "--hw", "{hw:unknown_section}"), "foo: unknown field"),
    (("run", "--hw", "{hw:unknown_key}"), "hbm.bw: unknown field"),
    (
        ("run", "--hw", "{hw:missing_section}"),
        "dmax: unknown field",
    ),  # the misspelled section, the cause, first
    (("run", "--hw", "{hw:name_int}"), "name: Input should be a valid string"),
    (("run", "--hw", "{hw:garbage}"), "not valid TOML"),
    (("run", "--hw", "{hw:tiles1}"), "size: about"),
    # model TOML
    (("run", "--model", "{model:heads0}"), "heads: Input should be greater than 0"),
    (("run", "--model", "{model:kv_nodiv}"), "kv_heads: 5 KV heads do not divide the 16 query heads"),
    (("run", "--model", "{model:kv_gt}"), "kv_heads: 32 KV heads"),
    (("run", "--model", "{model:head_frac}"), "heads: hidden width 1024 does not split into 3 heads"),
    (("run", "--model", "{model:heads_gt_hidden}"), "heads: hidden width 1024 does not split into 2048"),
    (("run", "--model", "{model:hidden_str}"), "hidden: Input should be a valid integer, got '1024'"),
    (("run", "--model", "{model:hidden_nan}"), "hidden"),
    (("run", "--model", "{model:gated_str}"), "gated: Input should be a valid boolean"),
    (("run", "--model", "{model:gated_int}"), "gated: Input should be a valid boolean"),
    (("run", "--model", "{model:dtype_bad}"), "dtype: unknown dtype 'fp64'"),
    (("run", "--model", "{model:tokens_float}"), "tokens: Input should be a valid integer"),
    (("run", "--model", "{model:unknown}"), "foo: unknown field"),
    (("run", "--model", "{model:table}"), "sub: unknown field"),
    (("run", "--model", "{model:ffn_nodiv}"), "ffn = 4097 is not divisible by tp=8"),
    # sweep spec TOML and options
    (("sweep", "{sweep:unknown_top}", "--store", "{store}"), "foo: unknown"),
    (("sweep", "{sweep:base_unknown}", "--store", "{store}"), "base.foo: unknown parameter"),
    (("sweep", "{sweep:grid_scalar}", "--store", "{store}"), "grid.config: expected a non-empty list"),
    (("sweep", "{sweep:grid_empty}", "--store", "{store}"), "grid.config: expected a non-empty list"),
    (("sweep", "{sweep:param_unknown}", "--store", "{store}"), "options.params.foo: unknown parameter"),
    (("sweep", "{sweep:param_fault}", "--store", "{store}"), "options.params.functional_fault"),
    (("sweep", "{sweep:opt_str_bool}", "--store", "{store}"), "options.symmetric: expected bool"),
    (("sweep", "{sweep:opt_str_int}", "--store", "{store}"), "options.comm_cus: expected int"),
    (("sweep", "{sweep:hw_str}", "--store", "{store}"), "compute.cus: Input should be a valid integer"),
    (("sweep", "{sweep:hw_nan}", "--store", "{store}"), "link.bandwidth_Bps: must be a finite number"),
    (("sweep", "{sweep:tokens_float}", "--store", "{store}"), "grid.tokens: expected int"),
    (("sweep", "{sweep:zip_unequal}", "--store", "{store}"), "lists must have equal lengths"),
    (("sweep", "{sweep:jitter_inf}", "--store", "{store}"), "options.jitter: must be a finite number"),
    (("sweep", "{sweep:jitter_neg}", "--store", "{store}"), "options.jitter: must be a finite number >= 0"),
    (("sweep", "{sweep:seed_float}", "--store", "{store}"), "options.seed"),
    (("sweep", "{sweep:comm_cus0}", "--store", "{store}"), "options.comm_cus: must be >= 1"),
    (("sweep", "{sweep:tp4096}", "--store", "{store}"), "size: about"),
    (("sweep", "{sweep:huge}", "--store", "{store}"), "size: the grid has 119700 points"),
    (("sweep", "{sweep:garbage}", "--store", "{store}"), "not valid TOML"),
    (("sweep", "nope.toml", "--store", "{store}"), "sweep spec: file 'nope.toml' not found"),
    (("sweep", "{sweep:good}"), "--store: required"),
    (("sweep", "{sweep:good}", "--store", "{dir}"), "--store: expected a path ending in .parquet"),
    (("sweep", "{sweep:good}", "--store", "{file}"), "--store: expected a path ending in .parquet"),
    (("sweep", "{sweep:good}", "--store", "{file}/x.parquet"), "is a file, so"),
    (("sweep", "{sweep:good}", "--store", "{garbage_store}"), "is not a Parquet file; move it aside"),
    (("sweep", "{sweep:good}", "--store", "{store}", "--flush-s", "0"), "--flush-s"),
    (("sweep", "{sweep:good}", "--store", "{store}", "--flush-s", "nan"), "--flush-s"),
    (("sweep", "{sweep:good}", "--store", "{store}", "--workers", "0"), "--workers: must be >= 1"),
    (("sweep", "{sweep:good}", "--store", "{store}", "--executor", "foo"), "--executor: unknown executor"),
    (("sweep", "show", "{tmp}/none.parquet"), "not found"),
    (("sweep", "{sweep:good}", "--dry-run", "--store", "{store}"), "--store: not used with --dry-run"),
    (("sweep", "{sweep:good}", "--dry-run", "--keep-going"), "--keep-going: not used with --dry-run"),
    (("study", "--json", "--markdown"), "--json and --markdown: choose one output format"),
    (("sweep", "show", "{dir}"), "is a directory"),
    (("sweep", "show", "{garbage_store}"), "not a readable Parquet file"),
    (("sweep", "show", "{garbage_store}", "--limit", "-1"), "--limit: must be >= 0"),
    # t3 ficco
    (("ficco", "explore", "--m", "0"), "m: must be > 0"),
    (("ficco", "explore", "--m", "7"), "m: 7 rows do not split over 8 GPUs"),
    (("ficco", "explore", "--gpus", "1"), "gpus: need at least 2"),
    (("ficco", "explore", "--gpus", "1024"), "gpus: 1024 GPUs exceed the mesh"),
    (("ficco", "explore", "--dtype", "fp64"), "dtype: unknown dtype 'fp64'"),
    (("ficco", "explore", "--skew", "1"), "skew: must be in [0, 1)"),
    (("ficco", "explore", "--skew", "nan", "--op", "moe"), "--skew: 'nan' is not a number written in digits"),
    (("ficco", "explore", "--skew", "0.5"), "skew: only the moe operation"),
    (("ficco", "explore", "--top", "0"), "--top: must be >= 1"),
    (("ficco", "explore", "--top", "-1"), "--top: must be >= 1"),
    (("ficco", "explore", "--op", "foo"), "op: unknown operation 'foo'"),
    (("ficco", "explore", "--hw", "nope"), "hardware: unknown preset 'nope'"),
    (("ficco", "explore", "--m", "1000000000"), "size: about"),
    (("ficco", "explore", "--gpus", "64", "--m", "65536", "--hw", "paper-80cu"), "size: about"),
    (("ficco", "select", "--m", "0"), "m: must be > 0"),
    (("ficco", "select", "--runtime", "--op", "moe"), "runtime: t3.runtime has no MoE"),
    (("ficco", "select", "--m", "1000000000"), "size: about"),
    (("ficco", "characterise", "--hw", "nope"), "hardware: unknown preset 'nope'"),
    # t3 reproduce
    (("reproduce", "t3", "--workers", "0"), "--workers: must be >= 1"),
    (("reproduce", "t3", "--out", "{file}"), "--out: "),
    (("reproduce", "t3", "--out", "{file}/sub"), "--out: "),
    (("reproduce", "t3", "--json", "{dir}", "--out", "{tmp}/o"), "--json: "),
    (("reproduce", "t3", "--json", "{file}/x.json", "--out", "{tmp}/o"), "is a file, so"),
    (
        ("reproduce", "t3", "--json", "{file}", "--out", "{tmp}/o"),
        "is not a JSON document of t3 reproduce t3",
    ),
    (("reproduce", "t3", "--hw", "mi300x-8", "--out", "{tmp}/o"), "tp: 16 GPUs exceed the mesh"),
    (("reproduce", "t3", "--set", "bad", "--out", "{tmp}/o"), "--set: expected KEY=VALUE"),
    (("reproduce", "t3", "--set", "link.bw=1", "--out", "{tmp}/o"), "hardware.link.bw: unknown field"),
    (("reproduce", "t3", "--executor", "foo"), "--executor: unknown executor"),
    (("reproduce", "t3", "--scheduler", "x"), "--scheduler: only valid with --executor dask"),
    (
        ("reproduce", "t3", "--store", "{dir}", "--out", "{tmp}/o"),
        "--store: expected a path ending in .parquet",
    ),
    (
        ("reproduce", "t3", "--set", "compute.tile_m=1", "--set", "compute.tile_n=1", "--out", "{tmp}/o"),
        "size: about",
    ),  # fmt: skip
    (("reproduce", "ficco", "--workers", "0"), "--workers: must be >= 1"),
    (("reproduce", "ficco", "--limit", "0"), "--limit: must be >= 1"),
    (("reproduce", "ficco", "--out", "{file}"), "--out: "),
    (("nope",), "No such command 'nope'"),
]


@pytest.mark.parametrize("args,needle", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_naming_the_field(args, needle, files, capsys):
    code, out, err = cli(capsys, *_expand(args, files))
    lines = err.strip().splitlines()
    assert code == (1 if needle == "not finite" else 2), err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert out == ""


def test_force_runs_past_the_size_guard(capsys, monkeypatch):
    """The guard refuses work above the limit and --force runs it anyway (the limit is lowered here so
    that the forced run stays fast)."""
    from t3 import size

    monkeypatch.setattr(size, "LIMIT_OPS", 10)
    code, _, err = cli(capsys, "run", "--tokens", "1024")
    assert code == 2 and "size: about" in err and "--force" in err
    code, out, err = cli(capsys, "run", "--tokens", "1024", "--force")
    assert code == 0 and "simulated" in out, err


@pytest.mark.parametrize(
    "model,tp,config,overrides,symmetric",
    [
        ("t-nlg", 8, "sequential", {}, True), ("t-nlg", 8, "t3-mca", {}, True),
        ("t-nlg", 8, "t3", {}, False), ("gpt-3", 96, "sequential", {}, True),
        ("mt-nlg", 128, "t3", {}, True), ("t-nlg", 8, "concurrent", {"compute.tile_m": 32}, True),
        ("mega-gpt-2", 16, "ideal-gemm-rs-overlap", {"compute.tile_n": 32}, False),
        ("t-nlg", 8, "ideal-rs-nmc", {"compute.tile_m": 16, "compute.tile_n": 16}, True),
    ],
)  # fmt: skip
def test_size_estimate_tracks_the_ops_really_built(model, tp, config, overrides, symmetric):
    """The estimate (from shapes alone) is within 0.5x-3x of the ops the configuration really builds
    (T3's address maps, tp x tp entries, are a term of their own: ``Work.mapped``)."""
    from t3 import size
    from t3.api import resolve
    from t3.schedules import RunOptions

    op, hw, spec = resolve(model, tp, "fc2", config, "paper-80cu", None, overrides)
    out = spec.run(op, hw, RunOptions(symmetric=symmetric))
    built = sum(len(r.schedule.ops) for r in out.results)
    w = size.run_work(op, hw, config, symmetric)
    assert 0.5 * built <= w.ops <= 3 * built, (w.ops, built)
    assert w.mapped == (tp * tp if config in size.T3_CONFIGS else 0)


# ---- inputs the tools took without a clear word (found by driving the command line with odd inputs) ------
def test_a_dataset_or_base_that_is_not_utf8_is_refused_with_the_files_name(tmp_path):
    from t3.errors import T3Error
    from t3.measure.calibrate import base_text
    from t3.validation import load_dataset

    bad = tmp_path / "binary.toml"
    bad.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(T3Error, match=r"dataset '.*binary.toml': not a UTF-8 text file"):
        load_dataset([bad])
    with pytest.raises(T3Error, match=r"--base '.*binary.toml': not a UTF-8 text file"):
        base_text(str(bad))
    with pytest.raises(T3Error, match="--base: 'h100-2x8' builds on 'h100-8'.*--base h100-8"):
        base_text("h100-2x8")


def test_a_row_the_model_refuses_names_its_file_and_row(tmp_path):
    from t3.errors import T3Error
    from t3.validation import load_dataset
    from t3.validation.runner import run as run_rows

    f = tmp_path / "coll.toml"
    f.write_text(
        '[[row]]\nid = "c1"\ncategory = "collective_busbw"\nrole = "validation"\nhardware = "h100-8"\n'
        'measured = 20.2\nunit = "GB/s"\nsource = "https://example.com/x"\nlocator = "l"\nconventions = "c"\n'
        '[row.workload]\nop = "all_gather"\nnbytes = 2097152\ngpus = 16\nalgo = "ring"\ntiming = "device"\n'
    )
    with pytest.raises(T3Error, match=r"^coll.toml: row 'c1': gpus: 16 GPUs exceed the switch of 8"):
        run_rows(load_dataset([f]))


def test_a_study_with_a_point_given_twice_is_refused():
    from t3.errors import ConfigError
    from t3.experiments.study import study

    with pytest.raises(ConfigError, match="tp: 8 is given twice"):
        study(("h100-8",), ("llama-3-8b",), (8, 8), ficco=False)
    with pytest.raises(ConfigError, match="hw: 'h100-8' is given twice"):
        study(("h100-8", "h100-8"), ("llama-3-8b",), (8,), ficco=False)


def test_validate_lists_what_the_named_hardware_has_when_a_filter_matches_nothing():
    p = subprocess.run(
        [sys.executable, "-m", "t3", "validate", "--hardware", "gb200-nvl72", "--category", "overlap_time"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 2
    have = p.stderr.split("rows exist on gb200-nvl72 for:")[1]
    assert "collective_busbw" in have and "overlap_time" not in have


def test_trace_events_with_non_finite_times_are_skipped_and_said(tmp_path):
    import gzip
    import json
    import math

    from t3.traces.kineto import parse

    src = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    n = 0
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel":
            e["dur"] = float("nan") if n % 2 else float("inf")
            n += 1
    assert n > 0
    t = parse(json.loads(json.dumps(doc)), "nan.json")
    assert any(f"{n} events without a finite, non-negative ts / dur were skipped" in x for x in t.notes)
    assert math.isfinite(t.window_s)
    for g in t.gemms:
        assert math.isfinite(g.busy_s) and math.isfinite(g.end_s - g.start_s)


def test_ficco_explore_top_limits_the_json_too_and_sweep_show_names_its_argument(tmp_path):
    import json

    p = subprocess.run(
        [sys.executable, "-m", "t3", "ficco", "explore", "--m", "2048", "--top", "2", "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    d = json.loads(p.stdout)
    times = [s["time_s"] for s in d["schedules"]]
    assert len(times) == 2 and times == sorted(times) and d["schedules_total"] > 2
    bad = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", "show", str(tmp_path / "x.toml")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "store: expected a path ending in .parquet" in bad.stderr
    assert "--store" not in bad.stderr


def test_overwrite_without_its_file_an_empty_file_name_and_an_unnamed_model_are_refused(tmp_path):
    from t3.errors import ConfigError
    from t3.workload import get_model

    for args, want in (
        (["run", "--overwrite"], "--overwrite: it replaces the --trace file; no --trace was given"),
        (["run", "--trace", ""], "--trace: an empty value; give one"),
        # an empty path would be the working directory: refused for every option and argument
        (["reproduce", "t3", "--out", ""], "--out: an empty value; give one"),
        (["validate", "--plot="], "--plot: an empty value; give one"),
        (["trace", "import", ""], "an empty argument; give a value"),
    ):
        p = subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)
        assert p.returncode == 2 and want in p.stderr, p.stderr
    m = tmp_path / "m.toml"
    m.write_text('name = ""\nhidden = 4096\nlayers = 32\nheads = 32\nffn = 14336\ntokens = 4096\n')
    with pytest.raises(ConfigError, match="name: expected a non-empty string of printable characters, got ''"):
        get_model(m)


def test_a_model_that_labels_no_pair_of_a_trace_is_said():
    from t3.traces import import_trace

    src = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    t = import_trace(src, model="mt-nlg")
    assert t.pairs and not any(p.label for p in t.pairs)
    assert any("model 'mt-nlg': no pair's GEMM has the widths" in n for n in t.notes)


def test_the_t3_reproduction_on_a_gpu_without_near_memory_compute_is_refused_before_any_point(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "t3", "reproduce", "t3", "--quick", "--hw", "mi300x-8", "--out", str(tmp_path / "o")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 2
    assert (
        "nmc.present: 'mi300x-8' has no near-memory compute" in p.stderr
        and "--set nmc.present=true" in p.stderr
    )
    assert "--keep-going runs the other configurations" in p.stderr and "point(s) failed" not in p.stderr


def test_a_collectives_bad_element_counts_keep_its_group_and_are_said(tmp_path):
    """Element counts that are not positive fall back to the c10d op's dims, as missing ones do; the
    annotation's group size stands (it was lost, and the projection then asked for --gpus)."""
    import gzip
    import json

    from t3.traces.kineto import parse

    src = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    base = parse(json.loads(json.dumps(doc)), "ok.json")
    n = 0
    for e in doc["traceEvents"]:
        a = e.get("args") if isinstance(e, dict) else None
        if isinstance(a, dict) and "Collective name" in a:
            a["In msg nelems"], a["Out msg nelems"] = -5, -40
            n += 1
    assert n > 0
    t = parse(doc, "neg.json")
    assert [c.group_size for c in t.collectives] == [c.group_size for c in base.collectives]
    assert any(c.group_size for c in t.collectives)
    assert any("In / Out msg nelems that are not positive counts" in x for x in t.notes)


def test_a_path_the_system_refuses_is_one_line_naming_it(tmp_path, capsys):
    # a name longer than the file system's limit (255 bytes): the path and the system's reason, exit 2
    long = "a" * 300
    for args in (["run", "--hw", long], ["validate", "--data", str(tmp_path / long)]):
        code, out, err = cli(capsys, *args)
        assert code == 2 and err.strip().splitlines() == [
            f"error: '{err.split(chr(39))[1]}': File name too long"
        ]
        assert long in err and "Traceback" not in err + out
    # an output that cannot be written once the work ran: exit 1, one line
    if Path("/dev/full").exists():
        code, out, err = cli(capsys, "run", "--model", "t-nlg", "--sublayer", "op", "--tokens", "1024",
                             "--config", "sequential", "--trace", "/dev/full", "--overwrite")  # fmt: skip
        assert code == 1 and err.strip().splitlines()[-1] == "error: No space left on device"


def test_a_presets_name_is_the_preset_whatever_the_working_directory_holds(tmp_path, monkeypatch):
    from t3.config.hardware import load_hardware
    from t3.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "h100-8").mkdir()
    (tmp_path / "mi300x-8").write_text("not toml = = =\n")
    assert load_hardware("h100-8").name == "h100-8" and load_hardware("mi300x-8").compute.cus == 304
    with pytest.raises(ConfigError, match=r"'h100-8' is a directory, not a TOML file"):
        load_hardware("./h100-8")  # a path names the file
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_hardware(Path("mi300x-8"))


@pytest.mark.parametrize("bad", [0, -8, "8x", 1.5, True])
def test_a_collectives_group_size_that_is_not_a_count_is_said(bad):
    """A Group size that is not a positive count falls back to the process group's or the world's size, as
    a missing one does, and the notes say how many annotations gave one."""
    import gzip
    import json

    from t3.traces.kineto import parse

    src = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    base = parse(json.loads(json.dumps(doc)), "ok.json")
    assert not any("Group size" in x for x in base.notes)
    n = 0
    for e in doc["traceEvents"]:
        a = e.get("args") if isinstance(e, dict) else None
        if isinstance(a, dict) and "Group size" in a:
            a["Group size"] = bad
            n += 1
    assert n > 0
    t = parse(doc, "bad.json")
    said = [x for x in t.notes if "give a Group size that is not a positive count" in x]
    assert len(said) == 1 and said[0].startswith(f"{len(t.collectives)} collectives' annotations give")
    assert [c.group_size for c in t.collectives] == [c.group_size for c in base.collectives]


def test_columns_zero_is_an_unknown_width_not_an_empty_table():
    # COLUMNS=0 means "width unknown" (as coreutils read it); taken as a width, every table printed empty
    env = {**os.environ, "COLUMNS": "0"}
    p = subprocess.run([sys.executable, "-m", "t3", "presets"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "h100-8" in p.stdout and "mi300x-8" in p.stdout
