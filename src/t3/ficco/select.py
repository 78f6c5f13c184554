"""The heuristic schedule selector: static operator sizes and peak rates in, a schedule name out.

No simulation: every feature is a closed form of the operator and the hardware preset.

Static estimates (seconds):
- ``gemm(shape, C)``: the GEMM on C CUs from its static plan (the library tile choice of
  :func:`t3.schedules.ficco.gemm_plan`): ``waves x tile time`` plus one kernel launch; ``p`` pieces
  on two streams: ``(p x tiles / C + 1)`` tile times plus one launch;
- ``t_comm``: bytes a GPU sends / its egress bandwidth (mesh: N-1 links; switch, ring: one port);
  a pattern may move them slower (``slow``): a DMA command runs on one engine (link / min(engine,
  link)); N-1 concurrent DMA commands through a switch port are bounded by all engines; plus the
  per-step overheads (N DMA commands or kernel launches) on the transfer path: ``tc``;
- bulk: ``gemm(whole, all CUs) + t_comm`` (+ the reduction of N partials at the HBM rate for
  reduce-scatter);
- overlapped candidate (pattern, executor, split[, reduction][, streams]), N pieces, compute ``comp``
  on all CUs (DMA) or those the communication kernel leaves (CU):
  AG -> GEMM and MoE: ``max(comp, tc) + tc / N`` (M pieces on two streams, K pieces on one plus
  reading the output back N-1 times); GEMM -> RS: the pipeline bound ``max(comp + tc/N, tc + comp/N)``
  with one stream, ``max(comp2 + tc/N, tc + 2 comp2/N)`` with two (the first piece shares the CUs),
  incremental reductions add 3 bytes of HBM traffic per received byte to ``tc`` through the
  communication kernel's CUs, batched ones add all but the last step's reduction to ``comp`` and the
  last one (plus a launch) at the end.

Rules (thresholds :class:`Rules` fitted on the design cases by :func:`fit`; docs/ficco.md says it
in words): take the overlapped candidate with the least estimate, after handicapping DMA candidates by
``dma_bias``, shard-level ones by ``shard_bias``, K and M splits by ``k_bias`` and ``m_bias``; run it
only if its estimate beats bulk by the ``margin`` (``rs_margin`` for GEMM -> reduce-scatter), else
bulk. ``2N`` pieces instead of N when the whole GEMM has at least ``big_waves`` waves. Illegal picks
fall back to one stream, then to half the pieces, then to bulk.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from t3.config.hardware import Hardware
from t3.ficco.space import Axes, FiccoOperator, check_fits, legality, no_gemm_cus_left
from t3.ops.gemm import cus_beside
from t3.schedules.ficco import comm_cus, gemm_plan
from t3.workload.sublayers import GemmShape

INF = math.inf


@dataclass(frozen=True)
class Rules:
    margin: float = 0.0  # an overlapped schedule must be estimated this much faster than bulk
    rs_margin: float = 0.0  # ... for GEMM -> reduce-scatter
    dma_bias: float = 0.0  # DMA candidates' estimates are multiplied by (1 + dma_bias)
    shard_bias: float = -0.05  # shard-level candidates' estimates are multiplied by (1 + shard_bias)
    k_bias: float = 0.1  # K-split candidates' estimates are multiplied by (1 + k_bias)
    m_bias: float = -0.05  # M-split candidates' estimates are multiplied by (1 + m_bias)
    big_waves: float = INF  # 2N pieces at or above this many waves of the whole GEMM, else N


GRID = {
    "margin": [0.0, 0.02, 0.05, 0.1, 0.2],
    "rs_margin": [0.0, 0.1, 0.2, INF],
    "dma_bias": [-0.1, -0.05, 0.0, 0.05, 0.1],
    "shard_bias": [-0.1, -0.05, 0.0, 0.05, 0.1],
    "k_bias": [0.0, 0.1, 0.2, INF],
    "m_bias": [-0.3, -0.2, -0.15, -0.1, -0.05, 0.0],
    "big_waves": [INF, 8.0],
}

# The thresholds fitted on the design cases by `t3 reproduce ficco` (it re-fits and reports whether
# the fit still gives these values).
SHIPPED = Rules()


def gemm_estimate(shape: GemmShape, hw: Hardware, cus: int, streams_of: int = 0) -> float:
    """GEMM time on ``cus`` CUs from its static plan (the library tile choice of
    :func:`t3.schedules.ficco.gemm_plan`: waves x tile time; no simulation), plus one launch.
    ``streams_of = p``: ``p`` such GEMMs on two streams, whose partial waves fill each other:
    ``(p x tiles / cus + 1)`` tile times plus one launch (a piece launches while the other stream
    computes)."""
    plan = gemm_plan(shape, hw, cus=cus)
    if not streams_of:
        return plan.compute_s + plan.launch_s(hw)
    return (streams_of * plan.tiles / cus + 1.0) * plan.t_tile + plan.launch_s(hw)


def _gemms(fop: FiccoOperator, rows: int, split: str, parts: int) -> list[GemmShape]:
    d = fop.dtype
    if fop.op == "moe":
        r = rows // parts
        return [GemmShape(r, 2 * fop.n, fop.k, d), GemmShape(r, fop.k, fop.n, d)]
    if split == "K":
        return [GemmShape(rows, fop.n, max(1, fop.k // parts), d)]
    if split == "N":
        return [GemmShape(rows, max(1, fop.n // parts), fop.k, d)]
    return [GemmShape(max(1, rows // parts), fop.n, fop.k, d)]


def features(fop: FiccoOperator, hw: Hardware) -> dict:
    c = hw.compute
    n = fop.gpus
    topo = hw.topology.kind
    t_comp = fop.flops() / (c.gemm_peak_flops(fop.dtype) * c.gemm_efficiency)
    links = (n - 1) if topo == "mesh" else 1
    t_comm = fop.comm_bytes() / (links * hw.link.bandwidth_Bps)
    rows = fop.expert_rows()[0] * n if fop.op == "moe" else fop.m
    cols = 2 * fop.n if fop.op == "moe" else fop.n
    tiles = math.ceil(rows / c.tile_m) * math.ceil(cols / c.tile_n)
    waves = tiles / c.cus
    piece_s = fop.comm_bytes() / ((n - 1) * n) / hw.link.bandwidth_Bps
    k = comm_cus(hw, n)
    link, eng = hw.link.bandwidth_Bps, hw.dma.bandwidth_Bps
    one_cmd = link / min(eng, link)
    many_cmd = link / min(hw.dma.engines * eng, link) if topo != "mesh" else one_cmd
    hbm = hw.hbm.effective_Bps
    rs = fop.op == "gemm-rs"
    # reduce-scatter: bytes of the output block a GPU owns; its reduction reads N partials, writes 1
    owner = fop.m * fop.n * fop.eb / n if rs else 0.0
    red_all = (n + 1) * owner / hbm
    whole = sum(gemm_estimate(s, hw, c.cus) for s in _gemms(fop, rows, "M", 1))
    est = {"bulk": whole + t_comm + red_all}
    splits = {"ag-gemm": ("M", "K"), "gemm-rs": ("N",), "moe": ("M",)}[fop.op]
    comms = ("ficco",) if topo in ("mesh", "ring") else ("ficco", "shard")
    reduces = ("inc", "rb") if rs and topo != "ring" else ("inc",)
    executors = ("cu", "dma") if no_gemm_cus_left(hw, n) is None else ("dma",)  # (space's legality rule)
    for comm, ex, split, red in itertools.product(comms, executors, splits, reduces):
        if comm == "shard" and split != "M":
            continue  # a shard-level step carries every K / column block: N such pieces are illegal
        cus = cus_beside(hw, k) if ex == "cu" else c.cus
        shapes = _gemms(fop, rows, split, n)
        slow = 1.0 if ex == "cu" else (many_cmd if comm == "ficco" else one_cmd)
        tc = t_comm * slow
        extra = tail = 0.0
        if split == "K":  # every K block after the first reads the output back
            extra += (n - 1) * rows * fop.n * fop.eb / hbm
        if rs and red == "inc":
            # the owner adds each arrival to its accumulator (3 bytes of HBM traffic per byte) on
            # the communication kernel's CUs
            tc += max(3.0 * fop.comm_bytes() / hbm, 3.0 * fop.comm_bytes() / (k * c.cu_copy_Bps))
        elif rs:
            # batched: step j's reduction (all CUs, HBM bound) runs beside the GEMM; the last is exposed
            blocks = n if comm == "ficco" else 1
            extra += red_all * (blocks - 1) / blocks
            tail = red_all / blocks + c.kernel_launch_s
        # per transfer step, on the transfers' critical path
        tc += n * hw.dma.command_overhead_s if ex == "dma" else n * c.kernel_launch_s
        key = f"{comm}-{ex}-{split}" + ("-rb" if red == "rb" else "")
        comp = n * sum(gemm_estimate(s, hw, cus) for s in shapes) + extra
        comp2 = sum(gemm_estimate(s, hw, cus, streams_of=n) for s in shapes) + extra
        if not rs:
            # the transfers feed the GEMM and the local piece runs first, under the first transfer:
            # compute-bound runs end with the last piece, transfer-bound ones with the last transfer
            # plus its piece. M pieces run on two streams (a piece's partial wave is filled by the
            # next piece's tiles); K pieces on one (they accumulate into the same output).
            c_ = comp2 if split == "M" else comp
            est[key + ("-s2" if split == "M" else "")] = max(c_, tc) + tc / n
            continue
        # GEMM -> reduce-scatter: the first transfer waits for the first piece. A two-stage pipeline
        # is bound by all compute plus the last transfer, or the first piece plus all transfers. Two
        # streams fill wave-quantization tails, but the first piece shares the CUs with the second
        # and finishes one piece time later.
        est[key] = max(comp + tc / n, tc + comp / n) + tail
        est[key + "-s2"] = max(comp2 + tc / n, tc + 2 * comp2 / n) + tail
    return {
        "op": fop.op,
        "topology": topo,
        "gpus": n,
        "t_compute_s": t_comp,
        "t_comm_s": t_comm,
        "comm_ratio": t_comm / t_comp,
        "waves": waves,
        "msg_over_dma": piece_s / max(hw.dma.command_overhead_s, 1e-12),
        "estimates_s": est,
    }


def _best_overlapped(f: dict, r: Rules) -> tuple[str | None, float]:
    """The overlapped candidate with the least handicapped estimate (margins play no part)."""
    best, best_t = None, INF
    for key, t in f["estimates_s"].items():
        if key == "bulk":
            continue
        comm, ex, split = key.split("-")[:3]
        t *= (1.0 + r.dma_bias) if ex == "dma" else 1.0
        t *= (1.0 + r.shard_bias) if comm == "shard" else 1.0
        t *= (1.0 + r.k_bias) if split == "K" else (1.0 + r.m_bias) if split == "M" else 1.0
        if t < best_t:
            best, best_t = key, t
    return best, best_t


def _axes_of(best: str, f: dict, r: Rules) -> Axes:
    n = f["gpus"]
    comm, ex, split = best.split("-")[:3]
    red = "batched" if "-rb" in best else "inc"
    g = 2 * n if f["waves"] >= r.big_waves else n
    return Axes(comm, g, split, ex, 0, 2 if "-s2" in best else 1, True, red)


def _handicapped(cands: list[tuple[str, float]], est, hc: dict):
    """Every candidate's handicapped estimate (columns) under every handicap combination (rows): the
    products of :func:`_best_overlapped`, factor by factor (a factor it skips is 1.0: no change)."""
    import numpy as np

    parts = [k.split("-")[:3] for k, _ in cands]
    dma = np.array([ex == "dma" for _, ex, _ in parts])
    shard = np.array([comm == "shard" for comm, _, _ in parts])
    ksp = np.array([sp == "K" for _, _, sp in parts])
    msp = np.array([sp == "M" for _, _, sp in parts])
    tt = est[None, :] * np.where(dma[None, :], (1.0 + hc["dma_bias"])[:, None], 1.0)
    tt = tt * np.where(shard[None, :], (1.0 + hc["shard_bias"])[:, None], 1.0)
    kf = np.where(msp[None, :], (1.0 + hc["m_bias"])[:, None], 1.0)
    return tt * np.where(ksp[None, :], (1.0 + hc["k_bias"])[:, None], kf)


def _named_pick(cand: str, f: dict, r: Rules, times: dict[str, float]) -> str:
    """The simulated schedule an overlapped choice runs as (its first legal fallback), else bulk."""
    for ax in _fallbacks(_axes_of(cand, f, r)):
        if ax.name in times:
            return ax.name
    return "bulk-g1-M-cu"


def rule_pick(f: dict, r: Rules) -> Axes:
    """The rules on a feature dict (no legality check)."""
    best, best_t = _best_overlapped(f, r)
    margin = r.rs_margin if f["op"] == "gemm-rs" else r.margin
    if best is None or not best_t < f["estimates_s"]["bulk"] * (1.0 - margin):
        return Axes("bulk", 1, "M", "cu")
    return _axes_of(best, f, r)


def _fallbacks(ax: Axes) -> list[Axes]:
    return [ax, Axes(ax.comm, ax.g, ax.split, ax.executor, reduce=ax.reduce),
            Axes(ax.comm, ax.g // 2 or 1, ax.split, ax.executor, reduce=ax.reduce),
            Axes("bulk", 1, "M", "cu")]  # fmt: skip


def select(
    fop: FiccoOperator, hw: Hardware, rules: Rules = SHIPPED, f: dict | None = None
) -> tuple[str, dict]:
    """(schedule name, features) chosen from static sizes; always a legal schedule. ``f``: the
    operator's :func:`features` on ``hw`` if already computed."""
    check_fits(fop, hw)
    f = features(fop, hw) if f is None else f
    for cand in _fallbacks(rule_pick(f, rules)):
        if legality(fop, hw, cand) is None:
            return cand.name, f
    return "bulk-g1-M-cu", f


def within(times: dict[str, float], name: str, tol: float = 0.02) -> bool:
    """The pick is right: it is the exhaustive best or within ``tol`` of its time."""
    best = min(times.values())
    return name in times and times[name] <= best * (1.0 + tol)


def _legal_pick(row: dict, r: Rules) -> str:
    for cand in _fallbacks(rule_pick(row["features"], r)):
        if cand.name in row["times"]:
            return cand.name
    return "bulk-g1-M-cu"


def accuracy(rows: list[dict], r: Rules, tol: float = 0.02) -> int:
    return sum(within(row["times"], _legal_pick(row, r), tol) for row in rows)


def score(rows: list[dict], r: Rules, tol: float = 0.02) -> tuple[int, float]:
    """(right picks, minus the summed relative gap of the picks to the exhaustive best)."""
    hits, gap = 0, 0.0
    for row in rows:
        t = row["times"]
        p = _legal_pick(row, r)
        hits += within(t, p, tol)
        gap += t[p] / min(t.values()) - 1.0
    return hits, -gap


def fit(rows: list[dict], tol: float = 0.02) -> tuple[Rules, float]:
    """Exhaustive search of :data:`GRID` maximising design-case accuracy, then (among equally
    accurate ones) the least summed time gap of the picks to the exhaustive best; remaining ties go
    to the first combination in grid order. ``rows``: dicts with ``features`` and ``times``.

    The overlapped choice of a row depends on the handicaps (every field but the two margins) only,
    so it is found once per (row, handicaps); the margins then only decide, row by row, between that
    choice and bulk, which is done for every margin pair at once (hits counted, gaps summed in row
    order, as :func:`score` sums them)."""
    import numpy as np

    keys = list(GRID)
    hkeys = keys[2:]  # the handicaps; margin and rs_margin are the first two fields
    assert keys[:2] == ["margin", "rs_margin"] and keys[-1] == "big_waves"
    bulk_name = "bulk-g1-M-cu"
    nr = len(rows)
    best_t = [min(row["times"].values()) for row in rows]

    def hit_gap(i: int, name: str) -> tuple[int, float]:
        t = rows[i]["times"]
        return int(within(t, name, tol)), t[name] / best_t[i] - 1.0

    h0 = np.empty(nr)
    g0 = np.empty(nr)
    for i in range(nr):
        h0[i], g0[i] = hit_gap(i, bulk_name)
    hcombos = list(itertools.product(*(GRID[k] for k in hkeys)))
    hc = {k: np.array([v[j] for v in hcombos]) for j, k in enumerate(hkeys)}
    ct = np.full((len(hcombos), nr), INF)
    h1 = np.repeat(h0[None, :], len(hcombos), axis=0)
    g1 = np.repeat(g0[None, :], len(hcombos), axis=0)
    for i, row in enumerate(rows):
        f, t = row["features"], row["times"]
        cands = [(k, v) for k, v in f["estimates_s"].items() if k != "bulk"]
        if not cands:
            continue
        est = np.array([v for _, v in cands])
        tt = _handicapped(cands, est, hc)
        if np.isnan(tt).any():  # (never in practice) the candidate loop's comparisons, one by one
            for c, vals in enumerate(hcombos):
                r = Rules(**dict(zip(hkeys, vals, strict=True)))
                cand, cti = _best_overlapped(f, r)
                if cand is not None:
                    ct[c, i] = cti
                    h1[c, i], g1[c, i] = hit_gap(i, _named_pick(cand, f, r, t))
            continue
        first = np.argmin(tt, axis=1)  # the first least, as the strict comparison keeps it
        least = tt[np.arange(len(hcombos)), first]
        named: dict[tuple, tuple[int, float]] = {}
        for c in np.flatnonzero(least < INF):
            cand = cands[first[c]][0]
            bw = hcombos[c][-1]
            hg = named.get((cand, bw))
            if hg is None:
                r = Rules(big_waves=bw)
                hg = named[cand, bw] = hit_gap(i, _named_pick(cand, f, r, t))
            ct[c, i] = least[c]
            h1[c, i], g1[c, i] = hg
    bulk_est = np.array([row["features"]["estimates_s"]["bulk"] for row in rows])
    rs = np.array([row["features"]["op"] == "gemm-rs" for row in rows])
    pairs = list(itertools.product(GRID["margin"], GRID["rs_margin"]))
    hits = np.empty((len(pairs), len(hcombos)), dtype=np.int64)
    gaps = np.empty((len(pairs), len(hcombos)))
    for p, (m, rsm) in enumerate(pairs):
        thr = np.where(rs, bulk_est * (1.0 - rsm), bulk_est * (1.0 - m))
        over = ct < thr[None, :]
        hits[p] = np.where(over, h1, h0[None, :]).sum(axis=1)
        gap = np.where(over, g1, g0[None, :])
        gaps[p] = np.cumsum(gap, axis=1)[:, -1] if nr else 0.0  # left to right, as a running sum
    hits, gaps = hits.ravel(), gaps.ravel()  # grid order: margins outermost, as itertools.product
    top = hits == hits.max()
    first = int(np.flatnonzero(top & (gaps == gaps[top].min()))[0])
    p, c = divmod(first, len(hcombos))
    vals = pairs[p] + hcombos[c]
    return Rules(**dict(zip(keys, vals, strict=True))), int(hits[first]) / max(1, nr)


def cross_validate(rows: list[dict], folds: int = 4, tol: float = 0.02) -> dict:
    """k-fold cross-validation of :func:`fit` within ``rows``: operator ``index % folds`` is the
    held-out fold (both presets of an operator together). Returns right picks on held-out cases."""
    right, per = 0, []
    for f in range(folds):
        train = [r for r in rows if r["index"] % folds != f]
        test = [r for r in rows if r["index"] % folds == f]
        if not train or not test:
            continue
        rf, _ = fit(train, tol)
        h = accuracy(test, rf, tol)
        right += h
        per.append({"fold": f, "right": h, "cases": len(test), "rules": rules_dict(rf)})
    n = sum(p["cases"] for p in per)
    return {"folds": per, "right": right, "cases": n, "accuracy_pct": 100.0 * right / max(1, n)}


def rules_dict(r: Rules) -> dict:
    return {k: (None if v == INF else v) for k, v in asdict(r).items()}
