"""One rule for every output path (issue 25 item 3): missing folders are created; an existing file is
replaced only when it is the command's own kind of output (an earlier run's), otherwise refused before
any work unless --overwrite; a results store must be a Parquet file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t3.cli.common import check_output_dir, check_output_file, check_store
from t3.cli.main import main
from t3.errors import ConfigError

SMALL = ["run", "--model", "t-nlg", "--sublayer", "op", "--tokens", "1024", "--config", "sequential"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_run_trace_creates_folders_and_replaces_only_its_own_trace(tmp_path, capsys):
    t = tmp_path / "new" / "deeper" / "run.json"
    code, _, err = cli(capsys, *SMALL, "--trace", t)
    assert code in (0, None), err
    first = json.loads(t.read_text())
    assert first["traceEvents"] and "provenance" in first["otherData"]
    code, _, err = cli(capsys, *SMALL, "--trace", t)  # an earlier t3 trace: replaced
    assert code in (0, None), err
    # a profiler's trace of a real run is never replaced by a simulated one without --overwrite
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"traceEvents": [{"name": "gemm", "ph": "X", "ts": 0, "dur": 1}]}))
    code, _, err = cli(capsys, *SMALL, "--trace", prof)
    assert code == 2 and err.strip().splitlines() == [
        f"error: --trace: '{prof}' exists and is not a trace written by t3 run; pass --overwrite to replace it"
    ]
    assert json.loads(prof.read_text())["traceEvents"][0]["name"] == "gemm"  # untouched
    code, _, err = cli(capsys, *SMALL, "--trace", prof, "--overwrite")
    assert code in (0, None), err
    assert "provenance" in json.loads(prof.read_text())["otherData"]


def test_trace_import_parquet_never_replaces_a_text_file(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, _, err = cli(capsys, "trace", "import", tmp_path / "missing.json", "--parquet", notes)
    assert (
        code == 2
        and "--parquet" in err
        and "is not a Parquet file of t3 trace import; pass --overwrite" in err
    )
    assert notes.read_text() == "my notes\n"


def test_trace_import_parquet_replaces_its_own_table_not_a_sweep_store(tmp_path, capsys):
    # a results store is a Parquet file too: it is never replaced by a trace's pairs without --overwrite
    import pyarrow as pa
    import pyarrow.parquet as pq

    trace = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    store = tmp_path / "results.parquet"
    pq.write_table(pa.table({"key": ["a"], "status": ["ok"], "point": [0]}), store)
    code, _, err = cli(capsys, "trace", "import", trace, "--parquet", store)
    assert code == 2 and err.strip().splitlines() == [
        f"error: --parquet: '{store}' exists and is not a Parquet file of t3 trace import; pass --overwrite to"
        " replace it"
    ]
    assert pq.read_schema(store).names == ["key", "status", "point"]  # untouched
    own = tmp_path / "pairs.parquet"
    for _ in range(2):  # written, then an earlier output of the command: replaced
        code, _, err = cli(capsys, "trace", "import", trace, "--parquet", own)
        assert code in (0, None), err
    assert {"kind", "relation", "label", "measured_s"} <= set(pq.read_schema(own).names)


def test_refusal_comes_before_any_work(tmp_path, capsys, monkeypatch):
    import t3.cli.run as run_mod

    def boom(*a, **k):  # the simulation must never start
        raise AssertionError("work started")

    monkeypatch.setattr(run_mod, "simulate", boom)
    f = tmp_path / "keep.json"
    f.write_text("{}")
    code, _, err = cli(capsys, *SMALL, "--trace", f)
    assert code == 2 and "work started" not in err and f.read_text() == "{}"


@pytest.mark.parametrize(
    "kind,own,other",
    [
        ("parquet", b"PAR1....PAR1", b"PAR1 then text"),
        (
            "trace",
            json.dumps(
                {"traceEvents": [], "otherData": {"units": "ts/dur in microseconds", "provenance": {}}}
            ).encode(),
            json.dumps({"traceEvents": []}).encode(),
        ),  # fmt: skip
        ("reproduce-json", json.dumps({"provenance": {}, "summary": {}}).encode(), b"[1, 2]"),
        (
            "preset",
            b"x: the h100-8 preset with single-GPU parameters fitted by `t3 calibrate --measured m`\n",
            b'name = "x"\n',
        ),  # fmt: skip
    ],
)
def test_own_kind_is_recognised(tmp_path, kind, own, other):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(own)
    b.write_bytes(other)
    assert check_output_file(a, "--x", kind) == a
    with pytest.raises(ConfigError, match=r"--x: '.*b' exists and is not .*; pass --overwrite to replace it"):
        check_output_file(b, "--x", kind)
    assert check_output_file(b, "--x", kind, overwrite=True) == b


def test_one_rule_for_missing_folders(tmp_path):
    assert check_output_file(tmp_path / "a" / "b" / "f.json", "--f", "trace") is not None
    assert (tmp_path / "a" / "b").is_dir()
    assert check_output_dir(tmp_path / "c" / "d", "--out").is_dir()
    assert check_store(tmp_path / "e" / "s.parquet") is not None and (tmp_path / "e").is_dir()
    f = tmp_path / "file"
    f.write_text("x")
    for call in (
        lambda: check_output_file(f / "x.json", "--f", "trace"),
        lambda: check_output_dir(f / "d", "--out"),
    ):
        with pytest.raises(ConfigError, match="is a file, so"):
            call()
    with pytest.raises(ConfigError, match="is a directory; give a file name"):
        check_output_file(tmp_path / "a", "--f", "trace")


def test_store_must_be_parquet_and_has_no_overwrite(tmp_path):
    s = tmp_path / "s.parquet"
    s.write_text("not parquet")
    with pytest.raises(ConfigError, match="is not a Parquet file; move it aside or choose another name"):
        check_store(s)


def test_every_output_flag_states_the_rule(capsys):
    for args, flag in ((["run"], "--trace"), (["trace", "import"], "--parquet"),
                       (["reproduce", "t3"], "--json"), (["calibrate"], "--out")):  # fmt: skip
        code, out, _ = cli(capsys, *args, "--help")
        text = " ".join(out.replace("│", " ").split())
        assert flag in text and "--overwrite" in text and "missing folders are created" in text, (args, text)


def test_reproduce_ficco_workers_bounded(capsys):
    code, _, err = cli(
        capsys, "reproduce", "ficco", "--workers", "99999999999", "--out", Path("/nonexistent-x")
    )
    assert code == 2 and err.strip() == "error: --workers: must be <= 256, got 99999999999"


# ---- output folders: only the files the command writes are replaced, and only an earlier output's ----

SRC = Path(__file__).resolve().parents[1] / "src" / "t3"
MARKERS = {
    "reproduce-t3": ("t3.json", {"provenance": {}, "summary": {}, "points": []}),
    "reproduce-ficco": ("ficco.json", {"provenance": {}, "evaluation": {}, "rules_shipped": {}}),
    "trace-project": ("projection.json", {"trace": {}, "window": {}, "outputs": {}}),
}


def test_the_folders_file_lists_are_the_files_the_commands_write():
    """An independent reading of the writers' sources: every file they write into the folder is in the
    list the check protects (a new figure must not slip past it): a literal name, or one of the writer's
    FIGURES, which the list takes; a figure written under a literal name outside FIGURES is caught too."""
    import re

    from t3.cli.common import _names
    from t3.experiments import reproduce_ficco, reproduce_t3

    written = {
        "reproduce-t3": (SRC / "experiments" / "reproduce_t3.py", r'out / "([\w.]+)"', r'out / FIGURES\["(\w+)"\]',
                         lambda k: reproduce_t3.FIGURES[k]),
        "reproduce-ficco": (SRC / "experiments" / "reproduce_ficco.py", r'save\(\w+(?:\(.*\))?, "([\w.]+)"\)',
                            r"save\(.*, FIGURES\[(\d+)\]\)", lambda i: reproduce_ficco.FIGURES[int(i)]),
        "trace-project": (SRC / "cli" / "trace.py", r'(?:"json"|"perfetto"|"figure"): "([\w.]+)"', None, None),
    }  # fmt: skip
    for kind, (src, literal, named, name) in written.items():
        text = src.read_text()
        found = set(re.findall(literal, text))
        if named is not None:
            keys = re.findall(named, text)
            assert len(keys) == len(set(keys)) and keys, (kind, keys)
            found |= {name(k) for k in keys}
        assert found and found <= set(_names(kind)), (kind, found - set(_names(kind)))
    assert len(re.findall(r"out / FIGURES", (SRC / "experiments" / "reproduce_t3.py").read_text())) == 6
    assert not re.findall(
        r"out /", (SRC / "experiments" / "figures.py").read_text()
    )  # its paths come in jobs
    assert (
        len(re.findall(r"save\(", (SRC / "experiments" / "reproduce_ficco.py").read_text())) == 5
    )  # def + 4
    assert {"t3.json", "report.md"} <= set(_names("reproduce-t3"))
    assert {"ficco.json", "report.md", "schedules.parquet"} <= set(_names("reproduce-ficco"))
    from t3.validation.dataset import CATEGORIES

    assert set(_names("validate-plot")) == {f"validate-{c}.png" for c in CATEGORIES}


@pytest.mark.parametrize("kind", sorted(MARKERS))
def test_a_folder_is_written_only_over_its_own_earlier_output(tmp_path, kind):
    from t3.cli.common import _names

    marker, doc = MARKERS[kind]
    d = tmp_path / "out"
    d.mkdir()
    (d / "notes.txt").write_text("mine")  # a file the command does not write: never a reason to refuse
    assert check_output_dir(d, "--out", kind) == d
    victim = next(n for n in _names(kind) if n != marker)
    (d / victim).write_text("my own file")
    with pytest.raises(ConfigError) as e:
        check_output_dir(d, "--out", kind)
    cmd = {"reproduce-t3": "t3 reproduce t3", "reproduce-ficco": "t3 reproduce ficco",
           "trace-project": "t3 trace project"}[kind]  # fmt: skip
    assert str(e.value) == (
        f"--out: '{d / victim}' exists and is not from an earlier {cmd} (the folder has no {marker} it "
        "wrote); pass --overwrite to replace it"
    )
    assert check_output_dir(d, "--out", kind, overwrite=True) == d
    (d / marker).write_text(json.dumps({"something": "else"}))  # a JSON of the same name is not enough
    with pytest.raises(ConfigError, match=f"'{d / marker}' exists and is not from an earlier"):
        check_output_dir(d, "--out", kind)
    (d / marker).write_text(json.dumps(doc))  # an earlier output: its files are replaced
    assert check_output_dir(d, "--out", kind) == d
    (d / victim).unlink()
    (d / victim).mkdir()  # a folder where a file is written: refused even with --overwrite
    with pytest.raises(ConfigError, match="is a directory where .* writes a file; move it aside"):
        check_output_dir(d, "--out", kind, overwrite=True)
    assert (d / "notes.txt").read_text() == "mine"


def test_trace_project_twice_into_one_folder_and_never_over_a_users_file(tmp_path, capsys, monkeypatch):
    gpu = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    out = tmp_path / "a" / "b"
    args = ("trace", "project", gpu, "--ficco", "select", "--json", "--out", out)
    for _ in range(2):  # the second run replaces the first one's files
        code, _, err = cli(capsys, *args)
        assert code in (0, None), err
    assert json.loads((out / "projection.json").read_text())["outputs"]
    import t3.traces.project as tp

    def boom(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(tp, "project", boom)
    own = tmp_path / "mine"
    own.mkdir()
    (own / "projection.png").write_bytes(b"my figure")
    code, _, err = cli(capsys, *args[:-1], own)
    assert code == 2 and err.strip() == (
        f"error: --out: '{own / 'projection.png'}' exists and is not from an earlier t3 trace project "
        "(the folder has no projection.json it wrote); pass --overwrite to replace it"
    )
    assert (own / "projection.png").read_bytes() == b"my figure"


def test_validate_plot_checks_its_figures_before_any_row_runs(tmp_path, capsys, monkeypatch):
    import t3.validation as v

    def boom(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(v, "run", boom)
    d = tmp_path / "figs"
    d.mkdir()
    (d / "validate-gemm_tflops.png").write_text("not an image")
    code, _, err = cli(capsys, "validate", "--category", "gemm_tflops", "--plot", d)
    assert code == 2 and err.strip() == (
        f"error: --plot: '{d / 'validate-gemm_tflops.png'}' exists and is not from an earlier t3 validate "
        "(not a PNG image); move it aside or choose another folder"
    )
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = cli(capsys, "validate", "--category", "gemm_tflops", "--plot", f / "sub")
    assert code == 2 and err.strip() == f"error: --plot: '{f}' is a file, so '{f / 'sub'}' cannot be created"


def test_reproduce_ficco_refuses_a_users_report_before_any_work(tmp_path, capsys, monkeypatch):
    import t3.experiments.reproduce_ficco as rf

    def boom(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(rf, "reproduce", boom)
    (tmp_path / "report.md").write_text("my report")
    code, _, err = cli(capsys, "reproduce", "ficco", "--out", tmp_path)
    assert (
        code == 2 and "--out: '" in err and "report.md' exists and is not from an earlier t3 reproduce" in err
    )
    assert (tmp_path / "report.md").read_text() == "my report"
    code, _, err = cli(capsys, "reproduce", "t3", "--out", tmp_path)
    assert code == 2 and "(the folder has no t3.json it wrote); pass --overwrite" in err


def test_measure_out_follows_the_folder_rule_before_the_device_opens(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    base = ("measure", "--device", "cpu", "--allow-cpu", "--hardware", "h100-8", "--quick")
    code, _, err = cli(capsys, *base, "--out", f / "sub")
    assert code == 2 and err.strip() == f"error: --out: '{f}' is a file, so '{f / 'sub'}' cannot be created"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "measured.toml").write_text("earlier")  # measurements are never replaced silently
    code, _, err = cli(capsys, *base, "--out", tmp_path / "m")
    assert code == 2 and "is not empty (pass --overwrite" in err
    assert (tmp_path / "m" / "measured.toml").read_text() == "earlier"


def test_every_output_folder_flag_states_the_rule(capsys):
    for args, flag in ((["reproduce", "t3"], "--out"), (["reproduce", "ficco"], "--out"),
                       (["trace", "project"], "--out"), (["validate"], "--plot"),
                       (["measure"], "--out")):  # fmt: skip
        code, out, _ = cli(capsys, *args, "--help")
        text = " ".join(out.replace("│", " ").split())
        assert flag in text and "created if missing" in text, (args, text)
        if args != ["validate"]:
            assert "--overwrite" in text, args


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--store", "{d}/same.parquet", "--json", "{d}/same.parquet"], "is also the --json file"),
        (["--json", "{d}/rt/report.md"], "is a file --out writes (report.md)"),
        (["--json", "{d}/rt"], "is the --out folder"),
    ],
)
def test_reproduce_t3_outputs_that_would_overwrite_each_other_are_refused_before_work(
    tmp_path, capsys, extra, needle
):
    args = [a.replace("{d}", str(tmp_path)) for a in extra]
    code, _, err = cli(capsys, "reproduce", "t3", "--quick", "--no-figures", "--out", tmp_path / "rt", *args)
    assert code == 2 and needle in err, err
    assert not (tmp_path / "rt" / "t3.json").exists() and not (tmp_path / "same.parquet").exists()
