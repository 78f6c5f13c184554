"""Design space: names round-trip, illegal points are skipped with a reason, every legal schedule runs."""

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.ficco.space import Axes, FiccoOperator, candidates, enumerate_space, legality, parse_name
from t3.schedules.ficco import ficco_schedule
from t3.sim.engine import Engine

SMALL = {
    "ag-gemm": FiccoOperator("ag-gemm", 1024, 512, 512),
    "gemm-rs": FiccoOperator("gemm-rs", 1024, 512, 512),
    "moe": FiccoOperator("moe", 512, 256, 256),
}


@pytest.mark.parametrize("op", list(SMALL))
def test_names_round_trip(op):
    for ax in candidates(SMALL[op]):
        assert parse_name(ax.name) == ax


def test_example_name_from_the_issue_parses():
    ax = parse_name("ficco-g64-M-dma")
    assert (ax.comm, ax.g, ax.split, ax.executor, ax.streams, ax.prefetch, ax.local_first) == (
        "ficco",
        64,
        "M",
        "dma",
        1,
        0,
        True,
    )


@pytest.mark.parametrize(
    "bad", ["ficco-64-M-dma", "ficco-g8-X-dma", "foo", "ficco-g8-M-dma-p0", "ficco-g0-M-cu"]
)
def test_malformed_names_are_one_line_errors(bad):
    with pytest.raises(ConfigError, match="schedule"):
        parse_name(bad)


def test_operator_validation_names_the_field():
    for kw, field in [
        ({"op": "x"}, "op"),
        ({"m": 1001}, "m"),
        ({"skew": 1.5}, "skew"),
        ({"dtype": "int3"}, "dtype"),
    ]:
        args = {"op": "ag-gemm", "m": 1024, "n": 64, "k": 64, **kw}
        with pytest.raises(ConfigError, match=f"^{field}"):
            FiccoOperator(**args)


def test_illegal_combinations_have_reasons():
    hw = load_hardware("mi300x-8")
    fop = FiccoOperator("gemm-rs", 8 * 12, 512, 512)  # 96 rows: 8 shards but not 64 pieces
    assert legality(fop, hw, Axes("ficco", 64, "M", "dma")) == "M=96 does not split into 64 equal pieces"
    assert "partial sums" in legality(fop, hw, Axes("ficco", 8, "K", "dma"))
    assert legality(fop, hw, Axes("shard", 8, "M", "cu")) is None
    legal, skipped = enumerate_space(fop, hw)
    assert legal and skipped and all(reason for _, reason in skipped)
    ag = FiccoOperator("ag-gemm", 1024, 512, 512)
    assert "column" in legality(ag, hw, Axes("ficco", 8, "N", "cu"))
    assert "mix" in legality(ag, hw, Axes("shard", 8, "K", "cu"))
    assert "deadlocks" in legality(ag, hw, Axes("ficco", 8, "M", "cu", prefetch=1, local_first=False))


@pytest.mark.parametrize("hwname", ["mi300x-8", "h100-8", "paper-80cu"])
@pytest.mark.parametrize("op", list(SMALL))
def test_every_legal_schedule_runs_under_any_interleaving(hwname, op):
    hw = load_hardware(hwname)
    legal, _ = enumerate_space(SMALL[op], hw)
    if hw.topology.kind == "ring" and op == "moe":
        assert not legal
        return
    assert len(legal) > 10
    for ax in legal[::7]:
        sched = ficco_schedule(SMALL[op], hw, ax)
        t = Engine().run(sched).makespan
        tj = Engine(seed=3, jitter=0.2).run(sched).makespan
        assert t > 0 and 0.5 * t < tj < 2.0 * t  # completes (no deadlock) under shuffled events
