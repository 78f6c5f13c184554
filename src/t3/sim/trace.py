"""Chrome / Perfetto trace (JSON "Trace Event Format") of simulation results.

One process per GPU (per result when several are given). Ops become complete events (``ph: "X"``)
on tracks named by their kind; overlapping ops of one kind are spread over numbered lanes so slices on
a track never partly overlap. Optional *spans* (``Schedule.meta["trace_spans"]``: ``(gpu, track,
name, op ids)``) add one slice per group of ops (e.g. GEMM stages). Counters (``ph: "C"``), from
``Result.usage`` (run the engine with ``trace=True``): HBM bandwidth by traffic class (GB/s), link /
port occupancy (GB/s), and the level of every counting semaphore (units). Times are microseconds.
Open the file at https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from t3.files import write_text
from t3.sim.engine import Result

US = 1e6  # trace timestamps are microseconds
TRACK_ORDER = {"span": 0, "gemm-load": 1, "gemm-compute": 2}


def _lanes(intervals: list[tuple[float, float, int]]) -> dict[int, int]:
    """Greedy interval colouring: op id -> lane, so that ops in one lane do not overlap."""
    ends: list[float] = []
    out = {}
    for s, e, i in sorted(intervals):
        for k, end in enumerate(ends):
            if end <= s:
                ends[k] = e
                out[i] = k
                break
        else:
            out[i] = len(ends)
            ends.append(e)
    return out


class _Tracks:
    """Thread ids of one result's tracks (created with their name and sort order on first use)."""

    def __init__(self, ev: list[dict[str, Any]], pid_of: dict[int, int]):
        self.ev, self.pid_of = ev, pid_of
        self.tids: dict[tuple[int, str, int], int] = {}

    def __call__(self, g: int, track: str, lane: int) -> int:
        key = (g, track, lane)
        if key not in self.tids:
            t = len(self.tids) + 1
            self.tids[key] = t
            pid = self.pid_of[g]
            name = track if lane == 0 else f"{track} #{lane}"
            order = TRACK_ORDER.get(track, 10) * 100 + lane
            self.ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": name}})
            self.ev.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": t, "args": {"sort_index": order}})  # fmt: skip
        return self.tids[key]


def trace_events(results: list[Result], labels: list[str] | None = None) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    for ri, res in enumerate(results):
        sched = res.schedule
        label = labels[ri] if labels else sched.name
        pid_of = {g: ri * 1000 + g for g in sched.gpus}
        for g, pid in pid_of.items():
            ev.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{label}: GPU {g}"}})
            ev.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        tid = _Tracks(ev, pid_of)
        spans: dict[tuple[int, str], list[tuple[float, float, int]]] = {}
        span_names = []
        for g, track, name, ids in sched.meta.get("trace_spans", []):
            if g in pid_of and ids:
                s, e = min(res.start[i] for i in ids), max(res.end[i] for i in ids)
                spans.setdefault((g, track), []).append((s, e, len(span_names)))
                span_names.append(name)
        for (g, track), iv in spans.items():
            lanes = _lanes(iv)
            for s, e, k in iv:
                ev.append({"name": span_names[k], "cat": "span", "ph": "X", "ts": s * US, "dur": (e - s) * US,
                           "pid": pid_of[g], "tid": tid(g, track, lanes[k])})  # fmt: skip
        groups: dict[tuple[int, str], list[tuple[float, float, int]]] = {}
        for op in sched.ops:
            groups.setdefault((op.gpu, op.kind), []).append((res.start[op.id], res.end[op.id], op.id))
        for (g, kind), iv in sorted(
            groups.items(), key=lambda kv: (kv[0][0], TRACK_ORDER.get(kv[0][1], 10), kv[0][1])
        ):
            lanes = _lanes(iv)
            for s, e, i in iv:
                op = sched.ops[i]
                ev.append({"name": str(op.key), "cat": op.cat, "ph": "X", "ts": s * US, "dur": (e - s) * US,
                           "pid": pid_of[g], "tid": tid(g, kind, lanes[i]), "args": dict(op.traffic)})  # fmt: skip
        ev += _counters(res, pid_of)
    return ev


def _counter_name(kind: str, name: str) -> str:
    return f"HBM {name} GB/s" if kind == "hbm" else f"{name} GB/s"


def _counters(res: Result, pid_of: dict[int, int]) -> list[dict[str, Any]]:
    """Bandwidth counters (GB/s by traffic class) of HBM, links and ports; semaphore levels (units)."""
    ev: list[dict[str, Any]] = []
    sched = res.schedule
    resources = sched.resources
    first_pid = min(pid_of.values())
    cats: dict[int, set[str]] = {}
    prev: dict[int, dict[str, float]] = {}

    def emit(r: int, t: float, vals: dict[str, float]) -> None:
        rs = resources[r]
        args = {c: vals.get(c, 0.0) for c in sorted(cats[r])}
        if prev.get(r) == args:
            return
        prev[r] = args
        ev.append({"name": _counter_name(rs.kind, rs.name), "ph": "C", "ts": t * US,
                   "pid": pid_of.get(rs.gpu, first_pid), "args": args})  # fmt: skip

    for t0, _t1, snap in res.usage or []:
        now: dict[int, dict[str, float]] = {}
        for (r, cat), rate in snap.items():
            if resources[r].kind in ("hbm", "link", "port", "nic"):
                cats.setdefault(r, set()).add(cat)
                d = now.setdefault(r, {})
                d[cat] = d.get(cat, 0.0) + rate / 1e9
        for r in sorted(set(now) | set(prev)):
            emit(r, t0, now.get(r, {}))
    for r in sorted(prev):
        emit(r, res.makespan, {})
    for sname, levels in res.meta.get("semaphore_levels", {}).items():
        g = next((s.gpu for s in sched.semaphores if s.name == sname), None)
        for t, v in levels:
            ev.append({"name": f"{sname} units", "ph": "C", "ts": t * US, "pid": pid_of.get(g, first_pid),
                       "args": {"held": v}})  # fmt: skip
    return ev


def write_trace(
    path: str | Path, results: list[Result], labels: list[str] | None = None, other: dict | None = None
) -> int:
    """Write the trace JSON (``other``: extra ``otherData`` entries, e.g. provenance); returns the
    number of events."""
    ev = trace_events(results, labels)
    for e in ev:
        for k in ("ts", "dur"):
            if k in e and not math.isfinite(e[k]):
                raise ValueError(f"trace: non-finite {k} in event {e['name']}")
    doc = {"traceEvents": ev, "displayTimeUnit": "ns",
           "otherData": {"units": "ts/dur in microseconds", **(other or {})}}  # fmt: skip
    write_text(path, json.dumps(doc, separators=(",", ":")))
    return len(ev)
