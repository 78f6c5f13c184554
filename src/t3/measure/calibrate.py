"""``t3 calibrate --measured``: fit a preset's single-GPU parameters to rows of ``t3 measure``.

Each parameter comes from its own rows, by a closed form or a one-dimensional search through the
project's own predictors (``t3.api``), never by per-row factors. In order (each fit sees the ones
before it):

1. ``compute.kernel_launch_s``, ``compute.stream_wait_s``, ``compute.flag_latency_s``: the median of
   the ``latency`` rows of each kind (``api.latency`` charges the value itself);
2. ``hbm.efficiency``: the read stream's GB/s over ``hbm.bandwidth_Bps`` (median of the read rows on
   every CU); ``hbm.turnaround``: ``k = (read / copy - 1) / 0.5`` and ``(read / triad - 1) / (1/3)``
   (the memory model's ``1 / (1 + k min(w, 1 - w))`` at write shares 1/2 and 1/3), their mean;
3. ``compute.stream_inflight_bytes``: the bytes of loads one block of t3 measure's copy kernel keeps in
   flight (it loads a block, then stores it: latency-bound), the window at which ``api.memory_stream``'s
   copies on the k below saturation (total under ``SATURATION`` of the fastest copy measured) give the
   measured GB/s (median of predicted / measured - 1 = 0, by bisection). ``compute.cu_copy_Bps`` is not
   fitted: it is the collective library's kernels' rate per CU (NCCL's own constant, or a fit on
   collective rows), which one GPU's copy kernel does not measure;
4. ``compute.gemm_efficiency``: the value that minimises the median |error| of ``api.gemm``'s TFLOPS
   on the large BF16 GEMMs (``LARGE_WAVES`` waves of the preset's tile or more, K >= ``LARGE_K``);
5. ``compute.gemm_clock_hz.<dtype>`` for FP16 and FP8: the same search on that dtype's clock.

Errors before / after are median |predicted / measured - 1| over the rows used, through ``t3.api``
(``api.memory_stream`` for the HBM rows). Interference rows are not fitted: they are reported beside
the predictions of ``t3 validate``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t3 import api
from t3.config.hardware import Hardware
from t3.errors import ConfigError

from .rows import is_cpu_row

LARGE_WAVES = 4.0  # a GEMM is "large" at this many waves of the preset's macro-tile
LARGE_K = 1024
SATURATION = 0.75  # a copy on k blocks is below saturation under this share of the fastest copy
# B: the bracket of compute.stream_inflight_bytes' search, from a few lines per warp to more than a block's shared memory
STREAM_WINDOW_BOUNDS = (1e3, 1e6)
LATENCY_FIELDS = {"kernel_launch": "kernel_launch_s", "event_wait": "stream_wait_s", "flag": "flag_latency_s"}
CLOCK_DTYPES = ("fp16", "fp8", "tf32")


@dataclass
class Fit:
    """One fitted parameter."""

    path: str  # dotted path in the hardware (compute.gemm_clock_hz.fp8 for one dtype's clock)
    base: float
    value: float
    unit: str  # the unit the table shows (value / scale)
    scale: float
    rows: list[str]
    what: str  # the measurement, for the preset's comment
    before: float | None = None  # median |error| of the rows used, base preset
    after: float | None = None  # ... fitted preset
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"parameter": self.path, "base": self.base, "fitted": self.value, "unit_si": _si(self.path),
                "rows": self.rows, "what": self.what, "median_abs_error_before": self.before,
                "median_abs_error_after": self.after, "note": self.note}  # fmt: skip


@dataclass
class Calibration:
    base: Hardware
    fitted: Hardware
    fits: list[Fit]
    skipped: list[str] = field(default_factory=list)  # parameters not fitted, and why


def _si(path: str) -> str:
    if path.endswith("_s"):
        return "s"
    if path.endswith("_Bps"):
        return "B/s"
    if path.endswith("_bytes"):
        return "B"
    if ".gemm_clock_hz." in path:
        return "Hz"
    return "1"


def _median_abs(pairs: list[tuple[float, float]]) -> float:
    """Median |predicted / measured - 1| of (predicted, measured) pairs."""
    return statistics.median(abs(p / m - 1.0) for p, m in pairs)


def _set(hw: Hardware, path: str, value: float) -> Hardware:
    if ".gemm_clock_hz." in path:
        dtype = path.rsplit(".", 1)[1]
        clocks = dict(hw.compute.gemm_clock_hz or {})
        clocks[dtype] = value
        return hw.with_overrides({"compute.gemm_clock_hz": clocks})
    return hw.with_overrides({path: value})


def _get(hw: Hardware, path: str) -> float:
    if ".gemm_clock_hz." in path:
        return hw.compute.gemm_clock(path.rsplit(".", 1)[1])
    node: Any = hw
    for p in path.split("."):
        node = getattr(node, p)
    return float(node)


def search(f: Callable[[float], float], x0: float, lo: float, hi: float, rel: float = 1e-5) -> float:
    """The x in [lo, hi] that minimises f, searched near x0: a grid of 13 points over x0 / 1.3 ..
    x0 x 1.3 (moved while the best point is on an edge that is not a bound), then golden-section search
    between the best point's neighbours until the bracket is ``rel`` of x."""
    memo: dict[float, float] = {}

    def g(x: float) -> float:
        if x not in memo:
            memo[x] = f(x)
        return memo[x]

    x0 = min(max(x0, lo), hi)
    a, b = max(lo, x0 / 1.3), min(hi, x0 * 1.3)
    for _ in range(8):
        xs = [a + (b - a) * i / 12 for i in range(13)]
        i = min(range(13), key=lambda j: g(xs[j]))
        if i == 0 and a > lo:
            a, b = max(lo, a / 1.3), xs[1]
        elif i == 12 and b < hi:
            a, b = xs[11], min(hi, b * 1.3)
        else:
            break
    a, b = xs[max(i - 1, 0)], xs[min(i + 1, 12)]
    phi = (math.sqrt(5.0) - 1.0) / 2.0
    while b - a > rel * max(abs(a), abs(b), 1e-300):
        c, d = b - phi * (b - a), a + phi * (b - a)
        if g(c) <= g(d):
            b = d
        else:
            a = c
    return min(memo, key=lambda x: memo[x])


# ---- the fits ------------------------------------------------------------------------------------------
def _fit_latencies(rows: list[Any], hw: Hardware, cal: Calibration) -> Hardware:
    for what, fieldname in LATENCY_FIELDS.items():
        sel = [r for r in rows if r.category == "latency" and r.workload["what"] == what]
        path = f"compute.{fieldname}"
        if not sel:
            cal.skipped.append(f"{path}: no latency rows with what = {what}")
            continue
        value = statistics.median(r.measured for r in sel) * 1e-6
        base = _get(cal.base, path)
        meas = [r.measured * 1e-6 for r in sel]
        fit = Fit(
            path, base, value, "us", 1e-6, [r.id for r in sel], f"{what.replace('_', ' ')} latency (median)"
        )
        fit.before = statistics.median(abs(base / m - 1.0) for m in meas)
        hw = _set(hw, path, value)
        fit.after = statistics.median(abs(api.latency(what, hardware=hw)["time_s"] / m - 1.0) for m in meas)
        cal.fits.append(fit)
    return hw


def _stream_rows(rows: list[Any], stream: str, cus: bool = False) -> list[Any]:
    return [r for r in rows if r.category == "hbm_bandwidth" and r.workload["stream"] == stream
            and (r.workload["cus"] > 0) == cus]  # fmt: skip


def _stream_error(rows: list[Any], hw: Hardware) -> float:
    pairs = []
    for r in rows:
        w = r.workload
        pred = api.memory_stream(w["stream"], w["nbytes"], min(w["cus"], hw.compute.cus), hardware=hw)["Bps"]
        pairs.append((pred, r.measured * 1e9))
    return _median_abs(pairs)


def _stream_bias(rows: list[Any], hw: Hardware) -> float:
    """Median of predicted / measured - 1 over stream rows (signed)."""
    errs = []
    for r in rows:
        w = r.workload
        pred = api.memory_stream(w["stream"], w["nbytes"], min(w["cus"], hw.compute.cus), hardware=hw)["Bps"]
        errs.append(pred / (r.measured * 1e9) - 1.0)
    return statistics.median(errs)


def _root(f: Callable[[float], float], lo: float, hi: float, iters: int = 50) -> float:
    """The x in [lo, hi] where the monotone ``f`` crosses 0 (bisection; an end if it does not cross)."""
    flo, fhi = f(lo), f(hi)
    if flo * fhi > 0:
        return lo if abs(flo) < abs(fhi) else hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _fit_hbm(rows: list[Any], hw: Hardware, cal: Calibration) -> Hardware:
    read, copy, triad = (_stream_rows(rows, s) for s in ("read", "copy", "triad"))
    if not read:
        cal.skipped.append("hbm.efficiency, hbm.turnaround: no read-stream rows on every CU")
        return hw
    read_Bps = statistics.median(r.measured for r in read) * 1e9
    eff = read_Bps / hw.hbm.bandwidth_Bps
    # the closed form is exact for an open stream; a window-limited one (compute.cu_inflight_bytes) reaches
    # a little less at the loaded latency, so the value is refined until the predictor gives the median
    if eff < 1.0 and hw.compute.cu_inflight_bytes > 0:
        eff = _root(lambda e: _stream_bias(read, _set(hw, "hbm.efficiency", e)), eff, 1.0)
    fit = Fit("hbm.efficiency", cal.base.hbm.efficiency, min(eff, 1.0), "fraction", 1.0, [r.id for r in read],
              "the efficiency at which the model's read stream gives the median measured GB/s")  # fmt: skip
    if eff > 1.0:
        fit.note = f"read stream at {eff:.3f} of the datasheet peak: capped at 1"
    fit.before = _stream_error(read, cal.base)
    hw = _set(hw, "hbm.efficiency", fit.value)
    fit.after = _stream_error(read, hw)
    cal.fits.append(fit)
    ks, used = [], []
    for sel, share in ((copy, 0.5), (triad, 1.0 / 3.0)):
        if sel:
            ks.append((read_Bps / (statistics.median(r.measured for r in sel) * 1e9) - 1.0) / share)
            used += sel
    if not ks:
        cal.skipped.append("hbm.turnaround: no copy or triad rows on every CU")
        return hw
    k = statistics.fmean(ks)
    if k > 0 and hw.compute.cu_inflight_bytes > 0:  # refined through the predictor, as the efficiency
        k = _root(lambda x: _stream_bias(used, _set(hw, "hbm.turnaround", x)), 0.0, 2.0 * k + 0.1)
    fit = Fit("hbm.turnaround", cal.base.hbm.turnaround, max(k, 0.0), "1", 1.0, [r.id for r in read + used],
              "k at which the model's copy and triad streams give the measured GB/s (closed form for open"
              f" streams: (read/copy - 1)/0.5 and (read/triad - 1)/(1/3): {', '.join(f'{x:.3g}' for x in ks)})")  # fmt: skip
    if k < 0:
        fit.note = f"copy / triad faster than read (k = {k:.3g}): set to 0"
    fit.before = _stream_error(used, cal.base)
    hw = _set(hw, "hbm.turnaround", fit.value)
    fit.after = _stream_error(used, hw)
    cal.fits.append(fit)
    return hw


def _fit_stream_window(rows: list[Any], hw: Hardware, cal: Calibration) -> Hardware:
    path = "compute.stream_inflight_bytes"
    cal.skipped.append(
        "compute.cu_copy_Bps: the collective library's kernels' rate per CU (NCCL's constant or a fit on"
        " collective rows); t3 measure's copy kernel, latency-bound, does not measure it"
    )
    blocks = _stream_rows(rows, "copy", cus=True)
    if not blocks:
        cal.skipped.append(f"{path}: no copy rows on k blocks")
        return hw
    fastest = max(r.measured for r in blocks + _stream_rows(rows, "copy"))
    below = [r for r in blocks if r.measured < SATURATION * fastest]
    note = ""
    if not below:
        below = [min(blocks, key=lambda r: r.workload["cus"])]
        note = "every k saturates: the smallest k used"

    def bias(w: float) -> float:
        return _stream_bias(below, _set(hw, path, w))

    lo, hi = STREAM_WINDOW_BOUNDS
    value = _root(bias, lo, hi)
    if abs(bias(value)) > 0.01:
        note = "; ".join(filter(None, [note, f"at the search's bound ({100 * bias(value):+.1f} % left): the copies"
                                       " run at another limit (compute.cu_copy_Bps or the HBM)"]))  # fmt: skip
    ks = sorted({r.workload["cus"] for r in below})
    fit = Fit(path, _get(cal.base, path), value, "KB", 1e3, [r.id for r in below],
              f"loads one block of the copy kernel keeps in flight: the window at which api.memory_stream's copies"
              f" on k = {', '.join(map(str, ks))} blocks give the measured GB/s (median bias 0)", note=note)  # fmt: skip
    fit.before = _stream_error(below, cal.base)
    hw = _set(hw, path, value)
    fit.after = _stream_error(below, hw)
    cal.fits.append(fit)
    return hw


def large(r: Any, hw: Hardware) -> bool:
    """A GEMM of at least ``LARGE_WAVES`` waves of the preset's macro-tile and K >= ``LARGE_K``."""
    c, w = hw.compute, r.workload
    tiles = math.ceil(w["m"] / c.tile_m) * math.ceil(w["n"] / c.tile_n)
    return tiles / (c.cus * c.wg_per_cu) >= LARGE_WAVES and w["k"] >= LARGE_K


def _gemm_error(rows: list[Any], hw: Hardware) -> float:
    return _median_abs([(api.gemm(r.workload["m"], r.workload["n"], r.workload["k"], r.workload["dtype"],
                                  hardware=hw)["tflops"], r.measured) for r in rows])  # fmt: skip


def _fit_gemm(rows: list[Any], hw: Hardware, cal: Calibration, dtype: str) -> Hardware:
    path = "compute.gemm_efficiency" if dtype == "bf16" else f"compute.gemm_clock_hz.{dtype}"
    sel = [r for r in rows if r.category == "gemm_tflops" and r.workload["dtype"] == dtype and large(r, hw)]
    if not sel:
        if dtype == "bf16" or any(r.category == "gemm_tflops" and r.workload["dtype"] == dtype for r in rows):
            cal.skipped.append(
                f"{path}: no large {dtype} GEMM rows (>= {LARGE_WAVES:g} waves of {hw.compute.tile_m}x"
                f"{hw.compute.tile_n} tiles on {hw.compute.cus} CUs, K >= {LARGE_K})"
            )
        return hw
    if dtype not in hw.compute.matrix_flops_per_clk_per_cu:
        cal.skipped.append(f"{path}: '{hw.name}' has no matrix rate for {dtype}")
        return hw
    x0 = _get(hw, path)
    ratio = statistics.median(r.measured / api.gemm(r.workload["m"], r.workload["n"], r.workload["k"], dtype,
                                                    hardware=hw)["tflops"] for r in sel)  # fmt: skip
    if dtype == "bf16":
        lo, hi, unit, scale = 1e-4, 1.0, "fraction", 1.0
    else:
        lo, hi, unit, scale = 1e-3 * hw.compute.clock_hz, 2.0 * hw.compute.clock_hz, "GHz", 1e9
    value = search(lambda x: _gemm_error(sel, _set(hw, path, x)), x0 * ratio, lo, hi)
    shapes = ", ".join(f"{r.workload['m']}x{r.workload['n']}x{r.workload['k']}" for r in sel)
    fit = Fit(path, _get(cal.base, path), value, unit, scale, [r.id for r in sel],
              f"{dtype} GEMM TFLOPS of {shapes}, 1-D search on api.gemm minimising the median |error|")  # fmt: skip
    if value <= lo * 1.0001 or value >= hi * 0.9999:
        fit.note = "at the search's bound"
    fit.before = _gemm_error(sel, cal.base)
    hw = _set(hw, path, value)
    fit.after = _gemm_error(sel, hw)
    cal.fits.append(fit)
    return hw


def calibrate(rows: list[Any], base: Hardware) -> Calibration:
    """Fit every single-GPU parameter the rows allow (see the module's docstring)."""
    cal = Calibration(base, base, [])
    hw = _fit_latencies(rows, base, cal)
    hw = _fit_hbm(rows, hw, cal)
    hw = _fit_stream_window(rows, hw, cal)
    hw = _fit_gemm(rows, hw, cal, "bf16")
    for dtype in CLOCK_DTYPES:
        hw = _fit_gemm(rows, hw, cal, dtype)
    cal.fitted = hw
    return cal


# ---- input and output ----------------------------------------------------------------------------------
def load_measured(measured: Path, allow_cpu: bool) -> tuple[Path, list[Any]]:
    """The rows of ``measured`` (a ``t3 measure`` directory, or its measured.toml), checked."""
    from t3.validation import load_dataset

    p = Path(measured)
    if not p.exists():
        raise ConfigError(f"--measured: '{p}' not found (t3 measure --out DIR writes DIR/measured.toml)")
    f = p / "measured.toml" if p.is_dir() else p
    if not f.is_file():
        raise ConfigError(f"--measured: '{f}' not found (t3 measure --out {p} writes it)")
    rows = load_dataset([f])
    if not rows:
        raise ConfigError(f"--measured: no rows in '{f}'")
    cpu = [r for r in rows if is_cpu_row(r)]
    if cpu and not allow_cpu:
        raise ConfigError(
            f"--measured: {len(cpu)} of the {len(rows)} rows of '{f}' were measured on the CPU (plumbing runs, not"
            f" GPU data, e.g. '{cpu[0].id}'); pass --allow-cpu to fit them anyway"
        )
    if allow_cpu and not cpu:
        raise ConfigError(
            f"--allow-cpu: no row of '{f}' was measured on the CPU (it has no effect on GPU rows: leave it out)"
        )
    return f, rows


def base_text(base: str) -> tuple[str, str]:
    """The base preset's TOML text and its name (a preset name, or a path to a TOML file)."""
    from importlib import resources

    from t3.config.hardware import preset_names
    from t3.config.toml_file import parse_toml, read_text

    p = Path(base)
    if base.endswith(".toml") and p.is_file():
        text, name = read_text(p, "--base"), p.stem
    elif base not in preset_names():
        raise ConfigError(f"--base: unknown preset '{base}' (available: {', '.join(preset_names())})")
    else:
        text, name = (
            resources.files("t3.config").joinpath("presets", f"{base}.toml").read_text(encoding="utf-8"),
            base,
        )
    parent = parse_toml(text, f"--base '{base}'").get("base")
    if parent is not None:
        raise ConfigError(
            f"--base: '{base}' builds on '{parent}' (its 'base' key: it adds nodes or overrides to that preset);"
            f" calibrate the single-node preset it builds on (--base {parent}): the calibrated values are one"
            " GPU's"
        )
    return text, name


def edits(cal: Calibration, gpu: str, date: str) -> list[Any]:
    """The preset lines to change: one per fitted field (per-dtype clocks share their inline table)."""
    from .preset import Edit

    out, clocks = [], []
    for f in cal.fits:
        comment = (f"measured by t3 measure on {gpu} ({date}): {f.what}, {_rows(len(f.rows))},"
                   " fitted by t3 calibrate --measured")  # fmt: skip
        if ".gemm_clock_hz." in f.path:
            clocks.append(f)
            continue
        section, key = f.path.split(".", 1)
        out.append(Edit(section, key, f.value, comment))
    if clocks:
        table = dict(cal.fitted.compute.gemm_clock_hz or {})
        names = ", ".join(f.path.rsplit(".", 1)[1] for f in clocks)
        n = sum(len(f.rows) for f in clocks)
        comment = (f"{names}: measured by t3 measure on {gpu} ({date}): GEMM TFLOPS, 1-D search on api.gemm, {_rows(n)},"
                   f" fitted by t3 calibrate --measured; other dtypes as in the base preset")  # fmt: skip
        out.append(Edit("compute", "gemm_clock_hz", table, comment))
    return out


def _rows(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")
