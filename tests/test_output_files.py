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
    assert code == 2 and "--parquet" in err and "is not a Parquet file; pass --overwrite" in err
    assert notes.read_text() == "my notes\n"


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
