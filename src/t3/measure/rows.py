"""The row writer: measurements as dataset rows (``[[row]]`` TOML tables, ``docs/validation.md``).

Each row is appended to ``measured.toml`` as soon as it is measured (a crash keeps what was written)
and, where ``t3`` is importable, checked by the dataset's own loader first. Numbers are written with 6
significant digits; ``time_us`` / ``median_us`` are the medians of the samples, ``p10_us`` / ``p90_us``
their 10th and 90th percentiles, ``samples`` their count; ``measured`` is derived from the medians
written (so the loader's consistency checks hold exactly).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compat import MEASURED_SOURCE, parse_rows
from .timing import stats

TOP = ("id", "category", "role", "hardware", "measured", "unit", "source", "locator", "conventions")
CPU_MARK = "CPU plumbing run (not GPU data): "


def sig(x: float, digits: int = 6) -> float:
    """``x`` rounded to ``digits`` significant digits."""
    return float(f"{x:.{digits}g}")


def is_cpu_row(row: Any) -> bool:
    """A row the kit measured on the CPU (never GPU data): its device says so."""
    dev = getattr(row, "device", None) or {}
    return dev.get("gpu", "").startswith("CPU") or dev.get("runtime", "").startswith("CPU")


@dataclass
class RowContext:
    """What every row of one run shares."""

    tag: str  # id prefix, unique per run
    hardware: str  # the preset the GPU corresponds to
    device: dict[str, str]  # the [row.device] table
    run_label: str  # locator prefix: "t3 measure run <date>"
    cpu: bool = False
    numbers: dict[str, int] = field(default_factory=dict)  # rows so far per suite (for locators)

    def row(self, suite: str, rid: str, category: str, measured: float, unit: str, workload: dict[str, Any],
            published: dict[str, float], conventions: str) -> dict[str, Any]:  # fmt: skip
        self.numbers[suite] = self.numbers.get(suite, 0) + 1
        return {
            "id": f"{self.tag}-{rid}",
            "category": category,
            "role": "calibration",
            "hardware": self.hardware,
            "measured": measured,
            "unit": unit,
            "source": f"{MEASURED_SOURCE}, {self.device['gpu']}",
            "locator": f"{self.run_label}, {suite} row {self.numbers[suite]}",
            "conventions": (CPU_MARK if self.cpu else "") + conventions,
            "workload": workload,
            "published": published,
            "device": dict(self.device),
        }


def _spread(samples: Sequence[float], prefix: str = "") -> tuple[float, dict[str, float]]:
    st = stats(samples)
    med = sig(st.median * 1e6)
    return med, {f"{prefix}p10_us": sig(st.p10 * 1e6), f"{prefix}p90_us": sig(st.p90 * 1e6)}


def gemm_row(ctx: RowContext, m: int, n: int, k: int, dtype: str, samples: Sequence[float],
             conventions: str) -> dict[str, Any]:  # fmt: skip
    """TFLOPS = 2 M N K / median time."""
    med, spread = _spread(samples)
    tflops = sig(2.0 * m * n * k / (med * 1e-6) / 1e12)
    pub = {"time_us": med, **spread, "samples": float(len(samples))}
    return ctx.row("gemm grid", f"gemm-{dtype}-{m}x{n}x{k}", "gemm_tflops", tflops, "TFLOPS",
                   {"m": m, "n": n, "k": k, "dtype": dtype}, pub, conventions)  # fmt: skip


def hbm_row(ctx: RowContext, stream: str, nbytes: int, cus: int, samples: Sequence[float],
            conventions: str) -> dict[str, Any]:  # fmt: skip
    """GB/s = bytes read + written by one pass / median time."""
    med, spread = _spread(samples)
    gbps = sig(nbytes / (med * 1e-6) / 1e9)
    pub = {"median_us": med, **spread, "samples": float(len(samples))}
    rid = f"hbm-{stream}-{_size(nbytes)}" + (f"-cus{cus}" if cus else "")
    return ctx.row("hbm", rid, "hbm_bandwidth", gbps, "GB/s", {"stream": stream, "nbytes": nbytes, "cus": cus},
                   pub, conventions)  # fmt: skip


def latency_row(ctx: RowContext, what: str, samples: Sequence[float], extra: dict[str, float],
                conventions: str) -> dict[str, Any]:  # fmt: skip
    """The median of the samples, in microseconds (``extra``: other numbers of the same measurement)."""
    med, spread = _spread(samples)
    pub = {
        "median_us": med,
        **spread,
        "samples": float(len(samples)),
        **{k: sig(v) for k, v in extra.items()},
    }
    return ctx.row("latency", f"latency-{what}", "latency", med, "us", {"what": what}, pub, conventions)


def interference_rows(ctx: RowContext, rid: str, workload: dict[str, Any],
                      series: list[tuple[str, Sequence[float], Sequence[float], str]],
                      extra: dict[str, float]) -> list[dict[str, Any]]:  # fmt: skip
    """One row per ``(victim, alone samples, together samples, conventions)`` of ``series``: the GEMM's
    slowdown (victim = compute), the interferer's own (comm), or the pair launched together against the
    two one after the other (pair), each 100 x (median together / median alone - 1) in per cent."""
    out = []
    for who, alone, together, conv in series:
        a, a_spread = _spread(alone, "alone_")
        t, t_spread = _spread(together, "together_")
        pub = {"alone_us": a, "together_us": t, **a_spread, **t_spread, "samples_alone": float(len(alone)),
               "samples_together": float(len(together)), **{k: sig(v) for k, v in extra.items()}}  # fmt: skip
        pct = round(100.0 * (t / a - 1.0), 4)
        out.append(ctx.row("interference", f"intf-{who}-{rid}", "interference", pct, "%",
                           {"victim": who, **workload}, pub, conv))  # fmt: skip
    return out


def _size(nbytes: int) -> str:
    for unit, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= b and nbytes % b == 0:
            return f"{nbytes // b}{unit}"
    return f"{nbytes}B"


size_label = _size


# ---- TOML ----------------------------------------------------------------------------------------------
def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def row_toml(row: dict[str, Any]) -> str:
    """One ``[[row]]`` table, fields in the dataset's order, sub-tables workload, published, device."""
    lines = ["[[row]]"] + [f"{k} = {_value(row[k])}" for k in TOP]
    for sub in ("workload", "published", "device"):
        if row.get(sub):
            lines.append(f"[row.{sub}]")
            lines += [f"{k} = {_value(v)}" for k, v in row[sub].items()]
    return "\n".join(lines) + "\n"


class RowWriter:
    """Appends rows to one TOML file as they come (each checked first where ``t3`` is importable)."""

    def __init__(self, path: Path, header: str) -> None:
        self.path = Path(path)
        self.ids: set[str] = set()
        self.rows: list[dict[str, Any]] = []
        self.path.write_text("".join(f"# {ln}\n" if ln else "#\n" for ln in header.splitlines()))

    def write(self, row: dict[str, Any]) -> None:
        if row["id"] in self.ids:
            raise ValueError(f"row id {row['id']!r} written twice")
        text = row_toml(row)
        if parse_rows is not None:
            parse_rows(text, self.path.name)  # the dataset's loader: a malformed row is a bug here
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("\n" + text)
            f.flush()
            os.fsync(f.fileno())
        self.ids.add(row["id"])
        self.rows.append(row)
