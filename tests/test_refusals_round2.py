"""Errors that name the cause, second round (issue 25 items 4, 6 and 11): the runtime's numeric and
flag arguments are refused before any data moves; a damaged sweep journal part (or compacted store)
is named with the way back; ``t3 trace project`` never prints a projection where every cell is n/a."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from t3.cli.main import main

TRACE = Path(__file__).parent / "traces" / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
SPEC = '[base]\nmodel = "t-nlg"\ntp = 8\nhardware = "paper-80cu"\n[grid]\nconfig = ["sequential", "concurrent"]\nsublayer = ["op", "fc2"]\n'


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def one_line_error(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ---- runtime ---------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """A one-rank gloo group in this process (destroyed afterwards: other tests expect none)."""
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    assert not dist.is_initialized()
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield None
    finally:
        dist.destroy_process_group()


def _ops():
    from t3.runtime import all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    return {"rs": matmul_reduce_scatter, "ar": matmul_all_reduce, "ag": all_gather_matmul}


RUNTIME_CASES = [
    # (keyword arguments, the message's start)
    (
        {"timeout": 1e300},
        "timeout: expected a finite number of seconds > 0 and <= 86400 (one day), got 1e+300",
    ),
    ({"timeout": 1e300, "path": "tiled"}, "timeout: expected a finite number of seconds > 0 and <= 86400"),
    ({"timeout": 86400.5}, "timeout: expected a finite number of seconds > 0 and <= 86400"),
    ({"timeout": math.inf}, "timeout: expected a finite number of seconds"),
    ({"timeout": math.nan}, "timeout: expected a finite number of seconds"),
    ({"timeout": -1.0}, "timeout: expected a finite number of seconds > 0"),
    ({"timeout": 0}, "timeout: expected a finite number of seconds > 0"),
    ({"timeout": "10"}, "timeout: expected a finite number of seconds"),
    ({"timeout": True}, "timeout: expected a finite number of seconds"),
    ({"min_flops": math.nan}, "min_flops: expected a finite number of FLOP >= 0, got nan"),
    ({"min_flops": -1}, "min_flops: expected a finite number of FLOP >= 0, got -1"),
    ({"min_flops": math.inf}, "min_flops: expected a finite number of FLOP >= 0, got inf"),
    ({"min_flops": "1e6"}, "min_flops: expected a finite number of FLOP >= 0, got '1e6'"),
    ({"min_flops": None}, "min_flops: expected a finite number of FLOP >= 0, got None"),
    ({"min_flops": False}, "min_flops: expected a finite number of FLOP >= 0, got False"),
    ({"return_stats": "yes"}, "return_stats: expected True or False, got 'yes'"),
    ({"return_stats": 1}, "return_stats: expected True or False, got 1"),
    ({"return_stats": None}, "return_stats: expected True or False, got None"),
    ({"check_peers": "no"}, "check_peers: expected True or False, got 'no'"),
]


@pytest.mark.parametrize("op", ["rs", "ar", "ag"])
@pytest.mark.parametrize("kw,needle", RUNTIME_CASES, ids=[repr(k) for k, _ in RUNTIME_CASES])
def test_runtime_refuses_before_any_data_moves(group, op, kw, needle):
    A, B = torch.ones(4, 4), torch.ones(4, 4)
    with pytest.raises(ValueError) as e:
        _ops()[op](A, B, **kw)
    assert str(e.value).startswith(needle), str(e.value)
    # the group is still usable (a refused call moved nothing): a good call gives A @ B
    out, stats = _ops()[op](A, B, timeout=5.0, return_stats=True)
    assert torch.equal(out, A @ B) and stats.path == "reference"


def test_runtime_scatter_dim_must_be_an_integer(group):
    from t3.runtime import matmul_reduce_scatter

    for bad in (1.0, 0.0, "0", True):
        with pytest.raises(ValueError, match=r"^scatter_dim: expected 0 or 1, got "):
            matmul_reduce_scatter(torch.ones(4, 4), torch.ones(4, 4), scatter_dim=bad)


def test_runtime_bounds_are_inclusive(group):
    """The largest timeout and min_flops 0 are valid: min_flops=0 makes 'auto' choose the tiled path
    whenever there is something to communicate (world size 1: the reference, saying why)."""
    from t3.runtime import matmul_all_reduce

    A = torch.arange(12.0).reshape(3, 4)
    out, stats = matmul_all_reduce(A, A.T, timeout=86400, min_flops=0, return_stats=True)
    assert torch.equal(out, A @ A.T)
    assert stats.reason == "world size 1: nothing to communicate"


def test_plan_flags_must_be_bools():
    from t3.runtime import Plan

    for field, bad in (
        ("overlap", "no"),
        ("overlap", 0),
        ("all_peer", 1),
        ("local_first", 1),
        ("local_first", 0),
    ):
        with pytest.raises(ValueError, match=rf"^plan\.{field}: must be "):
            Plan(**{field: bad})
    assert Plan(local_first=False).local_first is False


# ---- sweep journal ---------------------------------------------------------------------------------


@pytest.fixture()
def stored(tmp_path, capsys):
    """A 4-point sweep whose rows live only in one journal part (as after a kill before compaction)."""
    from t3.experiments.sweep import Store

    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    store = tmp_path / "r.parquet"
    code, _, err = cli(capsys, "sweep", str(spec), "--store", str(store), "--workers", "1", "--no-progress")
    assert code in (0, None), err
    rows = pq.read_table(store).to_pylist()
    assert len(rows) == 4
    store.unlink()
    db = Store(store)
    db.append(rows)
    (part,) = sorted(db.parts.iterdir())
    assert part.name.endswith("-n4.parquet")
    return spec, store, part


def _damage(part: Path, how: str) -> None:
    if how == "truncated":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    elif how == "garbage":
        part.write_bytes(b"\x00garbage\xff" * 10)
    elif how == "empty":
        part.write_bytes(b"")
    elif how == "other-columns":
        pq.write_table(pa.table({"x": [1, 2]}), part)
    elif how == "string-point":  # crashed de-duplication with a traceback before
        pq.write_table(pa.table({"key": ["a"], "status": ["ok"], "point": ["first"]}), part)


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty", "other-columns", "string-point"])
def test_damaged_journal_part_names_the_way_back(stored, how, capsys):
    spec, store, part = stored
    _damage(part, how)
    run = ("sweep", str(spec), "--store", str(store), "--workers", "1", "--no-progress")
    for args in (run, ("sweep", "show", str(store))):
        line = one_line_error(*cli(capsys, *args)[::2])
        assert f"journal part '{part}' is damaged (" in line, line
        assert line.endswith(
            f"drop the part (rm '{part}'; its 4 points are run again) and resume with the same command"
        ), line
    # the advice works: drop the part, rerun the same command; the 4 points are computed again
    part.unlink()
    code, _, err = cli(capsys, *run)
    assert code in (0, None), err
    assert "0 already stored, 4 computed" in err, err
    assert pq.read_table(store).num_rows == 4


def test_several_damaged_parts_are_all_named(stored, capsys):
    spec, store, part = stored
    other = part.with_name(part.name.replace("-n4.parquet", "x-n3.parquet"))
    older = part.with_name("part-00000000000000000001-old-000001.parquet")  # name without a row count
    for p in (part, other):
        _damage(p, "garbage")
    line = one_line_error(*cli(capsys, "sweep", "show", str(store))[::2])
    assert (
        "2 journal parts are damaged" in line
        and f"rm '{part}' '{other}'; their 7 points are run again" in line
    )
    older.write_bytes(b"junk")
    line = one_line_error(*cli(capsys, "sweep", "show", str(store))[::2])
    assert "3 journal parts are damaged" in line and "the points they held are run again" in line, line


def test_damaged_compacted_store_says_move_it_aside(tmp_path, capsys):
    store = tmp_path / "r.parquet"
    store.write_bytes(b"PAR1 not really")
    line = one_line_error(*cli(capsys, "sweep", "show", str(store))[::2])
    assert line.startswith(f"error: store: '{store}' is not a readable Parquet file ("), line
    assert f"move it aside (mv '{store}' '{store}.damaged'; the points it held are run again)" in line


def test_readable_parts_still_merge(stored, capsys):
    """Only damage is refused: an intact part is read and compacted as before."""
    spec, store, part = stored
    code, out, err = cli(capsys, "sweep", "show", str(store))
    assert code in (0, None), err
    assert "4 points, 4 ok" in out and not part.exists()


# ---- t3 trace project ------------------------------------------------------------------------------


@pytest.mark.parametrize("hw,gpus,n,kind", [("h100-8", 64, 8, "switch"), ("mi300x-8", 9, 8, "mesh")])
def test_trace_project_gpus_beyond_the_preset_is_refused(hw, gpus, n, kind, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("trace", "project", str(TRACE), "--hw", hw, "--gpus", str(gpus), "--out", str(out))
    line = one_line_error(*cli(capsys, *args)[::2])
    assert line == (
        f"error: --gpus: {gpus} is more than the {n} GPUs of the {kind} of hardware '{hw}': "
        f"no pair could be predicted; valid: 2..{n}"
    )
    assert not out.exists()  # refused before any work


def test_projection_with_every_cell_na_is_an_error():
    """The library call too (no --gpus check in front): every pair n/a raises, naming the reason."""
    from t3.config.hardware import load_hardware
    from t3.traces import import_trace
    from t3.traces.project import project
    from t3.traces.schema import TraceError

    t = import_trace(str(TRACE), None)
    with pytest.raises(TraceError) as e:
        project(t, load_hardware("h100-8"), gpus=64)
    msg = str(e.value)
    assert f"none of its {len(t.pairs)} pairs could be predicted on hardware 'h100-8'" in msg, msg
    want = "tp: 64 GPUs exceed the switch of 8 GPUs in hardware 'h100-8' (topology.gpus = 8: a switch connects no more)"
    assert msg.endswith(want), msg


@pytest.mark.parametrize("workers", ["99999999999", "257"])
def test_sweep_workers_beyond_the_bound_is_refused(workers, tmp_path, capsys):
    """An overflowing --workers was a 69-line OverflowError traceback from the process pool."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    args = ("sweep", str(spec), "--store", str(tmp_path / "r.parquet"), "--workers", workers)
    line = one_line_error(*cli(capsys, *args)[::2])
    assert line == f"error: --workers: must be <= 256 (one process each), got {workers}"
    assert not (tmp_path / "r.parquet").exists()


@pytest.mark.parametrize("text", ["", "# a comment only\n"])
def test_empty_sweep_spec_is_refused(text, tmp_path, capsys):
    """An empty spec ran t3 run's defaults as a one-point sweep and exited 0."""
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    store = tmp_path / "r.parquet"
    line = one_line_error(*cli(capsys, "sweep", str(spec), "--store", str(store))[::2])
    assert line == (
        f"error: sweep spec '{spec}': the file holds no keys: give [base] values and a [grid] of lists to "
        "sweep (docs/sweeps.md)"
    )
    assert not store.exists()


def test_journal_path_that_is_a_file_is_refused_before_work(tmp_path, capsys):
    """It was a FileExistsError traceback after every point had been computed."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    store = tmp_path / "r.parquet"
    journal = tmp_path / "r.parquet.parts"
    journal.write_text("x")
    want = (
        f"its journal '{journal}' exists and is not a directory; move it aside "
        f"(mv '{journal}' '{journal}.old') and run again"
    )
    # each names the store as the command takes it: sweep's --store option, show's store argument
    for option, args in (
        ("--store", ("sweep", str(spec), "--store", str(store), "--workers", "1")),
        ("store", ("sweep", "show", str(store))),
    ):
        assert one_line_error(*cli(capsys, *args)[::2]) == f"error: {option}: {want}"
    assert not store.exists()


def test_journal_part_that_is_a_directory_is_named(stored, capsys):
    spec, store, part = stored
    other = part.with_name("part-00000000000000000001-x-000001-n2.parquet")
    other.mkdir()
    line = one_line_error(*cli(capsys, "sweep", "show", str(store))[::2])
    assert f"journal part '{other}' is damaged (a directory, not a Parquet file)" in line, line
    assert f"(rm -r '{other}'; its 2 points are run again)" in line, line
