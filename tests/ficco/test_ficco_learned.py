"""The learned selector: the tree fitter on tiny hand-made datasets with known splits, families,
determinism, and no simulation at selection time."""

import json

import numpy as np
import pytest

from t3.config.hardware import load_hardware
from t3.ficco.learned import (
    BULK,
    FEATURE_NAMES,
    chain,
    cost_matrix,
    cross_validate,
    family_of,
    fit_tree,
    named,
    predict,
    resolve,
    schedule_of,
    select_learned,
    walk,
)
from t3.ficco.scenarios import OPERATORS
from t3.ficco.space import FiccoOperator, legality, parse_name


def _costs(labels, k=2):
    C = np.ones((len(labels), k))
    for i, y in enumerate(labels):
        C[i, y] = 0.0
    return C


def test_tree_finds_a_planted_threshold():
    x = np.array([[0.1], [0.2], [0.3], [0.7], [0.8], [0.9]])
    tree = fit_tree(x, _costs([0, 0, 0, 1, 1, 1]), depth=3, min_leaf=1)
    assert tree["feature"] == 0 and tree["threshold"] == pytest.approx(0.5)
    assert tree["le"] == {"family": 0, "cases": 3, "cost": 0.0}
    assert [predict(tree, [v]) for v in (0.0, 0.49, 0.51, 2.0)] == [0, 0, 1, 1]


def test_tree_needs_depth_two_for_xor_and_picks_the_right_feature():
    # label = a xor b; feature 2 is noise. Depth 1 cannot do better than 2 of 4 per half.
    X = np.array([[a, b, r] for a in (0, 1) for b in (0, 1) for r in (0.3, 0.6)], dtype=float)
    y = [int(a) ^ int(b) for a, b, _ in X]
    C = _costs(y)
    t2 = fit_tree(X, C, depth=2, min_leaf=1)
    assert all(predict(t2, X[i]) == y[i] for i in range(len(X)))
    assert t2["feature"] in (0, 1) and t2["le"]["feature"] in (0, 1)
    assert sum(predict(fit_tree(X, C, depth=1, min_leaf=1), X[i]) == y[i] for i in range(len(X))) <= 4


def test_leaf_takes_the_family_of_least_summed_cost_and_respects_min_leaf():
    # no feature separates anything: one leaf, the family right on most cases
    X = np.zeros((5, 1))
    C = _costs([1, 1, 1, 0, 2], k=3)
    assert fit_tree(X, C, depth=4, min_leaf=1) == {"family": 1, "cases": 5, "cost": 2.0}
    # a split leaving fewer than min_leaf cases on a side is not taken
    x = np.array([[0.0], [1.0], [1.0], [1.0]])
    assert "feature" not in fit_tree(x, _costs([0, 1, 1, 1]), depth=2, min_leaf=2)
    assert fit_tree(x, _costs([0, 1, 1, 1]), depth=2, min_leaf=1)["threshold"] == 0.5


def test_cost_matrix_tolerance_gap_and_fallbacks():
    times = {BULK: 1.0, "ficco-g8-M-dma": 0.99, "ficco-g8-M-dma-s2": 1.05, "ficco-g16-K-dma": 1.5}
    row = {"operator": {"gpus": 8}, "times": times}
    fams = [BULK, "ficco-gN-M-dma-s2", "ficco-gNN-M-dma-s2", "ficco-g2N-K-dma-s2"]
    C = cost_matrix([row], fams, tol=0.02)[0]
    assert C[0] == pytest.approx(0.01 * (1 / 0.99 - 1))  # within 2 %: no miss
    assert C[1] == pytest.approx(1 + 0.01 * (1.05 / 0.99 - 1))
    # NN with two streams is not simulated: one stream, then half the pieces (g32 absent), then bulk
    assert resolve("ficco-gNN-M-dma-s2", 8, times) == BULK
    assert resolve("ficco-g2N-K-dma-s2", 8, times) == "ficco-g16-K-dma"
    assert C[3] == pytest.approx(1 + 0.01 * min(1.5 / 0.99 - 1, 1.0))
    assert chain("ficco-g16-M-cu-s2") == ["ficco-g16-M-cu-s2", "ficco-g16-M-cu", "ficco-g8-M-cu", BULK]


@pytest.mark.parametrize(
    "name", ["bulk-g1-M-cu", "ficco-g8-N-dma-s2-rb", "shard-g16-M-cu", "ficco-g64-K-dma"]
)
def test_families_round_trip(name):
    fam = family_of(name, 8)
    assert "-g8-" not in fam or name.startswith("bulk")
    assert schedule_of(fam, 8) == name
    assert schedule_of(fam, 4).split("-")[2:] == name.split("-")[2:]


def test_cross_validation_holds_out_and_counts():
    X = np.array([[v] for v in np.linspace(0, 1, 20)])
    C = _costs([int(v > 0.5) for v in X[:, 0]])
    groups = np.arange(20)
    assert cross_validate(X, C, groups, depth=1, min_leaf=1, folds=5) >= 18


def _tree():
    return {"feature": "is_rs", "threshold": 0.5,
            "le": {"feature": "log2_comm_ratio", "threshold": -1.0,
                   "le": {"family": "ficco-gN-M-dma-s2", "cases": 3}, "gt": {"family": BULK, "cases": 2}},
            "gt": {"family": "ficco-gN-N-dma-s2-rb", "cases": 4}}  # fmt: skip


def test_select_is_static_deterministic_and_legal(no_simulation):
    for hwn in ("mi300x-8", "h100-8"):
        hw = load_hardware(hwn)
        for f in OPERATORS:
            a = select_learned(f, hw)
            assert json.dumps(a, sort_keys=True) == json.dumps(select_learned(f, hw), sort_keys=True)
            assert legality(f, hw, parse_name(a[0])) is None
            assert set(a[1]["tree"]) == set(FEATURE_NAMES)
    hw = load_hardware("mi300x-8")
    name, f = select_learned(FiccoOperator("gemm-rs", 8192, 4096, 1792), hw, _tree())
    assert name == "ficco-g8-N-dma-s2-rb" and f["rule"] == ["is_rs > 0.5"]
    fam, path = walk(_tree(), {"is_rs": 0.0, "log2_comm_ratio": -3.0})
    assert fam == "ficco-gN-M-dma-s2" and path == ["is_rs <= 0.5", "log2_comm_ratio <= -1"]


def test_named_tree_uses_feature_and_family_names():
    t = {"feature": 1, "threshold": 0.123456, "le": {"family": 0, "cases": 1, "cost": 0.0},
         "gt": {"family": 1, "cases": 2, "cost": 0.0}}  # fmt: skip
    n = named(t, ["a", "b"])
    assert n == {"feature": FEATURE_NAMES[1], "threshold": 0.1235, "le": {"family": "a", "cases": 1},
                 "gt": {"family": "b", "cases": 2}}  # fmt: skip
