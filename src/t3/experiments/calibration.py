"""Calibration of the T3 paper's unknowns on its two published calibration targets.

Few knobs on few numbers (``docs/calibration.md``):

- stage 1 (baselines only): link per-direction bandwidth (the paper's "150 GB/s bidirectional" read
  as 75 or 150 GB/s each way), tokens per iteration of the T3-paper models, and the GEMM's sustained
  fraction of tensor peak, against Ideal-GEMM-RS-Overlap 35 % geomean / 50 % max;
- stage 2 (T3 mechanism): MCA threshold cap and starvation bound, NMC update cost and DMA command
  overhead, against T3-MCA 30 % geomean / 47 % max, with the stage-1 values fixed.

The search is an exhaustive grid; the loss of a candidate is the larger of its geomean error in units
of the ±3 pp tolerance and its max error in units of the ±5 pp tolerance. Run it with
``python -m t3.experiments.calibration [--stage 1|2] [--workers N]``; it prints the ranked table that
``docs/calibration.md`` quotes. The chosen values live in ``presets/paper-80cu.toml`` and
``workload/models/zoo.toml``; nothing here is read by the simulator.
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from t3.config.hardware import Hardware
from t3.workload import get_model

T3_PAPER_MODELS = ("mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg")
TOLERANCE = {"geomean": 0.03, "max": 0.05}

# The calibrated parameters, where they live and the evidence (values are read from the preset / zoo).
PARAMETERS: list[tuple[str, str]] = [
    ("link.bandwidth_Bps", "stage 1: 75 GB/s each way fits Ideal 33.6 % / 49.1 % at 55 % GEMM efficiency; "
     "150 GB/s each way needs 100 % of tensor peak and fits worse (33.1 % / 48.1 %)"),
    ("compute.gemm_efficiency", "stage 1 loss minimiser at 75 GB/s, 12288 tokens: 0.50 -> 33.2 % / 48.1 %, "
     "0.55 -> 33.6 % / 49.1 %, 0.60 -> 33.3 % / 47.8 % (Ideal geomean / max)"),
    ("tokens", "not identified by the targets (Ideal geomean within 0.1 pp over 4096-16384); 12 x 1024, the "
     "batch x sequence of a later T3 re-implementation for an 8B GPT with H = 3072"),
    ("mca.intensity_scale", "not a knob: the paper sets the MCA threshold from the GEMM's measured "
     "first-stage intensity (scale 1); see the mca_threshold sweep"),
    ("mca.occupancy_threshold", "stage 2: no effect (0.6, 0.8, 1.0 give identical T3-MCA results); prior kept"),
    ("mca.starvation_share", "stage 2: 0.02 / 0.05 / 0.10 -> T3-MCA 32.0 % / 31.9 % / 31.6 % geomean, "
     "46.5 % / 46.8 % / 47.1 % max; 0.10 chosen"),
    ("nmc.update_overhead", "stage 2: flat (whole grid 31.5-32.0 %); prior 1.0 kept (bank RMW hidden)"),
    ("dma.command_overhead_s", "stage 2: flat; prior 0.5 us kept"),
    ("hbm.efficiency", "not calibrated: typical sustained HBM2 fraction (80-92 %)"),
    ("compute.cu_copy_Bps", "not calibrated: the ring RS stays link-bound for any value above ~4 GB/s per CU"),
]  # fmt: skip


def calibrated_parameters(hw: Hardware, models: tuple[str, ...]) -> list[dict[str, Any]]:
    data = hw.model_dump()
    out = []
    for path, evidence in PARAMETERS:
        if path == "tokens":
            value: Any = {m: get_model(m).tokens for m in models}
        else:
            node: Any = data
            for p in path.split("."):
                node = node.get(p) if isinstance(node, dict) else None
            if node is None:
                continue  # a knob this hardware model does not have
            value = node
        out.append({"parameter": path, "value": value, "evidence": evidence})
    return out


def _loss(geo: float | None, mx: float | None, target: tuple[float, float]) -> float:
    if geo is None or mx is None:
        return float("inf")
    return max(abs(geo - target[0]) / TOLERANCE["geomean"], abs(mx - target[1]) / TOLERANCE["max"])


STAGE1_GRID = {
    "link.bandwidth_Bps": (75e9, 150e9),
    "tokens": (4096, 8192, 12288, 16384),
    "compute.gemm_efficiency": tuple(round(0.5 + 0.05 * i, 2) for i in range(11)),
}
# mca.intensity_scale is not a knob here: the paper sets the threshold *from* the GEMM's measured
# first-stage intensity (scale 1); its effect is shown by the sensitivity sweep instead.
STAGE2_GRID = {
    "mca.occupancy_threshold": (0.6, 0.8, 1.0),
    "mca.starvation_share": (0.02, 0.05, 0.1),
    "nmc.update_overhead": (1.0, 1.5, 2.0),
    "dma.command_overhead_s": (0.0, 0.5e-6, 2e-6),
}


def _present(grid: dict[str, tuple]) -> dict[str, tuple]:
    """The grid restricted to fields the hardware model has (the MCA model's knobs depend on it)."""
    from t3.config.hardware import Hardware

    out = {}
    for k, v in grid.items():
        if k == "tokens":
            out[k] = v
            continue
        sec, _, name = k.partition(".")
        model = Hardware.model_fields[sec].annotation
        if name in model.model_fields:
            out[k] = v
    return out


def _candidates(grid: dict[str, tuple]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(grid[k] for k in keys))]


def search(stage: int, workers: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Evaluate every candidate of the stage's grid on the main set; rows sorted by loss."""
    from t3.experiments import reproduce_t3 as r

    grid, config, target = (
        (STAGE1_GRID, "ideal-gemm-rs-overlap", (0.35, 0.50))
        if stage == 1
        else (STAGE2_GRID, "t3-mca", (0.30, 0.47))
    )
    cands = _candidates(_present(grid))
    plans = []
    for c in cands:
        ov = {k: v for k, v in c.items() if k != "tokens"}
        plans.append(
            r.Plan(
                large_models=(), comm_cus=(), sweeps=(), timeline=None, tokens=c.get("tokens"),
                configs=("sequential", config) + (("t3",) if stage == 2 else ()), hw_overrides=ov,
            )
        )  # fmt: skip
    studies = [r.build_tasks(p) for p in plans]
    tasks = r.unique_tasks(
        {f"{i}:{k}": v for i, s in enumerate(studies) for k, v in s.items() if k == "main"}
    )
    results = r.execute_all(tasks, workers=workers, progress=progress)
    rows = []
    for c, p, s in zip(cands, plans, studies, strict=True):
        pts = r._point_records(p, s["main"], results)
        st = r._stats([q["speedup"] for q in pts if q["config"] == config])
        row = {**c, "geomean": st["geomean_speedup"], "max": st["max_speedup"],
               "loss": _loss(st["geomean_speedup"], st["max_speedup"], target)}  # fmt: skip
        if stage == 2:
            # qualitative result of the paper used as a constraint: MCA recovers T3's loss to contention,
            # it never makes T3 slower. A candidate whose T3-MCA geomean is below T3's is rejected.
            t3 = r._stats([q["speedup"] for q in pts if q["config"] == "t3"])["geomean_speedup"]
            row["t3_geomean"] = t3
            if t3 is not None and row["geomean"] is not None and row["geomean"] < t3 - 1e-9:
                row["loss"] = float("inf")
        rows.append(row)
    rows.sort(key=lambda x: x["loss"])
    return rows


# Values before calibration (preset comments: typical or natural readings). Knobs the targets cannot
# identify keep them (see :func:`choose`).
PRIORS: dict[str, Any] = {
    "link.bandwidth_Bps": 75e9,  # "150 GB/s bidirectional" read as 75 GB/s each way
    "tokens": 12288,  # B = 12 x SL = 1024 of a later re-implementation (8B GPT, H = 3072)
    "compute.gemm_efficiency": 0.8,
    "mca.intensity_scale": 1.0,  # threshold = the GEMM's measured first-stage intensity
    "mca.occupancy_threshold": 0.8,
    "mca.starvation_share": 0.05,
    "nmc.update_overhead": 1.0,  # bank read-modify-write hidden behind the channel write
    "dma.command_overhead_s": 0.5e-6,
}
RESOLUTION = 0.05  # loss differences below this (tolerance units, ~0.15 pp) are not evidence


def choose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The chosen candidate: among rows within :data:`RESOLUTION` of the best loss, the one that moves
    the fewest knobs away from :data:`PRIORS`, then the lowest loss."""
    best = rows[0]["loss"]
    near = [x for x in rows if x["loss"] <= best + RESOLUTION]
    knobs = [k for k in rows[0] if k in PRIORS]
    return min(near, key=lambda x: (sum(x[k] != PRIORS[k] for k in knobs), x["loss"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=int, choices=(1, 2), default=1)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", default=None, help="write every row to this file")
    a = ap.parse_args()
    rows = search(a.stage, a.workers)
    keys = [k for k in rows[0] if k not in ("geomean", "max", "loss", "t3_geomean")]
    print(" | ".join([*keys, "geomean speedup (%)", "max speedup (%)", "loss (tolerance units)"]))
    for row in rows[: a.top]:
        print(" | ".join([*(f"{row[k]:g}" for k in keys), f"{100 * row['geomean']:.1f}",
                          f"{100 * row['max']:.1f}", f"{row['loss']:.2f}"]))  # fmt: skip
    ch = choose(rows)
    print("chosen (fewest knobs moved from the priors within the loss resolution): "
          + ", ".join(f"{k} = {ch[k]:g}" for k in keys if k in PRIORS)
          + f" -> geomean {100 * ch['geomean']:.1f} %, max {100 * ch['max']:.1f} %, loss {ch['loss']:.2f}")  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
