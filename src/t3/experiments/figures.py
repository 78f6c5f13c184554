"""PNG figures of the T3 reproduction (matplotlib, Agg backend, deterministic bytes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from t3.experiments.reproduce_t3 import COMPARED, DRAM_CATS, figure_jobs, key  # noqa: E402
from t3.files import save_figure  # noqa: E402

COLORS = {
    "ideal-gemm-rs-overlap": "#9e9e9e",
    "ideal-rs-nmc": "#616161",
    "t3": "#64b5f6",
    "t3-mca": "#1565c0",
}
CAT_COLORS = {
    "gemm_read": "#1565c0", "gemm_write": "#64b5f6", "rs_read": "#e65100", "rs_write": "#ffb74d",
    "ag_read": "#2e7d32", "ag_write": "#81c784", "gemm": "#1565c0", "rs": "#e65100", "ag": "#2e7d32",
    "gemm read": "#1565c0", "gemm write": "#64b5f6", "rs read": "#e65100", "rs write": "#ffb74d",
    "ag read": "#2e7d32", "ag write": "#81c784",
}  # fmt: skip
SHORT = {"mega-gpt-2": "MG2", "t-nlg": "TNLG", "gpt-3": "GPT3", "palm": "PaLM", "mt-nlg": "MTNLG"}
META = {"Software": None}  # no version string in the PNG: same inputs -> same bytes


def _label(p: dict) -> str:
    return f"{SHORT.get(p['model'], p['model'])}-{p['tp']}\n{p['sublayer']}"


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata=META)
    plt.close(fig)
    return path.name


def speedup_bars(points: list[dict], path: Path, title: str, missing: list[str]) -> str:
    cfgs = [c for c in COMPARED if any(p["config"] == c for p in points)]
    base = [p for p in points if p["config"] == "sequential"]
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(base) + 2), 4))
    w = 0.8 / max(1, len(cfgs))
    for j, c in enumerate(cfgs):
        by = {(p["model"], p["tp"], p["sublayer"]): p["speedup"] for p in points if p["config"] == c}
        ys = [100 * by[(b["model"], b["tp"], b["sublayer"])] for b in base]
        ax.bar(
            [i + (j - (len(cfgs) - 1) / 2) * w for i in range(len(base))], ys, w, label=c, color=COLORS.get(c)
        )
    ax.set_xticks(range(len(base)), [_label(b) for b in base], fontsize=7)
    ax.set_ylabel("speedup over Sequential (%)")
    ax.axhline(0, color="black", lw=0.5)
    note = f" — NOT REGISTERED: {', '.join(missing)}" if missing else ""
    ax.set_title(title + note, fontsize=9)
    ax.legend(fontsize=7, ncol=len(cfgs))
    return _save(fig, path)


def dram_stacked(points: list[dict], path: Path, missing: list[str]) -> str:
    seq = [p for p in points if p["config"] == "sequential"]
    mca = {(p["model"], p["tp"], p["sublayer"]): p for p in points if p["config"] == "t3-mca"}
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(seq) + 2), 4))
    xs: list[float] = []
    heights: dict[str, list[float]] = {c: [] for c in DRAM_CATS}
    bottoms: dict[str, list[float]] = {c: [] for c in DRAM_CATS}
    for i, s in enumerate(seq):
        pair = [("S", s, i - 0.2)]
        k = (s["model"], s["tp"], s["sublayer"])
        if k in mca:
            pair.append(("T", mca[k], i + 0.2))
        tot0 = sum(s["dram_bytes"].values())
        for tag, p, x in pair:
            xs.append(x)
            bottom = 0.0
            for c in DRAM_CATS:
                v = p["dram_bytes"].get(c, 0.0) / tot0
                heights[c].append(v)
                bottoms[c].append(bottom)
                bottom += v
            ax.text(x, bottom + 0.01, tag, ha="center", fontsize=6)
    for c in DRAM_CATS if xs else ():  # one bar call per category: that segment of every stack at once
        ax.bar(xs, heights[c], 0.38, bottom=bottoms[c], color=CAT_COLORS[c], label=c)
    ax.set_xticks(range(len(seq)), [_label(p) for p in seq], fontsize=7)
    ax.set_ylabel("DRAM bytes / Sequential's total")
    t = "DRAM traffic per GPU: S = Sequential, T = T3-MCA"
    if "t3-mca" in missing:
        t += " — T3-MCA NOT REGISTERED (Sequential only)"
    ax.set_title(t, fontsize=9)
    ax.set_ylim(0, 1.22)
    ax.legend(fontsize=7, ncol=6, loc="upper center")
    return _save(fig, path)


def hbm_timeline(timelines: list[dict], path: Path, what: str) -> str:
    n = max(1, len(timelines))
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.2 * n + 0.6), squeeze=False)
    for ax, tl in zip(axes[:, 0], timelines, strict=False):
        series = tl["series_Bps"]
        nb = len(next(iter(series.values()))) if series else 0
        # bins are time averages: draw them as steps (bin start to bin end), not as a polyline
        xs = [i * tl["bin_s"] * 1e6 for i in range(nb + 1)]
        cats = sorted(series)
        ys = [[v / 1e9 for v in series[c]] + [series[c][-1] / 1e9] for c in cats]
        ax.stackplot(xs, *ys, labels=cats, step="post", colors=[CAT_COLORS.get(c, "#bdbdbd") for c in cats])
        ax.set_xlim(0, xs[-1] if xs else 1)
        ax.axhline(tl["capacity_Bps"] / 1e9, color="black", ls="--", lw=0.7, label="sustainable HBM")
        ax.set_title(f"{what}: {tl['config']} ({tl['time_s'] * 1e6:.0f} µs)", fontsize=9)
        ax.set_ylabel(f"HBM channel GB/s ({tl['bin_s'] * 1e6:.0f} µs bins)")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time (µs)")
    return _save(fig, path)


def end_to_end(e2e: dict[str, Any], path: Path) -> str:
    rows = [r for r in e2e["per_model"] if r["config"] == "t3-mca"] or [
        r for r in e2e["per_model"] if r["config"] == "ideal-gemm-rs-overlap"
    ]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    phases = ["training", "prompt_inference"]
    combos = sorted({(r["model"], r["tp"]) for r in rows})
    for j, ph in enumerate(phases):
        by = {(r["model"], r["tp"]): r for r in rows if r["phase"] == ph}
        xs = [i + (j - 0.5) * 0.4 for i in range(len(combos))]
        ys = [100 * by[c]["speedup"] for c in combos if c in by]
        err = [[100 * (by[c]["speedup"] - by[c]["speedup_range"][0]) for c in combos],
               [100 * (by[c]["speedup_range"][1] - by[c]["speedup"]) for c in combos]]  # fmt: skip
        ax.bar(xs, ys, 0.38, yerr=err, capsize=2, label=ph.replace("_", " "))
    ax.set_xticks(range(len(combos)), [f"{SHORT.get(m, m)} TP{tp}" for m, tp in combos], fontsize=8)
    ax.set_ylabel("end-to-end speedup (%)")
    cfg = rows[0]["config"] if rows else "none"
    ax.set_title(
        f"End-to-end (Amdahl) projection, {cfg}; error bars: attention 40-45 % of the layer time", fontsize=9
    )
    ax.legend(fontsize=8)
    return _save(fig, path)


def sensitivity(sweeps: list[dict], path: Path) -> str:
    n = max(1, len(sweeps))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, sw in zip(axes.flat, sweeps, strict=False):
        xs = [r["value"] for r in sw["rows"]]
        for c in COMPARED:
            k = key(c)
            pts = [(x, r.get(k, {}).get("geomean_speedup")) for x, r in zip(xs, sw["rows"], strict=True)]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                ax.plot(
                    [x for x, _ in pts], [100 * y for _, y in pts], marker="o", label=c, color=COLORS.get(c)
                )
            failed = [x for x, r in zip(xs, sw["rows"], strict=True) if r.get(k, {}).get("error")]
            for x in failed:
                ax.axvline(x, color=COLORS.get(c), ls=":", lw=0.8)
        if sw["field"] in ("tracker.entries", "tokens"):
            ax.set_xscale("log", base=2)
            # the values themselves (32, 64, ...) as tick labels: plain text, no mathtext powers
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(sw["label"], fontsize=8)
        ax.set_ylabel("geomean speedup (%)", fontsize=8)
        miss = f"\nnot registered: {', '.join(sw['missing'])}" if sw["missing"] else ""
        if any(v.get("error") for r in sw["rows"] for v in r.values() if isinstance(v, dict)):
            miss += "\ndotted: configuration fails at this value (see report)"
        ax.set_title(sw["name"] + miss, fontsize=8)
        if ax.lines:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(sweeps) :]:
        ax.axis("off")
    return _save(fig, path)


def _render(job: tuple[str, tuple]) -> str:
    name, args = job
    return globals()[name](*args)


def make_all(doc: dict[str, Any], out: Path, workers: int | None = 1) -> list[str]:
    """Every figure of the reproduction into ``out``; rendered on ``workers`` processes (same bytes)."""
    from t3.experiments.parallel import pmap

    names = pmap(_render, figure_jobs(doc, out), workers=workers, progress=False, chunksize=1)
    return sorted(names)
