"""Evidence for the calibrated parameters of the T3 reproduction, computed from the current model.

:func:`evidence` takes the calibrated parameters (:func:`t3.experiments.calibration.calibrated_parameters`:
each one's value and how it was chosen) and adds to each the numbers that support its value *as the
model stands now*, computed from the reproduction document (never written by hand). ``t3 reproduce
t3`` stores the list under ``calibration`` in its JSON, the report renders it
(:func:`t3.experiments.report.calibration_table`), and ``docs/calibration.md`` quotes the same table
through ``python -m t3.docs``.

Entry format (what the report renders)::

    {"parameter": "compute.gemm_efficiency",        # dotted hardware path, or "tokens"
     "value": 0.55,                                  # read from the preset / model zoo
     "stage": "B1", "target": "...",                 # how it was chosen (or "basis": words)
     "evidence": [{"label": "Ideal geomean", "value": 0.336, "unit": "%"}, ...]}

Units: ``"%"`` (a fraction shown as a percentage), ``"pp"`` (a fraction shown as percentage points),
``"x"`` (a ratio), ``"tol"`` (a loss in tolerance units), or any SI unit shown as is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t3.config.hardware import Hardware
from t3.experiments import calibration
from t3.experiments.paper_t3 import PUBLISHED

Doc = dict[str, Any]
Numbers = list[dict[str, Any]]


def _target(key: str) -> tuple[float, float]:
    """A calibration target: the paper's published (geomean, max) speedup of a configuration."""
    return PUBLISHED[f"{key}.geomean_speedup"].value, PUBLISHED[f"{key}.max_speedup"].value


def _stats(stats: dict | None, label: str, target: tuple[float, float] | None) -> Numbers:
    if not stats or stats.get("geomean_speedup") is None:
        return []
    g, m = stats["geomean_speedup"], stats["max_speedup"]
    out = [
        {"label": f"{label} geomean", "value": g, "unit": "%"},
        {"label": f"{label} max", "value": m, "unit": "%"},
    ]
    if target is not None:
        loss = max(abs(g - target[0]) / calibration.TOLERANCE["geomean"],
                   abs(m - target[1]) / calibration.TOLERANCE["max"])  # fmt: skip
        out.append({"label": f"{label} loss", "value": loss, "unit": "tol"})
    return out


def _sweep(doc: Doc, name: str, cfg: str, fmt: str) -> Numbers:
    """Geomean speedup of ``cfg`` at every value of a sensitivity sweep of the document."""
    sw = next((s for s in doc.get("sensitivity", []) if s["name"] == name), None)
    out: Numbers = []
    for row in sw["rows"] if sw else []:
        cell = row.get(cfg) or {}
        if cell.get("geomean_speedup") is not None:
            out.append({"label": fmt.format(v=row["value"]), "value": cell["geomean_speedup"], "unit": "%"})
    return out


def ideal_fit(doc: Doc) -> Numbers:
    """Ideal-GEMM-RS-Overlap against its target (link bandwidth x GEMM efficiency)."""
    return _stats(doc["summary"].get("ideal_gemm_rs_overlap"), "Ideal", _target("ideal_gemm_rs_overlap"))


def mca_fit(doc: Doc) -> Numbers:
    """T3-MCA against its target, and T3 beside it (MCA must not lose to T3)."""
    s = doc["summary"]
    t3 = [e for e in _stats(s.get("t3"), "T3", None) if e["label"].endswith("geomean")]
    return _stats(s.get("t3_mca"), "T3-MCA", _target("t3_mca")) + t3


def nmc_rs_speedup(doc: Doc) -> Numbers:
    """Stage B2's own measure: the NMC RS's speed-up over the CU ring RS (T_CU / T_NMC - 1), geomean over
    the main set's points of each TP (:func:`t3.experiments.calibration.nmc_rs_speedups`)."""
    from t3.experiments.calibration import nmc_rs_speedups

    return [
        {"label": f"NMC RS speed-up over the CU RS, TP {tp}", "value": v, "unit": "%"}
        for tp, v in nmc_rs_speedups(doc["points"]).items()
    ]


def link_sweep(doc: Doc) -> Numbers:
    """Ideal-GEMM-RS-Overlap's geomean at each value of the link-bandwidth sensitivity sweep."""
    return _sweep(doc, "link_bw", "ideal_gemm_rs_overlap", "Ideal geomean at x{v:g}")


# Evidence by calibration stage (the ``stage`` of an entry), then by parameter for entries without one.
BY_STAGE: dict[str, Callable[[Doc], Numbers]] = {
    "1": ideal_fit, "B1": ideal_fit, "B2": nmc_rs_speedup, "2": mca_fit, "C": mca_fit,
    "B": lambda doc: ideal_fit(doc) + nmc_rs_speedup(doc) + link_sweep(doc),
}  # fmt: skip
BY_PARAMETER: dict[str, Callable[[Doc], Numbers]] = {
    "link.bandwidth_Bps": lambda d: ideal_fit(d) + link_sweep(d),
    "compute.gemm_efficiency": ideal_fit,
    "collective.channels": nmc_rs_speedup,
    "tokens": lambda d: _sweep(d, "tokens", "ideal_gemm_rs_overlap", "Ideal geomean at {v:g} tokens"),
    "mca.occupancy_threshold": mca_fit,
    "mca.starvation_share": mca_fit,
    "nmc.update_overhead": mca_fit,
    "dma.command_overhead_s": mca_fit,
}  # fmt: skip

# How a parameter was chosen, in words, for entries that do not say (no numbers: they are evidence).
BASIS: dict[str, str] = {
    "link.bandwidth_Bps": "stage 1, Ideal-GEMM-RS-Overlap target, together with the GEMM efficiency",
    "compute.gemm_efficiency": "stage 1, Ideal-GEMM-RS-Overlap target, together with the link bandwidth",
    "tokens": "not identified by the targets; taken from a later re-implementation of T3",
    "mca.occupancy_threshold": "stage 2, T3-MCA target: not identified, prior kept",
    "mca.starvation_share": "stage 2, T3-MCA target, with MCA not losing to T3 as a constraint",
    "nmc.update_overhead": "stage 2, T3-MCA target: not identified, prior kept",
    "dma.command_overhead_s": "stage 2, T3-MCA target: not identified, prior kept",
    "hbm.efficiency": "not calibrated: typical sustained HBM2 fraction",
    "compute.cu_copy_Bps": "not calibrated: the ring RS stays link-bound over a wide range",
}


def evidence(doc: Doc, hw: Hardware) -> list[dict[str, Any]]:
    """:func:`t3.experiments.calibration.calibrated_parameters` of ``hw`` and the document's models,
    each with ``evidence`` numbers computed from ``doc`` (a ``t3 reproduce t3`` document with
    ``summary``, ``points`` and ``sensitivity`` filled). Text an entry carries under ``evidence`` is
    dropped: evidence is numbers from the model, never prose."""
    models = tuple(dict.fromkeys(p["model"] for p in doc.get("points", []) + doc.get("large_points", [])))
    out = []
    for e in calibration.calibrated_parameters(hw, models):
        e = {k: v for k, v in e.items() if k != "evidence"}
        if "stage" not in e and "basis" not in e:
            e["basis"] = BASIS.get(e["parameter"], "see docs/calibration.md")
        fn = BY_STAGE.get(str(e.get("stage"))) or BY_PARAMETER.get(e["parameter"])
        e["evidence"] = fn(doc) if fn else []
        out.append(e)
    return out
