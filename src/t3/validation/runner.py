"""Run dataset rows through the public prediction API and summarise the errors.

Each row is predicted by ``t3.api`` alone (:func:`predict`): a collective by ``collective``, a GEMM by
``gemm``, an overlap speed-up by two ``overlap`` calls (baseline schedule / fused schedule), an overlap
time by one. The relative error is ``predicted / measured - 1`` in the category's compared unit
(:mod:`t3.validation.conventions`). Nothing here is fitted.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from t3 import api
from t3.config.hardware import load_hardware
from t3.errors import T3Error
from t3.validation.conventions import ABSOLUTE_ERROR, COMPARED_UNIT, measured_compared
from t3.validation.dataset import CATEGORIES, MEASURED_SOURCE, ROLES, DatasetError, Row


@dataclass(frozen=True)
class Outcome:
    """One row with its prediction (both in the category's compared unit)."""

    row: Row
    measured: float
    predicted: float
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return COMPARED_UNIT[self.row.category]

    @property
    def error(self) -> float:
        """Relative error, predicted / measured - 1 (signed); for a slowdown in per cent (ABSOLUTE_ERROR)
        the difference in points, as a fraction (predicted - measured) / 100, so that x 100 reads in
        percentage points."""
        if self.row.category in ABSOLUTE_ERROR:
            return (self.predicted - self.measured) / 100.0
        return self.predicted / self.measured - 1.0

    @property
    def sign_right(self) -> bool | None:
        """Overlap speed-up rows: do prediction and measurement agree on gain (> 1) or loss (< 1)?"""
        if self.row.category != "overlap_speedup":
            return None
        return _sign(self.predicted) == _sign(self.measured)

    def as_dict(self) -> dict[str, Any]:
        r = self.row
        d = {
            "id": r.id, "category": r.category, "role": r.role, "hardware": r.hardware,
            "workload": dict(r.workload), "unit": self.unit, "measured": self.measured,
            "predicted": self.predicted, "error": self.error, "abs_error": abs(self.error),
        }  # fmt: skip
        if self.sign_right is not None:
            d["sign_right"] = self.sign_right
        d["detail"] = dict(self.detail)
        d["published"] = {"value": r.measured, "unit": r.unit, "source": r.source, "locator": r.locator}
        return d


def collective_compared_s(r: dict[str, Any], timing: str) -> float:
    """The time of a :func:`t3.api.collective` result that a row of ``timing`` is compared with: the kernel
    (``device``), the back-to-back call (``host``) or one call timed alone (``call``)."""
    return {"device": r["device_s"], "host": r["time_s"], "call": r["alone_s"]}[timing]


def _sign(ratio: float) -> int:
    return (ratio > 1.0) - (ratio < 1.0)


class Predictor:
    """Predicts rows through ``t3.api``, remembering each distinct call (rows share baselines).
    ``overrides``: dotted preset values applied to every row's preset (a calibration script's grid point,
    e.g. ``{"collective.nvls_loop_s": 4.8e-6}``); the rows are then predicted exactly as ``t3 validate``
    predicts them, on the overridden presets."""

    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self._memo: dict[tuple, dict[str, Any]] = {}
        self._overrides = dict(overrides or {})
        self._hardware: dict[str, Any] = {}

    def _preset(self, name: str) -> Any:
        """The preset ``name`` as this predictor's calls see it (its overrides applied), read once."""
        if name not in self._hardware:
            self._hardware[name] = load_hardware(name, self._overrides)
        return self._hardware[name]

    def _call(self, fn: Callable[..., dict[str, Any]], **kw: Any) -> dict[str, Any]:
        key = (fn.__name__, tuple(sorted(kw.items())))  # (the preset's name: one overrides per Predictor)
        if key not in self._memo:
            if self._overrides:
                kw["hardware"] = self._preset(kw["hardware"])
            self._memo[key] = fn(**kw)
        return self._memo[key]

    def predict(self, row: Row) -> Outcome:
        w, hw = row.workload, row.hardware
        if row.category == "collective_busbw":
            r = self._call(api.collective, op=w["op"], nbytes=w["nbytes"], gpus=w["gpus"], hardware=hw,
                           algo=w["algo"], gpus_per_thread=w["gpus_per_thread"])  # fmt: skip
            # a kernel's device time has no launch in it, a call timed alone holds the host's path and the
            # wait for the last rank: compare like with like
            if w["timing"] == "call" and not r["terms"]["call_alone_s"]:
                raise DatasetError(
                    f"{row.id}: workload.timing: 'call' needs collective.call_alone_s on hardware '{hw}' (it is 0:"
                    " a call timed alone after a barrier is not modelled there)"
                )
            t = collective_compared_s(r, w["timing"])
            return Outcome(row, measured_compared(row), r["busbw_Bps"] * r["time_s"] / t / 1e9,
                           {"algo": r["algo"], "time_s": t, "call_s": r["time_s"], "device_s": r["device_s"],
                            "terms": r["terms"]})  # fmt: skip
        if row.category == "gemm_tflops":
            r = self._call(
                api.gemm,
                m=w["m"],
                n=w["n"],
                k=w["k"],
                dtype=w["dtype"],
                hardware=hw,
                loop=w["loop"],
                out_dtype=w["out_dtype"] or None,
            )
            detail = {k: v for k, v in r.items() if k not in ("m", "n", "k", "dtype", "hardware", "tflops")}
            # a kernel's device time has no launch in it; in a CUDA graph each kernel (a split-K plan's two)
            # costs the device's gap to the next instead of the host's launch: compare like with like
            t = r["time_s"]
            if w["timing"] == "device":
                t -= r["launch_s"]
            elif w["timing"] == "graph":
                gap = self._preset(hw).compute.graph_launch_s
                if gap is None:
                    raise DatasetError(
                        f"{row.id}: workload.timing: 'graph' needs compute.graph_launch_s on hardware '{hw}'"
                        " (unset: the device's gap between kernels replayed in a CUDA graph is not known there)"
                    )
                t = t - r["launch_s"] + r["kernels"] * gap
            detail["compared_s"] = t
            return Outcome(row, measured_compared(row), r["tflops"] * r["time_s"] / t, detail)
        if row.category == "interference":
            if not_beside(row):
                raise DatasetError(
                    f"{row.id}: no call of the interferer ran beside the GEMM: every unit of it counted, none"
                    " wholly inside the GEMM's span (t3 measure took such rows from the interferer's calls outside"
                    " the span until 2026-11-29): not a slowdown beside the GEMM"
                )
            kw = {k: w[k] for k in ("m", "n", "k", "dtype", "comm", "nbytes", "gpus", "cus", "algo",
                                    "arrangement", "executor", "channels")}  # fmt: skip
            r = self._call(api.interference, **kw, lead_s=w["lead_us"] * 1e-6, first=w["first"], hardware=hw)
            pct = {"compute": "gemm_slowdown_pct", "comm": "comm_slowdown_pct", "pair": "pair_slowdown_pct"}
            detail = {k: r[k] for k in ("algo", "gemm_alone_s", "gemm_together_s", "comm_alone_s",
                                        "comm_together_s", "pair_together_s") if k in r}  # fmt: skip
            return Outcome(row, measured_compared(row), r[pct[w["victim"]]], detail)
        if row.category == "hbm_bandwidth":
            r = self._call(
                api.memory_stream, stream=w["stream"], nbytes=w["nbytes"], cus=w["cus"], hardware=hw
            )
            return Outcome(row, measured_compared(row), r["Bps"] / 1e9, {"time_s": r["time_s"]})
        if row.category == "latency":
            r = self._call(api.latency, what=w["what"], hardware=hw)
            return Outcome(row, measured_compared(row), r["time_s"] * 1e6, {"time_s": r["time_s"]})
        shape = {k: w[k] for k in ("op", "m", "n", "k", "gpus", "dtype")}
        fused = self._call(api.overlap, **shape, hardware=hw, schedule=w["schedule"])
        parts = {k: fused[k] for k in ("gemm_alone_s", "comm_alone_s", "contention_s", "decomposition_s")}
        if row.category == "overlap_time":
            return Outcome(row, measured_compared(row), fused["time_s"] * 1e3,
                           {"schedule": fused["schedule"], "time_s": fused["time_s"], **parts})  # fmt: skip
        base = self._call(api.overlap, **shape, hardware=hw, schedule=w["baseline"])
        return Outcome(
            row, measured_compared(row), base["time_s"] / fused["time_s"],
            {"baseline": base["schedule"], "baseline_s": base["time_s"], "schedule": fused["schedule"],
             "fused_s": fused["time_s"], **parts},
        )  # fmt: skip


def not_beside(row: Row) -> bool:
    """A ``t3 measure`` background row of the interferer's own slowdown (victim = comm) taken on a GPU in
    which none of its units lay wholly inside the GEMM's span: every unit counted (``samples_together`` >=
    ``units``), so its value is the interferer's calls apart from the GEMM (the kit fell back to them; it
    now writes no such row). Published rows and CPU rows are never this."""
    from t3.measure.rows import is_cpu_row  # (here: t3.measure's compat module imports t3.validation)

    w, pub = row.workload, row.published
    return (
        row.category == "interference" and w.get("arrangement") == "background" and w.get("victim") == "comm"
        and row.source.startswith(MEASURED_SOURCE) and not is_cpu_row(row)
        and "units" in pub and pub.get("samples_together", 0.0) >= pub["units"]
    )  # fmt: skip


def select(
    rows: Iterable[Row], role: str | None = None, category: str | None = None, hardware: str | None = None
) -> list[Row]:
    """Rows matching every given filter (checked: an unknown value is an error naming the option)."""
    rows = list(rows)
    if role is not None and role not in ROLES:
        raise DatasetError(f"role: unknown role '{role}' (available: {', '.join(ROLES)})")
    if category is not None and category not in CATEGORIES:
        raise DatasetError(f"category: unknown category '{category}' (available: {', '.join(CATEGORIES)})")
    if hardware is not None:
        have = sorted({r.hardware for r in rows})
        if hardware not in have:
            raise DatasetError(f"hardware: no rows for '{hardware}' (rows exist for: {', '.join(have)})")
    return [
        r for r in rows
        if (role is None or r.role == role) and (category is None or r.category == category)
        and (hardware is None or r.hardware == hardware)
    ]  # fmt: skip


def run(
    rows: Iterable[Row], progress: Callable[[int, int], None] | None = None,
    refused: list[tuple[Row, str]] | None = None,
) -> list[Outcome]:  # fmt: skip
    """Predict every row, in order; ``progress(done, total)`` is called after each. A row the model
    refuses raises, naming its file and row (the shipped dataset has none), unless ``refused`` is given
    (a user's rows, such as a whole ``t3 measure`` run): it then gets ``(row, reason)`` and the rest go on."""
    rows = list(rows)
    p = Predictor()
    out = []
    for i, r in enumerate(rows, 1):
        try:
            out.append(p.predict(r))
        except T3Error as err:  # a row the model refuses: name its file and row, as the parse does
            if refused is not None:
                refused.append((r, " ".join(str(err).split())))
            elif str(err).startswith(f"{r.id}:"):
                raise
            else:
                raise type(err)(f"{r.origin}: row '{r.id}': {err}") from None
        if progress:
            progress(i, len(rows))
    return out


def summarize(outcomes: list[Outcome], by: tuple[str, ...] = ("category", "role")) -> list[dict[str, Any]]:
    """Median and max |error| per group (default: category x role, in a fixed order), with the worst
    row, and for overlap speed-ups how many signs (gain / loss) are right. Grouped by role, the blind
    rows of a group (committed before any prediction of them existed) follow it as a group of their
    own, marked ``blind: True``."""
    order = {
        "category": list(CATEGORIES), "role": list(ROLES),
        "hardware": sorted({o.row.hardware for o in outcomes}),
    }  # fmt: skip
    groups: dict[tuple, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(tuple(getattr(o.row, k) for k in by), []).append(o)
    keys = sorted(groups, key=lambda g: tuple(order[k].index(v) for k, v in zip(by, g, strict=True)))
    entries = []
    for g in keys:
        entries.append((g, groups[g], False))
        # rows committed before any prediction of them existed, again on their own (after their group)
        blind = [o for o in groups[g] if o.row.blind] if "role" in by else []
        if blind:
            entries.append((g, blind, True))
    out = []
    for g, os_, is_blind in entries:
        errs = [abs(o.error) for o in os_]
        worst = max(os_, key=lambda o: (abs(o.error), o.row.id))
        d: dict[str, Any] = dict(zip(by, g, strict=True))
        if is_blind:
            d["blind"] = True
        d.update(
            rows=len(os_), median_abs_error=statistics.median(errs), max_abs_error=max(errs),
            worst=worst.row.id,
        )  # fmt: skip
        if "category" in by:
            d["unit"] = COMPARED_UNIT[os_[0].row.category]
        signs = [o.sign_right for o in os_ if o.sign_right is not None]
        if signs:
            d["sign_right"] = sum(signs)
            d["sign_rows"] = len(signs)
        out.append(d)
    return out
