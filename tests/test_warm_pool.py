"""t3.experiments.parallel.WarmPool: processes forked ahead that import a module, then run its functions."""

import math
import os

import pytest

from t3.experiments.parallel import WarmPool


def test_results_in_input_order_equal_the_functions_in_this_process():
    jobs = [(x,) for x in (0.5, 2.0, 9.0, 1e6, 3.0)]
    with WarmPool("math", 2) as pool:
        assert len(pool._procs) == 2
        got = pool.map("sqrt", jobs)
        again = pool.map("log1p", jobs)  # the processes serve any number of maps
    assert got == [math.sqrt(*j) for j in jobs]
    assert again == [math.log1p(*j) for j in jobs]


def test_jobs_run_in_other_processes_and_close_ends_them():
    pool = WarmPool("os", 2)
    pids = set(pool.map("getpid", [()] * 6))
    procs = list(pool._procs)
    pool.close()
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert all(not p.is_alive() for p in procs)


def test_one_worker_runs_here():
    with WarmPool("os", 1) as pool:
        assert pool._procs == [] and pool.map("getpid", [()]) == [os.getpid()]


def test_a_failing_job_raises_with_its_traceback_and_the_pool_still_closes():
    with WarmPool("math", 2) as pool:
        with pytest.raises(
            RuntimeError, match="(?s)math.sqrt failed in a worker process:.*ValueError: math domain error"
        ):
            pool.map("sqrt", [(4.0,), (-1.0,), (9.0,)])
        procs = list(pool._procs)
    assert all(not p.is_alive() for p in procs)


def test_a_module_that_cannot_be_imported_fails_every_job_with_the_import_error():
    with WarmPool("t3.no_such_module", 2) as pool:
        with pytest.raises(RuntimeError, match="(?s)t3.no_such_module.anything failed.*ModuleNotFoundError"):
            pool.map("anything", [()])
