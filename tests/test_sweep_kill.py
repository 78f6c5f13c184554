"""Interrupted sweeps (SIGKILL of the sweep process, SIGINT / Ctrl-C) resume without recomputing stored
points and without losing or duplicating a row; the resumed store equals a clean run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from t3.experiments.sweep import Store, execute, load_spec
from t3.experiments.sweep.store import TIMING_COLUMNS

N_BW = 1500  # x 2 configs x 2 TP degrees = 6000 points of under 1 ms each: seconds on one core
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    bws = ", ".join(repr(round(1e10 * (1 + i / 10), 1)) for i in range(N_BW))
    p = tmp_path_factory.mktemp("kill") / "big.toml"
    p.write_text(
        'name = "big"\n[base]\nsublayer = "op"\ntokens = 1024\n[grid]\n'
        f'"hardware.link.bandwidth_Bps" = [{bws}]\nconfig = ["sequential", "concurrent"]\ntp = [4, 8]\n'
    )
    return p


@pytest.fixture(scope="module")
def clean(spec) -> pd.DataFrame:
    df, _ = execute(load_spec(spec), workers=1, store=None, progress=False)
    return df.drop(columns=list(TIMING_COLUMNS))


def _sweep(spec: Path, store: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "t3", "sweep", str(spec), "--store", str(store), "--no-progress",
         "--flush-s", "0.05", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _group_exits(pgid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)
    return False


def _stop_when_rows_stored(
    p: subprocess.Popen, store: Path, sig: int, min_parts: int = 3, reap: bool = True
) -> str:
    """Send ``sig`` once ``min_parts`` part files are journaled; return the sweep's stderr."""
    parts = store.with_name(store.name + ".parts")
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and p.poll() is None:
        if parts.is_dir() and len(list(parts.glob("part-*.parquet"))) >= min_parts:
            break
        time.sleep(0.01)
    assert p.poll() is None, "the sweep finished before it could be interrupted; enlarge the grid"
    if sig == signal.SIGINT:
        os.killpg(p.pid, sig)  # Ctrl-C in a terminal reaches the whole process group
    else:
        os.kill(p.pid, sig)  # kill -9 of the sweep process only
    try:
        return p.communicate(timeout=TIMEOUT_S)[1]
    finally:
        if reap:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # reap any worker left behind
            except ProcessLookupError:
                pass


def _resume_and_check(spec: Path, store: Path, clean: pd.DataFrame) -> None:
    before = Store(store).table().to_pandas()
    total = len(clean)
    assert 0 < len(before) < total and before["key"].is_unique
    p = _sweep(spec, store, "--workers", "2")
    out, err = p.communicate(timeout=TIMEOUT_S)
    assert p.returncode == 0, err
    assert f"{len(before)} already stored, {total - len(before)} computed" in err
    after = pd.read_parquet(store)
    assert len(after) == total and after["key"].is_unique
    assert set(after["key"]) == set(clean["key"])
    # rows stored before the interruption were not recomputed: same run id, same finish time
    kept = after.set_index("key").loc[before["key"], ["run_id", "finished_at"]]
    pd.testing.assert_frame_equal(kept.reset_index(drop=True), before[["run_id", "finished_at"]])
    assert after["run_id"].nunique() == 2
    pd.testing.assert_frame_equal(after.drop(columns=list(TIMING_COLUMNS)), clean)


def test_sigkill_of_the_sweep_process_resumes_exactly(spec, clean, tmp_path):
    store = tmp_path / "r.parquet"
    p = _sweep(spec, store, "--workers", "2")
    _stop_when_rows_stored(p, store, signal.SIGKILL, reap=False)
    assert p.returncode == -signal.SIGKILL
    assert _group_exits(p.pid, within_s=10.0), "pool workers outlived the killed sweep"
    assert not store.exists()  # nothing compacted: the journal alone holds the finished rows
    _resume_and_check(spec, store, clean)


def test_ctrl_c_leaves_a_consistent_compacted_store(spec, clean, tmp_path):
    store = tmp_path / "r.parquet"
    p = _sweep(spec, store, "--workers", "2")
    err = _stop_when_rows_stored(p, store, signal.SIGINT)
    assert p.returncode == 130, err
    assert "rerun the same command to resume" in err and "Traceback" not in err
    assert not store.with_name(store.name + ".parts").exists()  # journal compacted into the file
    assert len(pd.read_parquet(store)) == len(Store(store).table())
    _resume_and_check(spec, store, clean)


def test_ctrl_c_is_taken_at_a_known_point():
    """While a sweep runs, SIGINT only sets a flag; check_stop (between batches) raises it; a second
    Ctrl-C raises at once; the previous handler is back afterwards."""
    from t3.experiments.sweep.executors import check_stop, deferred_interrupt

    before = signal.getsignal(signal.SIGINT)
    with deferred_interrupt():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # delivered: no exception here, only the flag
        with pytest.raises(KeyboardInterrupt):
            check_stop()
        check_stop()  # taken once
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        with pytest.raises(KeyboardInterrupt):  # the second Ctrl-C interrupts at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is before
