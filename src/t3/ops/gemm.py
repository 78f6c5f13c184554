"""The GEMM model: kernel (tile) choice, waves of workgroups, L2 reuse, and K-loop streaming.

One model serves every configuration (sequential, T3, FiCCO's pieces, the selector):

**Kernel choice.** A GEMM library picks a macro-tile per shape. The menu is every tile of
:data:`TILES` no larger than the preset's own (``compute.tile_m x tile_n``, the largest the
library's kernels use on that GPU); the pick is the tile whose plan has the least contention-free
time (:meth:`GemmPlan.alone_s`). A tile's inner loop runs at ``gemm_efficiency`` of the matrix
peak at the sustained GEMM clock (``compute.gemm_clock_hz``), unless feeding it from the L2 is slower:
per K step a ``tm x tn`` tile reads ``(tm + tn) k_step`` elements for ``2 tm tn k_step`` FLOPs, and a
CU's share of the L2 bandwidth (``compute.l2_Bps / cus``) caps its rate at that intensity. Small tiles
are therefore slower per FLOP by a mechanism, not by a table. Where the library runs tiles in clusters
whose CTAs receive the larger operand block in one multicast load (``compute.multicast`` CTAs, Hopper's
TMA multicast), each CTA takes only its share of that block from the L2 (:func:`tile_l2_elems`).
Where the library's kernels store a tile after its K loop with the matrix units idle (cooperative
kernels: ``compute.epilogue = "exposed"``), each tile also costs its output bytes at the CU's share of
the L2 bandwidth (:func:`tile_epilogue_s`): the fixed per-tile cost that makes short-K GEMMs slow.

**Decomposition.** Data-parallel: every tile runs its whole K loop. Where the library has stream-K
(``compute.stream_k``), a plain GEMM of more than one wave whose last wave is partial may instead
spread that wave's K loops over every CU, each split tile paying an FP32 fixup
(:func:`stream_k_fixup_s`); the plan takes whichever is faster (:attr:`GemmPlan.stream_k`). Where the
library splits K (``compute.split_k``), a plain GEMM whose chosen tiles leave more than half the CUs
idle may run each tile as 2 to ``split_k`` thread blocks of K slices in one wave, their FP32 partials
summed by a reduction kernel (:func:`_splits`, :func:`split_k_s`; :attr:`GemmPlan.split_k`).

**Waves.** The output (M x N) is cut into ``chunks`` equal row blocks (the stages of a staggered
GEMM; 1 for a plain GEMM), each tiled into macro-tiles (partial tiles at the edges cost a full
tile: tile quantization; where the output is narrower than one tile, as a decode step's few rows are,
every tile's matrix instructions still run on the whole tile but its loads and stores move only the
in-bounds rows and columns, :func:`tile_extent`), dispatched in production order (chunk by chunk in
``order``; inside a chunk row-major or column-major, ``compute.raster``) in waves of ``cus x wg_per_cu``
workgroups. A wave's
CU time is ``ceil(tiles / cus) x t_tile``.

**L2 reuse (DRAM reads).** A wave reads each distinct operand block it needs once (its tiles run
together, so a row block of A or column block of B shared by several of its tiles is fetched once).
A block used before hits in the L2 with the probability that it was not evicted: between its two
uses the GEMM touched ``d`` bytes of other data — half of each end wave's blocks (the K loop
streams them), every block of the waves between, and the output those waves stored, unless the
stores bypass the L2 (T3's ``remote_map`` / ``dma_map`` stores are uncached: ``bypass``). With
lines hashed uniformly over the sets of an ``A``-way LRU cache, the block's set receives
``Poisson(d / (line x sets))`` other lines, and the block survives if fewer than ``A`` arrive:
``P_hit(d) = P[Poisson(lambda) <= A - 1]`` (:func:`l2_hit`), ``sets = l2_usable_fraction x l2_bytes /
(line x ways)``. First uses miss.

**K-loop streaming.** A wave does not load its operands before computing: after an exposed
*prologue* that fills the pipeline (the first ``k_stages x k_step`` of K, i.e. that share of the
wave's DRAM reads), its CUs compute while the rest streams in: the *body* op couples the CU work,
the remaining reads and the output writes, so when the memory cannot deliver, compute waits. The
next wave's prologue starts when the wave's body ends (one workgroup per CU: no prefetch a wave
ahead). The loads are a *closed* memory stream (:mod:`t3.sim.memory`): while a workgroup computes on
one stage the others load, so all its stages but one are in flight (``(tm + tn) x k_step`` elements
each at the L2, times the share that misses to DRAM); when the loaded latency exceeds the compute time
of those stages, compute waits. A tile keeps ``k_stages`` stages, or, where the preset gives the shared
memory a kernel may use, as many as fit in it (:func:`tile_stages`: a smaller tile keeps more of K in
flight, as CUTLASS's and cuBLAS's kernels do); the prologue stays the first ``k_stages`` of them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

from t3.config.hardware import Hardware, per_hardware
from t3.errors import ScheduleError
from t3.sim.memory import HbmTiming
from t3.sim.schedule import hbm_timing
from t3.workload.sublayers import DTYPE_BYTES, GemmShape

# Macro-tiles a GEMM library offers (rows x columns of the output per workgroup), largest first.
TILES = ((256, 256), (256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))


class Wave(NamedTuple):
    """One wave of a plan's tiles (immutable; a named tuple: a plan makes one per wave, and a frozen
    dataclass's construction was a quarter of the planner's time per wave)."""

    index: int
    n_tiles: int
    segments: tuple[tuple[int, int, int], ...]  # (chunk, first tile, end tile) in the chunk's tile order
    read_bytes: float  # DRAM reads of the whole wave (prologue + body)
    write_bytes: dict[int, float]  # chunk -> output bytes written by this wave
    compute_s: float  # CU time alone, on `cus_used` CUs
    cus_used: int
    prologue_bytes: float = 0.0  # DRAM reads before compute can start (the first K stages)
    window_bytes: float = 0.0  # DRAM bytes the wave keeps in flight (0: no window limit)


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
    raster: str = "row"
    bypass: frozenset[int] = frozenset()  # chunk positions whose stores bypass the L2
    stream_k: bool = False  # the last, partial wave's K loops are spread over every CU (stream-K)
    split_k: int = 1  # K slices per tile (split-K: a thread block per slice, their FP32 partials summed)

    @property
    def tiles(self) -> int:
        return self.chunks * self.tiles_m_chunk * self.tiles_n

    @property
    def blocks(self) -> int:
        """Thread blocks the kernel runs: a tile's per K slice."""
        return self.tiles * self.split_k

    @property
    def kernels(self) -> int:
        """Kernels the plan launches: the GEMM's, and a split-K plan's reduction kernel."""
        return plan_kernels(self.split_k)

    def launch_s(self, hw: Hardware) -> float:
        """The launches of the plan's kernels (:attr:`kernels`): the GEMM's, and a split-K plan's
        reduction kernel's (it follows on the stream: charged with the GEMM's, at the first wave, so that
        the time alone is the two kernels')."""
        return hw.compute.kernel_launch_s * self.kernels

    @property
    def chunk_rows(self) -> int:
        return self.shape.m // self.chunks

    @property
    def compute_s(self) -> float:
        return sum(w.compute_s for w in self.waves)

    @property
    def read_bytes(self) -> float:
        return sum(w.read_bytes for w in self.waves)

    @property
    def valid(self) -> tuple[int, int]:
        """In-bounds rows and columns of every tile (:func:`tile_extent`)."""
        return tile_extent(self.chunk_rows, self.shape.n, (self.tile_m, self.tile_n))

    @property
    def kernel(self) -> str:
        return f"{self.tile_m}x{self.tile_n}"

    def last_wave_of_chunk(self) -> dict[int, int]:
        last: dict[int, int] = {}
        for w in self.waves:
            for c, _, _ in w.segments:
                last[c] = w.index
        return last

    def tile_rc(self, t: int) -> tuple[int, int]:
        """(tile row inside the chunk, tile column) of the chunk's ``t``-th tile in dispatch order."""
        if self.raster == "column":
            c, r = divmod(t, self.tiles_m_chunk)
            return r, c
        return divmod(t, self.tiles_n)

    def tile_box(self, chunk: int, t: int) -> tuple[int, int, int, int]:
        """(row0, row1, col0, col1) of tile ``t`` of ``chunk`` in output coordinates."""
        r, c = self.tile_rc(t)
        r0 = chunk * self.chunk_rows + r * self.tile_m
        r1 = min(r0 + self.tile_m, (chunk + 1) * self.chunk_rows)
        c0 = c * self.tile_n
        return r0, r1, c0, min(c0 + self.tile_n, self.shape.n)

    def wave_alone_s(self, w: Wave, hw: Hardware) -> tuple[float, float]:
        """(prologue, body) seconds of wave ``w`` alone on the GPU: the closed form of what the engine
        does with :func:`add_gemm`'s two ops (memory model included)."""
        return _wave_alone_s(
            hbm_timing(hw), hw.hbm.effective_Bps, w.prologue_bytes, w.window_bytes,
            sum(w.write_bytes.values()), w.read_bytes, w.compute_s,
        )  # fmt: skip

    def breakdown(self, hw: Hardware) -> dict:
        """The contention-free time's parts (:meth:`alone_s`): the kernel (tile, tiles, waves of
        ``wave_size``; data-parallel, or stream-K in the last wave), the tile's rate and what bounds it
        (``matrix``: the peak at the GEMM clock x ``gemm_efficiency``; ``l2``: the CU's share of the L2
        bandwidth at the tile's intensity), each tile's exposed epilogue (0 if overlapped), and the
        seconds of launch, exposed prologues and bodies (the
        CU time alone is ``compute_s``; a body longer than it waits on memory)."""
        c = hw.compute
        rate = tile_flops_per_s(
            hw, self.tile_m, self.tile_n, self.shape.dtype, (self.chunk_rows, self.shape.n)
        )
        clock = c.gemm_clock(self.shape.dtype)
        peak = tile_peak_flops_per_s(hw, self.shape.dtype)
        parts = [self.wave_alone_s(w, hw) for w in self.waves]
        return {
            "tile": self.kernel, "tiles": self.tiles, "waves": len(self.waves), "wave_size": self.wave_size,
            "split_k": self.split_k, "kernels": self.kernels, "stream_k": self.stream_k, "clock_hz": clock, "tile_flops_per_s": rate,
            "epilogue_s": tile_epilogue_s(hw, *self.valid, self.shape.out_elem_bytes),
            "tile_bound": "matrix" if rate >= peak else "l2", "launch_s": self.launch_s(hw),
            "prologue_s": sum(p for p, _ in parts), "body_s": sum(b for _, b in parts),
            "compute_s": self.compute_s,
            "memory_bound_waves": sum(b > w.compute_s for (_, b), w in zip(parts, self.waves, strict=True)),
        }  # fmt: skip

    def alone_s(self, hw: Hardware, launch: bool = True) -> float:
        """Contention-free time (s) of the whole GEMM alone: launch + every wave's prologue and body."""
        t = self.launch_s(hw) if launch else 0.0
        timing, cap = hbm_timing(hw), hw.hbm.effective_Bps
        seen: dict[tuple, float] = {}  # the waves of a plan repeat the same few situations
        for w in self.waves:
            t += _wave_pb(w, timing, cap, seen)
        return t


def _wave_pb(w: Wave, timing: HbmTiming, cap: float, seen: dict[tuple, float]) -> float:
    """Prologue + body seconds of wave ``w`` alone (:func:`_wave_alone_s`), memoised in ``seen`` by the
    wave's numbers (what :meth:`GemmPlan.alone_s` adds per wave, and :func:`_plan`'s limit with it)."""
    key = (w.prologue_bytes, w.window_bytes, sum(w.write_bytes.values()), w.read_bytes, w.compute_s)
    pb = seen.get(key)
    if pb is None:
        p, b = _wave_alone_s(timing, cap, *key)
        pb = seen[key] = p + b
    return pb


def _wave_alone_s(timing, cap, prologue, window, wb, read, compute_s) -> tuple[float, float]:
    """(prologue, body) seconds of a wave alone (:meth:`GemmPlan.wave_alone_s`) from its numbers: the
    prologue's reads as a closed stream at full demand, then the body's reads and ``wb`` bytes of writes
    at the turnaround's rate, no faster than its CU time."""
    pro = 0.0
    if prologue > 0:
        pro = prologue / _stream_rate(timing, cap, window, cap, 1.0)
    body_r = read - prologue
    tot = body_r + wb
    if tot <= 0:
        return pro, compute_s
    c_eff = cap * timing.eta(wb / tot)
    x = _stream_rate(timing, c_eff, window if body_r > 0 else 0.0, tot / compute_s, body_r / tot)
    return pro, max(compute_s, tot / x)


@functools.lru_cache(maxsize=65536)  # a pure function; the waves of a plan repeat the same arguments
def _stream_rate(timing: HbmTiming, cap: float, window: float, demand: float, read_share: float) -> float:
    """Bytes/s of one stream alone on the memory: at most its demand and the capacity; a closed stream
    (``window`` > 0 with a latency) reads at most ``window / L(rho)`` at its own utilisation, its
    writes (``1 - read_share`` of its bytes) following (bisection)."""
    x = min(demand, cap)
    if window <= 0 or timing.latency_s <= 0 or x * read_share <= window / timing.latency(x / cap):
        return x
    lo, hi = 0.0, min(x, window / (timing.latency_s * read_share))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if window / timing.latency(mid / cap) > mid * read_share:
            lo = mid
        else:
            hi = mid
    return lo


def l2_hit(d_bytes: float, hw: Hardware) -> float:
    """Probability that an L2 line survives ``d_bytes`` of other distinct data touched between two
    uses: hashed ``ways``-way LRU sets, ``P[Poisson(d / (line x sets)) <= ways - 1]``."""
    c = hw.compute
    key = (d_bytes, c.l2_usable_fraction, c.l2_bytes, c.l2_line_bytes, c.l2_ways)
    hit = _L2_HITS.get(key)
    if hit is not None:
        return hit
    sets = c.l2_usable_fraction * c.l2_bytes / (c.l2_line_bytes * c.l2_ways)
    lam = d_bytes / (c.l2_line_bytes * sets)
    if lam <= 0:
        return 1.0
    term = math.exp(-lam)
    total = term
    for j in range(1, c.l2_ways):
        term *= lam / j
        total += term
    if len(_L2_HITS) > 100_000:
        _L2_HITS.clear()
    hit = _L2_HITS[key] = min(1.0, total)
    return hit


_L2_HITS: dict[tuple, float] = {}  # (reuse distance, L2 geometry) -> l2_hit: waves repeat distances


def tile_flops_per_s(hw: Hardware, tm: int, tn: int, dtype: str, out: tuple[int, int] | None = None) -> float:
    """FLOP/s one CU sustains on a ``tm x tn`` tile: the inner loop at ``gemm_efficiency`` of the matrix
    peak at the GEMM clock, or the CU's share of the L2 bandwidth times the tile's operand intensity
    (its FLOPs over the bytes it loads, :func:`tile_l2_elems` of the output ``out`` where known)."""
    c = hw.compute
    peak = tile_peak_flops_per_s(hw, dtype)
    if c.l2_Bps is None:
        return peak
    intensity = 2.0 * tm * tn / (tile_l2_elems(hw, tm, tn, out) * DTYPE_BYTES[dtype])  # FLOP per L2 byte
    return min(peak, c.l2_Bps / c.cus * intensity)


def tile_l2_elems(hw: Hardware, tm: int, tn: int, out: tuple[int, int] | None = None) -> float:
    """Operand elements a ``tm x tn`` tile's CTA takes from the L2 per element of K: ``tm + tn``, the
    larger block's share ``1 / compute.multicast`` when a cluster's CTAs receive it in one multicast load
    (a cluster spans the smaller dimension, so its CTAs share the larger block: cuBLAS's sm90 kernels
    run 256x128 and 128x64 tiles in 1x2 clusters). ``out``: the (rows, columns) of the output (a
    chunk's) the tiles cut, where known: a tile loads only its in-bounds rows and columns
    (:func:`tile_extent`), and a cluster shares a block only where a second tile lies along its
    dimension (one row of tiles leaves a 2x1 cluster's partner without a tile). A pair of CTAs that
    runs one matrix instruction (``compute.mma_ctas``: sm100's ``tcgen05.mma`` with ``cta_group::2``,
    cuBLAS's ``nvjet_sm100_*_2cta_*`` kernels) splits the larger block between them the same way."""
    vm, vn = (tm, tn) if out is None else tile_extent(out[0], out[1], (tm, tn))
    mc = hw.compute.multicast * hw.compute.mma_ctas
    if tm >= tn:  # the cluster spans the tile columns: its CTAs share the A block
        return vm / (mc if out is None or out[1] > tn else 1) + vn
    return vn / (mc if out is None or out[0] > tm else 1) + vm


def plan_kernels(split_k: int) -> int:
    """Kernels a plan of ``split_k`` K slices launches: the GEMM's, and past one slice the reduction
    kernel that sums the partials."""
    return 2 if split_k > 1 else 1


def tile_stages(hw: Hardware, tm: int, tn: int, elem_bytes: int) -> int:
    """K stages a ``tm x tn`` tile's kernel keeps in shared memory: ``compute.k_stages``, or where the
    preset gives the shared memory a thread block may use (``compute.smem_bytes``), as many stages of
    ``(tm + tn) x k_step`` operand elements as fit beside the kernel's other shared memory
    (``compute.smem_epilogue_bytes``), at least one. CUTLASS's collective builders size their
    mainloops so (``StageCountAutoCarveout``: ``compute_stage_count_or_override``, capacity less the
    epilogue's carveout over the stage's bytes, ``sm90_smem_capacity_bytes`` = 232448); cuBLAS's sm90
    kernels follow the same rule (their names and shared memory in ``measurements/*/kernel-facts.json``:
    320x128 3 stages, 256x128 4, 128x128 6, 128x64 8, each with 16.6 KB besides), so a smaller tile
    keeps more of K in flight."""
    c = hw.compute
    if c.smem_bytes is None:
        return c.k_stages
    return max(
        1, (c.smem_bytes - c.smem_epilogue_bytes) // (_stage_elems(hw, tm, tn) * c.k_step * elem_bytes)
    )


def _stage_elems(hw: Hardware, tm: int, tn: int) -> int:
    """Operand elements per element of K one CTA of a ``tm x tn`` tile keeps in shared memory: ``tm + tn``,
    the larger block's share ``1 / compute.mma_ctas`` where a CTA pair runs one matrix instruction
    (each CTA holds half of the shared operand: cuBLAS's sm100 ``128x256_64x6_2x1_2cta`` kernel keeps
    6 stages, what fits of ``(128 + 256 / 2) x 64`` elements, where 128 + 256 would fit 4). TMA
    multicast (``compute.multicast``) still lands the whole block in every CTA's shared memory."""
    m = hw.compute.mma_ctas
    return tm // m + tn if tm >= tn else tm + tn // m


def tile_extent(rows: int, n: int, tile: tuple[int, int]) -> tuple[int, int]:
    """The in-bounds rows and columns of every tile of a ``rows`` x ``n`` output (a chunk's) cut into
    ``tile``s, where the output is narrower than one tile in that dimension (all its tiles are then
    edge tiles of that extent); the tile's own size otherwise. A tile's matrix instructions run on the
    whole tile (tile quantization), but its loads and stores move only in-bounds elements: Hopper's
    TMA fills a box's out-of-bounds elements itself (zeros, or NaN with ``oobFill``: CUDA driver API,
    cuTensorMapEncodeTiled) and drops out-of-bounds stores, as CDNA's buffer instructions return zero
    for, and discard, accesses past a buffer's range (AMD CDNA 3 ISA, buffer range checking). Where the
    output spans several tiles the edge tiles are charged as whole ones (the waves' time is set by the
    whole tiles beside them)."""
    bm, bn = tile
    return min(bm, rows), min(bn, n)


def gemm_energy_j(hw: Hardware, plan: GemmPlan) -> float:
    """Joules one GEMM spends on its work (``hw.power``): its matrix FLOPs at ``power.flop_j[dtype]``
    and its device-memory bytes at ``power.byte_j``: the operands read once and the output written once.
    The library's rasterisation keeps the re-reads of an operand panel in the L2; the plan's own miss
    count, whose row-by-row order has no such swizzle, would charge a 16384-cubed GEMM 21 times its
    operands. The idle power is not in it."""
    p, s = hw.power, plan.shape
    if p is None:
        raise ScheduleError(f"hardware '{hw.name}' has no power section: a GEMM's energy is not modelled")
    if s.dtype not in p.flop_j:
        raise ScheduleError(
            f"power.flop_j: no entry for dtype '{s.dtype}' on hardware '{hw.name}' (have {sorted(p.flop_j)}):"
            " its sustained (power-limited) rate is not measured"
        )
    return s.flops * p.flop_j[s.dtype] + gemm_compulsory_bytes(s) * p.byte_j


def gemm_compulsory_bytes(s: GemmShape) -> float:
    """Device-memory bytes of a GEMM that reads each operand once and writes its output once."""
    return (s.m * s.k + s.k * s.n) * s.elem_bytes + s.out_bytes


def power_limited_s(hw: Hardware, plan: GemmPlan) -> float:
    """The shortest time (s) a GEMM takes run back to back at the board's power limit: its energy
    (:func:`gemm_energy_j`) over the power the limit leaves above idle. Sustained, a GEMM takes the longer
    of this and its time at the preset's GEMM clock: the power controller lowers the clock until the
    board draws no more than its limit (``benchmarks/device_clock.py``: an 8192-cubed GEMM of random
    data holds 1410-1500 MHz at 700 W on H100/H200, 8-16 % below its short-run rate). The energy per
    FLOP is taken the same at every clock the limit sets: the measured runs of a GEMM beside copies (1.6-2.0
    GHz) spread 0.5-0.9 W per TFLOP/s around the 0.81 of the GEMM alone at 1.4 GHz once the copies' share
    (power.byte_j) is taken off, with no separable trend. So the bound is a rate cap, not a clock: small
    GEMMs draw less than the limit and keep their short-run rate."""
    p = hw.power
    if p is None:
        raise ScheduleError(f"hardware '{hw.name}' has no power section: its power limit is not modelled")
    return gemm_energy_j(hw, plan) / (p.limit_w - p.idle_w)


def tile_epilogue_s(hw: Hardware, tm: int, tn: int, elem_bytes: int) -> float:
    """Seconds a CU spends storing one ``tm x tn`` output tile after its K loop when the library's
    kernels expose that epilogue (``compute.epilogue = "exposed"``: the matrix units idle while the
    tile leaves the CU at its share of the L2 bandwidth, ``l2_Bps / cus``); 0 when a ping-pong kernel
    hides it behind another tile's K loop (``"overlapped"``) or no L2 rate is given."""
    c = hw.compute
    if c.epilogue != "exposed" or c.l2_Bps is None:
        return 0.0
    return tm * tn * elem_bytes / (c.l2_Bps / c.cus)


def tile_peak_flops_per_s(hw: Hardware, dtype: str) -> float:
    """A fed tile's inner-loop rate on one CU: the matrix peak at the GEMM clock x ``gemm_efficiency``."""
    c = hw.compute
    rate = c.matrix_flops_per_clk_per_cu.get(dtype)
    if rate is None:
        raise ScheduleError(f"dtype: hardware '{hw.name}' has no matrix rate for {dtype}")
    return rate * c.gemm_clock(dtype) * c.gemm_efficiency


_PLANS: dict = {}


_HW_KEYS: dict[int, tuple[Hardware, tuple]] = {}


def _key(hw: Hardware) -> tuple:
    """The fields of ``hw`` a plan depends on (computed once per hardware object)."""
    return per_hardware(_HW_KEYS, hw, _fields)


def _fields(hw: Hardware) -> tuple:
    c, h = hw.compute, hw.hbm
    return (
        c.cus, c.clock_hz, tuple(sorted((c.gemm_clock_hz or {}).items())),
        tuple(sorted(c.matrix_flops_per_clk_per_cu.items())),
        c.gemm_efficiency, c.wg_per_cu, c.tile_m, c.tile_n, tuple(c.tiles), c.l2_bytes, c.l2_usable_fraction, c.l2_ways,
        c.l2_line_bytes, c.l2_Bps, c.k_step, c.k_stages, c.smem_bytes, c.smem_epilogue_bytes, c.multicast, c.mma_ctas, c.epilogue, c.stream_k, c.split_k, c.raster, c.kernel_launch_s, h.bandwidth_Bps,
        h.efficiency, h.turnaround, h.latency_s, h.service_s,
    )  # fmt: skip


def tile_menu(hw: Hardware) -> list[tuple[int, int]]:
    """The macro-tiles the GPU's GEMM library offers: every tile of :data:`TILES` no larger (in either
    dimension) than the preset's own, which is always offered, then the library's other tiles
    (``compute.tiles``, e.g. hipBLASLt's 256x224 on an MI300X: with them the wave-aware choice picks,
    like the library, the tile that fills the CUs in whole waves), no larger than it either."""
    c = hw.compute
    menu = [(tm, tn) for tm, tn in TILES if tm <= c.tile_m and tn <= c.tile_n]
    if (c.tile_m, c.tile_n) not in menu:
        menu.insert(0, (c.tile_m, c.tile_n))
    for tm, tn in c.library_tiles:
        if tm <= c.tile_m and tn <= c.tile_n and (tm, tn) not in menu:
            menu.append((tm, tn))
    return menu


def plan_gemm(
    shape: GemmShape,
    hw: Hardware,
    *,
    cus: int | None = None,
    chunks: int = 1,
    order: tuple[int, ...] | None = None,
    bypass: frozenset[int] | set[int] = frozenset(),
    tile: tuple[int, int] | None = None,
) -> GemmPlan:
    """The plan a GEMM library would run: the menu tile with the least contention-free time (or
    ``tile``), its waves, DRAM reads and K-loop split. ``bypass``: chunk positions (in ``order``) whose
    output stores do not allocate in the L2. Memoised (plans are immutable)."""
    c = hw.compute
    cus = c.cus if cus is None else cus
    if not 0 < cus <= c.cus:
        raise ScheduleError(f"cus: GEMM needs 1..{c.cus} CUs, got {cus}")
    if shape.m % chunks:
        raise ScheduleError(f"chunks: M={shape.m} rows do not split into {chunks} chunks")
    order = tuple(range(chunks)) if order is None else tuple(order)
    if sorted(order) != list(range(chunks)):
        raise ScheduleError(f"order: {order} is not a permutation of the {chunks} chunks")
    bypass = frozenset(bypass)
    key = (shape, _key(hw), cus, chunks, order, bypass, tile)
    hit = _PLANS.get(key)
    if hit is not None:
        return hit
    best = None
    for t in tile_menu(hw) if tile is None else [tile]:
        for sk in _decompositions(shape, hw, cus, chunks, bypass, t):
            # a candidate whose CU time alone cannot beat the best so far is not planned (its plan, the
            # walk over its blocks, is most of the cost): the choice is the one the full scan makes
            if best is not None:
                bound = _compute_bound_s(shape, hw, cus, chunks, t, sk) * (1 - 1e-9)  # (rounding margin)
                if bound >= best[0] * (1 - 1e-12):
                    continue
            # (a candidate is also dropped while it is planned, once its waves so far and the CU time of
            # the rest cannot beat the best: most menu tiles lose to memory within their first waves)
            p, est = _plan_timed(
                shape, hw, cus, chunks, order, bypass, t, sk, limit=None if best is None else best[0]
            )
            if p is None:
                continue
            if best is None or est < best[0] * (1 - 1e-12):
                best = (est, p)
    for s in _splits(shape, hw, cus, chunks, bypass, best[1]):
        p, est = _plan_timed(shape, hw, cus, chunks, order, bypass, (best[1].tile_m, best[1].tile_n), split=s)
        if est < best[0] * (1 - 1e-12):
            best = (est, p)
    plan = best[1]
    if len(_PLANS) > 50_000:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _decompositions(shape, hw, cus, chunks, bypass, tile) -> tuple[bool, ...]:
    """Whether the plan may run stream-K (True) beside data-parallel (False): where the preset's library
    has it (``compute.stream_k``), on a plain GEMM (one chunk, stores allocating: a T3
    or fused schedule's staggered chunks keep whole tiles) of more tiles than one wave whose last wave is
    partial (the hybrid of CUTLASS's stream-K scheduler: whole waves data-parallel, the remainder
    stream-K). Split-K is weighed after the tile is chosen (:func:`_splits`)."""
    bm, bn = tile
    tiles = math.ceil(shape.m / bm) * math.ceil(shape.n / bn)
    wave = cus * hw.compute.wg_per_cu
    ok = hw.compute.stream_k and chunks == 1 and not bypass and tiles > wave and tiles % wave != 0
    return (False, True) if ok else (False,)


def _splits(shape, hw, cus, chunks, bypass, plan) -> range:
    """The K splits (2 up to ``compute.split_k``) the library may run the chosen tile's plan with: a plain
    GEMM whose tiles leave more than half the wave's CUs idle, each of its tiles' ``s`` slices a thread
    block of the one wave and at least the mainloop's ``k_stages x k_step`` of K. cuBLAS runs such
    small-M or small-N GEMMs of long K as split-K kernels and a reduction kernel (``nvjet_..._splitK_TNT``
    and ``cublasLt::splitKreduce_kernel`` in the profile of Dao-AILab/quack#157), hipBLASLt's Tensile
    solutions split K as ``GlobalSplitU``; a grid of at least about one CTA per SM runs one CTA per tile
    (cuBLAS's grids for 128 tiles on 132 SMs in ``measurements/*/kernel-facts.json``). Where between the
    two the libraries start splitting is not public: at half the CUs here."""
    c = hw.compute
    wave = cus * c.wg_per_cu
    tiles = plan.tiles
    if c.split_k < 2 or chunks != 1 or bypass or plan.stream_k or 2 * tiles > wave:
        return range(0)
    return range(2, min(c.split_k, wave // tiles, shape.k // (c.k_stages * c.k_step)) + 1)


def split_k_s(hw: Hardware, tiles: int, split: int, used: int, tile: tuple[int, int], out_bytes: int):
    """(slice, reduction) seconds of a split-K wave on its ``used`` CUs: after its K slice each thread
    block stores its FP32 partial tile, at the CU's share of the L2 bandwidth; then the ``split``
    partials of each of the ``tiles`` are read back and summed into the output, over the wave's CUs at
    their share (the reduction kernel's own launch is not charged: it follows the GEMM kernel on its
    stream). ``tile``: the tile's in-bounds rows and columns (:func:`tile_extent`). 0 with no L2 rate."""
    c = hw.compute
    if not c.l2_Bps:
        return 0.0, 0.0
    share = c.l2_Bps / c.cus
    part = tile[0] * tile[1] * 4.0
    return part / share, tiles * (split * part + tile[0] * tile[1] * out_bytes) / (used * share)


def stream_k_fixup_s(hw: Hardware, tm: int, tn: int) -> float:
    """CU seconds of a stream-K tile split's fixup: the CTA that does not finish the tile stores its
    FP32 partial accumulators and the finishing CTA loads them, each at the CU's share of the L2
    bandwidth (Osama et al., "Stream-K", PPoPP 2023; CUTLASS's sm90 stream-K tile scheduler)."""
    c = hw.compute
    return 2.0 * tm * tn * 4 / (c.l2_Bps / c.cus) if c.l2_Bps else 0.0


def _tile_s(shape, hw, tile, chunks: int = 1) -> tuple[float, float]:
    """(K loop, exposed epilogue) seconds of one ``tile`` of the GEMM (cut into ``chunks`` row blocks)
    on one CU; an output narrower than the tile loads and stores only its in-bounds part
    (:func:`tile_extent`)."""
    bm, bn = tile
    out = (shape.m // chunks, shape.n)
    t_main = 2.0 * bm * bn * shape.k / tile_flops_per_s(hw, bm, bn, shape.dtype, out)
    return t_main, tile_epilogue_s(hw, *tile_extent(*out, tile), shape.out_elem_bytes)


def _compute_bound_s(shape, hw, cus, chunks, tile, stream_k: bool) -> float:
    """A lower bound of :meth:`GemmPlan.alone_s` for the plan :func:`_plan` would make, in closed form:
    the launch and every wave's CU time alone (a wave's body takes at least its ``compute_s``, its
    prologue at least nothing), the same arithmetic as the plan's waves."""
    c = hw.compute
    bm, bn = tile
    total = math.ceil(shape.m // chunks / bm) * math.ceil(shape.n / bn) * chunks
    wave_size = cus * c.wg_per_cu
    t_main, t_epi = _tile_s(shape, hw, tile, chunks)
    t_tile = t_main + t_epi
    full, last = divmod(total, wave_size)
    t = c.kernel_launch_s + full * (math.ceil(wave_size / cus) * t_tile)
    if last:
        if stream_k:
            t += last * t_main / cus + t_epi + stream_k_fixup_s(hw, bm, bn)
        else:
            t += math.ceil(last / cus) * t_tile
    return t


def _plan(
    shape, hw, cus, chunks, order, bypass, tile, stream_k: bool = False, walk: bool = False,
    limit: float | None = None, split: int = 1,
) -> GemmPlan | None:  # fmt: skip
    """:func:`_plan_timed`'s plan (None where it cannot beat ``limit``)."""
    return _plan_timed(
        shape, hw, cus, chunks, order, bypass, tile, stream_k, walk=walk, limit=limit, split=split
    )[0]


def _plan_timed(
    shape, hw, cus, chunks, order, bypass, tile, stream_k: bool = False, walk: bool = False,
    limit: float | None = None, split: int = 1,
) -> tuple[GemmPlan | None, float]:  # fmt: skip
    """The plan of one tile and decomposition (:func:`plan_gemm` picks among them). The reuse distances
    of a row-major raster are computed in closed form (:func:`_row_reuse`); a column-major raster (or
    ``walk``, the tests' oracle) walks every operand block's last use. ``limit``: the best time alone so
    far; None is returned as soon as the plan cannot beat it (its launch and waves so far, each as
    :meth:`GemmPlan.alone_s` adds them, plus the CU time alone of the waves left: a wave takes at least
    its CU time, and rounded sums are monotone, so the margin of 1e-9 covers the rounding). Returns the
    plan and its :meth:`GemmPlan.alone_s`, summed as that method sums it (the same additions in the same
    order), or (None, the time so far)."""
    c = hw.compute
    bm, bn = tile
    rows = shape.m // chunks
    tm = math.ceil(rows / bm)
    tn = math.ceil(shape.n / bn)
    tiles_c = tm * tn
    wave_size = cus * c.wg_per_cu
    t_main, t_epi = _tile_s(shape, hw, tile, chunks)
    t_tile = t_main + t_epi
    eb = shape.elem_bytes
    vm, vn = tile_extent(rows, shape.n, tile)  # (an operand block's in-bounds rows / columns)
    a_block = vm * shape.k * eb
    b_block = vn * shape.k * eb
    out_tile = rows * shape.n * shape.out_elem_bytes / tiles_c
    column = c.raster == "column"
    walk = walk or column
    kfrac = min(1.0, c.k_stages * c.k_step / shape.k)
    # a workgroup computes on one stage while the others load: its stages but one in flight (at least 1)
    slice_bytes = (
        max(1, tile_stages(hw, bm, bn, eb) - 1) * tile_l2_elems(hw, bm, bn, (rows, shape.n)) * c.k_step * eb
    )
    total = tiles_c * chunks
    nwaves = math.ceil(total / wave_size)
    one = chunks == 1 and not walk  # a plain GEMM: every wave is one segment of the one chunk
    ch0, alloc0 = order[0], 0 not in bypass
    ws_bytes: list[float] = []  # per wave: its distinct blocks' bytes
    pws, pout = [0.0], [0.0]  # prefix sums of ws_bytes and of the waves' allocating output
    last_a = [-1] * (chunks * tm) if walk else []  # per block: the wave that used it last (-1: none yet)
    last_b = [-1] * tn if walk else []
    waves = []
    timing, cap = hbm_timing(hw), hw.hbm.effective_Bps
    seen: dict[tuple, float] = {}
    t_sum = c.kernel_launch_s * plan_kernels(split)  # (:meth:`GemmPlan.launch_s`)
    pbs: list[float] = []  # each wave's prologue + body alone (:func:`_wave_pb`)
    n_last = total - (nwaves - 1) * wave_size  # (the tiles of the last wave)
    if limit is not None:
        full_s = math.ceil(wave_size / cus) * t_tile  # the CU time of a full wave and of the last one
        if stream_k:
            last_s = n_last * t_main / cus + t_epi + stream_k_fixup_s(hw, bm, bn)
        else:
            last_s = math.ceil(n_last / cus) * t_tile
        stop = limit * (1 - 1e-12)

        def beyond(t_sum: float, left: int) -> bool:
            """Whether the waves so far (``t_sum``) and the CU time alone of the ``left`` waves after them
            reach the limit (the margin covers the rounding)."""
            return t_sum + ((left - 1) * full_s + last_s if left else 0.0) * (1 - 1e-9) >= stop

    # a row-major raster's full waves repeat every ``period`` waves (where a wave starts in its tile row
    # repeats, and with it the wave's reuse lags and distinct blocks): a full wave's numbers are those of the
    # wave ``period`` before when that one also started past the first tile row and the allocating output of
    # every wave its reuse distances span (at most ``span`` back) repeats too, where the sums behind the
    # distances are exact (whole bytes, below 2^52)
    period = tn // math.gcd(tn, wave_size)
    span = tn // wave_size + 2  # (a column's previous tile is tn tiles back; a row's, in the wave before)
    repeats = (
        not walk
        and float(out_tile).is_integer()
        and total * (a_block + b_block + out_tile) < 2.0**52
        and not (stream_k and total % wave_size == 0)
    )
    allocs: list[float] = []
    differs = -1  # the last wave whose allocating output is not that of the wave ``period`` before
    misses: dict[float, float] = {}  # reuse distance -> L2 miss probability (the waves repeat distances)
    # a row-major wave that starts past the first tile row reuses by lags that depend only on where it starts
    # in its row and on its size: (lo % tn, n) -> ((w - p, bytes) in order, cold bytes)
    lags: dict[tuple[int, int], tuple[tuple[tuple[int, float], ...], float]] = {}
    projected = False  # (the time of the waves left is known: see below)
    skip = -1  # the waves up to this one are made already (a plain GEMM's copied full waves, below)
    for w in range(nwaves):
        if w <= skip:
            continue
        copied = False
        # the wave's segments, its (allocating) output and its distinct blocks' bytes (as merged intervals of
        # block indices where the blocks' last uses are walked)
        lo = w * wave_size
        hi = min(lo + wave_size, total)
        n = hi - lo
        arows: list[tuple[int, int]] = []
        bcols: list[tuple[int, int]] = []
        if one:  # (the loop below for a single chunk, its sums in the same order)
            nb = out_tile * n
            segs, writes, alloc = [(ch0, lo, hi)], {ch0: 0.0 + nb}, (0.0 + nb if alloc0 else 0.0)
        else:
            segs = []
            writes: dict[int, float] = {}
            alloc = 0.0
            # only the chunks this wave's tiles fall in (a wave spans a few of thousands of T3 chunks)
            for pos in range(lo // tiles_c, min(chunks, (hi - 1) // tiles_c + 1)):
                ch = order[pos]
                a, b = max(lo, pos * tiles_c) - pos * tiles_c, min(hi, (pos + 1) * tiles_c) - pos * tiles_c
                segs.append((ch, a, b))
                nb = out_tile * (b - a)
                writes[ch] = writes.get(ch, 0.0) + nb
                if pos not in bypass:
                    alloc += nb
                if not walk:
                    continue
                base = ch * tm  # global index of the chunk's first tile row (A row block)
                if column:  # tile t of the chunk: column t // tm, row t % tm
                    bcols.append((a // tm, (b - 1) // tm + 1))
                    arows += [(base + x, base + y) for x, y in _wrapped(a, b, tm)]
                else:  # row-major: row t // tn, column t % tn
                    arows.append((base + a // tn, base + (b - 1) // tn + 1))
                    bcols += _wrapped(a, b, tn)
        if walk:
            arows, bcols = _merged(arows), _merged(bcols)
            ws_bytes.append(_length(arows) * a_block + _length(bcols) * b_block)
        else:  # row-major: the wave's walk rows (A blocks) and min(n, tn) columns (B blocks)
            ws_bytes.append(((hi - 1) // tn - lo // tn + 1) * a_block + min(n, tn) * b_block)
        allocs.append(alloc)
        if w < period or alloc != allocs[w - period]:
            differs = w
        if repeats and n == wave_size and lo - period * wave_size >= tn and differs < w - period - span:
            src = waves[w - period]  # (its numbers; its own index and tiles)
            copied = True
            reads, compute_s, window = src.read_bytes, src.compute_s, src.window_bytes
            waves.append(
                Wave(w, n, tuple(segs), reads, writes, compute_s, src.cus_used, src.prologue_bytes, window)
            )
        else:
            # reuse distances -> DRAM reads (blocks grouped by the wave that used them last)
            if walk:
                prev, cold = _walk_reuse(w, arows, bcols, last_a, last_b, a_block, b_block)
            elif lo < tn:
                prev, cold = _row_reuse(w, lo, n, wave_size, tn, a_block, b_block)
            else:
                rel = lags.get((lo % tn, n))
                if rel is None:
                    prev, cold = _row_reuse(w, lo, n, wave_size, tn, a_block, b_block)
                    lags[lo % tn, n] = (tuple((w - p, nb) for p, nb in prev.items()), cold)
                else:
                    prev, cold = {w - lag: nb for lag, nb in rel[0]}, rel[1]
            reads = cold
            for p, nbytes in prev.items():
                d = 0.5 * ws_bytes[p] + (pws[w] - pws[p + 1]) + 0.5 * ws_bytes[w] + (pout[w] - pout[p])
                miss = misses.get(d)
                if miss is None:
                    miss = misses[d] = 1.0 - l2_hit(d, hw)
                reads += nbytes * miss if miss > 1e-12 else 0.0
            per_cu = math.ceil(n / cus)
            used = min(n, cus)
            compute_s = per_cu * t_tile
            pro = kfrac
            if stream_k and w == nwaves - 1:
                # the partial last wave's n tiles of K loops spread evenly over every CU: each CU runs n / cus
                # of a tile's K loop, at most one tile's epilogue, and the fixup of the tile it splits
                used = cus
                compute_s = n * t_main / cus + t_epi + stream_k_fixup_s(hw, bm, bn)
            elif split > 1:
                # the one wave's n tiles as n x split thread blocks, each a 1/split slice of K (reading that
                # share of its blocks, with the pipeline's first stages a larger share of it), then the
                # partials' store and sum (:func:`split_k_s`)
                used = min(n * split, cus)
                part, red = split_k_s(hw, n, split, used, (vm, vn), shape.out_elem_bytes)
                compute_s = math.ceil(n * split / cus) * (t_main / split + part) + red
                pro = min(1.0, c.k_stages * c.k_step * split / shape.k)
            l2_reads = n * (a_block + b_block)
            window = used * c.wg_per_cu * slice_bytes * (reads / l2_reads) if l2_reads > 0 else 0.0
            waves.append(Wave(w, n, tuple(segs), reads, writes, compute_s, used, reads * pro, window))
        pws.append(pws[-1] + ws_bytes[w])
        pout.append(pout[-1] + alloc)
        pb = _wave_pb(waves[-1], timing, cap, seen)
        pbs.append(pb)
        t_sum += pb
        if limit is not None:
            left = nwaves - 1 - w
            if beyond(t_sum, left):
                return None, t_sum
            if copied and one and not projected and left:
                # in a plain GEMM, from the first copied wave on every full wave is a copy of the wave ``period``
                # before (its allocating output is constant, the other conditions only become truer with w): the
                # waves left repeat the last ``period`` waves' times alone, so the plan's time is known but for
                # its last wave (its CU time alone where partial)
                projected = True
                cycle = pbs[w - period + 1 : w + 1]
                full_left = left if n_last == wave_size else left - 1
                rest = (full_left // period) * sum(cycle) + sum(cycle[: full_left % period])
                if n_last != wave_size:
                    rest += last_s
                if t_sum + rest * (1 - 1e-9) >= stop:
                    return None, t_sum
        if copied and one:
            # the full waves left are copies of the wave ``period`` before: the loop above for them, with
            # nothing recomputed (the same numbers, sums and stops in the same order)
            skip = nwaves - 1 if n_last == wave_size else nwaves - 2
            b_bytes = min(wave_size, tn) * b_block
            nb = out_tile * wave_size
            alloc = 0.0 + nb if alloc0 else 0.0
            for v in range(w + 1, skip + 1):
                lo = v * wave_size
                hi = lo + wave_size
                src = waves[v - period]
                wave = Wave(v, wave_size, ((ch0, lo, hi),), src.read_bytes, {ch0: 0.0 + nb}, src.compute_s,
                            src.cus_used, src.prologue_bytes, src.window_bytes)  # fmt: skip
                waves.append(wave)
                wsb = ((hi - 1) // tn - lo // tn + 1) * a_block + b_bytes
                ws_bytes.append(wsb)
                allocs.append(alloc)
                pws.append(pws[-1] + wsb)
                pout.append(pout[-1] + alloc)
                pb = pbs[v - period]  # (the same numbers as that wave's: the same time alone)
                pbs.append(pb)
                t_sum += pb
                if limit is not None and beyond(t_sum, nwaves - 1 - v):
                    return None, t_sum
    plan = GemmPlan(
        shape, chunks, order, bm, bn, tm, tn, wave_size, cus, t_tile, tuple(waves), c.raster, bypass, stream_k, split
    )  # fmt: skip
    return plan, t_sum


def _walk_reuse(w, arows, bcols, last_a, last_b, a_block, b_block) -> tuple[dict[int, float], float]:
    """(bytes per wave that used them last, bytes used for the first time) of wave ``w``'s distinct blocks,
    by walking each block's last use (``last_a`` / ``last_b``, updated to ``w``), in the order of the
    blocks (A's, then B's; block sizes are whole bytes, so the sums are exact)."""
    prev: dict[int, float] = {}
    cold = 0.0
    for spans, last, size in ((arows, last_a, a_block), (bcols, last_b, b_block)):
        for x, y in spans:
            seen = last[x:y]
            for p in dict.fromkeys(seen):
                k = seen.count(p) * size
                if p < 0:
                    cold += k
                else:
                    prev[p] = prev.get(p, 0.0) + k
            last[x:y] = [w] * (y - x)
    return prev, cold


def _row_reuse(w: int, lo: int, n: int, wave: int, tn: int, a_block: int, b_block: int):
    """:func:`_walk_reuse` of wave ``w`` (walk tiles ``lo .. lo + n - 1``) in closed form for a row-major
    raster. The walk visits the tile rows of every chunk in turn, ``tn`` tiles each, so A's row blocks
    are the walk's rows (relabelled by chunk) and B's column blocks its columns. Only the wave's first
    row can have been used before, by the wave before, when the wave starts inside it. The wave covers
    ``min(n, tn)`` columns; the column it meets ``j`` tiles after ``lo`` was last used by the tile
    ``tn`` before, in wave ``(lo + j - tn) // wave`` (never, if that is negative): a staircase in ``j``,
    summed per step. The order is :func:`_walk_reuse`'s: A first, then B by column index (the columns
    below ``lo % tn`` are the wave's last ``j``). From ``lo >= tn`` on (``lo`` a multiple of ``wave``) every
    column has a previous tile and its wave lags ``w`` by ``-((j - tn) // wave)``: the result, relative to
    ``w``, depends on ``lo % tn`` and ``n`` alone (:func:`_plan` reuses it)."""
    prev: dict[int, float] = {}
    cold = 0.0
    rows = (lo + n - 1) // tn - lo // tn + 1
    if lo % tn:
        prev[w - 1] = 0.0 + a_block
        rows -= 1
    cold += rows * a_block
    m = min(n, tn)
    c0 = lo % tn
    for j0, j1 in ((tn - c0, m), (0, min(m, tn - c0))):
        v, v1 = lo - tn + j0, lo - tn + j1  # the walk index of each column's previous tile
        if v >= v1:
            continue
        if v < 0:
            cold += (min(v1, 0) - v) * b_block
            v = 0
        while v < v1:
            p = v // wave
            e = min(v1, (p + 1) * wave)
            prev[p] = prev.get(p, 0.0) + (e - v) * b_block
            v = e
    return prev, cold


def _wrapped(a: int, b: int, width: int) -> list[tuple[int, int]]:
    """Minor indices (mod ``width``) that tiles ``a .. b-1`` of a line-major walk cover, as half-open
    intervals."""
    if b - a >= width:
        return [(0, width)]
    c0, hi = a % width, a % width + b - a
    if hi <= width:
        return [(c0, hi)]
    return [(0, hi - width), (c0, width)]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open intervals as disjoint ones in increasing order (overlapping or touching ones joined)."""
    if len(spans) < 2:
        return spans
    out: list[tuple[int, int]] = []
    for x, y in sorted(spans):
        if out and x <= out[-1][1]:
            if y > out[-1][1]:
                out[-1] = (out[-1][0], y)
        else:
            out.append((x, y))
    return out


def _length(spans: list[tuple[int, int]]) -> int:
    return sum(y - x for x, y in spans)


def l2_body_bytes(plan: GemmPlan, w: Wave, hw: Hardware) -> float:
    """Operand bytes a wave's tiles load from the L2 after the prologue (hits and misses alike): per
    tile :func:`tile_l2_elems` ``x K`` elements, less the prologue's first ``k_stages x k_step`` of K."""
    s = plan.shape
    kfrac = min(1.0, hw.compute.k_stages * hw.compute.k_step * plan.split_k / s.k)
    elems = tile_l2_elems(hw, plan.tile_m, plan.tile_n, (plan.chunk_rows, s.n))
    return w.n_tiles * elems * s.k * s.elem_bytes * (1.0 - kfrac)


def gemm_tail(plan: GemmPlan, w: Wave, hw: Hardware) -> tuple[float, float, float] | tuple[()]:
    """:attr:`t3.sim.schedule.Op.rounds` of a wave: (the GEMM's tiles, its wave width, its CTAs per
    cluster) for the last wave, whose tail ends in whole rounds when CUs are held; for the others (fluid)
    (0, width, cluster) where the kernel runs in clusters (``compute.cluster_ctas`` > 1: a held CU takes its
    cluster slot), else ()."""
    m = hw.compute.cluster_ctas
    if w.index != len(plan.waves) - 1 or plan.stream_k:  # stream-K's last wave has no whole rounds
        return (0.0, float(plan.wave_size), float(m)) if m > 1 else ()
    return (float(plan.blocks), float(plan.wave_size), float(m))


def cus_beside(hw: Hardware, held: int) -> int:
    """The CUs a GEMM kernel can use while another kernel holds ``held`` CUs: the rest, less the cluster
    partners the held CUs leave idle (``compute.cluster_ctas``; :func:`t3.sim.engine.cluster_cus`, the
    engine's rule); 0 if none is left."""
    from t3.sim.engine import cluster_cus

    c = hw.compute.cus
    return int(cluster_cus(float(max(c - held, 0)), float(c), float(hw.compute.cluster_ctas)))


def declare_kernel(b, gpu: int, plan: GemmPlan, prefix: str = "gemm") -> None:
    """Declare the block dispatch of a GEMM added by :func:`add_gemm` where the GPU dispatches in
    launch order (``compute.dispatch``; :meth:`t3.sim.schedule.ScheduleBuilder.kernel`): it begins
    with its first prologue once no earlier kernel fills the CUs, and fills them to the end of its
    last wave (the libraries' GEMM kernels are persistent: one block per CU looping over the tiles,
    ``measurements/*/kernel-facts.json``). Elsewhere (``shared``) nothing is declared."""
    if b.hw.compute.dispatch == "launch_order":
        b.kernel(gpu, f"{prefix}.L0", fills=[f"{prefix}.{x}{w.index}" for w in plan.waves for x in "LC"])


def add_gemm(
    b,
    gpu: int,
    plan: GemmPlan,
    *,
    prefix: str = "gemm",
    deps: list = (),
    prio: int = 0,
    launch: bool = True,
    stores: dict[int, float] | None = None,
) -> list[tuple[int, str]]:
    """Add the plan's waves on ``gpu``: per wave a prologue (``<prefix>.L<i>``, its first K stages'
    reads) and a body (``<prefix>.C<i>``: CU work, the remaining reads and the output writes, coupled).
    ``stores`` overrides the bytes each wave writes locally (by wave index). Returns the body refs."""
    hw = b.hw
    cu, hbm, hbm_w = b.cu(gpu), b.hbm(gpu), b.hbm_w(gpu)
    refs = []
    # the same plan on the same resources makes the same ops (a schedule's pieces often share a plan):
    # the first ones serve as templates, only keys and dependencies change
    templates = b.templates
    tkey = ("gemm", id(plan), cu, hbm, prio, launch) if stores is None else None
    made = templates.get(tkey) if tkey is not None else None
    if made is not None and made[0] is plan:
        load_deps = tuple(deps)
        for w, (load, body) in zip(plan.waves, made[1], strict=True):
            lref, cref = (gpu, f"{prefix}.L{w.index}"), (gpu, f"{prefix}.C{w.index}")
            b.add_like(load, gpu, lref[1], load_deps)
            b.add_like(body, gpu, cref[1], (lref,))
            refs.append(cref)
            load_deps = (cref,)
        return refs
    made_ops = []
    # waves of the same numbers make the same ops but for their keys and dependencies: the first of each
    # serves as the template of the others (a plan's waves repeat a few situations); ``pairs`` keeps, by
    # all the numbers a wave's two ops are made of, the templates the keys below give them
    loads: dict[tuple, object] = {}
    bodies: dict[tuple, object] = {}
    pairs: dict[tuple, tuple] = {}
    last = len(plan.waves) - 1
    cref = None
    for w in plan.waves:
        i = w.index
        wbytes = sum(w.write_bytes.values()) if stores is None else stores.get(i, 0.0)
        wkey = (
            w.prologue_bytes,
            w.window_bytes,
            w.read_bytes,
            w.compute_s,
            w.cus_used,
            w.n_tiles,
            wbytes,
            i == 0,
            i == last,
        )
        pair = pairs.get(wkey)
        if pair is not None:
            lref = (gpu, f"{prefix}.L{i}")
            load = b.add_like(pair[0], gpu, lref[1], (cref,))  # (i > 0: the first wave's key is its own)
            cref = (gpu, f"{prefix}.C{i}")
            body = b.add_like(pair[1], gpu, cref[1], (lref,))
            made_ops.append((load, body))
            refs.append(cref)
            continue
        load_deps = list(deps) if i == 0 else [cref]  # (the wave before's body)
        lkey = (w.prologue_bytes, w.window_bytes, w.index == 0)
        load = loads.get(lkey)
        if load is not None:
            load = b.add_like(load, gpu, f"{prefix}.L{w.index}", load_deps)
        else:
            load = loads[lkey] = b.add(
                gpu, f"{prefix}.L{w.index}", kind="gemm-load", cat="gemm",
                work=[(hbm, w.prologue_bytes)],
                delay_s=plan.launch_s(hw) if (launch and w.index == 0) else 0.0,
                deps=load_deps, traffic={"gemm_read": w.prologue_bytes}, prio=prio, window=w.window_bytes,
                l2=0.0,  # (the prologue is modelled as the wave's first DRAM reads; its loads go with the body's)
            )  # fmt: skip
        body_reads = w.read_bytes - w.prologue_bytes
        rounds = gemm_tail(plan, w, hw)  # the tail: whole rounds
        l2 = l2_body_bytes(plan, w, hw) + wbytes if b.l2_side else None
        ckey = (w.compute_s, w.cus_used, body_reads, wbytes, rounds, w.window_bytes, l2)
        body = bodies.get(ckey)
        if body is not None:
            body = b.add_like(body, gpu, f"{prefix}.C{w.index}", [(gpu, f"{prefix}.L{w.index}")])
        else:
            body = bodies[ckey] = b.add(
                gpu, f"{prefix}.C{w.index}", kind="gemm-compute", cat="gemm",
                work=[(cu, w.compute_s * w.cus_used), (hbm, body_reads), (hbm_w, wbytes)],
                caps=[(cu, float(w.cus_used))], rounds=rounds,
                deps=[(gpu, f"{prefix}.L{w.index}")],
                traffic={"gemm_read": body_reads, "gemm_write": wbytes}, prio=prio, window=w.window_bytes, l2=l2,
            )  # fmt: skip
        made_ops.append((load, body))
        cref = (gpu, f"{prefix}.C{w.index}")
        refs.append(cref)
        pairs[wkey] = (loads[lkey], bodies[ckey])
    if tkey is not None:
        templates[tkey] = (plan, made_ops)
    return refs
