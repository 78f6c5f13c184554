"""The reproduction's shortcuts against the plain computations they replace: losses accounted only
for the schedules that can win, and the heuristic's grid search done per handicap combination."""

import itertools
import random

import pytest

from t3.config.hardware import load_hardware
from t3.ficco import select as S
from t3.ficco.losses import explore
from t3.ficco.space import FiccoOperator


@pytest.mark.parametrize("hwn", ["mi300x-8", "h100-8"])
@pytest.mark.parametrize(
    "fop", [FiccoOperator("gemm-rs", 1024, 2048, 512), FiccoOperator("ag-gemm", 1024, 512, 2048)]
)
def test_best_losses_are_those_of_the_full_exploration(fop, hwn):
    """``losses="best"``: every schedule's time as with every loss accounted; the losses of the fastest
    schedule of each communication kind equal the full exploration's, the others are left out."""
    hw = load_hardware(hwn)
    full = explore(fop, hw).to_json()
    best = explore(fop, hw, losses="best").to_json()
    assert [(s["name"], s["time_s"]) for s in best["schedules"]] == [
        (s["name"], s["time_s"]) for s in full["schedules"]
    ]
    kinds = {}
    for s in full["schedules"]:
        k = s["axes"]["comm"]
        if k not in kinds or (s["time_s"], s["name"]) < (kinds[k]["time_s"], kinds[k]["name"]):
            kinds[k] = s
    winners = {s["name"] for s in kinds.values()}
    assert full["best"] in winners and len(winners) == len({s["axes"]["comm"] for s in full["schedules"]})
    for f, b in zip(full["schedules"], best["schedules"], strict=True):
        if f["name"] in winners:
            assert b == f
        else:
            assert b["losses"] is None and b["ideal_s"] is None
    assert {k: v for k, v in best.items() if k != "schedules"} == {
        k: v for k, v in full.items() if k != "schedules"
    }


def test_explore_refuses_an_unknown_losses_mode():
    with pytest.raises(ValueError, match="losses"):
        explore(FiccoOperator("gemm-rs", 1024, 2048, 512), load_hardware("h100-8"), losses="some")


def _rows(seed: int) -> list[dict]:
    """Design-like rows: real static features of small operators, random simulated times of every
    schedule the rules can name (ties included)."""
    rng = random.Random(seed)
    rows = []
    for i, (op, m, n, k) in enumerate(
        [("ag-gemm", 2048, 1024, 2048), ("gemm-rs", 2048, 2048, 512), ("gemm-rs", 512, 4096, 1024),
         ("ag-gemm", 512, 4096, 4096), ("moe", 1024, 2048, 1024), ("gemm-rs", 4096, 4096, 2048)]
    ):  # fmt: skip
        for hwn in ("mi300x-8", "h100-8"):
            hw = load_hardware(hwn)
            f = S.features(FiccoOperator(op, m, n, k), hw)
            names = {"bulk-g1-M-cu"}
            for key in f["estimates_s"]:
                if key == "bulk":
                    continue
                for big in (S.INF, 8.0):
                    for ax in S._fallbacks(S._axes_of(key, f, S.Rules(big_waves=big))):
                        names.add(ax.name)
            times = {nm: rng.choice([1.0, 1.01, 1.03, 1.1, 1.3]) * 1e-3 for nm in sorted(names)}
            if rng.random() < 0.3:  # a schedule the rules name was not simulated (illegal)
                times.pop(rng.choice(sorted(times.keys() - {"bulk-g1-M-cu"})))
            rows.append({"index": i, "features": f, "times": times})
    return rows


@pytest.mark.parametrize("seed", range(3))
def test_fit_equals_brute_force_over_the_grid(monkeypatch, seed):
    """The grid search returns the first combination, in grid order, with the most right picks and
    then the least summed gap, as scoring every combination with :func:`score` does."""
    grid = {
        "margin": [0.0, 0.05, 0.2], "rs_margin": [0.0, 0.1, S.INF], "dma_bias": [-0.1, 0.0, 0.1],
        "shard_bias": [-0.05, 0.05], "k_bias": [0.0, S.INF], "m_bias": [-0.2, 0.0], "big_waves": [S.INF, 8.0],
    }  # fmt: skip
    monkeypatch.setattr(S, "GRID", grid)
    rows = _rows(seed)
    best = None
    for vals in itertools.product(*grid.values()):
        r = S.Rules(**dict(zip(grid, vals, strict=True)))
        sc = S.score(rows, r)
        if best is None or sc > best[0]:
            best = (sc, r)
    rules, acc = S.fit(rows)
    assert rules == best[1]
    assert acc == best[0][0] / len(rows)
