"""The T3 study on today's machines (``t3 study``): for each preset, model and TP degree, one tensor-parallel
sublayer (GEMM + all-reduce) as each design runs it, with the model's measured error on that preset beside it.

Per point (the same sublayer, tokens and TP on every design):

- ``sequential``: the GEMM, then the all-reduce as the library's reduce-scatter + all-gather (``t3 run``);
- ``nvls``: the GEMM, then one all-reduce by NVLink SHARP where the preset's switch has it (the switch
  reduces; the GEMM and the collective each alone, one after the other); across nodes NCCL's NVLS-Tree
  (each node's switch reduces, the NICs carry one shard);
- ``ideal``: Ideal-GEMM-RS-Overlap, the T3 paper's bound for overlapping the reduce-scatter with the GEMM;
- ``t3``, ``t3_mca``: T3 and T3 with memory-controller arbitration, with the paper's near-memory compute
  added to this GPU (``nmc.present = true``: no GPU on sale has it; the T3 paper's proposal);
- ``ficco``: the fastest FiCCO schedule of the sublayer's GEMM + reduce-scatter (sequence parallelism),
  against the same operation as one GEMM then one reduce-scatter (``bulk-g1-M-cu``).

A design whose own check refuses the point (the configuration's ``requires``, FiCCO's ``check_fits``)
has time None and ``not_modelled`` gives that refusal: across nodes (a TP wider than the preset's node)
T3, T3-MCA and FiCCO, whose own stores, DMA and reductions are modelled over one node's fabric only;
Sequential, NVLS-Tree and Ideal run there (the T3 paper's multi-node point: only
the part of the communication a GEMM's length covers can be hidden).

Speed-ups are ``T_sequential / T - 1`` (FiCCO's against its bulk baseline). The expected error beside
them is ``t3 validate``'s median |error| on the preset's own validation rows (GEMMs, collectives; overlap
speed-ups where the preset has such rows): how far the parts of these predictions stood from
measurement, not a bound on the composite."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from t3.config.hardware import Hardware, load_hardware, tp_refusal
from t3.errors import ConfigError, WorkloadError

DEFAULT_HARDWARE = ("h100-8", "h200-8", "b200-8", "gb200-nvl72", "mi300x-8", "mi325x-8", "mi355x-8")
DEFAULT_MODELS = ("llama-3-70b", "llama-3-405b", "mixtral-8x7b")
DESIGNS = ("sequential", "nvls", "ideal", "t3", "t3_mca", "ficco")


def _errors(rows: list) -> dict[str, Any]:
    """Median |error| of ``rows`` (one preset's validation rows) per category (``t3 validate``)."""
    from t3.validation.runner import run

    out: dict[str, Any] = {}
    by: dict[str, list[float]] = {}
    for o in run(rows):
        by.setdefault(o.row.category, []).append(abs(o.error))
    for cat in ("gemm_tflops", "collective_busbw", "overlap_speedup"):
        errs = by.get(cat)
        out[cat] = {"rows": len(errs), "median_abs_error": statistics.median(errs)} if errs else None
    return out


def _refusal(check: Callable[[], None]) -> str | None:
    """What a design's own check before any work refuses on this point (its one-line message), or None."""
    try:
        check()
    except ConfigError as err:
        return str(err)
    return None


def point(
    hardware: str | Hardware, model: str, tp: int, sublayer: str = "fc2", ficco: bool = True
) -> dict[str, Any]:
    """One (preset, model, TP) point of the study (see the module docstring); ``hardware``: a preset's
    name, a TOML file's path or the hardware itself (a user's file is not looked up again by its name)."""
    from t3.api import overlap, resolve, run
    from t3.ficco.space import FiccoOperator, check_fits
    from t3.ops.collectives import nvls_available, nvls_tree_available, simulate_collective
    from t3.workload import get_model, sublayer_operator

    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    seq = run(model=model, tp=tp, sublayer=sublayer, config="sequential", hardware=hw)
    t_seq = seq["time_s"]
    g = seq["gemm"]
    out: dict[str, Any] = {
        "hardware": hw.name, "model": model, "tp": tp, "sublayer": sublayer, "tokens": seq["tokens"],
        "gemm": g, "time_s": {"sequential": t_seq}, "collectives": seq.get("collectives", {}),
    }  # fmt: skip
    nvls = (
        "nvls/simple"
        if nvls_available(hw, tp)
        else "nvls-tree/simple"
        if nvls_tree_available(hw, tp)
        else None
    )
    out["nvls_algo"] = nvls
    if nvls:
        nbytes = sublayer_operator(get_model(model), sublayer, tp).comm_bytes  # what Sequential all-reduces
        ar = simulate_collective("all_reduce", float(nbytes), tp, hw, algo=nvls)
        out["time_s"]["nvls"] = seq["breakdown_s"]["gemm"] + ar["time_s"]
    else:
        out["time_s"]["nvls"] = None
    out["time_s"]["ideal"] = run(
        model=model, tp=tp, sublayer=sublayer, config="ideal-gemm-rs-overlap", hardware=hw
    )["time_s"]
    out["not_modelled"] = {}
    nmc = {"nmc.present": True}
    for key, cfg in (("t3", "t3"), ("t3_mca", "t3-mca")):
        op, hw_nmc, spec = resolve(model, tp, sublayer, cfg, hw, None, nmc)
        if why := _refusal(lambda spec=spec, op=op, hw_nmc=hw_nmc: spec.requires(op, hw_nmc)):
            out["time_s"][key] = None
            out["not_modelled"][key] = why
            continue
        out["time_s"][key] = run(
            model=model, tp=tp, sublayer=sublayer, config=cfg, hardware=hw, hw_overrides=nmc
        )["time_s"]
    out["speedup"] = {k: (t_seq / t - 1.0 if t else None) for k, t in out["time_s"].items()}
    fop = FiccoOperator("gemm-rs", g["m"], g["n"], g["k"], tp, g["dtype"])
    if ficco and (why := _refusal(lambda: check_fits(fop, hw))):
        out["ficco"] = None
        out["speedup"]["ficco"] = None
        out["not_modelled"]["ficco"] = why
    elif ficco:
        kw = dict(gpus=tp, hardware=hw, dtype=g["dtype"])
        best = overlap("gemm-rs", g["m"], g["n"], g["k"], schedule="best", **kw)
        bulk = overlap("gemm-rs", g["m"], g["n"], g["k"], schedule="bulk-g1-M-cu", **kw)
        out["ficco"] = {"schedule": best["schedule"], "time_s": best["time_s"], "bulk_s": bulk["time_s"]}
        out["speedup"]["ficco"] = bulk["time_s"] / best["time_s"] - 1.0
    else:
        out["ficco"] = None
        out["speedup"]["ficco"] = None
    return out


def study(
    hardware: tuple[str, ...] | list[str] = DEFAULT_HARDWARE, models: tuple[str, ...] | list[str] = DEFAULT_MODELS,
    tp: tuple[int, ...] | list[int] = (8,), sublayer: str = "fc2", ficco: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Every (preset, model, TP) point; a TP the preset cannot form or the model cannot split is left
    out with the reason (``skipped``). Every input is checked before any point runs."""
    from t3.validation import load_dataset
    from t3.workload import SUBLAYERS, get_model, sublayer_operator

    for what, vals in (("hw", hardware), ("model", models), ("tp", tp)):
        dup = next((v for i, v in enumerate(vals) if v in list(vals)[:i]), None)
        if dup is not None:
            raise ConfigError(f"{what}: {dup!r} is given twice (each point once)")
    if not isinstance(sublayer, str) or sublayer not in SUBLAYERS:
        raise ConfigError(f"sublayer: unknown sublayer {sublayer!r} (available: {', '.join(SUBLAYERS)})")
    hws = [load_hardware(h) for h in hardware]
    specs = [get_model(m) for m in models]
    for t in tp:
        if not isinstance(t, int) or isinstance(t, bool) or t < 2:
            raise ConfigError(f"tp: must be an integer >= 2, got {t!r}")
    rows = [r for r in load_dataset() if r.role == "validation"]
    points, skipped = [], []
    for hw in hws:
        for m in specs:
            for t in tp:
                why = tp_refusal(hw, t)
                if why is None:
                    try:
                        sublayer_operator(m, sublayer, t)
                    except (ConfigError, WorkloadError) as err:
                        why = str(err)
                if why:
                    skipped.append({"hardware": hw.name, "model": m.name, "tp": t, "why": why})
                    continue
                points.append(point(hw, m.name, t, sublayer, ficco))
    if not points:
        first = skipped[0]
        raise ConfigError(
            f"tp: no point can run: every preset, model and TP is left out (e.g. {first['hardware']} "
            f"{first['model']} TP {first['tp']}: {first['why']})"
        )
    return {
        "points": points,
        "skipped": skipped,
        "errors": {hw.name: _errors([r for r in rows if r.hardware == hw.name]) for hw in hws},
        "definitions": {
            "speedup": "T_sequential / T - 1 (FiCCO: T_bulk / T_best - 1, its own GEMM-then-reduce-scatter baseline)",
            "t3, t3_mca": "with near-memory compute added to the GPU (nmc.present = true): T3's proposal, on no GPU sold",
            "nvls": "the GEMM, then one NVLS all-reduce (where the preset's switch reduces; across nodes NCCL's"
            " NVLS-Tree: nvls_algo), one after the other",
            "errors": "t3 validate's median |error| on the preset's validation rows, per category",
        },
    }
