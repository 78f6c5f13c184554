"""Predicted-vs-measured figures of ``t3 validate --plot`` (matplotlib, Agg, deterministic bytes)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from t3.errors import ConfigError  # noqa: E402
from t3.files import save_figure  # noqa: E402
from t3.validation.conventions import ABSOLUTE_ERROR, QUANTITY  # noqa: E402
from t3.validation.dataset import CATEGORIES  # noqa: E402
from t3.validation.regimes import band_key, bands  # noqa: E402
from t3.validation.runner import Outcome  # noqa: E402

META = {"Software": None}  # no version string in the PNG: same inputs -> same bytes
COLORS = {
    "h100-8": "#2e7d32", "h200-8": "#00838f", "mi300x-8": "#c62828", "mi325x-8": "#ad1457", "mi355x-8": "#6d4c41",
    "b200-8": "#1565c0", "gb200-nvl72": "#6a1b9a", "h100-2x8": "#9e9d24", "h100-16x8": "#ef6c00",
    "h200-4x8": "#00695c", "b200-4x8": "#283593",
}  # fmt: skip
MARKERS = {"calibration": "o", "validation": "^"}
BAND_COLORS = ("#1565c0", "#ef6c00", "#6a1b9a", "#2e7d32", "#c62828")  # a band's colour, in band order
BAND = 0.10  # the +-10 % band drawn around y = x
BAND_POINTS = 5.0  # categories compared in points (a slowdown in %): a +-5 point band, linear axes


def write_plots(outcomes: list[Outcome], folder: Path) -> list[str]:
    """One log-log PNG per category present (``validate-<category>.png``); returns the paths written."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"plot: '{folder}' exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for cat in CATEGORIES:
        os_ = [o for o in outcomes if o.row.category == cat]
        if os_:
            path = folder / f"validate-{cat}.png"
            _plot(cat, os_, path)
            written.append(str(path))
    return written


def _plot(cat: str, os_: list[Outcome], path: Path) -> None:
    """Left: every row by hardware and role. Right, where the category has size bands
    (:mod:`t3.validation.regimes`): the same rows coloured by their band on the first axis."""
    linear = cat in ABSOLUTE_ERROR
    vals = [v for o in os_ for v in (o.measured, o.predicted)]
    if linear:
        span = max(max(vals) - min(vals), 4 * BAND_POINTS)
        lo, hi = min(vals) - 0.2 * span, max(vals) + 0.2 * span
    else:
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
    axis = next(iter(bands(os_[0])), None)
    fig, axes = plt.subplots(1, 2 if axis else 1, figsize=(11.2 if axis else 5.6, 5.0), squeeze=False)
    ax = axes[0][0]
    _frame(ax, cat, os_, lo, hi, linear)
    seen = set()
    for o in os_:
        key = (o.row.hardware, o.row.role)
        color = COLORS.get(o.row.hardware, "#1565c0")
        ax.scatter(
            [o.measured], [o.predicted], marker=MARKERS[o.row.role], s=28, linewidths=1,
            edgecolors=color, facecolors="none" if o.row.role == "validation" else color,
            label=None if key in seen else f"{o.row.hardware}, {o.row.role}",
        )  # fmt: skip
        seen.add(key)
    ax.legend(fontsize=7, loc="upper left")
    if axis:
        ax = axes[0][1]
        _frame(ax, cat, os_, lo, hi, linear)
        names = sorted({bands(o)[axis] for o in os_}, key=lambda b: band_key(axis, b))
        seen = set()
        for o in os_:
            b = bands(o)[axis]
            color = BAND_COLORS[names.index(b) % len(BAND_COLORS)]
            ax.scatter(
                [o.measured], [o.predicted], marker=MARKERS[o.row.role], s=28, linewidths=1, edgecolors=color,
                facecolors="none" if o.row.role == "validation" else color,
                label=None if (b, o.row.role) in seen else f"{axis} {b}, {o.row.role}",
            )  # fmt: skip
            seen.add((b, o.row.role))
        ax.set_title(f"{QUANTITY[cat]}: by {axis}")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    save_figure(fig, path, dpi=110, metadata=META)
    plt.close(fig)


def _frame(ax, cat: str, os_: list[Outcome], lo: float, hi: float, linear: bool) -> None:
    """Axes, limits, the y = x line and the error band of one panel."""
    unit = os_[0].unit
    xs = [lo, hi]
    if linear:
        ax.fill_between(xs, [x - BAND_POINTS for x in xs], [x + BAND_POINTS for x in xs], color="#e0e0e0",
                        label=f"±{BAND_POINTS:.0f} points")  # fmt: skip
    else:
        ax.fill_between(xs, [x * (1 - BAND) for x in xs], [x * (1 + BAND) for x in xs], color="#e0e0e0",
                        label=f"±{BAND * 100:.0f} %")  # fmt: skip
    ax.plot(xs, xs, color="#616161", linewidth=1, label="predicted = measured")
    if not linear:
        ax.set_xscale("log")
        ax.set_yscale("log")
        # 1-2-5 ticks per decade; one per decade where the range spans more than four (their labels would overlap)
        subs = (1.0,) if hi / lo > 1e4 else (1.0, 2.0, 5.0)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    ax.set_title(f"{QUANTITY[cat]}: {len(os_)} rows")
    ax.grid(True, which="both", linewidth=0.3)
