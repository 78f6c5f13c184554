"""The engine fills each group of active ops that shares no resource with the others on its own
(:meth:`t3.sim.engine.Allocator.allocate`). Oracle: the same simulations with splitting turned off
(one filling of all active ops), which must give the same times to rounding."""

from __future__ import annotations

import pytest

import t3.sim.engine as engine
from t3.config.hardware import load_hardware
from t3.ficco.losses import LossModel
from t3.ficco.space import FiccoOperator, parse_name

# skewed MoE is simulated on all GPUs: most events find one group of ops per GPU
CASES = [
    ("h100-8", FiccoOperator("moe", 2048, 2048, 1024, skew=0.5), "bulk-g1-M-cu"),
    ("h100-8", FiccoOperator("moe", 2048, 2048, 1024, skew=0.5), "shard-g8-M-cu-s2"),
    ("mi300x-8", FiccoOperator("moe", 2048, 2048, 1024, skew=0.5), "ficco-g8-M-dma-s2"),
]


def _time(hwn: str, op: FiccoOperator, name: str) -> float:
    return LossModel(op, load_hardware(hwn)).evaluate(parse_name(name)).time_s


@pytest.mark.parametrize("hwn,op,name", CASES, ids=[f"{h}-{n}" for h, _, n in CASES])
def test_filling_groups_apart_equals_filling_them_together(monkeypatch, hwn, op, name):
    # the Python loop's grouping (the compiled core's equals it bit for bit: tests/test_native_engine.py)
    monkeypatch.setattr(engine, "_native", None)
    split = []
    groups = engine.Allocator._groups

    def counting(self, active):
        g = groups(self, active)
        split.append(len(g))
        return g

    monkeypatch.setattr(engine.Allocator, "_groups", counting)
    apart = _time(hwn, op, name)
    assert max(split) > 1  # the case exercises splitting
    monkeypatch.setattr(engine, "SPLIT_MIN", 10**9)  # one filling of every active set
    split.clear()
    together = _time(hwn, op, name)
    assert not split
    assert apart == pytest.approx(together, rel=1e-12)
