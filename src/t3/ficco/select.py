"""The heuristic schedule selector: static operator sizes and peak rates in, a schedule name out.

No simulation: the features are closed forms of the operator and the hardware preset.

Features (all from static sizes):
- ``t_compute_s`` = GEMM FLOPs / (matrix peak x ``gemm_efficiency``);
- ``t_comm_s`` = bytes a GPU sends / its egress bandwidth (mesh: N-1 links; switch, ring: one port);
- ``comm_ratio`` = t_comm / t_compute;
- ``waves`` = macro-tiles of the whole GEMM / CUs (how many full waves the undecomposed GEMM has);
- ``msg_over_dma`` = time of one FiCCO piece on a link / the DMA per-command overhead;
- ``topology``.

Rules (the thresholds ``Rules`` are fitted on the design cases by :func:`fit`, see docs/ficco.md):
1. Too small to overlap: if ``t_compute + t_comm < small_s``, or ``comm_ratio < ratio_lo``, run bulk.
2. GEMM -> reduce-scatter overlaps only if ``rs_overlap``; otherwise bulk.
3. Communication: ``ficco`` on a mesh (only per-piece transfers to every peer use all links); on a
   switch, ``switch_comm`` (shard-level already uses the full port).
4. Executor: DMA if ``msg_over_dma >= dma_msg`` (the message hides the command overhead), else CUs.
5. Compute pieces: 2N if ``waves >= big_waves`` (large GEMMs keep full waves when cut finer), else N.
6. Split: M (rows) for all-gather and MoE; ``rs_split`` for reduce-scatter. Two compute streams.
If the rule's schedule is illegal for the operator, one stream, then bulk, are tried.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from t3.config.hardware import Hardware
from t3.ficco.space import Axes, FiccoOperator, legality

INF = math.inf


@dataclass(frozen=True)
class Rules:
    small_s: float = 50e-6
    ratio_lo: float = 0.1
    rs_overlap: bool = False
    switch_comm: str = "shard"
    dma_msg: float = 2.0
    big_waves: float = INF
    rs_split: str = "N"


GRID = {
    "small_s": [0.0, 25e-6, 50e-6, 100e-6, 200e-6],
    "ratio_lo": [0.0, 0.05, 0.1, 0.2, 0.3],
    "rs_overlap": [False, True],
    "switch_comm": ["shard", "ficco"],
    "dma_msg": [0.0, 1.0, 2.0, 4.0, 8.0, INF],
    "big_waves": [INF, 2.0, 4.0, 8.0],
    "rs_split": ["M", "N"],
}

# The thresholds fitted on the design cases by `t3 reproduce ficco` (it re-fits and reports whether
# the fit still gives these values).
SHIPPED = Rules()


def features(fop: FiccoOperator, hw: Hardware) -> dict:
    c = hw.compute
    n = fop.gpus
    t_comp = fop.flops() / (c.peak_flops(fop.dtype) * c.gemm_efficiency)
    links = (n - 1) if hw.topology.kind == "mesh" else 1
    t_comm = fop.comm_bytes() / (links * hw.link.bandwidth_Bps)
    if fop.op == "moe":
        rows, cols = fop.expert_rows()[0] * n, 2 * fop.n
    else:
        rows, cols = fop.m, fop.n
    tiles = math.ceil(rows / c.tile_m) * math.ceil(cols / c.tile_n)
    piece = fop.comm_bytes() / ((n - 1) * n) / hw.link.bandwidth_Bps
    return {
        "op": fop.op,
        "topology": hw.topology.kind,
        "gpus": n,
        "t_compute_s": t_comp,
        "t_comm_s": t_comm,
        "comm_ratio": t_comm / t_comp,
        "waves": tiles / c.cus,
        "msg_over_dma": piece / max(hw.dma.command_overhead_s, 1e-12),
    }


def rule_pick(f: dict, r: Rules) -> Axes:
    """The rules on a feature dict (no legality check)."""
    n = f["gpus"]
    bulk = Axes("bulk", 1, "M", "cu")
    if f["t_compute_s"] + f["t_comm_s"] < r.small_s or f["comm_ratio"] < r.ratio_lo:
        return bulk
    if f["op"] == "gemm-rs" and not r.rs_overlap:
        return bulk
    comm = "ficco" if f["topology"] == "mesh" else r.switch_comm
    if f["topology"] == "ring":
        comm = "ficco"
    ex = "dma" if f["msg_over_dma"] >= r.dma_msg else "cu"
    g = 2 * n if f["waves"] >= r.big_waves else n
    split = r.rs_split if f["op"] == "gemm-rs" else "M"
    return Axes(comm, g, split, ex, 0, 2, True)


def select(fop: FiccoOperator, hw: Hardware, rules: Rules = SHIPPED) -> tuple[str, dict]:
    """(schedule name, features) chosen from static sizes; always a legal schedule."""
    f = features(fop, hw)
    ax = rule_pick(f, rules)
    for cand in (ax, Axes(ax.comm, ax.g, ax.split, ax.executor), Axes("bulk", 1, "M", ax.executor)):
        if legality(fop, hw, cand) is None:
            return cand.name, f
    return Axes("bulk", 1, "M", "cu").name, f


def within(times: dict[str, float], name: str, tol: float = 0.02) -> bool:
    """The pick is right: it is the exhaustive best or within ``tol`` of its time."""
    best = min(times.values())
    return name in times and times[name] <= best * (1.0 + tol)


def fit(rows: list[dict], tol: float = 0.02) -> tuple[Rules, float]:
    """Grid search of the thresholds maximising design-case accuracy (first maximum in grid order).

    ``rows``: dicts with ``features`` and ``times`` (schedule name -> simulated seconds)."""
    keys = list(GRID)
    best: tuple[int, Rules] | None = None
    for vals in itertools.product(*(GRID[k] for k in keys)):
        r = Rules(**dict(zip(keys, vals, strict=True)))
        hits = 0
        for row in rows:
            name = _legal_pick(row, r)
            hits += within(row["times"], name, tol)
        if best is None or hits > best[0]:
            best = (hits, r)
    assert best is not None
    return best[1], best[0] / max(1, len(rows))


def _legal_pick(row: dict, r: Rules) -> str:
    ax = rule_pick(row["features"], r)
    for cand in (ax, Axes(ax.comm, ax.g, ax.split, ax.executor), Axes("bulk", 1, "M", ax.executor)):
        if cand.name in row["times"]:
            return cand.name
    return "bulk-g1-M-cu"


def rules_dict(r: Rules) -> dict:
    return {k: (None if v == INF else v) for k, v in asdict(r).items()}
