"""Projection: what each pair would take under each schedule on a hardware preset, and the step.

A pair puts ``measured = GEMM time + exposed collective time`` on the rank's critical path. Under a
schedule S the pair takes the simulator's ``P(S)`` instead (:mod:`t3.traces.predict`); everything
else in the profiled window is kept as measured:

    projected window(S) = measured window - sum over pairs of (measured - P(S))

Where S does not apply to a pair (T3 on an all-gather, FiCCO on a single all-to-all) the pair runs
sequential on the preset; where the simulator could not predict it at all (the reason is printed),
it keeps its measured time. The report counts both. ``best`` is,
per pair, the fastest of sequential, FiCCO and (on hardware with near-memory compute) T3 / T3-MCA;
``ideal`` is the overlap bound, not a schedule. When the trace was not taken on the hardware the
preset models, the projection substitutes the preset's pair times into a window measured elsewhere:
read it as "these pairs on the preset" and compare schedules with each other, not with the
measured window. When it was (GPU model named in both, or a CPU trace on a ``cpu-*`` preset), the
report also gives the model's error on the measured GEMM and collective times.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t3.config.hardware import Hardware
from t3.files import save_figure, write_text
from t3.traces.predict import SCHEDULES, PairPrediction, Prediction, Predictor
from t3.traces.schema import ImportedTrace, Pair, TraceError

SHOWN = (*SCHEDULES, "best")
GPU_MODELS = re.compile(
    r"\b(H100|H200|H800|H20|A100|A800|B100|B200|GB200|L40S?|V100|MI210|MI250X?|MI300X|MI325X|MI355X)\b", re.I
)


def same_hardware(trace: ImportedTrace, hw: Hardware) -> tuple[bool, str]:
    """Whether the trace was taken on the hardware the preset models, and why we think so."""
    if trace.device == "cpu":
        ok = hw.name.startswith("cpu")
        return ok, ("CPU trace, CPU preset" if ok else f"CPU trace, preset '{hw.name}' models GPUs")
    tt = {t.upper() for t in GPU_MODELS.findall(trace.device_name)}
    th = {t.upper() for t in GPU_MODELS.findall(f"{hw.name} {hw.description}")}
    if tt & th:
        return True, f"trace GPU '{trace.device_name}' is the preset's {'/'.join(sorted(tt & th))}"
    return False, f"trace GPU '{trace.device_name}', preset '{hw.name}' ({hw.description})"


@dataclass
class PairProjection:
    pair: Pair
    pred: PairPrediction
    hypothetical_t3: bool
    gpus: int | None = None  # the group the prediction is for (--gpus, else the trace's)

    def time(self, s: str, fallback: bool = False) -> Prediction:
        """The prediction of schedule ``s``; ``fallback``: sequential where ``s`` does not apply."""
        if s != "best":
            p = self.pred.schedules[s]
            seq = self.pred.schedules["sequential"]
            if fallback and not p.ok and not p.applies and seq.ok:
                return Prediction(seq.time_s, "sequential", f"{s} does not apply: sequential", applies=False)
            return p
        cands = ["sequential", "ficco"] + ([] if self.hypothetical_t3 else ["t3", "t3-mca"])
        ok = [(self.pred.schedules[c].time_s, c) for c in cands if self.pred.schedules[c].ok]
        if not ok:
            return Prediction(None, note="n/a: no schedule predicted")
        t, c = min(ok)
        p = self.pred.schedules[c]
        return Prediction(t, p.schedule or c, p.note)

    def as_dict(self) -> dict[str, Any]:
        d = self.pair.as_dict()
        d["predicted"] = {
            "gpus": self.gpus, "gemm_alone_s": self.pred.gemm_s, "collective_alone_s": self.pred.comm_s,
            **{s: {"time_s": (p := self.time(s)).time_s, "schedule": p.schedule, "note": p.note} for s in SHOWN},
        }  # fmt: skip
        return d


@dataclass
class Projection:
    trace: ImportedTrace
    hw: Hardware
    same_hw: bool
    same_hw_reason: str
    ficco: str
    rows: list[PairProjection] = field(default_factory=list)

    def window(self, s: str) -> tuple[float, int, int]:
        """Projected window under schedule ``s``, the pairs kept as measured (no prediction) and the
        pairs run sequential (``s`` does not apply to them)."""
        w, kept, seq = self.trace.window_s, 0, 0
        for r in self.rows:
            p = r.time(s, fallback=True)
            if p.ok:
                w -= r.pair.measured_s - p.time_s
                seq += not p.applies
            else:
                kept += 1
        return w, kept, seq

    def model_error(self) -> dict[str, Any] | None:
        """Predicted alone times against the measured GEMM and collective times (same hardware only)."""
        if not self.same_hw:
            return None
        rows = []
        for i, r in enumerate(self.rows):
            g, c = r.pair.gemm, r.pair.collective
            if r.pred.gemm_s is None or g.busy_s <= 0 or c.dur_s <= 0:
                continue
            rows.append({"pair": i, "gemm_measured_s": g.busy_s, "gemm_predicted_s": r.pred.gemm_s,
                         "gemm_error_pct": 100 * (r.pred.gemm_s / g.busy_s - 1),
                         "collective_measured_s": c.dur_s, "collective_predicted_s": r.pred.comm_s,
                         "collective_error_pct": 100 * (r.pred.comm_s / c.dur_s - 1)})  # fmt: skip
        if not rows:
            return {"pairs": [], "gemm_geomean_ratio": None, "collective_geomean_ratio": None}

        def geo(key_p: str, key_m: str) -> float:
            return math.exp(sum(math.log(x[key_p] / x[key_m]) for x in rows) / len(rows))

        return {
            "pairs": rows,
            "gemm_geomean_ratio": geo("gemm_predicted_s", "gemm_measured_s"),
            "collective_geomean_ratio": geo("collective_predicted_s", "collective_measured_s"),
            "gemm_mean_abs_error_pct": sum(abs(x["gemm_error_pct"]) for x in rows) / len(rows),
            "collective_mean_abs_error_pct": sum(abs(x["collective_error_pct"]) for x in rows) / len(rows),
        }

    def as_dict(self) -> dict[str, Any]:
        t = self.trace
        steps = t.steps or 1
        win = {"measured_s": t.window_s, "steps": t.steps, "measured_per_step_s": t.window_s / steps}
        for s in SHOWN:
            w, kept, seq = self.window(s)
            win[s] = {"time_s": w, "per_step_s": w / steps, "saving_pct": 100 * (1 - w / t.window_s),
                      "pairs_kept_measured": kept, "pairs_run_sequential": seq}  # fmt: skip
        return {
            "trace": t.summary(),
            "hardware": {"name": self.hw.name, "description": self.hw.description,
                         "near_memory_compute": self.hw.nmc.present},  # fmt: skip
            "same_hardware": self.same_hw, "same_hardware_reason": self.same_hw_reason,
            "ficco_search": self.ficco,
            "pairs": [r.as_dict() for r in self.rows],
            "window": win,
            "model_error": self.model_error(),
            "notes": list(t.notes),
        }  # fmt: skip


def project(trace: ImportedTrace, hw: Hardware, ficco: str = "explore", gpus: int | None = None,
            same_hw: bool | None = None) -> Projection:  # fmt: skip
    """Predict every pair of ``trace`` on ``hw``; ``gpus`` overrides the collectives' group size."""
    if not trace.pairs:
        why = next(
            (n.removeprefix("nothing to pair: ") for n in trace.notes if n.startswith("nothing to pair")), ""
        )
        raise TraceError(f"trace '{trace.source}': nothing to project: no GEMM / collective pairs ({why})")
    ok, why = same_hardware(trace, hw)
    if same_hw is not None:
        ok, why = same_hw, ("stated by --same-hw" if same_hw else "stated by --other-hw")
    pred = Predictor(hw, ficco)
    rows = []
    for p in trace.pairs:
        g = p.gemm
        n = gpus or p.collective.group_size
        rows.append(
            PairProjection(p, pred.predict(p.kind, g.m, g.n, g.k, g.batch, g.dtype, n), not hw.nmc.present, n)
        )
    if not any(r.time(s).ok for r in rows for s in SHOWN):  # every cell n/a: nothing was projected
        notes = {r.time(s).note.removeprefix("n/a: ") for r in rows for s in SHOWN if s != "best"}
        reasons = sorted(notes - {""})
        shown = "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "")
        raise TraceError(
            f"trace '{trace.source}': none of its {len(rows)} pairs could be predicted on hardware "
            f"'{hw.name}': {shown}"
        )
    return Projection(trace, hw, ok, why, ficco, rows)


# ---- outputs --------------------------------------------------------------------------------------------

US = 1e6


def _slice(name: str, ts_s: float, dur_s: float, pid: int, tid: int, args: dict | None = None) -> dict:
    return {"name": name, "ph": "X", "ts": round(ts_s * US, 3), "dur": round(max(dur_s, 0.0) * US, 3),
            "pid": pid, "tid": tid, "args": args or {}}  # fmt: skip


def _meta(pid: int, name: str, threads: dict[int, str]) -> list[dict]:
    ev = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}},
          {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}]  # fmt: skip
    for tid, tname in threads.items():
        ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
    return ev


def _pair_start(p: Pair) -> float:
    return p.gemm.start_s if p.relation == "produces" else p.collective.start_s


def timeline(proj: Projection, s: str) -> tuple[list[tuple[str, float, float, dict]], float]:
    """Projected blocks ``(name, start, duration, args)`` from 0 and the projected window: the measured
    window with each pair's critical time replaced by its predicted time, order kept."""
    t = proj.trace
    w0 = t.window_start_s
    cur_m, cur_p, deficit = w0, 0.0, 0.0
    blocks: list[tuple[str, float, float, dict]] = []

    def gap_block(gap: float) -> None:
        nonlocal cur_p, deficit
        take = min(gap, deficit)
        gap, deficit = gap - take, deficit - take
        if gap > 0:
            blocks.append(("other work (as measured)", cur_p, gap, {}))
            cur_p += gap

    for i, r in sorted(enumerate(proj.rows), key=lambda x: (_pair_start(x[1].pair), x[0])):
        a = _pair_start(r.pair)
        gap = a - cur_m
        if gap < 0:
            deficit += -gap
        else:
            gap_block(gap)
        p = r.time(s, fallback=True)
        dur = p.time_s if p.ok else r.pair.measured_s
        g = r.pair.gemm
        name = f"pair {i}: {r.pair.kind} {g.shape()}" + (f" [{p.schedule}]" if p.schedule else "")
        blocks.append(
            (name, cur_p, dur, {"predicted": p.ok, "note": p.note, "measured_s": r.pair.measured_s})
        )
        cur_p += dur
        cur_m = max(cur_m, a) + r.pair.measured_s
    gap_block(w0 + t.window_s - cur_m)
    return blocks, cur_p


def perfetto_events(proj: Projection) -> list[dict]:
    t = proj.trace
    w0 = t.window_start_s
    pid = 1
    ev = _meta(pid, f"measured: {Path(t.source).name} ({t.device_name}, rank {t.rank})",
               {1: "GEMMs", 2: "collectives"})  # fmt: skip
    paired = {p.collective.index: i for i, p in enumerate(t.pairs)}
    gpaired = {p.gemm.index: i for i, p in enumerate(t.pairs)}
    for g in t.gemms:
        args = {"shape": g.shape(), "dtype": g.dtype, "busy_us": g.busy_s * US}
        if g.index in gpaired:
            args["pair"] = gpaired[g.index]
        ev.append(_slice(f"{g.op} {g.shape()}", g.start_s - w0, g.end_s - g.start_s, pid, 1, args))
    for c in t.collectives:
        args = {
            "bytes": c.nbytes,
            "group_size": c.group_size,
            "exposed_us": c.exposed_s * US,
            "timing": c.timing,
        }
        if c.index in paired:
            args["pair"] = paired[c.index]
        ev.append(_slice(f"{c.op} ({c.name})", c.start_s - w0, c.dur_s, pid, 2, args))
    ev.append(_slice("profiled window (measured)", 0.0, t.window_s, pid, 3, {"steps": t.steps}))
    ev += _meta(pid, "", {3: "window"})[2:]
    for j, s in enumerate(("sequential", "ideal", "t3-mca", "ficco", "best")):
        pid = 2 + j
        blocks, end = timeline(proj, s)
        hyp = (
            " (hypothetical hardware: + near-memory compute)"
            if s == "t3-mca" and not proj.hw.nmc.present
            else ""
        )
        ev += _meta(pid, f"projected: {s} on {proj.hw.name}{hyp}", {1: "pairs", 2: "other work", 3: "window"})
        for name, st, dur, args in blocks:
            ev.append(_slice(name, st, dur, pid, 2 if name.startswith("other") else 1, args))
        ev.append(_slice(f"projected window ({s})", 0.0, end, pid, 3, {}))
    return ev


def write_perfetto(proj: Projection, path: str | Path) -> int:
    ev = perfetto_events(proj)
    doc = {"traceEvents": ev, "displayTimeUnit": "ns",
           "otherData": {"units": "ts/dur in microseconds", "source": proj.trace.source}}  # fmt: skip
    write_text(path, json.dumps(doc, separators=(",", ":")))
    return len(ev)


def write_figure(proj: Projection, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = proj.trace
    steps = t.steps or 1
    names = ["measured", *SHOWN]
    vals = [t.window_s / steps] + [proj.window(s)[0] / steps for s in SHOWN]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    unit, scale = ("ms", 1e3) if max(vals) < 1 else ("s", 1.0)
    hyp = not proj.hw.nmc.present
    labels = [f"{n} (hypothetical NMC)" if hyp and n in ("t3", "t3-mca") else n for n in names]
    colors = ["#888"] + ["#4a7"] * len(SHOWN)
    a1.barh(labels[::-1], [v * scale for v in vals[::-1]], color=colors[::-1])
    a1.set_xlabel(f"{'step' if t.steps else 'profiled window'} time ({unit})")
    a1.set_title(f"{Path(t.source).name} projected on {proj.hw.name}", fontsize=9)
    rows = sorted(enumerate(proj.rows), key=lambda x: -x[1].pair.measured_s)[:10]
    width = 0.8 / (1 + len(SHOWN))
    for j, s in enumerate(("measured", *SHOWN)):
        ys = [
            (r.pair.measured_s if s == "measured" else (r.time(s, True).time_s or 0.0)) * 1e6 for _, r in rows
        ]
        a2.bar([i + j * width for i in range(len(rows))], ys, width, label=s)
    a2.set_xticks([i + 0.4 for i in range(len(rows))])
    a2.set_xticklabels([f"{i}: {r.pair.kind}" for i, r in rows], rotation=30, fontsize=7)
    a2.set_ylabel("pair time (µs)")
    a2.set_title("largest pairs: measured (GEMM + exposed) vs predicted", fontsize=9)
    a2.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata={"Software": None})
    plt.close(fig)
