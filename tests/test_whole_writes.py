"""Output files are written whole (t3.files): a write that fails leaves the earlier file as it was and no
temporary file behind; a device or a pipe given as an output is written in place and never read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from t3.cli.main import main
from t3.files import replacing, save_figure, write_text

SMALL = ["run", "--model", "t-nlg", "--sublayer", "op", "--tokens", "1024", "--config", "sequential"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(tmp_path):
    f = tmp_path / "out.json"
    f.write_text("earlier\n")
    with pytest.raises(RuntimeError), replacing(f) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("disk full")
    assert f.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    write_text(f, "new µs\n")
    assert f.read_bytes() == "new µs\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_replaced_file_keeps_its_permissions_and_a_link_stays_a_link(tmp_path):
    f = tmp_path / "target.json"
    f.write_text("a")
    f.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(f)
    write_text(link, "b")
    assert link.is_symlink() and f.read_text() == "b"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640


def test_a_figure_is_written_whole_in_the_format_of_its_name(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    f = tmp_path / "fig.png"
    save_figure(fig, f, dpi=50)
    plt.close(fig)
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png"]


def test_run_trace_that_fails_to_write_keeps_the_earlier_trace(tmp_path, capsys, monkeypatch):
    t = tmp_path / "run.json"
    code, _, err = cli(capsys, *SMALL, "--trace", t)
    assert code in (0, None), err
    before = t.read_bytes()

    write = Path.write_text

    def full(self, data, *a, **k):  # the disk fills while the new trace is written: a part lands
        write(self, data[:10], *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    code, _, err = cli(capsys, *SMALL, "--trace", t)
    assert code == 1 and "No space left on device" in err
    assert t.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The command in its own process (a regression that reads its output file would block or never
    end: the timeout makes it a failure, not a hung test run)."""
    return subprocess.run(
        [sys.executable, "-m", "t3", *args], capture_output=True, text=True, timeout=timeout
    )


def test_a_pipe_as_output_is_written_in_place_not_read(tmp_path):
    fifo = tmp_path / "trace.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()  # (checking the output by reading it would block: nothing writes the pipe yet)
    r = _run(*SMALL, "--trace", str(fifo))
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert got and "provenance" in json.loads(got[0])["otherData"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the pipe, not replaced by a file


def test_a_device_as_output_is_not_read():
    # /dev/zero would never end if read to recognise it; written to, it takes everything
    r = _run(*SMALL, "--trace", "/dev/zero")
    assert r.returncode == 0, r.stderr


def test_staged_files_appear_together_and_the_marker_last(tmp_path, monkeypatch):
    from t3 import files

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("earlier report")
    (out / "mine.txt").write_text("a user's file")
    with pytest.raises(RuntimeError), files.staged(out, last="doc.json") as stage:
        (stage / "doc.json").write_text("{}")
        (stage / "report.md").write_text("new report")
        raise RuntimeError("a figure failed")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt", "report.md"]  # as it was
    assert (out / "report.md").read_text() == "earlier report"
    moved: list[str] = []
    replace = os.replace

    def record(src, dst):
        moved.append(Path(dst).name if not Path(dst).name.startswith(".") else Path(src).name)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", record)
    with files.staged(out, last="doc.json") as stage:
        for name in ("doc.json", "a.png", "report.md"):
            (stage / name).write_text(name)
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "doc.json", "mine.txt", "report.md"]
    assert (out / "report.md").read_text() == "report.md" and (
        out / "mine.txt"
    ).read_text() == "a user's file"
    published = [m for m in moved if not m.startswith(".")]
    assert published[-1] == "doc.json", moved


def test_trace_project_that_fails_half_way_leaves_the_folder_as_it_was(tmp_path, capsys, monkeypatch):
    trace = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
    out = tmp_path / "proj"
    args = ["trace", "project", trace, "--ficco", "select", "--out", out]
    code, _, err = cli(capsys, *args)
    assert code in (0, None), err
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*a, **k):  # the figure fails after the Perfetto trace was written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("t3.traces.project.write_figure", broken)
    code, _, err = cli(capsys, *args, "--gpus", "4")  # (another projection: other bytes)
    assert code == 1 and "No space left on device" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no half of a new projection
