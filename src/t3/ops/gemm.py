"""Tiled GEMM model: macro-tiles, waves of workgroups, per-wave compute and DRAM traffic.

The output (M x N) is cut into ``chunks`` equal row blocks (the stages of a staggered GEMM; 1 for a
plain GEMM); each chunk is tiled into ``tile_m x tile_n`` macro-tiles (partial tiles at the edges
cost a full tile of compute: tile quantization). Tiles are dispatched in production order (chunk by
chunk in ``order``, row-major inside a chunk) in *waves* of ``cus x wg_per_cu`` workgroups.

Per wave:
- compute time = ceil(tiles / cus) x t_tile, with t_tile = 2 tile_m tile_n K / (CU matrix rate x efficiency);
- DRAM reads (L2 reuse model): every A row-block is read once (consecutive waves share the rows they
  straddle); a B column-block is read once for the whole GEMM if B fits in the usable L2, otherwise
  once per wave that touches it;
- DRAM writes: the wave's output tiles.

In a schedule each wave becomes two ops: a *load* (its DRAM reads; issued as fast as HBM allows, so it
is the phase that slows down when HBM is shared) and a *compute* (its CU work and output writes). The
load of wave i+1 runs under the compute of wave i (double buffering); see :func:`add_gemm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.config.hardware import Hardware
from t3.errors import ScheduleError
from t3.workload.sublayers import GemmShape


@dataclass(frozen=True)
class Wave:
    index: int
    n_tiles: int
    segments: tuple[tuple[int, int, int], ...]  # (chunk, first tile, end tile) in the chunk's row-major order
    read_bytes: float
    write_bytes: dict[int, float]  # chunk -> output bytes written by this wave
    compute_s: float  # alone, on `cus_used` CUs
    cus_used: int


@dataclass(frozen=True)
class GemmPlan:
    shape: GemmShape
    chunks: int
    order: tuple[int, ...]
    tile_m: int
    tile_n: int
    tiles_m_chunk: int  # tile rows per chunk
    tiles_n: int
    wave_size: int
    cus: int
    t_tile: float
    waves: tuple[Wave, ...]

    @property
    def tiles(self) -> int:
        return self.chunks * self.tiles_m_chunk * self.tiles_n

    @property
    def chunk_rows(self) -> int:
        return self.shape.m // self.chunks

    @property
    def compute_s(self) -> float:
        return sum(w.compute_s for w in self.waves)

    @property
    def read_bytes(self) -> float:
        return sum(w.read_bytes for w in self.waves)

    def last_wave_of_chunk(self) -> dict[int, int]:
        last: dict[int, int] = {}
        for w in self.waves:
            for c, _, _ in w.segments:
                last[c] = w.index
        return last

    def tile_box(self, chunk: int, t: int) -> tuple[int, int, int, int]:
        """(row0, row1, col0, col1) of tile ``t`` of ``chunk`` in output coordinates."""
        r, c = divmod(t, self.tiles_n)
        r0 = chunk * self.chunk_rows + r * self.tile_m
        r1 = min(r0 + self.tile_m, (chunk + 1) * self.chunk_rows)
        c0 = c * self.tile_n
        return r0, r1, c0, min(c0 + self.tile_n, self.shape.n)


def plan_gemm(
    shape: GemmShape,
    hw: Hardware,
    *,
    cus: int | None = None,
    chunks: int = 1,
    order: tuple[int, ...] | None = None,
) -> GemmPlan:
    c = hw.compute
    cus = c.cus if cus is None else cus
    if not 0 < cus <= c.cus:
        raise ScheduleError(f"cus: GEMM needs 1..{c.cus} CUs, got {cus}")
    if shape.m % chunks:
        raise ScheduleError(f"chunks: M={shape.m} rows do not split into {chunks} chunks")
    order = tuple(range(chunks)) if order is None else tuple(order)
    if sorted(order) != list(range(chunks)):
        raise ScheduleError(f"order: {order} is not a permutation of the {chunks} chunks")
    bm, bn = c.tile_m, c.tile_n
    rows = shape.m // chunks
    tm = math.ceil(rows / bm)
    tn = math.ceil(shape.n / bn)
    tiles_c = tm * tn
    wave_size = cus * c.wg_per_cu
    rate = c.matrix_flops_per_clk_per_cu.get(shape.dtype)
    if rate is None:
        raise ScheduleError(f"dtype: hardware '{hw.name}' has no matrix rate for {shape.dtype}")
    t_tile = 2.0 * bm * bn * shape.k / (rate * c.clock_hz * c.gemm_efficiency)
    eb = shape.elem_bytes
    a_block = bm * shape.k * eb
    b_block = bn * shape.k * eb
    b_fits = shape.k * shape.n * eb <= c.l2_bytes * c.l2_usable_fraction
    col_seen = [False] * tn
    out_c = rows * shape.n * eb
    waves = []
    total = tiles_c * chunks
    for w, lo in enumerate(range(0, total, wave_size)):
        hi = min(lo + wave_size, total)
        segs = []
        reads = 0.0
        writes: dict[int, float] = {}
        cols: set[int] | None = set()
        for pos, ch in enumerate(order):
            a, b = max(lo, pos * tiles_c) - pos * tiles_c, min(hi, (pos + 1) * tiles_c) - pos * tiles_c
            if a >= b:
                continue
            segs.append((ch, a, b))
            writes[ch] = writes.get(ch, 0.0) + out_c * (b - a) / tiles_c
            # new A row blocks: rows whose first tile lies in [a, b)
            first_row = a // tn + (1 if a % tn else 0)
            last_row = (b - 1) // tn
            reads += max(0, last_row - first_row + 1) * a_block
            if cols is not None:
                if b - a >= tn:
                    cols = None  # every column
                else:  # tiles a .. b-1 of the chunk cover these columns (wrapping at most once)
                    c0 = a % tn
                    cols.update(range(c0, min(c0 + b - a, tn)))
                    cols.update(range(0, c0 + b - a - tn))
        ucols = range(tn) if cols is None else sorted(cols)
        if b_fits:
            new = [j for j in ucols if not col_seen[j]]
            for j in new:
                col_seen[j] = True
            reads += len(new) * b_block
        else:
            reads += len(ucols) * b_block
        n = hi - lo
        per_cu = math.ceil(n / cus)
        waves.append(Wave(w, n, tuple(segs), reads, writes, per_cu * t_tile, min(n, cus)))
    # A rows partly covered by the first wave of a chunk start mid-row only if a wave boundary splits
    # it; their read was charged where the row starts, so the total is exactly M/bm row blocks.
    return GemmPlan(shape, chunks, order, bm, bn, tm, tn, wave_size, cus, t_tile, tuple(waves))


def add_gemm(
    b,
    gpu: int,
    plan: GemmPlan,
    *,
    prefix: str = "gemm",
    deps: list = (),
    prio: int = 0,
    launch: bool = True,
) -> list[tuple[int, str]]:
    """Add the plan's waves on ``gpu`` as load/compute op pairs; returns the compute-op refs by wave."""
    hw = b.hw
    cu, hbm = b.cu(gpu), b.hbm(gpu)
    refs = []
    for w in plan.waves:
        load_deps = list(deps) if w.index == 0 else [(gpu, f"{prefix}.L{w.index - 1}")]
        if w.index >= 2:
            load_deps.append((gpu, f"{prefix}.C{w.index - 2}"))
        b.add(
            gpu, f"{prefix}.L{w.index}", kind="gemm-load", cat="gemm",
            work=[(hbm, w.read_bytes)],
            delay_s=hw.compute.kernel_launch_s if (launch and w.index == 0) else 0.0,
            deps=load_deps, traffic={"gemm_read": w.read_bytes}, prio=prio,
        )  # fmt: skip
        cdeps = [(gpu, f"{prefix}.L{w.index}")]
        if w.index:
            cdeps.append((gpu, f"{prefix}.C{w.index - 1}"))
        wbytes = sum(w.write_bytes.values())
        b.add(
            gpu, f"{prefix}.C{w.index}", kind="gemm-compute", cat="gemm",
            work=[(cu, w.compute_s * w.cus_used), (hbm, wbytes)],
            caps=[(cu, float(w.cus_used))],
            deps=cdeps, traffic={"gemm_write": wbytes}, prio=prio,
        )  # fmt: skip
        refs.append((gpu, f"{prefix}.C{w.index}"))
    return refs
