"""FiCCO's builder makes repeated ops (transfers, reductions, piece ends, accumulator loads, a ring's
steps, a GEMM's repeated waves) as copies of the first (``ScheduleBuilder.add_like``); a schedule built
that way equals, op by op and field by field, the one built with the builder's template table disabled
(every op of FiCCO's own made anew)."""

from __future__ import annotations

import pytest

from t3.config.hardware import load_hardware
from t3.ficco.space import FiccoOperator, enumerate_space
from t3.schedules.ficco import ficco_schedule
from t3.sim.schedule import ScheduleBuilder

FIELDS = ("gpu", "key", "kind", "cat", "demands", "caps", "delay_s", "deps", "traffic", "prio", "acquire",
          "release", "writes", "window", "rounds", "admit", "fills")  # fmt: skip


class _NoHits(dict):
    """A template table that never finds anything: every op is made anew."""

    def get(self, key, default=None):
        return default

    def __contains__(self, key):
        return False


def _cases():
    out = []
    for hwn, fop in (
        ("h100-8", FiccoOperator("gemm-rs", 8192, 4096, 1792)),
        ("mi300x-8", FiccoOperator("ag-gemm", 8192, 3584, 4096)),
        ("mi300x-8", FiccoOperator("moe", 4096, 2048, 1024)),
        ("h100-8", FiccoOperator("gemm-rs", 4096, 2048, 2048)),
    ):
        hw = load_hardware(hwn)
        out += [(fop, hw, ax) for ax in enumerate_space(fop, hw)[0]][::5]
    return out


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[1].name}-{c[0].op}-{c[2].name}")
def test_copies_equal_ops_made_anew(case, monkeypatch):
    fop, hw, ax = case
    for mode, sym in (("full", None), ("ideal", None), ("comm", None), ("full", False)):
        got = ficco_schedule(fop, hw, ax, mode, symmetric=sym)
        with monkeypatch.context() as m:
            init = ScheduleBuilder.__init__

            def no_templates(self, *a, init=init, **k):
                init(self, *a, **k)
                self.templates = _NoHits()

            m.setattr(ScheduleBuilder, "__init__", no_templates)
            ref = ficco_schedule(fop, hw, ax, mode, symmetric=sym)
        assert len(got.ops) == len(ref.ops)
        # (a ring's steps and a GEMM's waves are still copies in the reference: they keep their own tables)
        assert sum(o.like >= 0 for o in got.ops) >= sum(o.like >= 0 for o in ref.ops)
        for o, r in zip(got.ops, ref.ops, strict=True):
            for f in FIELDS:
                assert getattr(o, f) == getattr(r, f), (ax.name, mode, o.key, f)
        assert [r.name for r in got.resources] == [r.name for r in ref.resources]
