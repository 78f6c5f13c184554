"""Regenerate the learned FiCCO selector's training data and refit it.

    PYTHONPATH=src python3 benchmarks/fit_ficco_selector.py label [--count 200] [--workers 2]
    PYTHONPATH=src python3 benchmarks/fit_ficco_selector.py fit
    PYTHONPATH=src python3 benchmarks/fit_ficco_selector.py factors [--write]

``label``: ``count`` random realistic operators (:func:`t3.ficco.trainset.training_operators`, seed 0)
plus the 32 design operators, on both presets, each explored exhaustively (every legal schedule
simulated, process pool); writes ``benchmarks/data/ficco_train.json.gz`` (operator, preset, every
schedule's time and its contention-free time ``ideal``, in s; the latter feeds
``benchmarks/ficco_selector_ceiling.py``). About 7 min on 2 cores.

``fit``: chooses the tree depth and leaf size by 5-fold cross-validation on that data (folds by
operator, both presets together), fits the tree on all of it and prints the rules and the
cross-validated accuracies (%); ``--write`` writes them to ``src/t3/ficco/learned_rules.py``.

``factors``: the pipeline selector's contention factors (:func:`t3.ficco.pipeline.fit_factors` on
that data, about 1 min); ``--write`` writes them to ``src/t3/ficco/pipeline_factors.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from dataclasses import asdict
from pathlib import Path

from t3.config.hardware import load_hardware
from t3.experiments.parallel import pmap
from t3.ficco.losses import explore
from t3.ficco.scenarios import DESIGN_OPERATORS, HARDWARE
from t3.ficco.space import FiccoOperator
from t3.ficco.trainset import training_operators

DATA = Path(__file__).parent / "data" / "ficco_train.json.gz"


def label_one(item: tuple[int, str, FiccoOperator]) -> dict:
    idx, hw, fop = item
    ex = explore(fop, load_hardware(hw), losses="ideal").to_json()  # times and contention-free times
    return {"index": idx, "hardware": hw, "operator": asdict(fop),
            "times": {s["name"]: s["time_s"] for s in ex["schedules"]},
            "ideal": {s["name"]: s["ideal_s"] for s in ex["schedules"]}}  # fmt: skip


def label(count: int, workers: int | None) -> None:
    ops = list(DESIGN_OPERATORS) + training_operators(count)
    items = [(i, hw, f) for i, f in enumerate(ops) for hw in HARDWARE]
    # slow (all-GPU) skewed MoE first so the pool's tail is short
    order = sorted(range(len(items)), key=lambda j: (items[j][2].skew == 0, j))
    rows = pmap(label_one, [items[j] for j in order], workers=workers, desc="label")
    rows.sort(key=lambda r: (r["index"], HARDWARE.index(r["hardware"])))
    DATA.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(DATA, "wb", mtime=0) as fh:
        fh.write(
            json.dumps({"design_operators": len(DESIGN_OPERATORS), "rows": rows}, sort_keys=True).encode()
        )
    print(f"{len(rows)} labelled cases -> {DATA} ({DATA.stat().st_size / 1e3:.0f} kB)")


RULES = Path(__file__).parents[1] / "src" / "t3" / "ficco" / "learned_rules.py"


def rules_module(shipped: dict) -> str:
    L = ['"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`',
         "(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).", '"""',
         "", "# ruff: noqa: E501", "", 'SHIPPED_SELECTOR = "pipeline"']  # fmt: skip
    for k in ("DEPTH", "MIN_LEAF", "FIT", "TREE"):
        L.append(f"{k} = {json.dumps(shipped[k])}")
    return "\n".join(L) + "\n"


def factors_json(fac: dict) -> str:
    doc = {"source": "benchmarks/fit_ficco_selector.py factors --write (simulated / static estimate, "
           "geometric mean over benchmarks/data/ficco_train.json.gz)", **fac}  # fmt: skip
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("label", "fit", "factors"))
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument(
        "--write", action="store_true", help="write the fitted rules or factors into src/t3/ficco"
    )
    a = ap.parse_args()
    if a.what == "label":
        label(a.count, a.workers)
    elif a.what == "factors":
        from t3.ficco import pipeline
        from t3.ficco.learned import load_rows

        fac = pipeline.fit_factors(load_rows(DATA))
        text = factors_json(fac)
        print(f"{len(fac['schedule'])} schedule factors, {len(fac['class'])} class factors")
        if a.write:
            pipeline.FACTORS_FILE.write_text(text)
            print(f"wrote {pipeline.FACTORS_FILE}")
    else:
        from t3.ficco.learned import fit_report

        text, shipped = fit_report(DATA)
        print(text)
        if a.write:
            RULES.write_text(rules_module(shipped))
            print(f"wrote {RULES}")


if __name__ == "__main__":
    main()
