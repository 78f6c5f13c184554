"""Errors by regime: each row's size band (and the other axes a user sizes by), and the error summary
per band, so that a user can see where the model holds for their sizes (``t3 validate``'s third
table, ``docs/validation.md``).

Axes per category (bands in order; a row falls in exactly one band of each of its axes):

- collectives (``collective_busbw``): ``size`` of the message (nccl-tests' size: < 1 MiB, 1-128 MiB,
  > 128 MiB), ``timing`` (``device``: the kernel; ``host``: the call as a user times it) and ``gpus``;
- GEMMs (``gemm_tflops``): ``waves`` (output tiles per wave of the chosen kernel: < 1, 1-4, > 4),
  ``K`` (<= 1024, > 1024: the loop a tile runs) and ``dtype``;
- interference rows: ``size`` of the concurrent communication (as collectives).

The other categories have no size axis here; the per-category table covers them.
"""

from __future__ import annotations

import statistics
from typing import Any

from t3.validation.dataset import CATEGORIES, ROLES
from t3.validation.runner import Outcome

MIB = 1 << 20
SIZE_BANDS = ("< 1 MiB", "1-128 MiB", "> 128 MiB")
WAVE_BANDS = ("< 1 wave", "1-4 waves", "> 4 waves")
K_BANDS = ("K <= 1024", "K > 1024")
TIMING_BANDS = ("device", "host", "call")


def size_band(nbytes: float) -> str:
    """``< 1 MiB``, ``1-128 MiB`` (both ends included) or ``> 128 MiB``."""
    if nbytes < MIB:
        return SIZE_BANDS[0]
    return SIZE_BANDS[1] if nbytes <= 128 * MIB else SIZE_BANDS[2]


def wave_band(tiles: int, wave_size: int) -> str:
    """Output tiles per wave: ``< 1 wave`` (CUs left idle), ``1-4 waves`` or ``> 4 waves``."""
    if tiles < wave_size:
        return WAVE_BANDS[0]
    return WAVE_BANDS[1] if tiles <= 4 * wave_size else WAVE_BANDS[2]


def bands(o: Outcome) -> dict[str, str]:
    """The row's band on each axis of its category (empty: no axis for the category)."""
    w, cat = o.row.workload, o.row.category
    if cat == "collective_busbw":
        return {"size": size_band(w["nbytes"]), "timing": w["timing"], "gpus": f"{w['gpus']} GPUs"}
    if cat == "gemm_tflops":
        return {
            "waves": wave_band(o.detail["tiles"], o.detail["wave_size"]),
            "K": K_BANDS[0] if w["k"] <= 1024 else K_BANDS[1],
            "dtype": w["dtype"],
        }
    if cat == "interference":
        return {"size": size_band(w["nbytes"])}
    return {}


def band_key(axis: str, band: str) -> tuple:
    """Sort key of a band on its axis: the fixed bands in size order, GPU counts by number, the
    others (dtypes) by name."""
    for fixed in (SIZE_BANDS, WAVE_BANDS, K_BANDS, TIMING_BANDS):
        if band in fixed:
            return (0, fixed.index(band), "")
    if axis == "gpus":
        return (0, int(band.split()[0]), "")
    return (1, 0, band)


def summarize_bands(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Median and max |error| per (category, axis, band, role), with the worst row; categories in the
    dataset's order, axes as :func:`bands` lists them, bands in size order, calibration before
    validation. A size, wave or K band no row falls in is listed with 0 rows (role ``-``, no error)."""
    groups: dict[tuple[str, str, str, str], list[Outcome]] = {}
    axes: dict[str, list[str]] = {}
    for o in outcomes:
        for axis, band in bands(o).items():
            groups.setdefault((o.row.category, axis, band, o.row.role), []).append(o)
            seen = axes.setdefault(o.row.category, [])
            if axis not in seen:
                seen.append(axis)
    out = []
    for cat in CATEGORIES:
        for axis in axes.get(cat, []):
            keys = [k for k in groups if k[0] == cat and k[1] == axis]
            have = {k[2] for k in keys}
            fixed = next((f for f in (SIZE_BANDS, WAVE_BANDS, K_BANDS) if have & set(f)), ())
            keys += [(cat, axis, band, "-") for band in fixed if band not in have]  # no evidence there
            keys.sort(key=lambda k: (band_key(axis, k[2]), ROLES.index(k[3]) if k[3] in ROLES else -1))
            for k in keys:
                os_ = groups.get(k, [])
                if not os_:
                    out.append({
                        "category": cat, "axis": axis, "band": k[2], "role": "-", "rows": 0,
                        "median_abs_error": None, "max_abs_error": None, "worst": None,
                    })  # fmt: skip
                    continue
                errs = [abs(o.error) for o in os_]
                worst = max(os_, key=lambda o: (abs(o.error), o.row.id))
                out.append({
                    "category": cat, "axis": axis, "band": k[2], "role": k[3], "rows": len(os_),
                    "median_abs_error": statistics.median(errs), "max_abs_error": max(errs),
                    "worst": worst.row.id,
                })  # fmt: skip
    return out
