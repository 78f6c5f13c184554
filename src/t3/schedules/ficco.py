"""FiCCO schedule generators: one function builds every point of the design space (see
:mod:`t3.ficco.space`) as a schedule of the shared vocabulary.

Data is cut into N^2 *units* ``(o, j)`` per GPU: ``o`` is the peer offset (0 = local data; for
ag-gemm / moe dispatch the unit comes from GPU g-o, for gemm-rs / moe combine it goes to its owner),
``j`` the sub-piece (rows for an M split, the K block for a K split, the column block for an N split).

- Communication: ``bulk`` is one library collective (:mod:`t3.ops.collectives`); ``shard`` sends
  all units of offset o in step o (one peer per step; on a ring, forwarded hop by hop); ``ficco``
  sends unit j of every offset in step j (all peers at once; on a ring, N pipelined ring passes).
  Transfers of one link keep their step order. A DMA command runs on one engine (capped at
  ``dma.bandwidth_Bps``) and pays ``dma.command_overhead_s``; a CU transfer step pays a kernel launch.
- Compute: units in processing order (local first or last; then arrival order) are cut into ``g``
  consecutive pieces; each piece is one GEMM plan (one launch); a K-split piece after the first K
  block reads its output back (accumulation). One stream: piece i waits for piece i-1; two: i-2.
- Reduce-scatter: DMA engines cannot add, so reductions run on CUs. Incremental (default): the owner
  reduces each arrival into its accumulator as it lands (read 2, write 1) on the communication
  kernel's ``comm_cus`` CUs; the first reduction of a block also waits for the local piece. Batched
  (``-rb``): once all N-1 partials of a transfer step (and the local piece) landed, one reduction
  kernel on all CUs reads the N partials and writes the sum (N reads + 1 write, like the bulk direct
  reduce-scatter's final reduction), sharing CUs and HBM with the GEMM pieces still running.
- With the ``cu`` executor the communication kernel owns ``comm_cus(hw)`` CUs (enough to drive every
  link of a GPU at full rate) and the GEMM pieces are planned on the rest; with ``dma`` the GEMM keeps
  every CU.

Modes: ``full`` (the schedule), ``ideal`` (same DAG, but communication gets its own HBM and CU pool
and the GEMM pieces are planned for all CUs: nothing is shared; the contention-free reference),
``ideal-own`` (nothing shared either, but the GEMM pieces keep the plans of ``full``, i.e. for the
CUs the communication kernel leaves), ``comm`` (GEMM pieces take no time: the communication alone,
with the same dependencies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from t3.config.hardware import Hardware
from t3.errors import ConfigError, ScheduleError
from t3.ficco.space import Axes, FiccoOperator
from t3.ops.collectives import Executor, all_gather, all_to_all, reduce_scatter, transfer_work
from t3.ops.gemm import GemmPlan, Wave, add_gemm, plan_gemm
from t3.sim.schedule import Ref, Schedule, ScheduleBuilder
from t3.workload.sublayers import GemmShape

Unit = tuple[int, int]


@dataclass(frozen=True)
class Piece:
    index: int
    units: tuple[Unit, ...]


# GEMM kernel selection. A GEMM library picks a smaller macro-tile when a GEMM has too few tiles to
# fill the GPU; smaller tiles reuse each loaded operand fewer times and run at a lower fraction of
# the matrix peak. Menu: (tile_m, tile_n, efficiency relative to the 256x256 tile). The relative
# efficiencies are unknowns, chosen (not calibrated: no measured piece times are available); tiles
# larger than the preset's own macro-tile are not offered. No stream-K / split-K kernels.
TILE_MENU = ((256, 256, 1.0), (256, 128, 0.97), (128, 128, 0.9), (128, 64, 0.8), (64, 64, 0.6))
# Speed knob: consecutive full waves of a GEMM plan are merged into at most this many wave ops
# (first and last wave kept separate so the exposed first load and the tail quantization stay exact).
MAX_WAVE_OPS = 6

_PLANS: dict = {}


def _menu(hw: Hardware) -> list[tuple[int, int, float]]:
    c = hw.compute
    area = c.tile_m * c.tile_n
    ok = [t for t in TILE_MENU if t[0] * t[1] <= area]
    if not ok:
        raise ConfigError(
            f"compute.tile_m: a {c.tile_m}x{c.tile_n} macro-tile is smaller than every tile of the FiCCO GEMM "
            f"kernel menu (smallest {TILE_MENU[-1][0]}x{TILE_MENU[-1][1]})"
        )
    base = max((t[2] for t in ok if (t[0], t[1]) == (c.tile_m, c.tile_n)), default=ok[0][2])
    return [(tm, tn, e / base) for tm, tn, e in ok]


def _coarsen(plan: GemmPlan) -> GemmPlan:
    w = plan.waves
    if len(w) <= MAX_WAVE_OPS:
        return plan
    mid = w[1:-1]
    groups = MAX_WAVE_OPS - 2
    size = math.ceil(len(mid) / groups)
    merged = [w[0]]
    for i in range(0, len(mid), size):
        grp = mid[i : i + size]
        writes: dict[int, float] = {}
        for x in grp:
            for c, v in x.write_bytes.items():
                writes[c] = writes.get(c, 0.0) + v
        merged.append(
            Wave(0, sum(x.n_tiles for x in grp), tuple(s for x in grp for s in x.segments),
                 sum(x.read_bytes for x in grp), writes, sum(x.compute_s for x in grp), grp[0].cus_used)
        )  # fmt: skip
    merged.append(w[-1])
    merged = [replace(x, index=i) for i, x in enumerate(merged)]
    return replace(plan, waves=tuple(merged))


def gemm_plan(shape: GemmShape, hw: Hardware, cus: int | None = None) -> GemmPlan:
    """The plan a GEMM library would run: the menu tile with the least estimated time, coarsened."""
    cus = hw.compute.cus if cus is None else cus
    key = (hw.name, str(hw.compute), str(hw.hbm), shape, cus)
    if key in _PLANS:
        return _PLANS[key]
    best = None
    for tm, tn, rel in _menu(hw):
        h = (
            hw.with_overrides(
                {
                    "compute.tile_m": tm,
                    "compute.tile_n": tn,
                    "compute.gemm_efficiency": hw.compute.gemm_efficiency * rel,
                }
            )
            if (tm, tn, rel) != (hw.compute.tile_m, hw.compute.tile_n, 1.0)
            else hw
        )
        p = plan_gemm(shape, h, cus=cus)
        est = max(p.compute_s, p.read_bytes / hw.hbm.effective_Bps)
        if best is None or est < best[0] * (1 - 1e-12):
            best = (est, p)
    _PLANS[key] = plan = _coarsen(best[1])
    return plan


def comm_cus(hw: Hardware, n: int) -> int:
    """CUs a communication kernel needs to drive a GPU's links at full rate (named parameter)."""
    links = (n - 1) if hw.topology.kind == "mesh" else 1
    need = math.ceil(links * hw.link.bandwidth_Bps / hw.compute.cu_copy_Bps)
    return max(1, min(need, hw.compute.cus // 4))


def unit_order(fop: FiccoOperator, ax: Axes) -> list[Unit]:
    n = fop.gpus
    remote_first_step = ax.comm == "ficco"
    if ax.split == "M":
        local = [(0, j) for j in range(n)]
        if remote_first_step:
            remote = [(o, j) for j in range(n) for o in range(1, n)]
        else:
            remote = [(o, j) for o in range(1, n) for j in range(n)]
        return local + remote if ax.local_first else remote + local
    out: list[Unit] = []
    if remote_first_step:
        for j in range(n):
            rem = [(o, j) for o in range(1, n)]
            out += [(0, j)] + rem if ax.local_first else rem + [(0, j)]
        return out
    offs = list(range(1, n))
    offs = [0] + offs if ax.local_first else offs + [0]
    return [(o, j) for o in offs for j in range(n)]


def plan_pieces(fop: FiccoOperator, hw: Hardware, ax: Axes) -> list[Piece]:
    """The compute pieces of a schedule; :class:`ScheduleError` (a legality reason) if impossible."""
    n = fop.gpus
    order = unit_order(fop, ax)
    if (n * n) % ax.g:
        raise ScheduleError(f"{n * n} units do not split into {ax.g} pieces")
    per = n * n // ax.g
    pieces = [Piece(i, tuple(order[i * per : (i + 1) * per])) for i in range(ax.g)]
    if ax.split in ("K", "N") and ax.g > 1:
        for p in pieces:
            if len({j for _, j in p.units}) != 1:
                blk = "K" if ax.split == "K" else "column"
                raise ScheduleError(
                    f"a {ax.split}-split piece must hold one {blk} block, but {ax.comm} transfers with "
                    f"{ax.g} pieces mix blocks (use more pieces or split M)"
                )
    if fop.op != "moe":
        for p in pieces:
            shape_of(fop, ax, p, 0)
    if ax.prefetch:
        first = 0 if ax.comm == "ficco" else 1
        for t in range(first + ax.prefetch, n):
            last = _last_piece_with_step(pieces, ax, t - ax.prefetch)
            upto = [s for p in pieces[: last + 1] for u in p.units if (s := _step(ax, u)) is not None]
            if upto and max(upto) >= t:
                raise ScheduleError(
                    f"prefetch depth {ax.prefetch} deadlocks with {ax.g} pieces "
                    f"(a piece needs step {max(upto)} before step {t} may start)"
                )
    return pieces


def _step(ax: Axes, u: Unit) -> int | None:
    o, j = u
    if o == 0:
        return None
    return j if ax.comm == "ficco" else o


def _last_piece_with_step(pieces: list[Piece], ax: Axes, t: int) -> int:
    return max(p.index for p in pieces if any(_step(ax, u) == t for u in p.units))


def _as_int(x: Fraction, what: str, total: int, parts: int) -> int:
    if x.denominator != 1 or x <= 0:
        raise ScheduleError(f"{what}={total} does not split into {parts} equal pieces")
    return int(x)


def moe_unit_rows(fop: FiccoOperator, gpu: int, j: int) -> int:
    """Rows of unit j of one source on expert GPU ``gpu`` (near-equal integer parts)."""
    t = fop.expert_rows()[gpu % fop.gpus]
    n = fop.gpus
    return t // n + (1 if j < t % n else 0)


def shape_of(fop: FiccoOperator, ax: Axes, p: Piece, gpu: int) -> list[tuple[GemmShape, bool]]:
    """GEMM(s) of a piece on ``gpu``: [(shape, accumulates into existing output)]."""
    n, u = fop.gpus, len(p.units)
    if fop.op == "moe":
        rows = sum(moe_unit_rows(fop, gpu, j) for _, j in p.units)
        return [
            (GemmShape(rows, 2 * fop.n, fop.k, fop.dtype), False),
            (GemmShape(rows, fop.k, fop.n, fop.dtype), False),
        ]
    if ax.g == 1:
        return [(GemmShape(fop.m, fop.n, fop.k, fop.dtype), False)]
    if ax.split == "M":
        rows = _as_int(Fraction(u * fop.m, n * n), "M", fop.m, n * n // u)
        return [(GemmShape(rows, fop.n, fop.k, fop.dtype), False)]
    rows = _as_int(Fraction(u * fop.m, n), "M", fop.m, n // u)
    if ax.split == "K":
        k = _as_int(Fraction(fop.k, n), "K", fop.k, n)
        return [(GemmShape(rows, fop.n, k, fop.dtype), p.units[0][1] != 0)]
    cols = _as_int(Fraction(fop.n, n), "N", fop.n, n)
    return [(GemmShape(rows, cols, fop.k, fop.dtype), False)]


class FiccoBuilder(ScheduleBuilder):
    """A builder whose communication ops can get private HBM / CU pools (the ``ideal`` mode)."""

    def __init__(self, *a, isolate: bool = False, **kw):
        super().__init__(*a, **kw)
        self.isolate = isolate
        self.side = "gemm"

    def hbm(self, gpu: int) -> int:
        if self.isolate and self.side == "comm":
            g = self.canon(gpu)
            return self._resource(f"hbm:{g}:comm", self.hw.hbm.effective_Bps, "hbm", g)
        return super().hbm(gpu)

    def cu(self, gpu: int) -> int:
        if self.isolate and self.side == "comm":
            g = self.canon(gpu)
            return self._resource(f"cu:{g}:comm", float(self.hw.compute.cus), "cu", g)
        return super().cu(gpu)


def _unit_bytes(fop: FiccoOperator, gpu: int, j: int, phase: str) -> float:
    """Bytes of one unit landing on / leaving ``gpu`` (phase: 'in' = dispatch/gather, 'out')."""
    n, eb = fop.gpus, fop.eb
    if fop.op == "ag-gemm":
        return fop.m * fop.k * eb / (n * n)
    if fop.op == "gemm-rs":
        return fop.m * fop.n * eb / (n * n)
    return moe_unit_rows(fop, gpu, j) * fop.k * eb


class _Gen:
    def __init__(self, fop: FiccoOperator, hw: Hardware, ax: Axes, mode: str, symmetric: bool | None = None):
        if mode not in ("full", "ideal", "ideal-own", "comm"):
            raise ScheduleError(f"mode: unknown mode '{mode}'")
        self.fop, self.hw, self.ax, self.mode = fop, hw, ax, mode
        self.n = fop.gpus
        self.b = FiccoBuilder(
            f"{fop.op}:{ax.name}",
            hw,
            fop.gpus,
            symmetric=fop.symmetric if symmetric is None else symmetric,
            isolate=mode.startswith("ideal"),
        )
        self.pieces = plan_pieces(fop, hw, ax)
        self.where: dict[Unit, int] = {u: p.index for p in self.pieces for u in p.units}
        k = comm_cus(hw, self.n)
        if ax.comm == "bulk":
            self.ex = Executor(ax.executor, None, "comm")
            self.gemm_cus = hw.compute.cus
        else:
            self.ex = Executor(ax.executor, k, "comm")
            own = ax.executor == "cu" and mode in ("full", "ideal-own")
            self.gemm_cus = hw.compute.cus - k if own else hw.compute.cus
        self.plans: dict = {}
        self.ring = hw.topology.kind == "ring"
        self.jsets = list(range(self.n)) if ax.comm == "ficco" else ["a"]

    # ---- helpers ----------------------------------------------------------------------------
    def piece_end(self, g: int, i: int) -> Ref:
        return (g, f"p{i}.end")

    def pieces_with(self, g: int, o: int, jj) -> list[Ref]:
        js = range(self.n) if jj == "a" else [jj]
        return [self.piece_end(g, i) for i in sorted({self.where[(o, j)] for j in js})]

    def jbytes(self, gpu: int, jj, phase: str) -> float:
        js = range(self.n) if jj == "a" else [jj]
        return sum(_unit_bytes(self.fop, gpu, j, phase) for j in js)

    def send(self, g: int, dst: int, key: str, nbytes: float, deps: list[Ref], cat: str, extra=()):
        b, hw, ex = self.b, self.hw, self.ex
        b.side = "comm"
        work = transfer_work(b, g, dst, nbytes, ex) + list(extra)
        caps = [(b.dma(g), hw.dma.bandwidth_Bps)] if ex.kind == "dma" else []
        delay = ex.step_delay(b, ex.kind == "cu")
        b.add(
            g, key, kind="send", cat=cat, work=work, caps=caps, delay_s=delay, deps=deps,
            traffic={f"{cat}_read": nbytes, f"{cat}_write": nbytes, "link": nbytes},
        )  # fmt: skip
        b.side = "gemm"

    def step_gate(self, g: int, t: int | None) -> list[Ref]:
        """Prefetch: transfers of step t wait for the compute of step t - depth."""
        ax = self.ax
        if not ax.prefetch or t is None or ax.comm == "bulk":
            return []
        s = t - ax.prefetch
        first = 0 if ax.comm == "ficco" else 1
        if s < first:
            return []
        return [self.piece_end(g, _last_piece_with_step(self.pieces, ax, s))]

    # ---- gather / dispatch -------------------------------------------------------------------
    def gather(self) -> dict[tuple[int, Unit], list[Ref]]:
        """Adds the transfers that feed the GEMM; returns arrival refs per (gpu, unit)."""
        b, n, ax, fop = self.b, self.n, self.ax, self.fop
        arr: dict[tuple[int, Unit], list[Ref]] = {}
        if ax.comm == "bulk":
            b.side = "comm"
            if fop.op == "moe":
                rows = fop.expert_rows()
                mat = [[0.0 if s == h else rows[h] * fop.k * fop.eb for h in range(n)] for s in range(n)]
                done = all_to_all(b, mat, ex=self.ex, prefix="d", cat="a2a")
            else:
                done = all_gather(b, fop.m * fop.k * fop.eb, ex=self.ex, prefix="d", cat="ag")
            b.side = "gemm"
            for g in b.gpus:
                for o in range(1, n):
                    for j in range(n):
                        arr[(g, (o, j))] = done[g]
            return arr
        cat = "a2a" if fop.op == "moe" else "ag"
        for g in b.gpus:
            for jj in self.jsets:
                step_j = jj if ax.comm == "ficco" else None
                for o in range(1, n):
                    t = step_j if step_j is not None else o
                    if self.ring:
                        # hop o of pass jj: g forwards to g+1 the unit of source g-(o-1)
                        deps = [(g - 1, f"d.r{jj}.{o - 1}")] if o > 1 else []
                        prev = self._prev_j(jj)
                        if prev is not None:
                            deps.append((g, f"d.r{prev}.{o}"))
                        deps += self.step_gate(g, t)
                        self.send(g, g + 1, f"d.r{jj}.{o}", self.jbytes(g + 1, jj, "in"), deps, cat)
                    else:
                        deps = []
                        if ax.comm == "shard" and o > 1:
                            deps.append((g, f"d.s{o - 1}"))
                        prev = self._prev_j(jj)
                        if prev is not None:
                            deps.append((g, f"d.f{prev}.{o}"))
                        deps += self.step_gate(g, t)
                        key = f"d.f{jj}.{o}" if ax.comm == "ficco" else f"d.s{o}"
                        self.send(g, g + o, key, self.jbytes(g + o, jj, "in"), deps, cat)
            for o in range(1, n):
                for j in range(n):
                    jj = j if ax.comm == "ficco" else "a"
                    if self.ring:
                        arr[(g, (o, j))] = [(g - 1, f"d.r{jj}.{o}")]
                    else:
                        key = f"d.f{jj}.{o}" if ax.comm == "ficco" else f"d.s{o}"
                        arr[(g, (o, j))] = [(g - o, key)]
        return arr

    def _prev_j(self, jj):
        return jj - 1 if isinstance(jj, int) and jj > 0 else None

    # ---- compute ------------------------------------------------------------------------------
    def compute(self, arr: dict[tuple[int, Unit], list[Ref]]) -> None:
        b, ax = self.b, self.ax
        for g in b.gpus:
            for p in self.pieces:
                deps: list[Ref] = []
                for u in p.units:
                    for r in arr.get((g, u), []):
                        if r not in deps:
                            deps.append(r)
                if p.index >= ax.streams:
                    deps.append(self.piece_end(g, p.index - ax.streams))
                if self.mode == "comm":
                    b.add(g, f"p{p.index}.end", kind="piece", cat="gemm", deps=deps)
                    continue
                for t, (shape, acc) in enumerate(shape_of(self.fop, ax, p, g)):
                    pre = f"p{p.index}.{t}"
                    if acc:
                        ob = shape.out_bytes
                        b.add(g, f"{pre}.acc", kind="gemm-load", cat="gemm", work=[(b.hbm(g), ob)],
                              deps=deps, traffic={"gemm_read": ob})  # fmt: skip
                        deps = [(g, f"{pre}.acc")]
                    key = (shape, self.gemm_cus)
                    if key not in self.plans:
                        self.plans[key] = gemm_plan(shape, self.hw, cus=self.gemm_cus)
                    deps = add_gemm(b, g, self.plans[key], prefix=pre, deps=deps)[-1:]
                b.add(g, f"p{p.index}.end", kind="piece", cat="gemm", deps=deps)

    # ---- reduce-scatter / combine -------------------------------------------------------------
    def scatter(self) -> None:
        b, n, ax, fop = self.b, self.n, self.ax, self.fop
        last = self.piece_end
        if ax.comm == "bulk":
            b.side = "comm"
            if fop.op == "moe":
                rows = fop.expert_rows()
                mat = [[0.0 if s == h else rows[s] * fop.k * fop.eb for h in range(n)] for s in range(n)]
                all_to_all(b, mat, ex=self.ex, prefix="c", cat="a2a", start=lambda g: [last(g, 0)])
            else:
                reduce_scatter(b, fop.m * fop.n * fop.eb, ex=self.ex, prefix="c", cat="rs",
                               start=lambda g: [last(g, 0)])  # fmt: skip
            b.side = "gemm"
            return
        moe = fop.op == "moe"
        cat = "a2a" if moe else "rs"
        for g in b.gpus:
            for jj in self.jsets:
                for o in range(1, n):
                    prev = self._prev_j(jj)
                    if self.ring:
                        # hop o: g sends to g-1 the running partial of owner offset o
                        c = self.jbytes(g, jj, "out")
                        deps = self.pieces_with(g, o, jj) if o == 1 else [(g + 1, f"c.r{jj}.{o - 1}")]
                        deps += self.pieces_with(g - 1, (o + 1) % n, jj)
                        if prev is not None:
                            deps.append((g, f"c.r{prev}.{o}"))
                        b.side = "comm"
                        red = [(b.hbm(g - 1), 3 * c)] + self.ex.reduce_work(b, g - 1, 3 * c)
                        b.side = "gemm"
                        self.send(g, g - 1, f"c.r{jj}.{o}", c, deps, cat, extra=red)
                        continue
                    key = f"c.f{jj}.{o}" if ax.comm == "ficco" else f"c.s{o}"
                    deps = self.pieces_with(g, o, jj)
                    if ax.comm == "shard" and o > 1:
                        deps.append((g, f"c.s{o - 1}"))
                    if prev is not None:
                        deps.append((g, f"c.f{prev}.{o}"))
                    dst = g - o if moe else g + o
                    self.send(g, dst, key, self.jbytes(g, jj, "out"), deps, cat)
                    if moe:
                        continue
                    if ax.reduce == "batched":
                        continue
                    # the owner g reduces the arrival from g-o into its accumulator
                    c = self.jbytes(g, jj, "out")
                    rdeps = [(g - o, key)]
                    rdeps += [(g, f"r{jj}.{o - 1}")] if o > 1 else self.pieces_with(g, 0, jj)
                    b.side = "comm"
                    b.add(
                        g, f"r{jj}.{o}", kind="reduce", cat=cat,
                        work=[(b.hbm(g), 3 * c)] + self.ex.reduce_work(b, g, 3 * c), deps=rdeps,
                        traffic={f"{cat}_read": 2 * c, f"{cat}_write": c},
                    )  # fmt: skip
                    b.side = "gemm"
                if ax.reduce == "batched" and not moe and not self.ring:
                    self._batched_reduce(
                        g, jj, key_of=lambda o, jj=jj: f"c.f{jj}.{o}" if ax.comm == "ficco" else f"c.s{o}"
                    )

    def _batched_reduce(self, g: int, jj, key_of) -> None:
        """Owner g adds the N-1 landed partials of step set ``jj`` and its own piece in one reduction
        kernel on all CUs: N reads + 1 write of a block, after every partial landed (a kernel launch)."""
        b, n = self.b, self.n
        c = self.jbytes(g, jj, "out")
        deps = [(g - o, key_of(o)) for o in range(1, n)] + self.pieces_with(g, 0, jj)
        prev = self._prev_j(jj)
        if prev is not None:
            deps.append((g, f"r{prev}"))  # one reduction stream
        b.side = "comm"
        wide = Executor("cu", None, "reduce")
        b.add(
            g, f"r{jj}", kind="reduce", cat="rs", delay_s=self.hw.compute.kernel_launch_s,
            work=[(b.hbm(g), (n + 1) * c)] + wide.reduce_work(b, g, (n + 1) * c), deps=deps,
            traffic={"rs_read": n * c, "rs_write": c},
        )  # fmt: skip
        b.side = "gemm"

    def build(self) -> Schedule:
        op = self.fop.op
        arr = self.gather() if op in ("ag-gemm", "moe") else {}
        self.compute(arr)
        if op in ("gemm-rs", "moe"):
            self.scatter()
        self.b.meta.update(schedule=self.ax.name, mode=self.mode, gemm_cus=self.gemm_cus)
        return self.b.build()


def ficco_schedule(
    fop: FiccoOperator, hw: Hardware, ax: Axes, mode: str = "full", symmetric: bool | None = None
) -> Schedule:
    """The schedule of design point ``ax`` for ``fop`` on ``hw`` (mode: full, ideal, comm).
    ``symmetric`` forces the quotient (True) or all-GPU (False) mode; default: by the operator."""
    if symmetric and not fop.symmetric:
        raise ScheduleError("symmetric: skewed MoE routing needs the all-GPU mode")
    return _Gen(fop, hw, ax, mode, symmetric).build()


def gemm_alone_schedule(shapes: list[tuple[GemmShape, bool]], hw: Hardware, n: int) -> Schedule:
    """A chain of GEMMs alone on one GPU with all CUs (isolated piece times)."""
    b = ScheduleBuilder("gemm-alone", hw, n, symmetric=True)
    deps: list[Ref] = []
    for t, (shape, acc) in enumerate(shapes):
        if acc:
            b.add(0, f"g{t}.acc", kind="gemm-load", cat="gemm", work=[(b.hbm(0), shape.out_bytes)], deps=deps)
            deps = [(0, f"g{t}.acc")]
        deps = add_gemm(b, 0, gemm_plan(shape, hw), prefix=f"g{t}", deps=deps)[-1:]
    return b.build()
