"""``t3 reproduce ficco``: exhaustive search over the scenario set, heuristic fit and evaluation,
figures, JSON, a Parquet table of every schedule and a Markdown report.

Procedure: every case (operator x hardware) is explored exhaustively (every legal schedule simulated,
in a process pool); the losses (contention-free time, decomposition) are accounted for the fastest
schedule of each communication kind (bulk, shard-level, FiCCO) of every case, the only ones that can
be the case's best. The heuristic's thresholds are fitted on the design cases only
(:func:`t3.ficco.select.fit`), then the fitted heuristic picks a schedule for every unseen case from
static sizes; a pick is right when its simulated time is within 2% of the exhaustive best.
The learned selector (a decision tree fitted offline by ``benchmarks/fit_ficco_selector.py`` on
random training operators; :mod:`t3.ficco.learned`) and the shipped pipeline selector are evaluated on
the same cases as shipped, and on the fresh blind sets of :mod:`t3.ficco.trainset`. The static
selectors' picks, the learned tree's training features and the characterisation are computed in the
same process pool as the explorations.

Outputs (``out_dir``): ``ficco.json`` (evaluations, fitted rules, per case its summary and the
schedules whose losses were accounted), ``schedules.parquet`` (one row per case and schedule: axes,
simulated time, speed-ups, losses where accounted; skipped schedules with their reason; read it with
:func:`load_schedules`), ``report.md`` and PNG figures.
"""

from __future__ import annotations

import gc
import json
import math
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from t3.config.hardware import load_hardware
from t3.errors import PointsFailed
from t3.experiments.parallel import pmap
from t3.ficco.characterise import characterise, dma_efficiency
from t3.ficco.learned import DATA, learned_summary, load_rows, row_static, select_learned
from t3.ficco.learned_rules import SHIPPED_SELECTOR
from t3.ficco.losses import explore
from t3.ficco.pipeline import select_pipeline
from t3.ficco.scenarios import HARDWARE, OPERATORS, Case, cases
from t3.ficco.select import (
    SHIPPED,
    Rules,
    cross_validate,
    features,
    fit,
    rule_pick,
    rules_dict,
    select,
    within,
)
from t3.ficco.space import FiccoOperator
from t3.ficco.trainset import (
    FRESH2_OPERATORS,
    FRESH3_OPERATORS,
    FRESH4_OPERATORS,
    FRESH5_OPERATORS,
    FRESH6_OPERATORS,
    FRESH7_OPERATORS,
    FRESH8_OPERATORS,
    FRESH9_OPERATORS,
    FRESH10_OPERATORS,
    FRESH_OPERATORS,
)
from t3.files import replacing, save_figure, staged, write_text
from t3.provenance import provenance
from t3.size import explore_work

TOL = 0.02

# The blind set of the shipped selector: the subset that was never run before the selector's rules
# (method and contention factors) were frozen, the commit that froze them, and the sha256 (first 16
# hex digits) of the factors file then. Refitting the factors changes the file: :func:`blind` then
# refuses until this is updated (to a new set committed before its first run, or to None when no
# blind case is left), so no claim calls a looked-at case blind.
BLIND: dict[str, str] | None = {
    "subset": "fresh10",
    "frozen_in": "fe6b6e4",
    "factors_sha256": "ec6b1cb7d717d28b",
}
SUBSET_NAMES = {
    "design": "design cases",
    "unseen": "first unseen set",
    "fresh": "first fresh blind set",
    "fresh2": "second fresh blind set",
    "fresh3": "third fresh blind set",
    "fresh4": "fourth fresh blind set",
    "fresh5": "fifth fresh blind set",
    "fresh6": "sixth fresh blind set",
    "fresh7": "seventh fresh blind set",
    "fresh8": "eighth fresh blind set",
    "fresh9": "ninth fresh blind set",
    "fresh10": "tenth fresh blind set",
    "all": "all scenario cases",
}


def blind() -> dict[str, str] | None:
    """:data:`BLIND`, after checking that the shipped factors are still the frozen ones."""
    import hashlib

    from t3.ficco.pipeline import FACTORS_FILE

    if BLIND is None:
        return None
    now = hashlib.sha256(FACTORS_FILE.read_bytes()).hexdigest()[:16]
    if now != BLIND["factors_sha256"]:
        raise PointsFailed(
            f"{FACTORS_FILE.name} changed since the blind set '{BLIND['subset']}' was frozen ({BLIND['frozen_in']}): "
            "its cases are no longer blind for the shipped selector; update BLIND in "
            "src/t3/experiments/reproduce_ficco.py (None, or a new set committed before its first run)"
        )
    return BLIND


def accuracy_meaning(res: dict) -> list[str]:
    """What the shipped selector's accuracy is measured against, in the report's words."""
    ev, b = res["evaluation"], blind()
    tol = res["tolerance_pct"]
    out = [
        f"Ground truth: this simulator's exhaustive search. Every legal schedule of a case is simulated on "
        f"the engine; a pick is right when its simulated time is within {tol:g} % of the fastest. Nothing is "
        "measured on a GPU.",
    ]
    if b is not None:
        e = ev[b["subset"]]
        out.append(
            f"Blind cases: the {e['cases']} cases of the {SUBSET_NAMES[b['subset']]} were committed with the frozen "
            f"selector ({b['frozen_in']}) before any of their results existed; the shipped selector is right on "
            f"{e['right']} of them ({e['accuracy_pct']:.1f} %). Every other case had been looked at while this or "
            "an earlier selector was built."
        )
    else:
        out.append(
            "Blind cases: none; every case has been looked at since the selector's rules last changed."
        )
    out.append(
        "The shipped (pipeline) selector runs a reduced model of the engine for every legal schedule: the engine's "
        "sharing rule on the GEMM pieces' waves, closed-form transfer times and a fitted contention factor per "
        "schedule; it builds and simulates no schedule. The FiCCO paper's 81 % (its heuristics' optimal picks on "
        "unseen scenarios) rests on scenarios, rules and a ground truth that are not public: not a like-for-like "
        "comparison with these numbers."
    )
    return out


def run_case(case: Case) -> dict[str, Any]:
    """One case: its exploration (every schedule's time; losses of the best of each kind), static
    features and the static selectors' picks."""
    hw = load_hardware(case.hardware)
    ex = explore(case.fop, hw, losses="best")
    j = ex.to_json()
    j.update(case=case.key, index=case.index, subset=case.subset, features=features(case.fop, hw))
    j["times"] = {r["name"]: r["time_s"] for r in j["schedules"]}
    j["picks"] = static_picks(case.fop, hw)
    return j


def static_picks(fop: FiccoOperator, hw) -> dict[str, str]:
    """The schedules the static selectors pick (no simulation): the pipeline selector, the learned tree
    and the estimate heuristic with its shipped thresholds."""
    return {
        "pipeline": select_pipeline(fop, hw)[0],
        "learned": select_learned(fop, hw)[0],
        "estimate": select(fop, hw, SHIPPED)[0],
    }


def try_case(case: Case) -> dict[str, Any]:
    """:func:`run_case`, or ``{"case", "error": "Type: message"}`` if it raised (reported by reproduce)."""
    try:
        return run_case(case)
    except Exception as err:  # noqa: BLE001 - any failure of one case is named by reproduce()
        msg = " ".join(str(err).split())
        return {"case": case.key, "operator": case.fop.describe(), "hardware": case.hardware,
                "subset": case.subset, "error": f"{type(err).__name__}: {msg}" if msg else type(err).__name__}  # fmt: skip


def run_task(task: tuple[str, Any]) -> Any:
    """One item of the reproduction's process pool: ``("case", Case)``, ``("train", rows)`` (the learned
    tree's static features of labelled training rows) or ``("char", preset)``. The cyclic garbage
    collector is off while it runs and collects the young generations once at its end
    (:func:`_collected_once`)."""
    with _collected_once():
        kind, arg = task
        if kind == "case":
            return try_case(arg)
        if kind == "train":
            return [row_static(r) for r in arg]
        hw = load_hardware(arg)
        return characterise(hw), dma_efficiency(hw)


# the collector's thresholds in the pool's processes outside the tasks (Python's defaults: 700, 10, 10)
GC_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def _collected_once():
    """The cyclic garbage collector off inside, then one collection of the young generations (0 and
    1); raised thresholds (:data:`GC_THRESHOLDS`) outside, for the pool's own work (results pickled).
    An exploration allocates millions of short-lived objects (ops, lists, tuples) freed by their
    reference counts and almost no reference cycles, while every automatic pass of the collector
    walks what survives, the memo tables included. Measured: a fifth of a case's time with Python's
    default thresholds (7.3 s -> 5.9 s on 15 cases); with the defaults between tasks, the whole run
    did not show the gains its cases showed alone (`benchmarks/bench_ficco.py --reproduce`). Cycles
    made inside are collected at the end."""
    if gc.get_threshold()[0] < GC_THRESHOLDS[0]:
        gc.set_threshold(*GC_THRESHOLDS)  # between tasks too (the pool's own work)
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect(1)
        if was:
            gc.enable()


def _order(cs: list[Case]) -> list[int]:
    """Case indices, the most work first (the pool's tail stays short)."""
    hws = {h: load_hardware(h) for h in {c.hardware for c in cs}}
    return sorted(range(len(cs)), key=lambda i: (-explore_work(cs[i].fop, hws[cs[i].hardware]).ops, i))


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


SUBSETS = (
    "design",
    "unseen",
    "fresh",
    "fresh2",
    "fresh3",
    "fresh4",
    "fresh5",
    "fresh6",
    "fresh7",
    "fresh8",
    "fresh9",
    "fresh10",
    "all",
)


def all_cases(limit: int | None = None) -> list[Case]:
    """The scenario set's design and unseen cases, then the fresh blind sets (``limit``: the first
    ``limit`` operators of each)."""
    out = cases(limit)
    base = len(OPERATORS)
    for subset, ops in (
        ("fresh", FRESH_OPERATORS),
        ("fresh2", FRESH2_OPERATORS),
        ("fresh3", FRESH3_OPERATORS),
        ("fresh4", FRESH4_OPERATORS),
        ("fresh5", FRESH5_OPERATORS),
        ("fresh6", FRESH6_OPERATORS),
        ("fresh7", FRESH7_OPERATORS),
        ("fresh8", FRESH8_OPERATORS),
        ("fresh9", FRESH9_OPERATORS),
        ("fresh10", FRESH10_OPERATORS),
    ):
        out += [Case(base + i, f, hw, subset) for i, f in enumerate(ops[:limit]) for hw in HARDWARE]
        base += len(ops)
    return out


def evaluate(rows: list[dict], rules: Rules | str | None) -> dict[str, Any]:
    """Picks of the estimate heuristic with ``rules``, of the learned tree (``None``), or of the
    pipeline selector (``"pipeline"``)."""
    per = []
    hws = {h: load_hardware(h) for h in {r["hardware"] for r in rows}}
    for row in rows:
        hw = hws[row["hardware"]]
        o = row["operator"]
        fop = FiccoOperator(o["op"], o["m"], o["n"], o["k"], o["gpus"], o["dtype"], o["skew"], o["label"])
        picks = row.get("picks", {})
        if rules == "pipeline":
            name = picks.get("pipeline") or select_pipeline(fop, hw)[0]
        elif rules is None:
            name = picks.get("learned") or select_learned(fop, hw)[0]
        elif rules == SHIPPED and "estimate" in picks:
            name = picks["estimate"]
        else:  # the row's features are the operator's (computed where it was explored)
            name, _ = select(fop, hw, rules, f=row.get("features"))
        t = row["times"][name]
        per.append({
            "case": row["case"], "subset": row["subset"], "label": o["label"], "hardware": row["hardware"],
            "pick": name, "pick_s": t, "best": row["best"], "best_s": row["best_time_s"],
            "right": within(row["times"], name, TOL), "gap_pct": 100.0 * (t / row["best_time_s"] - 1.0),
            "pick_vs_bulk": row["bulk_s"] / t,
            "pick_vs_shard": (row["best_shard_s"] / t) if row["best_shard_s"] else None,
            "best_vs_bulk": row["bulk_s"] / row["best_time_s"],
        })  # fmt: skip
    out: dict[str, Any] = {"cases": per}
    for subset in SUBSETS:
        sel = [p for p in per if subset == "all" or p["subset"] == subset]
        vb = [p["pick_vs_bulk"] for p in sel]
        vs = [p["pick_vs_shard"] for p in sel if p["pick_vs_shard"]]
        out[subset] = {
            "cases": len(sel),
            "right": sum(p["right"] for p in sel),
            "accuracy_pct": 100.0 * sum(p["right"] for p in sel) / max(1, len(sel)),
            "within_5pct_pct": 100.0 * sum(p["gap_pct"] <= 5.0 + 1e-9 for p in sel) / max(1, len(sel)),
            "slowdown_vs_best_geomean_pct": 100.0 * (_geomean([1 + p["gap_pct"] / 100 for p in sel]) - 1.0),
            "slowdown_vs_best_max_pct": max((p["gap_pct"] for p in sel), default=float("nan")),
            "speedup_vs_bulk_geomean": _geomean(vb), "speedup_vs_bulk_max": max(vb, default=float("nan")),
            "speedup_vs_shard_geomean": _geomean(vs), "speedup_vs_shard_max": max(vs, default=float("nan")),
            "best_vs_bulk_geomean": _geomean([p["best_vs_bulk"] for p in sel]),
        }  # fmt: skip
    return out


def reproduce(
    out_dir: Path, *, workers: int | None = None, limit: int | None = None, progress: bool = True,
    keep_going: bool = False,
) -> dict:  # fmt: skip
    """Explore every case, fit and evaluate the selectors, write ``ficco.json``, figures and
    ``report.md`` into ``out_dir``. A case that fails raises :class:`PointsFailed` naming it (after
    every case ran; nothing is written), unless ``keep_going``: then it is listed under ``errors`` in
    the JSON and the report and left out of every evaluation."""
    cs = all_cases(limit)
    # the learned tree's training cases: their static features, in the same pool (small tasks last,
    # they fill the pool's tail)
    train = load_rows(DATA) if DATA.exists() else []
    chunks = [train[i : i + TRAIN_CHUNK] for i in range(0, len(train), TRAIN_CHUNK)]
    keyed = [[{"operator": r["operator"], "hardware": r["hardware"]} for r in ch] for ch in chunks]
    tasks = [("case", cs[i]) for i in _order(cs)] + [("char", h) for h in CHAR_HARDWARE]
    tasks += [("train", ch) for ch in keyed]
    out = pmap(run_task, tasks, workers=workers, desc="t3 reproduce ficco: cases", progress=progress,
               chunksize=1)  # fmt: skip
    by_key = {r["case"]: r for r in out[: len(cs)]}
    done = [by_key[c.key] for c in cs]
    nc = len(cs) + len(CHAR_HARDWARE)
    char = {h: c for h, (c, _) in zip(CHAR_HARDWARE, out[len(cs) : nc], strict=True)}
    dma = {h: d for h, (_, d) in zip(CHAR_HARDWARE, out[len(cs) : nc], strict=True)}
    static = [x for part in out[nc:] for x in part]
    errors = [r for r in done if "error" in r]
    if errors and not keep_going:
        e = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise PointsFailed(
            f"{len(errors)} case(s) failed: case {e['case']} ({e['operator']}): {e['error']}{more}; "
            "--keep-going writes the report with them listed and left out"
        )
    rows = [r for r in done if "error" not in r]
    if not rows:
        raise PointsFailed(f"every one of the {len(cs)} cases failed: {errors[0]['error']}")
    out_dir.mkdir(parents=True, exist_ok=True)
    design = [r for r in rows if r["subset"] == "design"]
    fitted, design_acc = fit(design, TOL)
    cv = cross_validate(design, 4, TOL)
    ev_est = evaluate(rows, fitted)
    ev_learned = evaluate(rows, None)
    ev_pipe = evaluate(rows, "pipeline")
    ev = {"learned": ev_learned, "pipeline": ev_pipe}.get(SHIPPED_SELECTOR, ev_est)
    result = {
        "provenance": provenance({h: load_hardware(h) for h in sorted({c.hardware for c in cs})}),
        "errors": errors,
        "tolerance_pct": 100 * TOL,
        "rules_fitted": rules_dict(fitted),
        "rules_shipped": rules_dict(SHIPPED),
        "fitted_equals_shipped": fitted == SHIPPED,
        "design_fit_accuracy_pct": 100.0 * design_acc,
        "design_cross_validation": cv,
        "shipped_selector": SHIPPED_SELECTOR,
        "evaluation": ev,
        "evaluation_estimate": ev_est,
        "evaluation_learned": ev_learned,
        "evaluation_pipeline": ev_pipe,
        "learned_training": learned_summary(static=static if train else None),
        "characterisation": char,
        "dma_efficiency": dma,
        "schedules_table": SCHEDULES,
        "explorations": [_summary(r) for r in rows],
    }
    with staged(out_dir, last="ficco.json") as stage:  # (the folder's files appear together, ficco.json last)
        write_schedules(rows, stage / SCHEDULES, result["provenance"])
        write_text(stage / "ficco.json", json.dumps(result, indent=1, sort_keys=True, default=_nan))
        figs = figures(rows, ev, char, stage)
        write_text(stage / "report.md", report(result, rows, figs))
    return result


CHAR_HARDWARE = ("mi300x-8", "h100-8")
TRAIN_CHUNK = 24  # training rows per task of the pool
SCHEDULES = "schedules.parquet"


def _summary(row: dict) -> dict:
    """A case in ficco.json: everything but the per-schedule lists, plus the schedules whose losses were
    accounted (the fastest of each communication kind); every schedule is in the Parquet table."""
    out = {k: v for k, v in row.items() if k not in ("times", "schedules", "skipped")}
    out["schedules"] = [s for s in row["schedules"] if s["losses"] is not None]
    out["schedules_simulated"] = len(row["schedules"])
    out["schedules_skipped"] = len(row["skipped"])
    return out


def write_schedules(rows: list[dict], path: Path, prov: dict) -> None:
    """One row per (case, schedule): the case's keys, the schedule's axes, simulated time (s), speed-ups,
    contention-free time and losses where accounted (NaN otherwise); skipped schedules with the reason.
    ``prov`` (the provenance) goes into the file's metadata under ``t3.provenance``."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = []
    for r in rows:
        head = {
            "case": r["case"],
            "subset": r["subset"],
            "hardware": r["hardware"],
            "label": r["operator"]["label"],
        }
        for s in r["schedules"]:
            lo = s["losses"] or {}
            recs.append({
                **head, "schedule": s["name"], **{f"axis_{k}": v for k, v in s["axes"].items()},
                "time_s": s["time_s"], "ideal_s": s["ideal_s"], "speedup_vs_bulk": s["speedup_vs_bulk"],
                "speedup_vs_shard": s["speedup_vs_shard"], "best": s["name"] == r["best"], "skipped": None,
                **{k: lo.get(k) for k in LOSS_KEYS},
            })  # fmt: skip
        for sk in r["skipped"]:
            recs.append({**head, "schedule": sk["name"], "skipped": sk["reason"]})
    df = pd.DataFrame.from_records(recs)
    for c in ("time_s", "ideal_s", "speedup_vs_bulk", "speedup_vs_shard", *LOSS_KEYS):
        df[c] = df[c].astype("float64")
    meta = {b"t3.provenance": json.dumps(prov, sort_keys=True).encode()}
    table = pa.Table.from_pandas(df, preserve_index=False)
    with replacing(path) as tmp:
        pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), **meta}), tmp)


LOSS_KEYS = ("decomposition_s", "contention_s", "decomposition_pct", "contention_pct", "decomposition_gemm_s",
             "decomposition_comm_s")  # fmt: skip


def load_schedules(out_dir: Path):
    """The Parquet table of every simulated (and skipped) schedule of a reproduction's output folder, as
    a pandas DataFrame."""
    import pandas as pd

    return pd.read_parquet(Path(out_dir) / SCHEDULES)


def _nan(x):
    return None


def cell_text_colour(rgba) -> str:
    """The colour of a number written on a heatmap cell of colour ``rgba``: black on a light cell, white
    on a dark one (the cell's relative luminance, sRGB weights, against 0.5), so it reads on every cell."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"


def design_space_heatmaps(rows: list[dict], plt):
    """Design-space heatmaps: best speedup over bulk per (comm+executor, pieces), a few cases; each
    case's full label as its title, each number in the colour that reads on its cell."""
    pick = [r for r in rows if r["index"] in (1, 7, 13, 22, 28)] or rows[:1]
    hws = sorted({r["hardware"] for r in pick})
    idx = sorted({r["index"] for r in pick})
    fig, axes = plt.subplots(len(hws), len(idx), figsize=(3.3 * len(idx), 3.0 * len(hws)), squeeze=False)
    ys = ["shard-cu", "shard-dma", "ficco-cu", "ficco-dma"]
    im = None
    for r in pick:
        ax = axes[hws.index(r["hardware"])][idx.index(r["index"])]
        gs = sorted({s["axes"]["pieces"] for s in r["schedules"] if s["axes"]["comm"] != "bulk"})
        grid = [[float("nan")] * len(gs) for _ in ys]
        for s in r["schedules"]:
            a = s["axes"]
            if a["comm"] == "bulk":
                continue
            y, x = ys.index(f"{a['comm']}-{a['executor']}"), gs.index(a["pieces"])
            v = s["speedup_vs_bulk"]
            if math.isnan(grid[y][x]) or v > grid[y][x]:
                grid[y][x] = v
        im = ax.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
        ax.set_xticks(range(len(gs)), [str(g) for g in gs])
        ax.set_yticks(range(len(ys)), ys if idx.index(r["index"]) == 0 else [""] * len(ys))
        ax.set_xlabel("compute pieces g", fontsize=7)
        title = "\n".join(textwrap.wrap(r["operator"]["label"], 34) + [r["hardware"]])
        ax.set_title(title, fontsize=7)
        for y in range(len(ys)):
            for x in range(len(gs)):
                if not math.isnan(grid[y][x]):
                    colour = cell_text_colour(im.cmap(im.norm(grid[y][x])))
                    ax.text(x, y, f"{grid[y][x]:.2f}", ha="center", va="center", fontsize=6, color=colour)
    fig.subplots_adjust(hspace=0.75)
    fig.colorbar(im, ax=axes.ravel().tolist(), label="best speedup over bulk (x) per cell")
    return fig


# the figures :func:`figures` writes (the CLI's output-folder rule replaces only these)
FIGURES = ("design_space_heatmaps.png", "loss_signatures.png", "decomposition_characterisation.png",
           "selection.png")  # fmt: skip


def figures(rows: list[dict], ev: dict, char: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []

    def save(fig, name: str) -> None:
        save_figure(fig, out / name, dpi=110, bbox_inches="tight")  # no title or label cut off
        plt.close(fig)
        names.append(name)

    save(design_space_heatmaps(rows, plt), FIGURES[0])
    # 2. loss signatures: decomposition vs contention (% of time) of every schedule, by comm kind
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for comm, col in (("shard", "tab:blue"), ("ficco", "tab:red")):
        xs, ys = [], []
        for r in rows:
            for s in r["schedules"]:
                if s["axes"]["comm"] == comm and s["losses"] is not None:
                    xs.append(s["losses"]["decomposition_pct"])
                    ys.append(s["losses"]["contention_pct"])
        ax.scatter(xs, ys, s=4, alpha=0.35, c=col, label=comm)
    ax.set_xlabel("decomposition loss (% of schedule time)")
    ax.set_ylabel("contention loss (% of schedule time)")
    ax.set_xlim(-5, 150)
    ax.legend()
    ax.set_title("loss signatures of each case's best shard-level and FiCCO schedule", fontsize=10)
    save(fig, FIGURES[1])
    # 3. characterisation curves
    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (h, rs) in zip(axs, char.items(), strict=True):
        lbl = [f"{r['m']}x{r['n']}x{r['k']}" for r in rs]
        for key in ("M8", "M64", "K8", "K64"):
            ax.plot(
                range(len(rs)), [r.get(f"{key}_loss_pct", float("nan")) for r in rs], marker="o", label=key
            )
        ax.set_yscale("symlog")
        ax.set_xticks(range(len(rs)), lbl, rotation=60, fontsize=6)
        ax.set_ylabel("decomposition loss (% of whole GEMM)")
        ax.set_title(h)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, FIGURES[2])
    # 4. the shipped selector's pick against the exhaustive best, per case (speedup over bulk)
    fig, ax = plt.subplots(figsize=(5.6, 5))
    cs = ev["cases"]
    hi = max([1.0] + [c["best_vs_bulk"] for c in cs]) * 1.03
    lo = min([1.0] + [c["pick_vs_bulk"] for c in cs]) * 0.97
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.6, label="pick = best")
    ax.plot([lo, hi], [lo / 1.02, hi / 1.02], color="k", lw=0.6, ls=":", label="2 % slower than best")
    for subset in SUBSETS[:-1]:
        sel = [c for c in cs if c["subset"] == subset]
        if sel:
            ax.scatter([c["best_vs_bulk"] for c in sel], [c["pick_vs_bulk"] for c in sel], s=14, alpha=0.7,
                       label=f"{subset} ({len(sel)})")  # fmt: skip
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("exhaustive best: speedup over bulk (x)")
    ax.set_ylabel("selected schedule: speedup over bulk (x)")
    ax.set_title("schedule selection per case", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, FIGURES[3])
    return names


def _us(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e6:.1f} µs"


def report(res: dict, rows: list[dict], figs: list[str]) -> str:
    ev = res["evaluation"]
    pv = res["provenance"]
    L = ["# FiCCO reproduction", "",
         f"Produced by `python3 -m t3 reproduce ficco` (this run: `{pv['command']}`, t3 {pv['t3_version']}"
         + (f", git {pv['git_commit']}" if pv["git_commit"] else "") + "); hardware content hashes (sha256): "
         + ", ".join(f"{h} `{x}`" for h, x in pv["hardware_sha256"].items()) + ".", ""]  # fmt: skip
    if res["errors"]:
        L += [f"> **WARNING: {len(res['errors'])} case(s) failed and are left out of every evaluation "
              "(`--keep-going`):**"]  # fmt: skip
        L += [f"> - case {e['case']} ({e['operator']}, {e['subset']}): {e['error']}" for e in res["errors"]]
        L.append("")
    L.append(f"Cases: {ev['all']['cases']} ({ev['design']['cases']} design, {ev['unseen']['cases']} unseen, "
             f"{ev['fresh']['cases']} fresh blind, {ev['fresh2']['cases']} second fresh blind, "
             f"{ev['fresh3']['cases']} third fresh blind, {ev['fresh4']['cases']} fourth fresh blind, "
             f"{ev['fresh5']['cases']} fifth fresh blind, {ev['fresh6']['cases']} sixth fresh blind, "
             f"{ev['fresh7']['cases']} seventh fresh blind, {ev['fresh8']['cases']} eighth fresh blind, "
             f"{ev['fresh9']['cases']} ninth fresh blind, {ev['fresh10']['cases']} tenth fresh blind); "
             f"a pick is right if within {res['tolerance_pct']:.0f}% of the exhaustive best.")  # fmt: skip
    L += ["", "## What the accuracy means", ""]
    for para in accuracy_meaning(res):
        L += [para, ""]
    L += ["", "## Heuristic", ""]
    L.append(f"Fitted thresholds (design cases): `{json.dumps(res['rules_fitted'])}`; "
             f"equal to the shipped ones: {res['fitted_equals_shipped']}.")  # fmt: skip
    cv = res["design_cross_validation"]
    L.append(f"4-fold cross-validation within the design cases (fit on 3 folds of operators, score the "
             f"held-out fold): {cv['right']}/{cv['cases']} right ({cv['accuracy_pct']:.1f} %).")  # fmt: skip
    L += ["", "| selector | subset | cases | right | accuracy | within 5 % | pick slower than best: geomean / max | pick vs bulk geomean / max | pick vs shard geomean / max | best vs bulk geomean |",
          "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for sel, s in [(x, y) for x in ("estimate", "learned", "pipeline") for y in SUBSETS]:
        e = res[f"evaluation_{sel}"][s]
        L.append(f"| {sel} | {s} | {e['cases']} | {e['right']} | {e['accuracy_pct']:.1f} % | "
                 f"{e['within_5pct_pct']:.1f} % | "
                 f"{e['slowdown_vs_best_geomean_pct']:.2f} % / {e['slowdown_vs_best_max_pct']:.1f} % | "
                 f"{e['speedup_vs_bulk_geomean']:.3f}x / {e['speedup_vs_bulk_max']:.3f}x | "
                 f"{e['speedup_vs_shard_geomean']:.3f}x / {e['speedup_vs_shard_max']:.3f}x | "
                 f"{e['best_vs_bulk_geomean']:.3f}x |")  # fmt: skip
    from t3.ficco.pipeline import FACTORS, FACTORS_FILE

    L += ["", f"## Pipeline selector ({'shipped' if res['shipped_selector'] == 'pipeline' else 'not shipped'})", "",
          "Every legal schedule's time with the GPU shared, from the operator's sizes (GEMM pieces from "
          "their plans under the engine's sharing rule, transfers from closed forms; no schedule is "
          f"simulated), times its contention factor: {len(FACTORS['schedule'])} per-schedule and "
          f"{len(FACTORS['class'])} per-class factors from `src/t3/ficco/{FACTORS_FILE.name}`, fitted on the "
          "training cases by `PYTHONPATH=src python3 benchmarks/fit_ficco_selector.py factors --write`. "
          "Ring topologies and skewed MoE routing: the learned tree below. Rules in words: `docs/ficco.md`."]  # fmt: skip
    lt = res["learned_training"]
    role = (
        "fallback for ring topologies and skewed MoE" if res["shipped_selector"] == "pipeline" else "shipped"
    )
    L += ["", f"## Learned selector ({role})", "",
          f"Decision tree, depth {lt['depth']}, at least {lt['min_leaf']} training cases per leaf, fitted "
          "offline by `PYTHONPATH=src python3 benchmarks/fit_ficco_selector.py fit`.", ""]  # fmt: skip
    if lt["data"]:
        d = lt["data"]
        L.append(f"Training data present: 5-fold cross-validated accuracy {d['cv_right']}/{d['cases']} "
                 f"({d['cv_accuracy_pct']:.1f} %); re-fit equals the shipped tree: {d['refit_equals_shipped']}.")  # fmt: skip
    L += ["", "```", *lt["rules"], "```"]
    L += ["", "## Cases (picks of the shipped selector)", "",
          "| case | set | operator | hw | bulk | best | best time | pick | pick time | right |",
          "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    byc = {r["case"]: r for r in rows}
    for c in ev["cases"]:
        r = byc[c["case"]]
        ok = "yes" if c["right"] else f"no (+{c['gap_pct']:.1f} %)"
        L.append(f"| {c['case']} | {c['subset']} | {c['label']} | {c['hardware']} | {_us(r['bulk_s'])} | "
                 f"`{c['best']}` | {_us(c['best_s'])} | `{c['pick']}` | {_us(c['pick_s'])} | "
                 f"{ok} |")  # fmt: skip
    from t3.ficco.losses import NEGATIVE_LOSS

    L += ["", "## Losses of the best schedule per case", "",
          "Decomposition loss: the pieces' GEMM time alone minus the whole GEMM's, plus the extra launch and "
          "command overheads on the communication's critical path; contention loss: the schedule's time minus "
          f"the same schedule with nothing shared (docs/ficco.md). Note: {NEGATIVE_LOSS}. Losses are accounted "
          "for the fastest schedule of each communication kind (bulk, shard-level, FiCCO) of every case, the "
          f"ones that can be its best; every schedule's simulated time is in `{SCHEDULES}`.", "",
          "| case | best | time | decomposition | contention | ideal-overlap bound |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        b = next(s for s in r["schedules"] if s["name"] == r["best"])
        lo = b["losses"]
        L.append(f"| {r['case']} | `{r['best']}` | {_us(b['time_s'])} | {_us(lo['decomposition_s'])} "
                 f"({lo['decomposition_pct']:.1f} %) | {_us(lo['contention_s'])} ({lo['contention_pct']:.1f} %) | "
                 f"{_us(r['ideal_overlap_bound_s'])} |")  # fmt: skip
    L += ["", "## Decomposition-loss characterisation (% of the whole GEMM's time)", ""]
    for h, rs in res["characterisation"].items():
        L += [f"{h}:", "", "| GEMM MxNxK | whole | M/8 | M/64 | K/8 | K/64 |", "|---|---|---|---|---|---|"]
        for r in rs:
            cells = [
                f"{r[f'{x}_loss_pct']:.1f} %" if f"{x}_loss_pct" in r else "-"
                for x in ("M8", "M64", "K8", "K64")
            ]
            L.append(f"| {r['m']}x{r['n']}x{r['k']} | {_us(r['whole_s'])} | " + " | ".join(cells) + " |")
        L.append("")
    L += ["## Figures", ""] + [f"![{f}]({f})" for f in figs] + [""]
    return "\n".join(L)


__all__ = ["reproduce", "run_case", "try_case", "evaluate", "rule_pick"]
