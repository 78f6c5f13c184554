"""Sweep runs and the results store: values equal direct runs, resumption, dedupe, failures, workers."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from t3.api import run
from t3.errors import T3Error
from t3.experiments.parallel import run_point
from t3.experiments.sweep import Store, execute, run_points, run_sweep, spec_from_dict
from t3.experiments.sweep.store import TIMING_COLUMNS
from t3.schedules import RunOptions, register
from t3.schedules.base import Param
from t3.schedules.baselines import run_sequential

SMALL = {"model": "t-nlg", "sublayer": "op", "tokens": 1024}


def grid(bws=(5e10, 1e11, 2e11), configs=("sequential", "concurrent")):
    return spec_from_dict(
        {
            "name": "t",
            "base": SMALL,
            "grid": {"hardware.link.bandwidth_Bps": list(bws), "config": list(configs), "tp": [4, 8]},
        }
    )


def content(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in TIMING_COLUMNS if c in df]).reset_index(drop=True)


def test_rows_equal_direct_runs_and_flattened_records(tmp_path):
    sw = grid()
    store = tmp_path / "r.parquet"
    df, st = execute(sw, workers=1, store=store, progress=False)
    assert (st.total, st.computed, st.skipped, st.errors) == (12, 12, 0, 0)
    assert list(df["point"]) == list(range(12))
    on_disk = pd.read_parquet(store)
    pd.testing.assert_frame_equal(on_disk, df)
    for pt, (_, row) in zip(sw.points, df.iterrows(), strict=True):
        p = pt.point
        rec = run(
            p["model"], p["tp"], p["sublayer"], p["config"], p["hardware"], p["tokens"], p["hw_overrides"]
        )
        assert row["status"] == "ok" and row["key"] == sw.keys[pt.index]
        assert row["hardware.link.bandwidth_Bps"] == p["hw_overrides"]["link.bandwidth_Bps"]
        assert (row["config"], row["tp"]) == (p["config"], p["tp"])
        assert row["time_s"] == rec["time_s"]
        for k, v in rec["breakdown_s"].items():
            assert row[f"breakdown_s.{k}"] == v
        for k, v in rec["dram_bytes"].items():
            assert row[f"dram_bytes.{k}"] == v
        assert (row["gemm.m"], row["sim.events"]) == (rec["gemm"]["m"], rec["sim"]["events"])
        assert json.loads(row["record_json"]) == rec


def test_store_content_does_not_depend_on_worker_count(tmp_path):
    a, _ = execute(grid(), workers=1, store=tmp_path / "a.parquet", progress=False)
    b, _ = execute(grid(), workers=2, store=tmp_path / "b.parquet", progress=False, batch_size=1)
    c, _ = execute(grid(), workers=2, store=None, progress=False)
    pd.testing.assert_frame_equal(content(a), content(b))
    pd.testing.assert_frame_equal(content(a), content(c))
    assert len(set(b["worker"])) >= 1


def test_rerun_skips_finished_points_and_extension_computes_only_new_ones(tmp_path):
    store = tmp_path / "r.parquet"
    first, st1 = execute(grid(bws=(5e10, 2e11)), workers=1, store=store, progress=False)
    again, st2 = execute(grid(bws=(5e10, 2e11)), workers=1, store=store, progress=False)
    assert (st2.computed, st2.skipped) == (0, 8)
    pd.testing.assert_frame_equal(first, again)  # same rows, same run ids and timestamps
    ext, st3 = execute(grid(bws=(5e10, 1e11, 2e11)), workers=1, store=store, progress=False)
    assert (st3.computed, st3.skipped) == (4, 8)
    assert set(ext.loc[ext["run_id"] == st1.run_id, "key"]) == set(first["key"])
    clean, _ = execute(grid(bws=(5e10, 1e11, 2e11)), workers=1, store=None, progress=False)
    pd.testing.assert_frame_equal(content(ext), content(clean))  # points re-stamped in the new grid order


def test_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    # comm_cus must leave CUs for the GEMM: 80 of 80 fails inside the schedule, at run time
    sw = spec_from_dict(
        {"base": {**SMALL, "config": "concurrent"}, "grid": {"options.comm_cus": [8, 80, 16]}}
    )
    store = tmp_path / "r.parquet"
    df, st = execute(sw, workers=2, store=store, progress=False)
    assert list(df["status"]) == ["ok", "error", "ok"] and st.errors == 1
    assert "comm_cus" in df.loc[1, "error"] and df.loc[1, "error"].startswith("ConfigError")
    assert pd.isna(df.loc[1, "time_s"]) and df.loc[0, "time_s"] > 0
    _, st = execute(sw, workers=1, store=store, progress=False)
    assert (st.computed, st.errors) == (1, 1)  # errors are retried by default
    _, st = execute(sw, workers=1, store=store, progress=False, retry_errors=False)
    assert st.computed == 0
    assert len(pd.read_parquet(store)) == 3


def test_cli_exit_status_is_1_when_a_point_fails(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[base]\nsublayer = "op"\ntokens = 1024\nconfig = "concurrent"\n[grid]\n"options.comm_cus" = [8, 80]\n'
    )
    store = tmp_path / "r.parquet"
    p = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", str(spec), "--store", str(store), "--no-progress"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert "1 failed" in p.stderr and "comm_cus" in p.stderr
    s = subprocess.run(
        [sys.executable, "-m", "t3", "sweep", "show", str(store)], capture_output=True, text=True, timeout=60
    )
    assert s.returncode == 0 and "2 points, 1 ok, 1 failed" in s.stdout and "point 1 failed" in s.stdout


def _row(key, status, point=0, value=1.0):
    return {
        "point": point,
        "key": key,
        "status": status,
        "error": None if status == "ok" else "E",
        "v": value,
    }


def test_dedupe_keeps_first_ok_else_latest_error_and_survives_interrupted_compaction(tmp_path):
    db = Store(tmp_path / "r.parquet")
    db.append([_row("a", "error", 0, 1.0), _row("b", "ok", 1, 2.0), _row("c", "error", 2, 3.0)])
    db.append([_row("a", "ok", 0, 4.0), _row("b", "error", 1, 5.0), _row("c", "error", 2, 6.0)])
    db.append([_row("a", "ok", 0, 7.0)])
    (db.parts / ".tmp-part-garbage.parquet").write_bytes(b"half a file")  # a writer killed mid-write
    t = db.table().to_pandas()
    assert list(t["key"]) == ["a", "b", "c"]
    assert list(t["v"]) == [4.0, 2.0, 6.0]
    db.compact()
    assert not db.parts.exists()
    # a kill after the compacted file replaced the old one but before the parts were deleted
    db.append([_row("b", "ok", 1, 2.0), _row("d", "ok", 3, 8.0)])
    t = db.table().to_pandas()
    assert list(t["key"]) == ["a", "b", "c", "d"] and list(t["v"]) == [4.0, 2.0, 6.0, 8.0]
    assert len(pd.read_parquet(db.compact() and db.path)) == 4


def test_second_writer_is_refused(tmp_path):
    store = tmp_path / "r.parquet"
    with Store(store):
        with pytest.raises(T3Error, match="in use by another sweep"):
            execute(grid(bws=(1e11,)), workers=1, store=store, progress=False)
    execute(grid(bws=(1e11,)), workers=1, store=store, progress=False)


def test_a_store_refused_before_any_write_is_left_as_it_was(tmp_path):
    # a Parquet file that is not a sweep store: refused, and no lock file is left beside it
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), store)
    with pytest.raises(T3Error, match="is not a t3 sweep store"):
        execute(grid(bws=(1e11,)), workers=1, store=store, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.parquet"]
    # a store's own lock file, there before the run, stays after a refused run (another sweep's)
    good = tmp_path / "good.parquet"
    execute(grid(bws=(1e11,)), workers=1, store=good, progress=False)
    assert (tmp_path / "good.parquet.lock").exists()
    pq.write_table(pa.table({"a": [1]}), good)
    with pytest.raises(T3Error, match="is not a t3 sweep store"):
        execute(grid(bws=(1e11,)), workers=1, store=good, progress=False)
    assert (tmp_path / "good.parquet.lock").exists()


def test_sweep_show_of_a_file_it_refuses_leaves_nothing_beside_it(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from t3.cli.main import main

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    junk = tmp_path / "junk.parquet"
    junk.write_text("x\n")
    for f, why in ((other, "is not a t3 sweep store"), (junk, "is not a readable Parquet file")):
        with pytest.raises(SystemExit) as e:
            main(["sweep", "show", str(f)])
        assert e.value.code == 2 and why in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.parquet", "other.parquet"]


def test_a_store_path_that_is_not_utf8_is_refused_before_anything_is_created(tmp_path, capsys):
    import os

    from t3.cli.main import main

    spec = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "link-bandwidth.toml"
    bad = os.path.join(str(tmp_path), os.fsdecode(b"\xff.parquet"))
    for args in (["sweep", "run", str(spec), "--store", bad, "--no-progress"], ["sweep", "show", bad]):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == 2 and "is not a valid UTF-8 path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_run_points_equals_run_point_and_run_sweep_has_one_row_per_point():
    points = [
        {"model": "t-nlg", "tp": tp, "sublayer": "op", "config": cfg, "hardware": "paper-80cu",
         "tokens": 1024, "hw_overrides": {"link.latency_s": 1e-6}, "options": {"comm_cus": 8}}
        for tp in (4, 8) for cfg in ("sequential", "concurrent")
    ]  # fmt: skip
    assert run_points(points, workers=2, progress=False) == [run_point(p) for p in points]
    df = run_sweep(points, workers=1, progress=False)
    assert list(df["point"]) == [0, 1, 2, 3] and list(df["options.comm_cus"]) == [8] * 4


@register(
    "test-kills-its-worker", "test only: SIGKILLs the process running it when params.crash is set",
    {"crash": Param((bool,), "kill the worker")},
)  # fmt: skip
def _killer(op, hw, opts: RunOptions):
    if opts.params.get("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    return run_sequential(op, hw, opts)


@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="workers must inherit the test config"
)
def test_killed_worker_loses_no_point_and_duplicates_none(tmp_path):
    sw = spec_from_dict(
        {
            "base": {**SMALL, "config": "test-kills-its-worker"},
            "grid": {
                "hardware.link.bandwidth_Bps": [5e10, 1e11, 2e11, 4e11],
                "options.params.crash": [False, True],
            },
        }
    )
    df, _ = execute(sw, workers=2, store=tmp_path / "r.parquet", progress=False, batch_size=3)
    assert len(df) == 8 and df["key"].is_unique
    crash = df["options.params.crash"].astype(bool)
    assert (df.loc[~crash, "status"] == "ok").all()
    assert (df.loc[crash, "status"] == "error").all()
    assert df.loc[crash, "error"].str.contains("worker process died").all()
    for _, row in df[~crash].iterrows():
        p = sw.points[int(row["point"])].point
        assert (
            row["time_s"]
            == run("t-nlg", 8, "op", "sequential", "paper-80cu", 1024, p["hw_overrides"])["time_s"]
        )


def test_run_points_rejects_unknown_keys_and_raises_on_failed_points():
    p = {"model": "t-nlg", "tp": 8, "sublayer": "op", "tokens": 1024, "config": "concurrent"}
    with pytest.raises(T3Error, match="point 0: unknown key 'hw'"):
        run_points([{**p, "hw": {}}], workers=1, progress=False)
    with pytest.raises(T3Error, match="point 0: tp: expected int, got '8'"):
        run_points([{**p, "tp": "8"}], workers=1, progress=False)
    with pytest.raises(T3Error, match="point 0: options.comm_kus: unknown option"):
        run_points([{**p, "options": {"comm_kus": 8}}], workers=1, progress=False)
    with pytest.raises(T3Error, match="point 0: ConfigError: comm_cus"):
        run_points([{**p, "options": {"comm_cus": 80}}], workers=1, progress=False)


@register("test-extra-figures", "test only: sequential plus nested / list-valued extra figures")
def _extras(op, hw, opts: RunOptions):
    out = run_sequential(op, hw, opts)
    out.extra = {
        "chunks": [1, opts.comm_cus],
        "selector": {"choice": "ring", "loss_s": 1e-6},
        "tp_echo": op.tp,
    }
    return out


def test_extra_figures_of_any_configuration_become_columns(tmp_path):
    sw = spec_from_dict(
        {"base": {**SMALL, "config": "test-extra-figures"}, "grid": {"options.comm_cus": [4, 8]}}
    )
    df, _ = execute(sw, workers=1, store=tmp_path / "r.parquet", progress=False)
    df = pd.read_parquet(tmp_path / "r.parquet")
    assert list(df["selector.choice"]) == ["ring", "ring"] and list(df["selector.loss_s"]) == [1e-6, 1e-6]
    assert [json.loads(x) for x in df["chunks"]] == [[1, 4], [1, 8]]
    assert list(df["tp_echo"]) == [8, 8]
    assert json.loads(df.loc[1, "record_json"])["chunks"] == [1, 8]


def test_periodic_compaction_keeps_every_row(tmp_path):
    store = tmp_path / "r.parquet"
    df, st = execute(grid(), workers=1, store=store, progress=False, flush_rows=1, compact_every=5)
    assert st.computed == 12 and list(df["point"]) == list(range(12))
    assert not store.with_name("r.parquet.parts").exists()
    pd.testing.assert_frame_equal(content(df), content(execute(grid(), workers=1, progress=False)[0]))


def test_a_column_typed_differently_in_two_parts_is_read_as_json_text(tmp_path):
    db = Store(tmp_path / "r.parquet")
    db.append([_row("a", "ok", 0, 1.5)])
    db.append([{**_row("b", "ok", 1), "v": "fast"}])
    assert db.table().column("v").to_pylist() == ["1.5", '"fast"']


@pytest.mark.parametrize("stored", [False, True])
def test_records_are_the_dataframes_columns_with_and_without_a_store(tmp_path, stored):
    from t3.experiments.sweep.run import RECORD_COLUMN, execute_records

    # a point that fails (no record) beside ones that run
    sw = spec_from_dict(
        {"base": {**SMALL, "config": "concurrent"}, "grid": {"options.comm_cus": [8, 80, 16], "tp": [4, 8]}}
    )
    cols = ("key", "status", "error", RECORD_COLUMN, "no-such-column")
    a = tmp_path / "a.parquet" if stored else None
    b = tmp_path / "b.parquet" if stored else None
    df, st = execute(sw, workers=1, store=a, progress=False)
    recs, st2 = execute_records(sw, cols, workers=1, store=b, progress=False)
    assert (st.total, st.errors, st.error_examples) == (st2.total, st2.errors, st2.error_examples) == (
        st.total, 2, st.error_examples,
    )  # fmt: skip
    assert len(recs) == len(df) == 6
    for r, (_, row) in zip(recs, df.iterrows(), strict=True):
        assert (r["key"], r["status"]) == (row["key"], row["status"])
        assert r["error"] == (None if pd.isna(row["error"]) else row["error"])
        assert r[RECORD_COLUMN] == (None if pd.isna(row[RECORD_COLUMN]) else row[RECORD_COLUMN])
        assert r["no-such-column"] is None
    assert [r["status"] for r in recs].count("error") == 2


def test_records_without_a_store_do_not_import_pandas():
    code = (
        "import sys; from t3.experiments.sweep import spec_from_dict; "
        "from t3.experiments.sweep.run import execute_records; "
        "sw = spec_from_dict({'base': {'model': 't-nlg', 'sublayer': 'op', 'tokens': 1024, "
        "'config': 'sequential'}, 'grid': {'tp': [4, 8]}}); "
        "r, st = execute_records(sw, ('key', 'status'), workers=1, progress=False); "
        "assert [x['status'] for x in r] == ['ok', 'ok'], r; print('pandas' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"
