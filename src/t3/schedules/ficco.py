"""FiCCO schedule generators: one function builds every point of the design space (see
:mod:`t3.ficco.space`) as a schedule of the shared vocabulary.

Data is cut into N^2 *units* ``(o, j)`` per GPU: ``o`` is the peer offset (0 = local data; for
ag-gemm / moe dispatch the unit comes from GPU g-o, for gemm-rs / moe combine it goes to its owner),
``j`` the sub-piece (rows for an M split, the K block for a K split, the column block for an N split).

- Communication: ``bulk`` is one library collective (:mod:`t3.ops.collectives`: the algorithm and
  protocol the library picks for a CU kernel of ``collective.channels`` CUs; DMA engines: direct
  copies, reductions on CUs); ``shard`` sends
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

Named implementations of real fused kernels (selectable by name, never enumerated by the explorer):

- ``-fk`` (one fused kernel): the G pieces are the row chunks, in processing order, of *one* GEMM plan
  (one launch; waves run on across chunk boundaries, so no per-piece wave quantization or launch).
  ag-gemm: a wave's first load waits for the arrival of every unit of the chunks its tiles belong to
  (tile-wise waits on data the DMA engines or the CU kernel copied: Flux's all-gather GEMM). gemm-rs: a
  chunk's transfers start when the last wave holding its tiles ended (per-tile signals).
- executor ``ep`` (epilogue stores, gemm-rs): one fused kernel whose epilogue stores every output tile
  to the GPU that owns its rows (straight into that GPU's buffer slot for this sender). The stores of a
  wave go out after its compute, and the wave's CUs are not free for the next wave until they drained:
  a *store* op per wave holds them, at ``fused.store_Bps_per_cu`` per CU, the link's achievable rate
  and the owners' HBM, plus one link latency for the completion. Remote tiles bypass the local L2.
- ``-sb`` (PyTorch async-TP's symmetric-memory handshakes; ``shard-g<N>-M`` only): a *barrier* is one
  kernel on every GPU that ends when every GPU reached it (``compute.kernel_launch_s`` plus one
  ``link.latency_s`` for the signals). gemm-rs: the partial for offset o, barrier ``c.b<o>``, the pull
  ``c.s<o>``, barrier ``c.a<o>``; a stream's next partial waits for ``c.a<o>`` (the peer must have
  read the buffer before it is overwritten), and a final barrier precedes the sum (``-rsum``).
  ag-gemm: the local shard is copied into the symmetric buffer (``d.lc``), a barrier (``d.b0``)
  precedes every pull, the local shard is copied into the gathered output after the local GEMM
  (``d.lo``, on the local GEMM's stream), and a final barrier (``d.fin``) ends the operation.
- ``-rsum``: one library sum kernel over the N stacked partials of the owner's block (``torch.sum``
  in Flux's and async-TP's reduce-scatter), after every partial landed: N reads + 1 write on all CUs,
  its HBM use capped at ``fused.reduce_hbm_fraction`` of ``hbm.bandwidth_Bps`` (the kernel is
  instruction-bound, not bandwidth-bound).

Modes: ``full`` (the schedule), ``ideal`` (same DAG, but communication gets its own HBM and CU pool
and the GEMM pieces are planned for all CUs: nothing is shared; the contention-free reference),
``ideal-own`` (nothing shared either, but the GEMM pieces keep the plans of ``full``, i.e. for the
CUs the communication kernel leaves), ``comm`` (GEMM pieces take no time: the communication alone,
with the same dependencies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.config.hardware import Hardware
from t3.errors import ScheduleError
from t3.ficco.space import Axes, FiccoOperator
from t3.ops.collectives import Executor, all_gather, all_to_all, reduce_scatter, transfer_work
from t3.ops.gemm import GemmPlan, add_gemm, cus_beside, declare_kernel, gemm_tail, l2_body_bytes, plan_gemm
from t3.sim.schedule import Ref, Schedule, ScheduleBuilder, hbm_timing
from t3.workload.sublayers import GemmShape

Unit = tuple[int, int]


@dataclass(frozen=True)
class Piece:
    index: int
    units: tuple[Unit, ...]


def gemm_plan(shape: GemmShape, hw: Hardware, cus: int | None = None) -> GemmPlan:
    """The plan a GEMM library runs for a piece: the one GEMM model's (:func:`t3.ops.gemm.plan_gemm`:
    tile choice, waves, L2 reuse, K-loop streaming)."""
    return plan_gemm(shape, hw, cus=cus)


def comm_cus(hw: Hardware, n: int) -> int:
    """CUs a communication kernel needs to drive a GPU's links at full rate (named parameter)."""
    links = (n - 1) if hw.topology.kind == "mesh" else 1
    # a send issues a load and a store per byte (t3.ops.collectives.transfer_work)
    rate = links * hw.link.bandwidth_Bps * hw.collective.link_efficiency
    need = math.ceil(2 * rate / hw.compute.cu_copy_Bps)
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
    """The compute pieces of a schedule; :class:`ScheduleError` (a legality reason) if impossible.
    Memoised (pieces are immutable; an exploration plans the same schedule in several modes)."""
    key = (fop, ax, id(hw))
    hit = _PIECES.get(key)
    if hit is None or hit[0] is not hw:
        if len(_PIECES) > 10_000:
            _PIECES.clear()
        hit = _PIECES[key] = (hw, _plan_pieces(fop, hw, ax))
    return list(hit[1])


_PIECES: dict[tuple, tuple[Hardware, list[Piece]]] = {}


def _plan_pieces(fop: FiccoOperator, hw: Hardware, ax: Axes) -> list[Piece]:
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


def _as_int(num: int, den: int, what: str, total: int, parts: int) -> int:
    """``num / den`` if it is a positive integer (``den`` > 0)."""
    q, r = divmod(num, den)
    if r or q <= 0:
        raise ScheduleError(f"{what}={total} does not split into {parts} equal pieces")
    return int(q)


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
        rows = _as_int(u * fop.m, n * n, "M", fop.m, n * n // u)
        return [(GemmShape(rows, fop.n, fop.k, fop.dtype), False)]
    rows = _as_int(u * fop.m, n, "M", fop.m, n // u)
    if ax.split == "K":
        k = _as_int(fop.k, n, "K", fop.k, n)
        return [(GemmShape(rows, fop.n, k, fop.dtype), p.units[0][1] != 0)]
    cols = _as_int(fop.n, n, "N", fop.n, n)
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
        return ScheduleBuilder.hbm(self, gpu)

    def cu(self, gpu: int) -> int:
        if self.isolate and self.side == "comm":
            g = self.canon(gpu)
            return self._resource(f"cu:{g}:comm", float(self.hw.compute.cus), "cu", g)
        return ScheduleBuilder.cu(self, gpu)


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
        elif ax.executor == "ep":  # the GEMM's epilogue moves the bytes: no communication kernel
            self.ex = Executor("cu", k, "comm")  # (unused: no transfer ops)
            self.gemm_cus = hw.compute.cus
        else:
            self.ex = Executor(ax.executor, k, "comm")
            own = ax.executor == "cu" and mode in ("full", "ideal-own")
            self.gemm_cus = cus_beside(hw, k) if own else hw.compute.cus  # (a held CU takes its cluster slot)
        self.plans: dict = {}
        self._with: dict[tuple, list[int]] = {}  # (offset, step set) -> pieces holding those units
        self._jb: dict[tuple, float] = {}  # (gpu, step set, phase) -> bytes
        self._last: dict[int, int] = {}  # step -> the last piece holding one of its units
        self.ring = hw.topology.kind == "ring"
        self.jsets = list(range(self.n)) if ax.comm == "ficco" else ["a"]

    # ---- helpers ----------------------------------------------------------------------------
    def piece_end(self, g: int, i: int) -> Ref:
        return (g, f"p{i}.end")

    def barrier(self, g: int, key: str, cat: str, deps: list[Ref]) -> Ref:
        """A symmetric-memory barrier of GPU g (``-sb``): ``deps`` are this GPU's; the barrier also waits
        for the same ``deps`` on every other GPU (each GPU signals every peer once it reached it)."""
        b, n, hw = self.b, self.n, self.hw
        every = [(h + d, k) for d in range(n) for h, k in deps]
        b.side = "comm"
        b.add(g, key, kind="barrier", cat=cat, delay_s=hw.compute.kernel_launch_s + hw.link.latency_s,
              deps=every)  # fmt: skip
        b.side = "gemm"
        return (g, key)

    def stream_prev(self, g: int, i: int) -> Ref:
        """What piece i waits for on its stream: the end of piece ``i - streams``; with ``-sb`` on
        gemm-rs the second barrier after that piece's pull, on ag-gemm after the local piece the copy
        of the local shard into the gathered output."""
        j = i - self.ax.streams
        if self.ax.handshake:
            o = self.pieces[j].units[0][0]
            if self.fop.op == "gemm-rs" and o:
                return (g, f"c.a{o}")
            if self.fop.op == "ag-gemm" and not o:
                return (g, "d.lo")
        return self.piece_end(g, j)

    def _copy(self, g: int, key: str, cat: str, nbytes: float, deps: list[Ref]) -> None:
        """A device-to-device copy of ``nbytes`` on GPU g (one copy kernel: read and write its HBM)."""
        b = self.b
        b.side = "comm"
        b.add(g, key, kind="copy", cat=cat, delay_s=self.hw.compute.kernel_launch_s,
              work=[(b.hbm(g), nbytes), (b.hbm_w(g), nbytes)] + self.ex.reduce_work(b, g, 2 * nbytes),
              deps=deps, traffic={f"{cat}_read": nbytes, f"{cat}_write": nbytes})  # fmt: skip
        b.side = "gemm"

    def marker(self, g: int, key: str, deps: list[Ref]) -> None:
        """An op without work that ends when ``deps`` do (a piece's end): every one a copy of the first."""
        b, tkey = self.b, ("marker", g)
        if b.add_copy(tkey, g, key, deps) is None:
            b.templates[tkey] = b.add(g, key, kind="piece", cat="gemm", deps=deps)

    def pieces_with(self, g: int, o: int, jj) -> list[Ref]:
        idx = self._with.get((o, jj))
        if idx is None:
            js = range(self.n) if jj == "a" else [jj]
            idx = self._with[o, jj] = sorted({self.where[(o, j)] for j in js})
        return [self.piece_end(g, i) for i in idx]

    def jbytes(self, gpu: int, jj, phase: str) -> float:
        nb = self._jb.get((gpu, jj, phase))
        if nb is None:
            js = range(self.n) if jj == "a" else [jj]
            nb = self._jb[gpu, jj, phase] = sum(_unit_bytes(self.fop, gpu, j, phase) for j in js)
        return nb

    def send(
        self, g: int, dst: int, key: str, nbytes: float, deps: list[Ref], cat: str, extra=(), extra_key=None
    ):  # fmt: skip
        """A transfer of ``nbytes`` from g to dst; ``extra``: more work of the same op, which ``extra_key``
        names (the same key, the same work) so that a repeat is a copy (without one, never copied)."""
        b, hw, ex = self.b, self.hw, self.ex
        tkey = ("send", g, dst, nbytes, cat, extra_key) if not extra or extra_key is not None else None
        if tkey is not None and b.add_copy(tkey, g, key, deps) is not None:
            return  # the same transfer again: only key and deps change
        b.side = "comm"
        work = transfer_work(b, g, dst, nbytes, ex) + list(extra)
        caps = [(b.dma(g), hw.dma.bandwidth_Bps)] if ex.kind == "dma" else []
        delay = ex.step_delay(b, ex.kind == "cu")
        op = b.add(
            g, key, kind="send", cat=cat, work=work, caps=caps, delay_s=delay, deps=deps,
            traffic={f"{cat}_read": nbytes, f"{cat}_write": nbytes, "link": nbytes},
        )  # fmt: skip
        b.side = "gemm"
        if tkey is not None:
            b.templates[tkey] = op

    def step_gate(self, g: int, t: int | None) -> list[Ref]:
        """Prefetch: transfers of step t wait for the compute of step t - depth."""
        ax = self.ax
        if not ax.prefetch or t is None or ax.comm == "bulk":
            return []
        s = t - ax.prefetch
        if ax.handshake and s == 0:  # the local GEMM's stream copies the local shard out after it
            return [(g, "d.lo")]
        first = 0 if ax.comm == "ficco" else 1
        if s < first:
            return []
        last = self._last.get(s)
        if last is None:
            last = self._last[s] = _last_piece_with_step(self.pieces, ax, s)
        return [self.piece_end(g, last)]

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
        if ax.handshake:
            shard = self.jbytes(0, "a", "in")
            local = [p.index for p in self.pieces if p.units[0][0] == 0]
            for g in b.gpus:
                self._copy(g, "d.lc", cat, shard, [])
                self.barrier(g, "d.b0", cat, [(g, "d.lc")])
                self._copy(g, "d.lo", cat, shard, [self.piece_end(g, i) for i in local])
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
                        deps = [(g, "d.b0")] if ax.handshake else []
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
        if ax.one_kernel:
            self.fused_compute(arr)
            return
        for g in b.gpus:
            for p in self.pieces:
                deps: list[Ref] = []
                for u in p.units:
                    for r in arr.get((g, u), []):
                        if r not in deps:
                            deps.append(r)
                if p.index >= ax.streams:
                    deps.append(self.stream_prev(g, p.index))
                if self.mode == "comm":
                    self.marker(g, f"p{p.index}.end", deps)
                    continue
                for t, (shape, acc) in enumerate(shape_of(self.fop, ax, p, g)):
                    pre = f"p{p.index}.{t}"
                    if acc:
                        ob = shape.out_bytes
                        if b.add_copy(("acc", g, ob), g, f"{pre}.acc", deps) is None:
                            b.templates["acc", g, ob] = b.add(
                                g, f"{pre}.acc", kind="gemm-load", cat="gemm", work=[(b.hbm(g), ob)], deps=deps,
                                traffic={"gemm_read": ob},
                            )  # fmt: skip
                        deps = [(g, f"{pre}.acc")]
                    key = (shape, self.gemm_cus)
                    plan = self.plans.get(key)
                    if plan is None:
                        plan = self.plans[key] = gemm_plan(shape, self.hw, cus=self.gemm_cus)
                    deps = add_gemm(b, g, plan, prefix=pre, deps=deps)[-1:]
                    declare_kernel(b, g, plan, pre)  # the pieces' GEMMs on two streams take turns
                self.marker(g, f"p{p.index}.end", deps)

    def fused_compute(self, arr: dict[tuple[int, Unit], list[Ref]]) -> None:
        """One GEMM kernel over the pieces' row chunks (``-fk`` / ``ep``): per wave a prologue and a body
        (as :func:`t3.ops.gemm.add_gemm`), the prologue waiting for the previous wave to retire and for
        the data of the chunks the wave's tiles belong to; with ``ep`` a store op per wave after its
        body; ``p<i>.end`` marks the retirement of chunk i's last wave."""
        b, ax, hw = self.b, self.ax, self.hw
        plan = fused_plan(self.fop, hw, ax, self.gemm_cus)
        ep = ax.executor == "ep"
        geo = wave_unit_bytes(self.fop, ax, plan, self.pieces)
        for g in b.gpus:
            cu, hbm, hbm_w = b.cu(g), b.hbm(g), b.hbm_w(g)
            retire: Ref | None = None
            last_of: dict[int, Ref] = {}
            for w in plan.waves:
                chunks = [ch for ch, _, _ in w.segments]
                deps: list[Ref] = [] if retire is None else [retire]
                for ch in chunks:
                    for u in self.pieces[ch].units:
                        deps += [r for r in arr.get((g, u), []) if r not in deps]
                body = (g, f"f.C{w.index}")
                remote: dict[int, float] = {}  # ep: bytes of the wave's tiles by owner offset
                if ep:
                    for (o, _), v in geo[w.index].items():
                        if o:
                            remote[o] = remote.get(o, 0.0) + v
                if self.mode == "comm":
                    self.marker(g, body[1], deps)
                else:
                    b.add(
                        g, f"f.L{w.index}", kind="gemm-load", cat="gemm", work=[(hbm, w.prologue_bytes)],
                        delay_s=hw.compute.kernel_launch_s if w.index == 0 else 0.0, deps=deps,
                        traffic={"gemm_read": w.prologue_bytes}, window=w.window_bytes, l2=0.0,
                    )  # fmt: skip
                    written = sum(w.write_bytes.values())
                    # ep: the remote tiles land in their owners' HBM as the wave writes them (posted
                    # writes, absorbed there while every GPU computes the same wave)
                    landing = [(b.hbm_w(g + o), nb) for o, nb in sorted(remote.items())]
                    local = written - sum(remote.values())
                    body_reads = w.read_bytes - w.prologue_bytes
                    b.add(
                        g, body[1], kind="gemm-compute", cat="gemm",
                        work=[(cu, w.compute_s * w.cus_used), (hbm, body_reads), (hbm_w, local)] + landing,
                        caps=[(cu, float(w.cus_used))], rounds=gemm_tail(plan, w, hw),
                        deps=[(g, f"f.L{w.index}")],
                        traffic={"gemm_read": body_reads, "gemm_write": written}, window=w.window_bytes,
                        l2=l2_body_bytes(plan, w, hw) + written if b.l2_side else None,
                    )  # fmt: skip
                retire = body
                if remote:
                    retire = self._epilogue_stores(g, w.index, w.cus_used, remote, body)
                for ch in chunks:
                    last_of[ch] = retire
            for p in self.pieces:
                self.marker(g, f"p{p.index}.end", [last_of[p.index]])

    def _epilogue_stores(self, g: int, wave: int, cus_used: int, remote: dict[int, float], body: Ref) -> Ref:
        """The drain of one wave's remote tiles (``remote``: bytes by owner offset): link bytes to each
        owner and the wave's CUs busy at ``fused.store_Bps_per_cu`` each, then one link latency for the
        completion the wave waits for before it retires (the landing writes are the body's)."""
        b, hw = self.b, self.hw
        cu = b.cu(g)  # the GEMM's CUs (never a private pool: the wave holds them)
        rate = hw.fused.store_Bps_per_cu or hw.compute.cu_copy_Bps
        wire = 1.0 / hw.collective.link_efficiency
        total = sum(remote.values())
        b.side = "comm"
        work = [(cu, total / rate)]
        for o, nb in sorted(remote.items()):
            work += [(r, nb * wire) for r in b.path(g, g + o)]
        key = f"f.S{wave}"
        b.add(
            g, key, kind="remote-store", cat="rs", work=work, caps=[(cu, float(cus_used))],
            delay_s=hw.link.latency_s, deps=[body], traffic={"link": total},
        )  # fmt: skip
        b.side = "gemm"
        return (g, key)

    # ---- reduce-scatter / combine -------------------------------------------------------------
    def scatter(self) -> None:
        b, n, ax, fop = self.b, self.n, self.ax, self.fop
        last = self.piece_end
        if ax.executor == "ep":
            self._epilogue_reductions()
            return
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
                        red = [(b.hbm(g - 1), 2 * c), (b.hbm_w(g - 1), c)] + self.ex.reduce_work(
                            b, g - 1, 3 * c
                        )
                        b.side = "gemm"
                        self.send(g, g - 1, f"c.r{jj}.{o}", c, deps, cat, extra=red, extra_key=("reduce", c))
                        continue
                    key = f"c.f{jj}.{o}" if ax.comm == "ficco" else f"c.s{o}"
                    deps = self.pieces_with(g, o, jj)
                    if ax.handshake:
                        deps = [self.barrier(g, f"c.b{o}", cat, deps)]
                    if ax.comm == "shard" and o > 1:
                        deps.append((g, f"c.s{o - 1}"))
                    if prev is not None:
                        deps.append((g, f"c.f{prev}.{o}"))
                    dst = g - o if moe else g + o
                    self.send(g, dst, key, self.jbytes(g, jj, "out"), deps, cat)
                    if ax.handshake:  # the peer has read the buffer: the stream may overwrite it
                        self.barrier(g, f"c.a{o}", cat, [(g, key)])
                    if moe:
                        continue
                    if ax.reduce != "inc":
                        continue
                    # the owner g reduces the arrival from g-o into its accumulator
                    c = self.jbytes(g, jj, "out")
                    rdeps = [(g - o, key)]
                    rdeps += [(g, f"r{jj}.{o - 1}")] if o > 1 else self.pieces_with(g, 0, jj)
                    if b.add_copy(("inc-reduce", g, c, cat), g, f"r{jj}.{o}", rdeps) is not None:
                        continue
                    b.side = "comm"
                    b.templates["inc-reduce", g, c, cat] = b.add(
                        g, f"r{jj}.{o}", kind="reduce", cat=cat,
                        work=[(b.hbm(g), 2 * c), (b.hbm_w(g), c)] + self.ex.reduce_work(b, g, 3 * c), deps=rdeps,
                        traffic={f"{cat}_read": 2 * c, f"{cat}_write": c},
                    )  # fmt: skip
                    b.side = "gemm"
                if ax.reduce == "batched" and not moe and not self.ring:
                    self._batched_reduce(
                        g, jj, key_of=lambda o, jj=jj: f"c.f{jj}.{o}" if ax.comm == "ficco" else f"c.s{o}"
                    )
            if ax.reduce == "sum" and not moe and not self.ring:
                landed = [
                    (g - o, f"c.f{jj}.{o}" if ax.comm == "ficco" else f"c.s{o}")
                    for jj in self.jsets for o in range(1, n)
                ]  # fmt: skip
                if ax.handshake:  # both streams joined, then one barrier of all GPUs before the sum
                    done = [(g, f"c.a{o}") for o in range(1, n)] + self.pieces_with(g, 0, "a")
                    landed = [self.barrier(g, "c.fin", cat, done)]
                self._sum_reduce(g, landed + self.pieces_with(g, 0, "a"))

    def _epilogue_reductions(self) -> None:
        """``ep``: the owner reduces the partials its peers' epilogues stored into its buffer slots:
        per transfer step set (``-rb``) once the waves that stored them retired, or one sum kernel at the
        end (``-rsum``). A wave's stores land before it retires, and a GPU's waves retire in order."""
        b, n, ax = self.b, self.n, self.ax
        plan = fused_plan(self.fop, self.hw, ax, self.gemm_cus)
        geo = wave_unit_bytes(self.fop, ax, plan, self.pieces)
        last_store: dict[Unit, int] = {}
        for w in plan.waves:
            for u in geo[w.index]:
                last_store[u] = w.index
        for g in b.gpus:
            if ax.reduce == "sum":
                final = max(last_store[u] for u in last_store if u[0])
                self._sum_reduce(
                    g, [(g - o, f"f.S{final}") for o in range(1, n)] + self.pieces_with(g, 0, "a")
                )
                continue
            for jj in self.jsets:
                js = range(n) if jj == "a" else [jj]
                deps = [(g - o, f"f.S{last_store[(o, j)]}") for o in range(1, n) for j in js]
                self._batched_reduce(g, jj, deps=deps + self.pieces_with(g, 0, jj))

    def _sum_reduce(self, g: int, deps: list[Ref]) -> None:
        """Owner g sums its N stacked partials (N reads + 1 write of its block) in one library kernel on
        all CUs after ``deps``; the kernel reaches ``fused.reduce_hbm_fraction`` of the HBM peak."""
        b, n, hw = self.b, self.n, self.hw
        c = self.jbytes(g, "a", "out")
        b.side = "comm"
        wide = Executor("cu", hw.compute.cus, "reduce", exclusive=False)
        hbm = b.hbm(g)
        b.add(
            g, "rsum", kind="reduce", cat="rs", delay_s=hw.compute.kernel_launch_s,
            work=[(hbm, n * c), (b.hbm_w(g), c)] + wide.reduce_work(b, g, (n + 1) * c),
            caps=[(hbm, hw.fused.reduce_hbm_fraction * hw.hbm.bandwidth_Bps)], deps=deps,
            traffic={"rs_read": n * c, "rs_write": c},
        )  # fmt: skip
        b.side = "gemm"

    def _batched_reduce(self, g: int, jj, key_of=None, deps: list[Ref] | None = None) -> None:
        """Owner g adds the N-1 landed partials of step set ``jj`` and its own piece in one reduction
        kernel on all CUs: N reads + 1 write of a block, after every partial landed (a kernel launch).
        ``key_of(o)``: the transfer from g-o that lands them (or the refs ``deps``, local piece included)."""
        b, n = self.b, self.n
        c = self.jbytes(g, jj, "out")
        if deps is None:
            deps = [(g - o, key_of(o)) for o in range(1, n)] + self.pieces_with(g, 0, jj)
        prev = self._prev_j(jj)
        if prev is not None:
            deps.append((g, f"r{prev}"))  # one reduction stream
        b.side = "comm"
        wide = Executor("cu", self.hw.compute.cus, "reduce", exclusive=False)
        b.add(
            g, f"r{jj}", kind="reduce", cat="rs", delay_s=self.hw.compute.kernel_launch_s,
            work=[(b.hbm(g), n * c), (b.hbm_w(g), c)] + wide.reduce_work(b, g, (n + 1) * c), deps=deps,
            traffic={"rs_read": n * c, "rs_write": c},
        )  # fmt: skip
        b.side = "gemm"

    def build(self) -> Schedule:
        op = self.fop.op
        arr = self.gather() if op in ("ag-gemm", "moe") else {}
        self.compute(arr)
        if op in ("gemm-rs", "moe"):
            self.scatter()
        elif self.ax.handshake:  # ag-gemm: one barrier once every piece ended and the local copy landed
            for g in self.b.gpus:
                ends = [self.piece_end(g, p.index) for p in self.pieces] + [(g, "d.lo")]
                self.barrier(g, "d.fin", "ag", ends)
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


def fused_plan(fop: FiccoOperator, hw: Hardware, ax: Axes, cus: int | None = None) -> GemmPlan:
    """The one GEMM plan of a fused kernel (``-fk`` / ``ep``): the whole GEMM, its rows cut into the
    pieces' chunks in processing order; with ``ep`` the chunks that hold no local unit store around the
    L2 (remote stores do not allocate in it)."""
    pieces = plan_pieces(fop, hw, ax)
    bypass = frozenset()
    if ax.executor == "ep":
        bypass = frozenset(p.index for p in pieces if all(o for o, _ in p.units))
    shape = GemmShape(fop.m, fop.n, fop.k, fop.dtype)
    return plan_gemm(shape, hw, cus=cus, chunks=len(pieces), bypass=bypass)


def wave_unit_bytes(
    fop: FiccoOperator, ax: Axes, plan: GemmPlan, pieces: list[Piece]
) -> list[dict[Unit, float]]:
    """Output bytes each wave of a fused plan writes, by unit (exact tile boxes: a tile that spans
    several units' rows is split by rows; partial tiles at the edges hold only their own rows)."""
    n = fop.gpus
    unit_rows = fop.m // (n * n)
    out: list[dict[Unit, float]] = []
    for w in plan.waves:
        d: dict[Unit, float] = {}
        for ch, a, e in w.segments:
            units = pieces[ch].units
            base = ch * plan.chunk_rows
            for t in range(a, e):
                r0, r1, c0, c1 = plan.tile_box(ch, t)
                row_bytes = (c1 - c0) * fop.eb
                r = r0
                while r < r1:
                    k = (r - base) // unit_rows
                    top = min(r1, base + (k + 1) * unit_rows)
                    u = units[k]
                    d[u] = d.get(u, 0.0) + (top - r) * row_bytes
                    r = top
        out.append(d)
    return out


def epilogue_breakdown(fop: FiccoOperator, hw: Hardware, ax: Axes) -> dict[str, float]:
    """Closed-form parts (s) of an ``ep`` implementation on an idle node, every GPU alike (the engine's
    result while the reduction does not overlap the GEMM, i.e. ``-rsum``): ``gemm_s`` (the fused plan
    alone: launch, every wave's prologue and body; the remote tiles land in their owners' HBM as the
    wave writes them, which by symmetry is what each GPU receives), ``drain_s`` (every wave's store
    drain: one link latency plus its remote bytes at the slower of the wave's CUs' store rate and the
    link), ``reduce_s`` (launch + (N+1) blocks at the reduction's HBM cap) and ``total_s``."""
    plan = fused_plan(fop, hw, ax)
    geo = wave_unit_bytes(fop, ax, plan, plan_pieces(fop, hw, ax))
    rate = hw.fused.store_Bps_per_cu or hw.compute.cu_copy_Bps
    link = hw.link.bandwidth_Bps * hw.collective.link_efficiency
    switch = hw.topology.kind == "switch"
    gemm = plan.launch_s(hw)
    drain = 0.0
    for w in plan.waves:
        p, body = plan.wave_alone_s(w, hw)
        gemm += p + body
        by_o: dict[int, float] = {}
        for (o, _), v in geo[w.index].items():
            if o:
                by_o[o] = by_o.get(o, 0.0) + v
        if not by_o:
            continue
        tot = sum(by_o.values())
        # a switch port carries all of a GPU's stores; a mesh link those to one peer
        wire = tot if switch else max(by_o.values())
        drain += hw.link.latency_s + max(tot / (w.cus_used * rate), wire / link)
    n = fop.gpus
    c = fop.m // n * fop.n * fop.eb
    hbm_cap = hw.hbm.effective_Bps * hbm_timing(hw).eta(1.0 / (n + 1))  # N reads : 1 write
    red_cap = min(hw.fused.reduce_hbm_fraction * hw.hbm.bandwidth_Bps, hbm_cap)
    reduce = hw.compute.kernel_launch_s + (n + 1) * c / red_cap
    return {"gemm_s": gemm, "drain_s": drain, "reduce_s": reduce, "total_s": gemm + drain + reduce}


def fused_gemm_alone_schedule(fop: FiccoOperator, hw: Hardware, ax: Axes) -> Schedule:
    """The fused kernel's GEMM (:func:`fused_plan`, all CUs) alone on one GPU, its stores local."""
    b = ScheduleBuilder("fused-gemm-alone", hw, fop.gpus, symmetric=True)
    add_gemm(b, 0, fused_plan(fop, hw, ax), prefix="g")
    return b.build()


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
