"""``t3 validate --explain ROW``: one row's prediction taken apart, every number with its unit.

A collective: the algorithm and protocol, and its closed form on an idle node (launch, fixed latency,
per-hop latency x hops, the transfer and each resource's seconds over the steps) beside the simulated
time, and where the library chooses the algorithm, every algorithm's time (the model picks its least, or,
across nodes where the preset gives NCCL's graphs, NCCL's estimate of each, whose least runs); a
GEMM: the kernel (tile, tiles, waves, K split), the tile's rate and what bounds it, the clock, and the
launch, exposed prologues and wave bodies; an interference or overlap row: the parts its
prediction is built from. The figures come from the same calls ``t3 validate`` makes
(:class:`~t3.validation.runner.Predictor`), so they add up to the prediction shown.
"""

from __future__ import annotations

from typing import Any

from t3.validation.regimes import bands
from t3.validation.runner import Outcome, collective_compared_s


def _us(s: float) -> str:
    return f"{s * 1e6:.4g} us"


def _tf(x: float) -> str:
    return f"{x / 1e12:.4g} TFLOP/s"


def explain(o: Outcome) -> list[tuple[str, str]]:
    """(label, value with its unit) lines describing how ``o``'s prediction was made."""
    r, d, w = o.row, o.detail, o.row.workload
    err = "pp" if r.category == "interference" else "%"
    lines: list[tuple[str, str]] = [
        ("row", f"{r.id} ({r.category}, {r.role}{', blind' if r.blind else ''})"),
        ("hardware", r.hardware),
        ("source", f"{r.source} ({r.locator})" if r.locator else r.source),
        ("conventions", r.conventions or "-"),
        ("measured", f"{o.measured:.4g} {o.unit}"),
        ("predicted", f"{o.predicted:.4g} {o.unit}"),
        ("error", f"{o.error * 100:+.1f} {err}"),
    ]
    lines += [(f"band ({axis})", band) for axis, band in bands(o).items()]
    if r.category == "collective_busbw":
        lines += _collective(d, w)
        if w["algo"] == "auto":
            lines.append(("every algorithm", _alternatives(r, d["algo"])))
            nccl = _nccl_estimates(r, d["algo"])
            if nccl:
                lines.append(("NCCL's estimate", nccl))
    elif r.category == "gemm_tflops":
        lines += _gemm(d)
        lines.append(("compared time", f"{_us(d['compared_s'])}: " + {
            "host": "the calls as the host times them (the launch included)",
            "device": "the kernel (device-timed row: no launch)",
            "graph": f"replayed in a CUDA graph: the time less its launch, plus {d['kernels']} x compute.graph_launch_s"
                     " (the device's gap between kernels)",
        }[w["timing"]]))  # fmt: skip
    else:
        lines += [(k, _value(k, v)) for k, v in d.items()]
    return lines


def _value(key: str, v: Any) -> str:
    if isinstance(v, float) and key.endswith("_s"):
        return _us(v)
    if isinstance(v, float) and key.endswith("_pct"):
        return f"{v:.4g} %"
    return str(v)


def _collective(d: dict[str, Any], w: dict[str, Any]) -> list[tuple[str, str]]:
    t = d["terms"]
    res = ", ".join(f"{k} {_us(v)}" for k, v in t["resources_s"].items()) or "not split for this algorithm"
    timed = {
        "device": "kernel (device-timed row: no launch)",
        "host": "call (host-timed row)",
        "call": "call timed alone after a barrier (call-timed row)",
    }[w["timing"]]
    channels = str(t["channels"]) if t["channels"] else "none (copy engines)"
    if t["channel_share"] < 1:
        channels += (
            f" ({t['channel_share']:.3g} of the library's: NCCL's fewer channels for a call of few bytes)"
        )
    lines = [
        ("algorithm", d["algo"]),
        ("channels", channels),
        ("compared time", f"{_us(d['time_s'])}: the {timed}"),
        ("simulated call", f"{_us(d['call_s'])} (kernel {_us(d['device_s'])})"),
        ("closed form", f"{_us(t['total_s'])} on an idle node = the terms below"),
        ("  launch", _us(t["launch_s"])),
        ("  fixed latency", _us(t["base_latency_s"])),
        ("  hop latency", f"{_us(t['hop_latency_s'])} ({t['hops']} hops)"),
        ("  transfer", f"{_us(t['transfer_s'])} (each step takes its slowest resource)"),
        ("  resources over the steps", res),
    ]
    if w["timing"] == "call":  # (a preset without the constant refuses such a row: t3.validation.runner)
        lines.append(
            ("call alone", f"{_us(d['time_s'])} = {_us(t['call_alone_s'])} (collective.call_alone_s: the host's "
             f"path of the call and the wait for the last rank after the barrier) + the kernel {_us(d['device_s'])}")
        )  # fmt: skip
    host = t.get("host_s", 0.0)
    if host > 0 and w["timing"] == "host":
        lines.append(("host's calls", f"{_us(host)} ({w['gpus_per_thread']} GPU(s) per thread x "
                      "collective.host_call_s): a back-to-back call takes at least this"))  # fmt: skip
    gap = d["call_s"] - max(t["total_s"], host)
    if abs(gap) > 1e-9 * d["call_s"]:
        lines.append(
            ("simulated - closed form", f"{_us(gap)} (bytes in flight limited by the memory's latency)")
        )
    return lines


def _alternatives(row, picked: str) -> str:
    """The compared time (the row's timing) of every algorithm and protocol the model has for the row,
    least first, the one it picks marked: how far the prediction stands from the library running
    another (its own tuning model may choose otherwise)."""
    from t3 import api

    w = row.workload
    kw = dict(op=w["op"], nbytes=w["nbytes"], gpus=w["gpus"], hardware=row.hardware,
              gpus_per_thread=w["gpus_per_thread"])  # fmt: skip
    times = {
        a: collective_compared_s(api.collective(**kw, algo=a), w["timing"])
        for a in api.collective_algos(w["op"], row.hardware, w["gpus"])[1:]
    }
    return ", ".join(
        f"{a} {_us(t)}{' (picked)' if a == picked else ''}"
        for a, t in sorted(times.items(), key=lambda x: (x[1], x[0]))
    )


def _nccl_estimates(row, picked: str) -> str:
    """Where the library's choice is NCCL's (:func:`t3.ops.collectives.nccl_estimates`): NCCL's own estimate
    of every algorithm and protocol it would run, least first, the pick marked; "" elsewhere."""
    from t3.config.hardware import load_hardware
    from t3.ops.collectives import candidates, nccl_estimates

    w = row.workload
    hw = load_hardware(row.hardware)
    n, nbytes = w["gpus"], float(w["nbytes"])
    est = nccl_estimates(w["op"], nbytes, hw, n, candidates(w["op"], hw, n, None, nbytes))
    if est is None:
        return ""
    return "its tuning model, which picks: " + ", ".join(
        f"{a} {t:.4g} us{' (picked)' if str(a) == picked else ''}"
        for a, t in sorted(est.items(), key=lambda x: (x[1], str(x[0])))
        if t < float("inf")
    )


def _gemm(d: dict[str, Any]) -> list[tuple[str, str]]:
    bound = {"matrix": "matrix peak x efficiency", "l2": "the CU's share of L2 bandwidth"}[d["tile_bound"]]
    per_wave = d["tiles"] / d["wave_size"]
    return [
        ("kernel", f"{d['tile']} tiles, {d['tiles']} tiles in {d['waves']} waves of {d['wave_size']} "
                   f"({per_wave:.3g} waves of work), K split {d['split_k']}"),
        ("decomposition", "stream-K in the last wave" if d["stream_k"] else
         f"split-K: {d['split_k']} slices per tile, then a reduction kernel" if d["split_k"] > 1
         else "data-parallel (whole tiles)"),  # fmt: skip
        ("output", f"{d['out_dtype']} (the bytes each tile stores)"),
        ("tile rate", f"{_tf(d['tile_flops_per_s'])} per CU, bound by {bound}"),
        ("epilogue", f"{_us(d['epilogue_s'])} per tile after its K loop" if d["epilogue_s"] else "overlapped"),
        ("clock", f"{d['clock_hz'] / 1e9:.4g} GHz"),
        *_power(d),
        ("time", f"{_us(d['time_s'])} = the power limit's bound (the parts below: {_us(d['short_s'])})"
                 if d.get("power_bound") else f"{_us(d['time_s'])} = the parts below"),
        ("  launch", _us(d["launch_s"])),
        ("  prologues", f"{_us(d['prologue_s'])} (each wave's first K stages, exposed)"),
        ("  wave bodies", f"{_us(d['body_s'])} (CU time alone {_us(d['compute_s'])}; "
                          f"{d['memory_bound_waves']} of {d['waves']} waves wait on memory)"),
    ]  # fmt: skip


def _power(d: dict[str, Any]) -> list[tuple[str, str]]:
    if d.get("loop") != "sustained":
        return [("loop", "short (timed within its first 0.2 s: the GEMM clock, no power limit)")]
    if d.get("power_s") is None:
        return [("loop", "sustained; this preset has no power section: its GEMM clock serves both")]
    verdict = "sets the time" if d["power_bound"] else "under the time at the GEMM clock: not limiting"
    return [("loop", "sustained (run back to back: the board's power limit applies)"),
            ("power limit", f"energy / (limit - idle) = {_us(d['power_s'])}, {verdict}")]  # fmt: skip
