"""The Dask executor (a LocalCluster) gives the local executor's results, point for point."""

import sys

import pandas as pd
import pytest

from t3.errors import ConfigError
from t3.experiments.sweep import execute, spec_from_dict
from t3.experiments.sweep.store import TIMING_COLUMNS


def small():
    return spec_from_dict(
        {
            "base": {"model": "t-nlg", "sublayer": "op", "tokens": 1024},
            "grid": {
                "hardware.link.bandwidth_Bps": [5e10, 2e11],
                "config": ["sequential", "ideal-gemm-rs-overlap", "concurrent"],
                "options.comm_cus": [8, 80],  # 80 fails in 'concurrent' only: errors must match too
            },
        }
    )


def content(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(TIMING_COLUMNS))


def test_dask_local_cluster_equals_local_pool(tmp_path):
    pytest.importorskip("dask.distributed")
    local, st_l = execute(small(), workers=2, store=tmp_path / "local.parquet", progress=False)
    dask, st_d = execute(
        small(),
        executor="dask",
        workers=2,
        store=tmp_path / "dask.parquet",
        progress=False,
        dask_processes=False,
    )
    assert (st_l.total, st_l.errors) == (12, 2) and (st_d.total, st_d.errors) == (12, 2)
    pd.testing.assert_frame_equal(content(local), content(dask))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "dask.parquet"), dask)


def test_dask_missing_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match="install the 'dist' extra"):
        execute(small(), executor="dask", workers=1, progress=False)


def test_scheduler_needs_dask_and_unknown_executor_is_rejected():
    with pytest.raises(ConfigError, match="--scheduler: only valid with --executor dask"):
        execute(small(), executor="local", scheduler="tcp://127.0.0.1:1", progress=False)
    with pytest.raises(ConfigError, match="unknown executor 'ray'"):
        execute(small(), executor="ray", progress=False)


def test_dask_scheduler_address_with_process_workers(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    local, _ = execute(small(), workers=1, store=None, progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        remote, st = execute(
            small(), executor="dask", scheduler=cluster.scheduler_address, store=tmp_path / "r.parquet",
            progress=False,
        )  # fmt: skip
    assert st.computed == 12
    pd.testing.assert_frame_equal(content(local), content(remote))
    assert remote["worker"].nunique() == 1
