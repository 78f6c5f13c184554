"""Calibration of the T3 paper's unknowns, by the protocol of ``docs/calibration.md``.

Stage A (outside the paper only) sets the memory system's physical values in the preset with their
sources: turnaround, latency under load, NMC bank timing, L2 geometry. Then three stages, each
fitting few knobs to one published pair, with everything else held:

- **B1** (baselines only): the GEMM's inner-loop efficiency and the link's per-direction bandwidth
  (the paper's "150 GB/s bidirectional": 75 or 150 GB/s each way) against Ideal-GEMM-RS-Overlap
  35 % geomean / 50 % max;
- **B2**: the RS kernel's channels (CUs), which set the CU ring's reduction tail, against the NMC
  reduce-scatter's speed-up over the CU one, 7 % at TP 8 and 3 % at TP 16 (two numbers, one knob).
  The link's bandwidth acts in both B1 and B2 (a CU ring step reduces ``3c`` while the link moves
  ``c``), so ``--stage B`` runs B1 then B2 for each reading of the link and keeps the reading whose
  worse stage loss is smaller;
- **C** (T3's mechanism): the MCA occupancy threshold, its starvation bound and the DMA engines'
  window and staging buffer against T3-MCA 30 % geomean / 47 % max, with T3-MCA >= T3 at every
  point of the main set as a constraint (the paper's qualitative result; ``evaluate(...,
  large=True)`` shows that no candidate keeps it on the TP-32 models) and, among near-equal fits, the
  fewest knobs moved from their priors.

Every stage is an exhaustive grid over the 16 main-set points (Mega-GPT-2 and T-NLG x TP 8, 16 x four
sublayers). The loss of a candidate is its largest error in units of the tolerance (3 pp geomean,
5 pp max for speed-ups; 1 pp for the NMC speed-ups). ``python -m t3.experiments.calibration
--stage B1|B2|C`` prints the ranked grid that ``docs/calibration.md`` quotes; the chosen values live
in ``presets/paper-80cu.toml``. Nothing here is read by the simulator.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from typing import Any

from t3.config.hardware import Hardware
from t3.workload import get_model

T3_PAPER_MODELS = ("mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg")
TOLERANCE = {"geomean": 0.03, "max": 0.05, "nmc": 0.01}
TARGETS = {
    "B1": ("ideal-gemm-rs-overlap", (0.35, 0.50)),
    "B2": ("ideal-rs-nmc", (0.07, 0.03)),  # RS speed-up of NMC over the CU ring, TP 8 / TP 16
    "C": ("t3-mca", (0.30, 0.47)),
}
GRIDS: dict[str, dict[str, tuple]] = {
    "B1": {
        "link.bandwidth_Bps": (75e9, 150e9),
        "compute.gemm_efficiency": tuple(round(0.40 + 0.05 * i, 2) for i in range(13)),
    },
    "B2": {"collective.channels": (8, 12, 14, 16, 18, 20, 22, 24, 28, 32, 40)},
    "C": {
        "mca.occupancy_threshold": (0.3, 0.5, 0.8, 1.0),
        "mca.starvation_share": (0.05, 0.1, 0.2, 0.3, 0.4),
        "dma.inflight_bytes": (16384.0, 65536.0, 262144.0),
        "dma.staging_bytes": (0.0, 65536.0, 262144.0),
    },
}
# Values before calibration (the preset's documented priors). Knobs the targets cannot identify keep
# them (see :func:`choose`).
PRIORS: dict[str, Any] = {
    "link.bandwidth_Bps": 75e9,  # "150 GB/s bidirectional" read as 75 GB/s each way
    "compute.gemm_efficiency": 0.8,  # a fed tensor-core mainloop
    "collective.channels": 16,  # RCCL's ring channels on one node
    "mca.occupancy_threshold": 0.8,
    "mca.starvation_share": 0.05,
    "dma.inflight_bytes": 65536.0,
    "dma.staging_bytes": 0.0,
}
RESOLUTION = 0.05  # loss differences below this (tolerance units) are not evidence


def _loss_pair(geo: float | None, mx: float | None, target: tuple[float, float]) -> float:
    if geo is None or mx is None:
        return math.inf
    return max(abs(geo - target[0]) / TOLERANCE["geomean"], abs(mx - target[1]) / TOLERANCE["max"])


def _candidates(grid: dict[str, tuple]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(grid[k] for k in keys))]


def nmc_rs_speedups(points: list[dict]) -> dict[int, float]:
    """Geomean over the points of each TP degree of T_RS(CU ring) / T_RS(NMC) - 1, from the RS spans of
    Ideal-GEMM-RS-Overlap and Ideal-RS+NMC (both measure the RS alone)."""
    by = {(p["model"], p["tp"], p["sublayer"], p["config"]): p for p in points}
    out: dict[int, list[float]] = {}
    for (m, tp, s, c), p in by.items():
        if c != "ideal-rs-nmc" or (m, tp, s, "ideal-gemm-rs-overlap") not in by:
            continue
        cu = by[(m, tp, s, "ideal-gemm-rs-overlap")]["breakdown_s"]["reduce_scatter"]
        out.setdefault(tp, []).append(cu / p["breakdown_s"]["reduce_scatter"])
    return {tp: math.exp(sum(math.log(x) for x in xs) / len(xs)) - 1 for tp, xs in sorted(out.items())}


def evaluate(overrides: list[dict[str, Any]], configs: tuple[str, ...], workers: int | None = None,
             progress: bool = True, large: bool = False) -> list[list[dict]]:  # fmt: skip
    """The main set's point records (with speed-ups over Sequential) for each override set; with
    ``large``, the TP-32 models' records follow (``study`` = ``large``)."""
    from t3.experiments import reproduce_t3 as r

    kw = {} if large else {"large_models": ()}
    plans = [
        r.Plan(comm_cus=(), sweeps=(), timeline=None, configs=("sequential", *configs), hw_overrides=ov, **kw)
        for ov in overrides
    ]
    studies = [r.build_tasks(p) for p in plans]
    keep = ("main", "large") if large else ("main",)
    tasks = r.unique_tasks({f"{i}:{k}": v for i, s in enumerate(studies) for k, v in s.items() if k in keep})
    results = r.execute_all(tasks, workers=workers, progress=progress)
    out = []
    for p, s in zip(plans, studies, strict=True):
        recs = r._point_records(p, s["main"], results)
        if large:
            recs += [{**q, "study": "large"} for q in r._point_records(p, s["large"], results)]
        out.append(recs)
    return out


def search(stage: str, base: dict[str, Any] | None = None, workers: int | None = None,
           progress: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """Evaluate every candidate of the stage's grid (on top of the ``base`` overrides); rows by loss."""
    from t3.experiments import reproduce_t3 as r

    config, target = TARGETS[stage]
    cands = _candidates(GRIDS[stage])
    configs = {"B1": ("ideal-gemm-rs-overlap",), "B2": ("ideal-gemm-rs-overlap", "ideal-rs-nmc"),
               "C": ("t3", "t3-mca")}[stage]  # fmt: skip
    recs = evaluate([{**(base or {}), **c} for c in cands], configs, workers, progress)
    rows = []
    for c, allpts in zip(cands, recs, strict=True):
        pts = [q for q in allpts if q.get("study") != "large"]
        row: dict[str, Any] = dict(c)
        if stage == "B2":
            sp = nmc_rs_speedups(pts)
            row.update({"tp8": sp.get(8), "tp16": sp.get(16)})
            row["loss"] = (
                max(abs(sp[8] - target[0]), abs(sp[16] - target[1])) / TOLERANCE["nmc"]
                if 8 in sp and 16 in sp else math.inf
            )  # fmt: skip
        else:
            st = r._stats([q["speedup"] for q in pts if q["config"] == config])
            row.update({"geomean": st["geomean_speedup"], "max": st["max_speedup"]})
            row["loss"] = _loss_pair(st["geomean_speedup"], st["max_speedup"], target)
        if stage == "C":
            # the paper's qualitative result as a constraint: MCA never makes T3 slower at any point of
            # the calibration set (0.05 pp of slack for event-order noise). The TP-32 models are not in
            # it: no candidate of the grid satisfies it there (17 pp or more; the report says why)
            t3 = {(q["model"], q["tp"], q["sublayer"]): q["speedup"] for q in allpts if q["config"] == "t3"}
            worst = min(
                (q["speedup"] - t3[(q["model"], q["tp"], q["sublayer"])] for q in allpts if q["config"] == "t3-mca"),
                default=0.0,
            )  # fmt: skip
            row["t3_geomean"] = r._stats([q["speedup"] for q in pts if q["config"] == "t3"])[
                "geomean_speedup"
            ]
            row["mca_minus_t3_min"] = worst
            if worst < -5e-4:
                row["loss"] = math.inf
        rows.append(row)
    rows.sort(key=lambda x: x["loss"])
    return rows


def choose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The chosen candidate: among rows within :data:`RESOLUTION` of the best loss, the one that moves
    the fewest knobs away from :data:`PRIORS`, then the lowest loss."""
    best = rows[0]["loss"]
    near = [x for x in rows if x["loss"] <= best + RESOLUTION]
    knobs = [k for k in rows[0] if k in PRIORS]
    return min(near, key=lambda x: (sum(x[k] != PRIORS[k] for k in knobs), x["loss"]))


# The calibrated parameters (values read from the preset), with the stage that fitted them.
PARAMETERS: list[tuple[str, str]] = [
    ("link.bandwidth_Bps", "B"),
    ("compute.gemm_efficiency", "B1"),
    ("collective.channels", "B2"),
    ("mca.occupancy_threshold", "C"),
    ("mca.starvation_share", "C"),
    ("dma.inflight_bytes", "C"),
    ("dma.staging_bytes", "C"),
    ("tokens", "not identified by the targets: 12 x 1024, the batch x sequence of a later T3 "
               "re-implementation for an 8B GPT with H = 3072"),
]  # fmt: skip


def calibrated_parameters(hw: Hardware, models: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each calibrated parameter's value in ``hw`` (or the models) and the stage that set it."""
    data = hw.model_dump()
    out = []
    for path, stage in PARAMETERS:
        if path == "tokens":
            value: Any = {m: get_model(m).tokens for m in models}
        else:
            node: Any = data
            for p in path.split("."):
                node = node.get(p) if isinstance(node, dict) else None
            if node is None:
                continue  # a knob this hardware model does not have
            value = node
        out.append({"parameter": path, "value": value, "stage": stage,
                    "target": _target_text(stage)})  # fmt: skip
    return out


def _target_text(stage: str) -> str:
    if stage == "B":
        return f"B1 and B2 together: {_target_text('B1')}; {_target_text('B2')}"
    if stage not in TARGETS:
        return stage
    cfg, (a, b) = TARGETS[stage]
    if stage == "B2":
        return f"{cfg}: RS speed-up {100 * a:.0f} % (TP 8) / {100 * b:.0f} % (TP 16)"
    return f"{cfg}: {100 * a:.0f} % geomean / {100 * b:.0f} % max"


def stage_b(workers: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """For each reading of the link: B1's choice of GEMM efficiency, then B2's choice of channels on
    top; one row per link reading with both stages' chosen rows and losses, best (smallest worse
    loss) first."""
    out = []
    for link in GRIDS["B1"]["link.bandwidth_Bps"]:
        b1 = [r for r in search("B1", workers=workers, progress=progress) if r["link.bandwidth_Bps"] == link]
        c1 = choose(b1)
        base = {"link.bandwidth_Bps": link, "compute.gemm_efficiency": c1["compute.gemm_efficiency"]}
        c2 = choose(search("B2", base=base, workers=workers, progress=progress))
        out.append({"link.bandwidth_Bps": link, "B1": c1, "B2": c2, "loss": max(c1["loss"], c2["loss"])})
    out.sort(key=lambda x: x["loss"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", choices=(*GRIDS, "B"), default="B")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", default=None, help="write every row to this file")
    a = ap.parse_args()
    if a.stage == "B":
        print("link per direction | B1: gemm_efficiency, Ideal geomean / max (%), loss | "
              "B2: channels, NMC RS speed-up TP 8 / TP 16 (%), loss | worse loss")  # fmt: skip
        for row in stage_b(a.workers):
            c1, c2 = row["B1"], row["B2"]
            print(f"{row['link.bandwidth_Bps'] / 1e9:g} GB/s | {c1['compute.gemm_efficiency']:g}, "
                  f"{100 * c1['geomean']:.2f} / {100 * c1['max']:.2f}, {c1['loss']:.2f} | "
                  f"{c2['collective.channels']}, {100 * c2['tp8']:.2f} / {100 * c2['tp16']:.2f}, {c2['loss']:.2f} | "
                  f"{row['loss']:.2f}")  # fmt: skip
        print("chosen: the first row (the link reading whose worse stage loss is smallest)")
        return
    rows = search(a.stage, workers=a.workers)
    keys = [k for k in rows[0] if k in GRIDS[a.stage]]
    vals = ("tp8", "tp16") if a.stage == "B2" else ("geomean", "max")
    extra = ("t3_geomean", "mca_minus_t3_min") if a.stage == "C" else ()
    print(" | ".join([*keys, *(f"{v} (%)" for v in vals + extra), "loss (tolerance units)"]))
    for row in rows[: a.top]:
        cells = [f"{row[k]:g}" for k in keys] + [
            "-" if row[v] is None else f"{100 * row[v]:.2f}" for v in vals + extra
        ]
        print(" | ".join([*cells, f"{row['loss']:.2f}"]))
    ch = choose(rows)
    print(
        "chosen (fewest knobs moved from the priors within the loss resolution): "
        + ", ".join(f"{k} = {ch[k]:g}" for k in keys)
        + " -> " + ", ".join(f"{v} {100 * ch[v]:.2f} %" for v in vals)
        + f", loss {ch['loss']:.2f}"
    )  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
