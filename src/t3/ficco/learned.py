"""The learned FiCCO selector: a shallow decision tree on dimensionless static features.

No simulation: the features are closed forms of the operator and the hardware preset (including
the static time estimates of :func:`t3.ficco.select.features`). The tree's leaves name a schedule
*family* -- a schedule name whose piece count is written relative to the GPU count N
(``ficco-gN-M-dma-s2``, ``shard-g2N-M-dma``, ``bulk-g1-M-cu``) -- so one rule serves any N.

Fitting (:func:`fit_tree`): a CART-style tree (axis-aligned thresholds, greedy) whose impurity is
the selector's own loss: a case costs 1 if the leaf's family (after the legality fallbacks) is more
than ``tol`` slower than the exhaustive best, plus ``GAP_WEIGHT`` x its relative gap (capped at 1)
so near-misses are preferred; each leaf takes the family of least summed cost. Depth and leaf size
are chosen by cross-validation (:func:`cross_validate`, folds by operator).

Illegal family for an operator: drop the second stream, then halve the pieces, then bulk
(:func:`chain`), as the estimate heuristic does.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from t3.config.hardware import Hardware, load_hardware
from t3.ficco.select import features as estimate_features
from t3.ficco.space import Axes, FiccoOperator, check_fits, legality, parse_name

GAP_WEIGHT = 0.01
BULK = "bulk-g1-M-cu"
ESTIMATE = "estimate"  # pseudo-family: the estimate heuristic's pick (t3.ficco.select.select)

# name -> description (all dimensionless)
FEATURES: dict[str, str] = {
    "is_ag": "1 for all-gather -> GEMM, else 0",
    "is_rs": "1 for GEMM -> reduce-scatter, else 0",
    "is_moe": "1 for MoE dispatch -> experts -> combine, else 0",
    "switch": "1 if the GPUs hang off a switch (one port each), 0 for a full mesh",
    "skew": "MoE routing skew (0 = uniform)",
    "log2_comm_ratio": "log2(bytes sent / egress bandwidth  over  GEMM FLOPs / (peak x efficiency))",
    "log2_waves": "log2(whole-GEMM tiles / CUs) with the preset's largest tile",
    "log2_piece_waves": "log2(waves of one of N row pieces) = log2_waves - log2 N",
    "log2_msg_over_dma": "log2(time of one N^2-th piece of a shard on a link / DMA command overhead)",
    "log2_k_tiles": "log2(K / tile_m): inner depth of the GEMM in tiles",
    "est_overlap_vs_bulk": "least static estimate of an overlapped schedule / bulk estimate",
    "est_k_vs_m": "all-gather: least K-split estimate / least M-split estimate (else 1)",
    "est_dma_vs_cu": "least DMA estimate / least CU-kernel estimate",
    "est_rb_vs_inc": "reduce-scatter: least batched-reduction / least incremental estimate (else 1)",
    "est_shard_vs_ficco": "least shard-level estimate / least FiCCO estimate (1 on a mesh: none)",
    "log2_piece_row_tiles": "log2(rows of one of N row pieces / tile_m)",
    "log2_n_tiles": "log2(GEMM columns / tile_n)",
}
FEATURE_NAMES = tuple(FEATURES)


def _min_est(est: dict[str, float], pred) -> float:
    vals = [t for k, t in est.items() if k != "bulk" and pred(k)]
    return min(vals) if vals else math.inf


def feature_vector(fop: FiccoOperator, hw: Hardware, f: dict | None = None) -> dict[str, float]:
    """The tree's features (static: no simulation)."""
    f = f or estimate_features(fop, hw)
    est = f["estimates_s"]
    c = hw.compute
    n = fop.gpus
    ov = _min_est(est, lambda k: True)
    mm = _min_est(est, lambda k: k.split("-")[2] in ("M", "N"))
    kk = _min_est(est, lambda k: k.split("-")[2] == "K")
    dma = _min_est(est, lambda k: k.split("-")[1] == "dma")
    cu = _min_est(est, lambda k: k.split("-")[1] == "cu")
    rb = _min_est(est, lambda k: k.endswith("-rb") or "-rb-" in k)
    inc = _min_est(est, lambda k: "-rb" not in k)
    shard = _min_est(est, lambda k: k.startswith("shard"))
    fic = _min_est(est, lambda k: k.startswith("ficco"))
    rows = fop.expert_rows()[0] * n if fop.op == "moe" else fop.m
    cols = 2 * fop.n if fop.op == "moe" else fop.n
    return {
        "is_ag": float(fop.op == "ag-gemm"),
        "is_rs": float(fop.op == "gemm-rs"),
        "is_moe": float(fop.op == "moe"),
        "switch": float(f["topology"] != "mesh"),
        "skew": float(fop.skew),
        "log2_comm_ratio": math.log2(f["comm_ratio"]),
        "log2_waves": math.log2(f["waves"]),
        "log2_piece_waves": math.log2(f["waves"] / n),
        "log2_msg_over_dma": math.log2(max(f["msg_over_dma"], 1e-9)),
        "log2_k_tiles": math.log2(fop.k / c.tile_m),
        "est_overlap_vs_bulk": ov / est["bulk"],
        "est_k_vs_m": kk / mm if math.isfinite(kk) else 1.0,
        "est_dma_vs_cu": dma / cu,
        "est_rb_vs_inc": rb / inc if fop.op == "gemm-rs" and math.isfinite(rb) else 1.0,
        "est_shard_vs_ficco": shard / fic if math.isfinite(shard) else 1.0,
        "log2_piece_row_tiles": math.log2(rows / n / c.tile_m),
        "log2_n_tiles": math.log2(cols / c.tile_n),
    }


# --- schedule families -----------------------------------------------------------------------


def family_of(name: str, n: int) -> str:
    """Schedule name -> family (pieces relative to N: 1, N, 2N, 4N, NN)."""
    a = parse_name(name)
    g = {1: "1", n: "N", 2 * n: "2N", 4 * n: "4N", n * n: "NN"}.get(a.g, str(a.g))
    return name.replace(f"-g{a.g}-", f"-g{g}-", 1)


def schedule_of(family: str, n: int) -> str:
    head, g, rest = family.split("-", 2)
    pieces = {"g1": 1, "gN": n, "g2N": 2 * n, "g4N": 4 * n, "gNN": n * n}.get(g)
    return f"{head}-g{pieces if pieces else g[1:]}-{rest}"


def chain(name: str) -> list[str]:
    """The family's schedule, then its fallbacks if illegal: one stream, half the pieces, bulk."""
    a = parse_name(name)
    one = Axes(a.comm, a.g, a.split, a.executor, a.prefetch, 1, a.local_first, a.reduce)
    half = Axes(a.comm, a.g // 2 or 1, a.split, a.executor, a.prefetch, 1, a.local_first, a.reduce)
    return [name, one.name, half.name, BULK]


def resolve(family: str, n: int, times: dict[str, float]) -> str:
    """The schedule a family runs as on a labelled case (its first fallback that was simulated)."""
    for s in chain(schedule_of(family, n)):
        if s in times:
            return s
    return BULK


# --- the tree --------------------------------------------------------------------------------


def _estimate_pick(r: dict) -> str:
    from t3.ficco.select import select

    return select(_fop(r["operator"]), load_hardware(r["hardware"]))[0]


def cost_matrix(
    rows: list[dict], families: list[str], tol: float, static: list[tuple[list[float], str]] | None = None
) -> np.ndarray:
    """cost[i, j]: 1 if family j is not within ``tol`` of case i's best, + GAP_WEIGHT x gap.
    The pseudo-family ``ESTIMATE`` costs what the estimate heuristic's pick costs (``static``: the
    rows' :func:`row_static`, if already computed)."""
    out = np.zeros((len(rows), len(families)))
    for i, r in enumerate(rows):
        t, n = r["times"], r["operator"]["gpus"]
        best = min(t.values())
        for j, fam in enumerate(families):
            if fam == ESTIMATE:
                s = static[i][1] if static is not None else _estimate_pick(r)
            else:
                s = resolve(fam, n, t)
            gap = t[s] / best - 1.0
            out[i, j] = float(gap > tol + 1e-12) + GAP_WEIGHT * min(gap, 1.0)
    return out


def fit_tree(X: np.ndarray, C: np.ndarray, depth: int, min_leaf: int) -> dict:
    """Greedy tree: at each node the (feature, threshold) split with the least summed leaf cost
    (each side takes its cheapest family); stops at ``depth``, below ``2 min_leaf`` cases, or when
    every split raises the cost. A split that does not lower the cost is kept only if a deeper one
    below it does (so XOR-like interactions are found); otherwise two leaves of the same family are
    merged back. Ties: lower feature index, then lower threshold."""
    tot = C.sum(axis=0)
    leaf = {"family": int(np.argmin(tot)), "cases": int(len(C)), "cost": float(tot.min())}
    if depth == 0 or len(C) < 2 * min_leaf:
        return leaf
    best = (tot.min() + 1e-9, None, None)
    for j in range(X.shape[1]):
        order = np.argsort(X[:, j], kind="stable")
        x = X[order, j]
        cum = np.cumsum(C[order], axis=0)[:-1]  # row i: cost sums of cases 0..i (left side)
        c = cum.min(axis=1) + (tot - cum).min(axis=1)
        ok = np.zeros(len(c), dtype=bool)
        ok[min_leaf - 1 : len(x) - min_leaf] = True
        ok &= x[:-1] != x[1:]
        if not ok.any():
            continue
        i = int(np.argmin(np.where(ok, c, np.inf)))  # first (lowest threshold) of the least cost
        if c[i] < best[0] - 1e-12:
            best = (float(c[i]), j, float((x[i] + x[i + 1]) / 2))
    if best[1] is None:
        return leaf
    _, j, thr = best
    m = X[:, j] <= thr
    le = fit_tree(X[m], C[m], depth - 1, min_leaf)
    gt = fit_tree(X[~m], C[~m], depth - 1, min_leaf)
    if _cost(le) + _cost(gt) >= leaf["cost"] - 1e-9:
        return leaf  # no gain below this split either
    return {"feature": j, "threshold": thr, "le": le, "gt": gt}


def _cost(node: dict) -> float:
    return node["cost"] if "cost" in node else _cost(node["le"]) + _cost(node["gt"])


def predict(tree: dict, x: np.ndarray | list[float]) -> int:
    node = tree
    while "feature" in node:
        node = node["le"] if x[node["feature"]] <= node["threshold"] else node["gt"]
    return node["family"]


def named(tree: dict, families: list[str]) -> dict:
    """The tree with feature and family names (the shipped, readable form)."""
    if "feature" not in tree:
        return {"family": families[tree["family"]], "cases": tree["cases"]}
    return {"feature": FEATURE_NAMES[tree["feature"]], "threshold": float(f"{tree['threshold']:.4g}"),
            "le": named(tree["le"], families), "gt": named(tree["gt"], families)}  # fmt: skip


def walk(tree: dict, fv: dict[str, float]) -> tuple[str, list[str]]:
    """(family, the tests taken) of a named tree on a feature dict."""
    node, path = tree, []
    while "feature" in node:
        v, t = fv[node["feature"]], node["threshold"]
        le = v <= t
        path.append(f"{node['feature']} {'<=' if le else '>'} {t:g}")
        node = node["le"] if le else node["gt"]
    return node["family"], path


def rules_text(tree: dict, indent: str = "") -> list[str]:
    if "feature" not in tree:
        return [f"{indent}-> {tree['family']}   ({tree['cases']} training cases)"]
    return [f"{indent}if {tree['feature']} <= {tree['threshold']:g}:", *rules_text(tree["le"], indent + "    "),
            f"{indent}else:", *rules_text(tree["gt"], indent + "    ")]  # fmt: skip


# --- data, cross-validation ------------------------------------------------------------------


def _fop(o: dict) -> FiccoOperator:
    return FiccoOperator(o["op"], o["m"], o["n"], o["k"], o["gpus"], o["dtype"], o["skew"], o["label"])


def load_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["rows"]


def row_static(row: dict) -> tuple[list[float], str]:
    """A labelled case's tree features (in :data:`FEATURE_NAMES` order) and the estimate heuristic's
    pick: static, no simulation (``row``: a dict with ``operator`` and ``hardware``)."""
    from t3.ficco.select import select

    hw = _HW.get(row["hardware"])
    if hw is None:
        hw = _HW[row["hardware"]] = load_hardware(row["hardware"])
    fop = _fop(row["operator"])
    f = estimate_features(fop, hw)
    fv = feature_vector(fop, hw, f)
    return [fv[k] for k in FEATURE_NAMES], select(fop, hw, f=f)[0]


_HW: dict[str, Hardware] = {}  # presets by name, parsed once per process


def design_matrix(rows: list[dict], static: list[tuple[list[float], str]] | None = None) -> np.ndarray:
    if static is not None:
        return np.array([fv for fv, _ in static])
    hws: dict[str, Hardware] = {}
    out = []
    for r in rows:
        hw = hws.setdefault(r["hardware"], load_hardware(r["hardware"]))
        fv = feature_vector(_fop(r["operator"]), hw)
        out.append([fv[k] for k in FEATURE_NAMES])
    return np.array(out)


def families_of(rows: list[dict], tol: float) -> list[str]:
    """Every family that is within ``tol`` of the best on some case (the leaves' vocabulary)."""
    fams = set()
    for r in rows:
        t, n = r["times"], r["operator"]["gpus"]
        best = min(t.values())
        fams |= {family_of(s, n) for s, v in t.items() if v <= best * (1 + tol)}
    return sorted(fams | {BULK}) + ([ESTIMATE] if USE_ESTIMATE else [])


def accuracy(tree: dict, X: np.ndarray, C: np.ndarray) -> int:
    return int(sum(C[i, predict(tree, X[i])] < 1.0 for i in range(len(X))))


def cross_validate(X, C, groups, depth: int, min_leaf: int, folds: int = 5) -> int:
    """Right picks on held-out folds (fold = operator index mod ``folds``)."""
    right = 0
    for f in range(folds):
        te = groups % folds == f
        tree = fit_tree(X[~te], C[~te], depth, min_leaf)
        right += accuracy(tree, X[te], C[te])
    return right


USE_ESTIMATE = True
DEPTHS = (2, 3, 4, 5, 6)
MIN_LEAVES = (5, 10, 20)  # a leaf rests on at least 5 training cases (readable rules)


def fit_report(path: Path, tol: float = 0.02) -> tuple[str, dict]:
    """Choose depth / leaf size by cross-validation, fit on everything, print the rules."""
    rows = load_rows(path)
    fams = families_of(rows, tol)
    X, C = design_matrix(rows), cost_matrix(rows, fams, tol)
    groups = np.array([r["index"] for r in rows])
    n = len(rows)
    L = [f"{n} cases, {len(set(groups.tolist()))} operators, {len(fams)} families", ""]
    best = None
    for d in DEPTHS:
        for ml in MIN_LEAVES:
            cv = cross_validate(X, C, groups, d, ml)
            L.append(f"depth {d} min_leaf {ml:2d}: 5-fold CV {cv}/{n} = {100 * cv / n:.1f} %")
            if best is None or cv > best[0]:
                best = (cv, d, ml)
    cv, d, ml = best
    tree = fit_tree(X, C, d, ml)
    L.append(f"chosen: depth {d}, min_leaf {ml} (CV {100 * cv / n:.1f} %); "
             f"fit on all: {accuracy(tree, X, C)}/{n}")  # fmt: skip
    L += ["", *rules_text(named(tree, fams))]
    fit = {"cases": n, "operators": len(set(groups.tolist())), "cv_right": int(cv),
           "cv_accuracy_pct": round(100 * cv / n, 1), "fit_right": accuracy(tree, X, C)}  # fmt: skip
    return "\n".join(L), {"DEPTH": d, "MIN_LEAF": ml, "FIT": fit, "TREE": named(tree, fams)}


# --- the selector ----------------------------------------------------------------------------


def select_learned(fop: FiccoOperator, hw: Hardware, tree: dict | None = None) -> tuple[str, dict[str, Any]]:
    """(schedule name, features) from the shipped tree; always a legal schedule."""
    from t3.ficco.learned_rules import TREE

    check_fits(fop, hw)
    f = estimate_features(fop, hw)
    fv = feature_vector(fop, hw, f)
    fam, path = walk(tree or TREE, fv)
    name = BULK
    if fam == ESTIMATE:
        from t3.ficco.select import select

        return select(fop, hw)[0], {**f, "tree": fv, "family": fam, "rule": path}
    for s in chain(schedule_of(fam, fop.gpus)):
        if legality(fop, hw, parse_name(s)) is None:
            name = s
            break
    return name, {**f, "tree": fv, "family": fam, "rule": path}


DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "ficco_train.json.gz"


def learned_summary(
    path: Path = DATA, tol: float = 0.02, static: list[tuple[list[float], str]] | None = None
) -> dict[str, Any]:
    """What the shipped tree was fitted with; if the training data is present, re-fit it with the
    shipped depth and leaf size and report the cross-validated accuracy and whether the re-fit equals
    the shipped tree (``benchmarks/fit_ficco_selector.py`` regenerates the data). ``static``: the
    training rows' :func:`row_static`, if already computed (in parallel)."""
    from t3.ficco import learned_rules as lr

    out: dict[str, Any] = {"depth": lr.DEPTH, "min_leaf": lr.MIN_LEAF, "fit_report": lr.FIT,
                           "rules": rules_text(lr.TREE), "data": None}  # fmt: skip
    if not path.exists():
        return out
    rows = load_rows(path)
    fams = families_of(rows, tol)
    X, C = design_matrix(rows, static), cost_matrix(rows, fams, tol, static)
    groups = np.array([r["index"] for r in rows])
    cv = cross_validate(X, C, groups, lr.DEPTH, lr.MIN_LEAF)
    tree = named(fit_tree(X, C, lr.DEPTH, lr.MIN_LEAF), fams)
    out["data"] = {"cases": len(rows), "cv_right": cv, "cv_accuracy_pct": 100.0 * cv / len(rows),
                   "refit_equals_shipped": tree == lr.TREE}  # fmt: skip
    return out


def select_shipped(fop: FiccoOperator, hw: Hardware, runnable: bool = False) -> tuple[str, dict[str, Any]]:
    """The selector ``t3 ficco select`` uses (``learned_rules.SHIPPED_SELECTOR``); ``runnable``:
    a schedule :mod:`t3.runtime` executes (``t3 ficco select --runtime``)."""
    from t3.ficco.learned_rules import SHIPPED_SELECTOR
    from t3.ficco.select import select

    if SHIPPED_SELECTOR == "pipeline":
        from t3.ficco.pipeline import select_pipeline

        return select_pipeline(fop, hw, runnable)
    name, f = select_learned(fop, hw) if SHIPPED_SELECTOR == "learned" else select(fop, hw)
    return (runnable_variant(fop, hw, name) if runnable else name), f


def runnable_variant(fop: FiccoOperator, hw: Hardware, name: str) -> str:
    """``name`` with one compute stream, no prefetch bound and the DMA executor (what :mod:`t3.runtime`
    executes), if that is legal; else the bulk schedule."""
    from dataclasses import replace

    from t3.ficco.space import legality, parse_name

    ax = parse_name(name)
    one = replace(ax, streams=1, prefetch=0, executor="dma")
    return one.name if legality(fop, hw, one) is None else "bulk-g1-M-dma"
