"""Work estimates and the size guard: inputs that would run for minutes and grow to gigabytes are
refused before anything is built, unless forced (``--force``, ``force=True``).

The estimate is computed from the shapes and the hardware in a fraction of a second, without building a
schedule (the GEMM's tile is the one ``plan_gemm`` picks for at most :data:`TILE_PROBE_WAVES` waves of
rows). Its unit is the *op*, about 10 µs of CPU on one core and at most 2 kB of memory
(:data:`PROMISE`, measured by ``benchmarks/size_guard.py``). :attr:`Work.cost`, what the limits apply
to, adds two terms:

- simulated ops: one op of a schedule is about one engine event. A sublayer simulation (``t3 run``,
  each point of a sweep or reproduction) builds, on each simulated GPU (one on the symmetric fast
  path, ``tp`` with ``--all-gpus`` or functional mode), two ops per GEMM wave (load, compute) and the
  collectives' steps: ``ops = gpus_simulated x (2 x waves + 4 x tp)`` with
  ``waves = ceil(tiles / (cus x wg_per_cu))`` in the tile the plan picks. The preset's tile is the
  menu's largest: the plan's 128x64 tiles doubled the waves of ``t3 run --tokens 100000000``, which
  was estimated at 996,136 ops and ran 200 s in 5.7 GB. T3 adds up to two tile groups per wave (a
  store or DMA op each, and a burst op where the DMA engines stage) and ``3 x tp`` ops per simulated GPU
  (its all-gather's steps and per-stage ops). A FiCCO exploration simulates every candidate schedule (full,
  ideal and communication-only runs): ``ops = 2 x candidates x gpus_simulated x (2 x waves + 2 x
  gpus^2 + 8)``. ``t3 ficco select`` plans the pieces of every candidate without simulating them:
  ``candidates x (waves + gpus^2) / 10`` (one candidate where the learned tree decides).
- :data:`PLAN_WEIGHT` per GEMM wave planned (``Work.planned``): ``plan_gemm`` walks every tile of the
  menu over the whole GEMM (the blocks of each wave, their L2 reuse distances, its time alone), about
  50 µs per wave: most of a sublayer run's time and memory (its engine events cost 1-3 µs each).
- :data:`MAP_WEIGHT` per entry of T3's address maps (``Work.mapped``): every GPU maps every chunk,
  ``tp x tp`` entries built once whatever the GPUs simulated (TP 4096: 17 million entries, about a
  minute and 4 GB).

A multi-point command (sweep, reproduction) sums its points. Limits (documented in ``--help`` and
``docs/architecture.md``): :data:`LIMIT_OPS` for one simulation or one exploration (about 20 s),
:data:`LIMIT_TOTAL_OPS` for a whole sweep or reproduction, and :data:`LIMIT_POINTS` points per sweep
(checked from the grid's axis lengths, before expanding it).
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from t3.errors import TooLargeError

PROMISE_S = 10.0  # CPU seconds per 1e6 estimated ops (benchmarks/size_guard.py)
PROMISE_GB = 2.0  # GB of memory per 1e6 estimated ops (at most)
PROMISE = f"about {PROMISE_S:.0f} s of CPU and up to {PROMISE_GB:g} GB per 1e6 ops"
LIMIT_OPS = 2_000_000  # one simulation / exploration: about 20 s, up to 4 GB (PROMISE)
LIMIT_TOTAL_OPS = 50_000_000  # a whole sweep or reproduction: about 8 min of CPU (PROMISE), parallel or not
LIMIT_POINTS = 100_000  # points of one sweep grid

T3_CONFIGS = ("t3", "t3-mca")


@dataclass(frozen=True)
class Work:
    """Estimated ops (~ engine events) of a piece of work, and what they come from (for messages)."""

    ops: float
    what: str
    planned: float = 0.0  # GEMM waves planned (every tile of the menu is planned over the whole GEMM)
    mapped: float = 0.0  # address-map entries built (T3: every GPU maps every chunk, tp x tp)

    @property
    def cost(self) -> float:
        """What the limit applies to, in op-equivalents (about 10 µs of CPU each): the simulated ops,
        :data:`PLAN_WEIGHT` per planned GEMM wave, :data:`MAP_WEIGHT` per address-map entry."""
        return self.ops + PLAN_WEIGHT * self.planned + MAP_WEIGHT * self.mapped

    def describe(self) -> str:
        parts = [f"{self.ops:.2g} simulated"]
        if self.planned:
            parts.append(f"{self.planned:.2g} GEMM waves planned x {PLAN_WEIGHT}")
        if self.mapped:
            parts.append(f"{self.mapped:.2g} address-map entries x {MAP_WEIGHT}")
        return " + ".join(parts)

    def __add__(self, other: Work) -> Work:
        return Work(self.ops + other.ops, self.what, self.planned + other.planned, self.mapped + other.mapped)


# one planned GEMM wave (pass over its blocks, L2 reuse distances, its alone time, for every tile of the
# menu) costs about 50 µs of CPU, five simulated ops of an exploration (8-10 µs each, its pieces'
# planning included): benchmarks/size_guard.py
PLAN_WEIGHT = 5

# one entry of T3's address maps (built once per layout, whatever the number of GPUs simulated) costs
# about 3.3 µs of CPU and 250 bytes (``ring_rs_maps`` at 512-2048 GPUs): a third of an op
MAP_WEIGHT = 0.35


def _ceil(a: float, b: float) -> int:
    return max(1, math.ceil(a / b))


# a GEMM of more rows than this many waves of the preset's tile picks the tile it picks for this many
# (on the 480 shapes x presets x chunkings of tests/test_size_guards.py the choice no longer changes)
TILE_PROBE_WAVES = 128


def gemm_tile(m: int, n: int, k: int, dtype: str, hw, *, chunks: int = 1, cus: int | None = None) -> tuple:
    """The macro-tile ``plan_gemm`` picks for an M x N x K GEMM: planned for at most
    :data:`TILE_PROBE_WAVES` waves of the preset's tile (a fraction of a second), the rows beyond
    leave the choice unchanged (and the columns beyond that many waves in one tile row, for an
    output wider than any model's: planning all of them took minutes and gigabytes). The preset's
    tile is the largest of the menu, so smaller tiles (up to 4x the waves on a 128 x 128 preset, 16x
    on 256 x 256) are what the estimate must know about."""
    from t3.ops.gemm import plan_gemm
    from t3.workload.sublayers import GemmShape

    c = hw.compute
    cus = c.cus if cus is None else cus
    per_wave = TILE_PROBE_WAVES * cus * c.wg_per_cu
    rows = _ceil(per_wave, _ceil(n, c.tile_n)) * c.tile_m
    rows = chunks * _ceil(rows, chunks * c.tile_m) * c.tile_m
    cols = per_wave * c.tile_n  # (an output wider than this many waves in one tile row: its first columns)
    if (m <= rows or m % chunks) and n <= cols:
        rows, cols = m, n  # the GEMM's own plan (memoised: the simulation reuses it)
    plan = plan_gemm(GemmShape(min(rows, m), min(cols, n), k, dtype), hw, chunks=chunks, cus=cus)
    return plan.tile_m, plan.tile_n


def gemm_waves(
    m: int, n: int, hw, *, chunks: int = 1, cus: int | None = None, k: int | None = None,
    dtype: str | None = None,
) -> int:  # fmt: skip
    """Waves of an M x N output cut into ``chunks`` row blocks (the tile count of ``plan_gemm``):
    with ``k`` and ``dtype``, in the tile the plan picks (:func:`gemm_tile`); without, in the preset's
    tile (the largest of the menu: a lower bound)."""
    c = hw.compute
    cus = c.cus if cus is None else cus
    bm, bn = (
        (c.tile_m, c.tile_n)
        if k is None or dtype is None
        else gemm_tile(m, n, k, dtype, hw, chunks=chunks, cus=cus)
    )
    tiles = chunks * _ceil(m / chunks, bm) * _ceil(n, bn)
    return _ceil(tiles, cus * c.wg_per_cu)


def planned_waves(m: int, n: int, hw, *, chunks: int = 1, cus: int | None = None) -> int:
    """Waves ``plan_gemm`` walks to pick a tile: every tile of the menu, over the whole GEMM."""
    from t3.ops.gemm import tile_menu

    c = hw.compute
    cus = c.cus if cus is None else cus
    return sum(
        _ceil(chunks * _ceil(m / chunks, bm) * _ceil(n, bn), cus * c.wg_per_cu) for bm, bn in tile_menu(hw)
    )


def run_work(
    op, hw, config: str, symmetric: bool = True, functional: bool = False, comm_cus: int = 16
) -> Work:
    """Estimated ops of one sublayer simulation (see the module docstring)."""
    tp, g = op.tp, op.gemm
    t3 = config in T3_CONFIGS
    from t3.ops.gemm import cus_beside

    cus = cus_beside(hw, comm_cus) if config == "concurrent" and 0 < comm_cus < hw.compute.cus else None
    cus = cus or None
    chunks = tp if t3 and g.m % tp == 0 else 1
    waves = gemm_waves(g.m, g.n, hw, chunks=chunks, cus=cus, k=g.k, dtype=g.dtype)
    gpus = tp if (not symmetric or functional) else 1
    if t3:
        # load + compute per wave, up to two tile groups per wave (cut at a chunk boundary and where
        # the downstream GPU's groups start), each one store or DMA op (and a burst op where the DMA
        # engines stage), the all-gather's tp - 1 steps and a few ops per stage
        groups = 2 * waves * (2 if hw.dma.staging_bytes else 1)
        ops = gpus * (2 * waves + groups + 3 * tp)
    else:
        ops = gpus * (2 * waves + 4 * tp)  # load + compute per wave, the RS and AG steps
    bm, bn = gemm_tile(g.m, g.n, g.k, g.dtype, hw, chunks=chunks, cus=cus)
    what = (
        f"{config}, TP {tp}, GEMM {g.m}x{g.n}x{g.k} in {waves} waves of "
        f"{bm}x{bn} tiles, {gpus} GPU(s) simulated"
    )
    planned = float(planned_waves(g.m, g.n, hw, chunks=chunks, cus=cus))
    return Work(float(ops), what, planned, float(tp * tp) if t3 else 0.0)


def _ficco_waves(fop, hw) -> int:
    if fop.op == "moe":
        rows = math.ceil(fop.m * (1 + fop.skew))
        return gemm_waves(rows, 2 * fop.n, hw) + gemm_waves(rows, fop.k, hw)
    return gemm_waves(fop.m, fop.n, hw)


def _ficco_planned(fop, hw) -> int:
    """GEMM waves planned for the operation's whole GEMM(s) (every tile of the menu)."""
    if fop.op == "moe":
        rows = math.ceil(fop.m * (1 + fop.skew))
        return planned_waves(rows, 2 * fop.n, hw) + planned_waves(rows, fop.k, hw)
    return planned_waves(fop.m, fop.n, hw)


def explore_work(fop, hw) -> Work:
    """Estimated ops of ``t3 ficco explore`` (every candidate schedule, about four simulations each);
    planned: the GEMM alone, and its pieces once per granularity (plans are memoised by shape)."""
    from t3.ficco.space import candidates, granularities

    n = fop.gpus
    gpus = 1 if fop.symmetric else n
    per = gpus * (2 * _ficco_waves(fop, hw) + 2 * n * n + 8)
    cands = len(candidates(fop))
    planned = (1 + len(granularities(n))) * _ficco_planned(fop, hw)
    return Work(
        2.0 * cands * per,
        f"{cands} candidate schedules of {fop.describe()}, {gpus} GPU(s) simulated",
        float(planned),
    )


def select_work(fop, hw) -> Work:
    """Estimated ops of ``t3 ficco select`` (GEMM pieces of every candidate planned, none simulated)."""
    from t3.ficco.space import candidates

    n = fop.gpus
    pipeline = hw.topology.kind in ("mesh", "switch") and fop.symmetric
    cands = len(candidates(fop)) if pipeline else 1
    ops = cands * (_ficco_waves(fop, hw) + n * n) / 10
    return Work(ops, f"GEMM pieces of {cands} candidate schedule(s) of {fop.describe()} planned")


def gemm_work(m: int, n: int, k: int, dtype: str, hw) -> Work:
    """Estimated ops of one GEMM alone (``t3.api.gemm``): a load and a compute op per wave."""
    waves = gemm_waves(m, n, hw, k=k, dtype=dtype)
    bm, bn = gemm_tile(m, n, k, dtype, hw)
    return Work(
        2.0 * waves + 2,
        f"GEMM {m}x{n}x{k} {dtype} in {waves} waves of {bm}x{bn} tiles",
        planned_waves(m, n, hw),
    )


def overlap_work(fop, hw, schedule: str) -> Work:
    """Estimated ops of ``t3.api.overlap``: ``"best"`` explores every candidate (the estimate and the
    limit of ``t3 ficco explore``); a named schedule runs one candidate and the operation's GEMM and
    collective alone (two simulations' worth of one candidate)."""
    if schedule == "best":
        return explore_work(fop, hw)
    n = fop.gpus
    gpus = 1 if fop.symmetric else n
    per = gpus * (2 * _ficco_waves(fop, hw) + 2 * n * n + 8)
    return Work(
        2.0 * per,
        f"schedule {schedule} of {fop.describe()}, {gpus} GPU(s) simulated",
        2.0 * _ficco_planned(fop, hw),  # the GEMM alone and the schedule's pieces
    )


# No hardware preset has a memory-capacity field (hbm.capacity_bytes); until one does, a collective's
# buffer is bounded by the largest HBM of the GPUs the presets model (MI300X: 192 GB, datasheet).
MAX_HBM_BYTES = 192e9


def check_collective_bytes(
    op: str, nbytes: float, hw, *, force: bool = False, flag: str = "force=True"
) -> None:
    """Refuse a collective whose buffer on one GPU (``nbytes``, nccl-tests sizes; an all-to-all holds
    its send and its receive buffer) is more than one GPU's memory, unless ``force``."""
    cap = getattr(hw.hbm, "capacity_bytes", None)
    where = (
        "hbm.capacity_bytes"
        if cap
        else (f"'{hw.name}' has no hbm.capacity_bytes; the largest HBM of the modelled GPUs")
    )
    cap = float(cap or MAX_HBM_BYTES)
    held = 2.0 * nbytes if op == "all_to_all" else float(nbytes)
    if force or _FORCED.get() or held <= cap:
        return
    what = "send + receive buffers" if op == "all_to_all" else "buffer"
    raise TooLargeError(
        f"size: nbytes = {nbytes:.3g} bytes ({op}: {held:.3g} bytes of {what} per GPU) is more than one "
        f"GPU's memory ({cap:.3g} bytes, {where}); use a smaller size, or {flag} to run it anyway"
    )


def validation_work(rows) -> Work:
    """Estimated ops of ``t3 validate`` over ``rows`` (each distinct prediction once, as the runner
    memoises them). A row that cannot be estimated counts nothing here: running it raises its error."""
    from t3.config.hardware import load_hardware
    from t3.errors import T3Error
    from t3.ficco.space import FiccoOperator

    seen: dict[tuple, float] = {}
    hws: dict[str, object] = {}
    for r in rows:
        w = r.workload
        try:
            hw = hws.get(r.hardware) or hws.setdefault(r.hardware, load_hardware(r.hardware))
            if r.category == "gemm_tflops":
                key = ("gemm", w["m"], w["n"], w["k"], w["dtype"], r.hardware)
                if key not in seen:
                    seen[key] = gemm_work(w["m"], w["n"], w["k"], w["dtype"], hw).cost
            elif r.category == "interference":  # the GEMM alone and beside the communication
                key = ("interference", w["m"], w["n"], w["k"], w["dtype"], r.hardware)
                if key not in seen:
                    seen[key] = 4 * gemm_work(w["m"], w["n"], w["k"], w["dtype"], hw).cost
            elif r.category.startswith("overlap") or "schedule" in w:
                fop = FiccoOperator(w["op"], w["m"], w["n"], w["k"], w["gpus"], w["dtype"])
                for sched in (w.get("schedule"), w.get("baseline")):
                    key = (
                        "overlap",
                        w["op"],
                        w["m"],
                        w["n"],
                        w["k"],
                        w["gpus"],
                        w["dtype"],
                        sched,
                        r.hardware,
                    )
                    if sched and key not in seen:
                        seen[key] = overlap_work(fop, hw, sched).cost
            else:  # collectives, memory streams, latencies: tens of ops whatever the size
                seen.setdefault((r.category, repr(sorted(w.items())), r.hardware), 100.0)
        except (T3Error, KeyError, TypeError, ValueError):
            continue
    return Work(sum(seen.values()), f"{len(seen)} distinct predictions of {len(list(rows))} rows")


def trace_work(trace, hw, ficco: str = "explore", gpus: int | None = None) -> Work:
    """Estimated ops of ``t3 trace project``: per distinct GEMM / collective pair, the sublayer
    configurations (sequential, ideal, T3, T3-MCA) for a GEMM + all-reduce or reduce-scatter, the GEMM
    alone for the others, and FiCCO's exploration (``explore``) or selection (``select``)."""
    from t3.errors import T3Error
    from t3.ficco.space import FiccoOperator
    from t3.workload.sublayers import GemmShape, Operator

    seen: dict[tuple, float] = {}
    for p in trace.pairs:
        g = p.gemm
        n = gpus or p.collective.group_size
        rows = g.m * g.batch
        key = (p.kind, rows, g.n, g.k, g.dtype, n)
        if key in seen or not n or n < 2:
            continue
        try:
            ops = 0.0
            fic = None
            if p.kind in ("gemm-ar", "gemm-rs"):
                op = Operator("trace", "pair", "forward", n, rows, GemmShape(rows, g.n, g.k, g.dtype))
                ops += sum(
                    run_work(op, hw, c).cost for c in ("sequential", "ideal-gemm-rs-overlap", "t3", "t3-mca")
                )
                fic = FiccoOperator("gemm-rs", rows, g.n, g.k, n, g.dtype) if p.kind == "gemm-rs" else None
            else:
                ops += gemm_work(rows, g.n, g.k, g.dtype, hw).cost
                if p.kind == "ag-gemm":
                    fic = FiccoOperator("ag-gemm", rows, g.n, g.k, n, g.dtype)
                elif p.kind == "ag-gemm-w":
                    fic = FiccoOperator("ag-gemm", g.n, rows, g.k, n, g.dtype)
            if fic is not None:
                ops += (explore_work(fic, hw) if ficco == "explore" else select_work(fic, hw)).cost
            seen[key] = ops
        except (T3Error, ValueError, ZeroDivisionError):
            seen[key] = 0.0
    return Work(sum(seen.values()), f"{len(seen)} distinct GEMM / collective pairs of {len(trace.pairs)}")


_FORCED: contextvars.ContextVar[bool] = contextvars.ContextVar("t3_size_forced", default=False)


@contextmanager
def forced(on: bool = True) -> Iterator[None]:
    """Inside the block every guard passes (``on``): a command that was forced (``--force``) and runs
    its work through entry points that guard themselves again (``t3 validate --data``)."""
    token = _FORCED.set(bool(on) or _FORCED.get())
    try:
        yield
    finally:
        _FORCED.reset(token)


def check(work: Work, *, force: bool = False, limit: float | None = None, flag: str = "--force") -> None:
    """Refuse ``work`` above ``limit`` (default :data:`LIMIT_OPS`) unless ``force`` (one line: the
    estimate, what it comes from, the way out)."""
    limit = LIMIT_OPS if limit is None else limit
    if force or _FORCED.get() or work.cost <= limit:
        return
    raise TooLargeError(
        f"size: about {work.cost:.2g} ops of simulation work ({work.describe()}; {work.what}) is above the limit of "
        f"{limit:.0e} ({PROMISE}); use a smaller input, or {flag} to run it anyway"
    )
