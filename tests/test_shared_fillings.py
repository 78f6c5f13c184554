"""The engine shares the filling of a group of active ops between the schedules of one process
(``t3.sim.engine._FILLS``, keyed by the resources and the ordered asks). A schedule's result must not
depend on what ran before it: each schedule run after many others gives, bit for bit, what it gives
in an empty process state."""

from __future__ import annotations

import pytest

import t3.sim.engine as engine
from t3.config.hardware import load_hardware
from t3.ficco.space import FiccoOperator, enumerate_space
from t3.schedules.ficco import ficco_schedule
from t3.sim.engine import Engine


def _cases():
    out = []
    for hwn in ("h100-8", "mi300x-8"):
        hw = load_hardware(hwn)
        for fop in (FiccoOperator("gemm-rs", 4096, 4096, 1024), FiccoOperator("ag-gemm", 4096, 2048, 4096)):
            legal, _ = enumerate_space(fop, hw)
            out += [(fop, hw, ax) for ax in legal[::9]]
    # a hardware variant: same resources but one capacity changed, so it must not reuse the others' fillings
    hw = load_hardware("h100-8", {"hbm.bandwidth_Bps": 2.0e12})
    fop = FiccoOperator("gemm-rs", 4096, 4096, 1024)
    out += [(fop, hw, ax) for ax in enumerate_space(fop, hw)[0][::9]]
    return out


def _fingerprint(fop, hw, ax):
    res = Engine().run(ficco_schedule(fop, hw, ax))
    return res.makespan, tuple(res.end)


def test_results_do_not_depend_on_what_ran_before():
    cases = _cases()
    assert len(cases) > 20
    alone = []
    for c in cases:
        engine._FILLS.clear()
        alone.append(_fingerprint(*c))
    engine._FILLS.clear()
    for c in reversed(cases):  # warm the shared table with every other case first
        _fingerprint(*c)
    assert len(engine._FILLS) > 0  # the sharing is in use (otherwise this test checks nothing)
    for c, a in zip(cases, alone, strict=True):
        assert _fingerprint(*c) == a, c[2].name


@pytest.mark.parametrize("bw", [1.0e12, 4.0e12])
def test_a_changed_capacity_is_a_different_resource_set(bw):
    fop = FiccoOperator("gemm-rs", 4096, 4096, 1024)
    base, other = load_hardware("h100-8"), load_hardware("h100-8", {"hbm.bandwidth_Bps": bw})
    ax = enumerate_space(fop, base)[0][3]
    engine._FILLS.clear()
    want = _fingerprint(fop, other, ax)
    engine._FILLS.clear()
    _fingerprint(fop, base, ax)
    assert _fingerprint(fop, other, ax) == want
