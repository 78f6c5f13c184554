"""Work estimates and the size guard: inputs that would run for minutes and grow to gigabytes are
refused before anything is built, unless forced (``--force``, ``force=True``).

The estimate is computed from the shapes and the hardware alone, in microseconds, without planning a
GEMM or building a schedule. Its unit is the *op*: one op of a schedule is about one engine event and
costs 20-60 µs of CPU on one core (``benchmarks/bench_sim.py``); the simulator's memory grows with the
ops too (about 1-2 kB each).

- A sublayer simulation (``t3 run``, each point of a sweep or reproduction) builds, on each simulated
  GPU (one on the symmetric fast path, ``tp`` with ``--all-gpus`` or functional mode), two ops per
  GEMM wave (load, compute), one tile group per wave for T3's fused reduce-scatter, and two ops per
  peer for the reduce-scatter and all-gather steps: ``ops = gpus_simulated x (3 x waves + 4 x tp + 8)``
  with ``waves = ceil(tiles / (cus x wg_per_cu))`` and the tiles of the (staggered, for T3) GEMM.
  T3 configurations also build address maps of ``tp x tp`` entries per simulated GPU, counted as ops.
- A FiCCO exploration simulates every candidate schedule (full, ideal and communication-only runs);
  each builds, per simulated GPU, two ops per GEMM wave plus the ``gpus^2`` transfers of the finest
  split: ``ops = 2 x candidates x gpus_simulated x (2 x waves + 2 x gpus^2 + 8)`` (measured on the
  scenario set: 10-30 µs per estimated op). ``t3 ficco select`` plans the pieces of every candidate
  without simulating them; planning a wave costs about a tenth of simulating it, so its estimate is
  ``candidates x (waves + gpus^2) / 10`` (one candidate where the learned tree decides: rings and
  skewed MoE).
- A multi-point command (sweep, reproduction) sums its points.

Limits (documented in ``--help`` and ``docs/architecture.md``): :data:`LIMIT_OPS` for one simulation
or one exploration (about a minute), :data:`LIMIT_TOTAL_OPS` for a whole sweep or reproduction, and
:data:`LIMIT_POINTS` points per sweep (checked from the grid's axis lengths, before expanding it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.errors import TooLargeError

LIMIT_OPS = 1_000_000  # one simulation / exploration: ~20-60 s and ~1-2 GB
LIMIT_TOTAL_OPS = 50_000_000  # a whole sweep or reproduction: ~30 min on one core
LIMIT_POINTS = 100_000  # points of one sweep grid

T3_CONFIGS = ("t3", "t3-mca")


@dataclass(frozen=True)
class Work:
    """Estimated ops (~ engine events) of a piece of work, and what they come from (for messages)."""

    ops: float
    what: str

    def __add__(self, other: Work) -> Work:
        return Work(self.ops + other.ops, self.what)


def _ceil(a: float, b: float) -> int:
    return max(1, math.ceil(a / b))


def gemm_waves(m: int, n: int, hw, *, chunks: int = 1, cus: int | None = None) -> int:
    """Waves of an M x N output cut into ``chunks`` row blocks (the tile count of ``plan_gemm``)."""
    c = hw.compute
    tiles = chunks * _ceil(m / chunks, c.tile_m) * _ceil(n, c.tile_n)
    return _ceil(tiles, (cus or c.cus) * c.wg_per_cu)


def run_work(op, hw, config: str, symmetric: bool = True, functional: bool = False) -> Work:
    """Estimated ops of one sublayer simulation (see the module docstring)."""
    tp, g = op.tp, op.gemm
    t3 = config in T3_CONFIGS
    waves = gemm_waves(g.m, g.n, hw, chunks=tp if t3 else 1)
    gpus = tp if (not symmetric or functional) else 1
    ops = gpus * (3 * waves + 4 * tp + 8)
    if t3:
        ops += gpus * tp * tp
    what = (
        f"{config}, TP {tp}, GEMM {g.m}x{g.n}x{g.k} in {waves} waves of "
        f"{hw.compute.tile_m}x{hw.compute.tile_n} tiles, {gpus} GPU(s) simulated"
    )
    return Work(float(ops), what)


def _ficco_waves(fop, hw) -> int:
    if fop.op == "moe":
        rows = math.ceil(fop.m * (1 + fop.skew))
        return gemm_waves(rows, 2 * fop.n, hw) + gemm_waves(rows, fop.k, hw)
    return gemm_waves(fop.m, fop.n, hw)


def explore_work(fop, hw) -> Work:
    """Estimated ops of ``t3 ficco explore`` (every candidate schedule, about four simulations each)."""
    from t3.ficco.space import candidates

    n = fop.gpus
    gpus = 1 if fop.symmetric else n
    per = gpus * (2 * _ficco_waves(fop, hw) + 2 * n * n + 8)
    cands = len(candidates(fop))
    return Work(
        2.0 * cands * per, f"{cands} candidate schedules of {fop.describe()}, {gpus} GPU(s) simulated"
    )


def select_work(fop, hw) -> Work:
    """Estimated ops of ``t3 ficco select`` (GEMM pieces of every candidate planned, none simulated)."""
    from t3.ficco.space import candidates

    n = fop.gpus
    pipeline = hw.topology.kind in ("mesh", "switch") and fop.symmetric
    cands = len(candidates(fop)) if pipeline else 1
    ops = cands * (_ficco_waves(fop, hw) + n * n) / 10
    return Work(ops, f"GEMM pieces of {cands} candidate schedule(s) of {fop.describe()} planned")


def check(work: Work, *, force: bool = False, limit: float | None = None, flag: str = "--force") -> None:
    """Refuse ``work`` above ``limit`` (default :data:`LIMIT_OPS`) unless ``force`` (one line: the
    estimate, what it comes from, the way out)."""
    limit = LIMIT_OPS if limit is None else limit
    if force or work.ops <= limit:
        return
    raise TooLargeError(
        f"size: about {work.ops:.2g} ops of simulation work ({work.what}) is above the limit of {limit:.0e} "
        f"(about a minute and a GB per 1e6 ops); use a smaller input, or {flag} to run it anyway"
    )
