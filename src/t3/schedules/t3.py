"""T3 configurations: the GEMM's stores drive the reduce-scatter through the address map, the tracker,
DMA engines and near-memory compute (T3 paper, "The mechanism"); the all-gather runs afterwards.

- ``t3``: fused GEMM + RS, default (demand-proportional) HBM arbitration, then AG.
- ``t3-mca``: the same with memory-controller arbitration (:mod:`t3.hardware.mca`).
- ``ideal-rs-nmc``: GEMM and an NMC-reducing RS perfectly overlapped (isolated times), then AG.

Schedule of one GPU g (N = TP degree; the GEMM output is split into N chunks, produced in the
staggered order of :func:`t3.hardware.address_map.stagger_order`):

- every wave is a *load* op (its reads) and a *compute* op (its CU work and the local writes of its
  tiles in local / dma_mapped chunks); tiles of a remote-mapped chunk are not written locally;
- the tiles of one wave that belong to one chunk form a *tile group*; a group of a remote-mapped chunk
  becomes remote-store ops (``rs.<position>.<i>``) that run while the wave computes: link bytes and one
  NMC update per byte at the peer. The next wave waits until they drained (store backpressure);
- a group of a dma_mapped chunk becomes DMA ops that fire when the local wave has written the tiles and
  the upstream updates of those tiles have been applied (the tracker's trigger); a DMA reads the tiles
  from local HBM (RS read), sends them and the peer's memory applies them as NMC updates (RS write);
- groups are cut where the downstream GPU's groups start, so every downstream DMA depends exactly on the
  upstream ops that carry its tiles; the tracker counts entries per group (:mod:`t3.hardware.tracker`);
- ``rs.done`` marks the owned chunk fully reduced; the ring (or direct) AG starts from it.

In symmetric mode GPU 0 stands for all GPUs: the update GPU 0 receives from GPU 1 is, by rotation, the
one it sends to GPU N-1, so a dependency on "upstream update arrived" is the canonical ref of the
neighbour's op. Functional mode runs every GPU and carries values (:mod:`t3.functional`).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from t3.config.hardware import Hardware, per_hardware
from t3.errors import ConfigError, ScheduleError
from t3.functional import FAULTS, FunctionalRun
from t3.hardware.address_map import AddressMap, direct_rs_maps, ring_rs_maps, stagger_order
from t3.hardware.mca import McaPolicy, first_stage_intensity, mca_threshold
from t3.hardware.nmc import nmc_reduce_scatter, require_nmc, update_work
from t3.hardware.tracker import SEMAPHORE_KIND, TrackerModel
from t3.ops.collectives import all_gather, spans_nodes
from t3.ops.gemm import GemmPlan, gemm_tail, plan_gemm
from t3.schedules.base import Outcome, Param, RunOptions, register, summarize
from t3.schedules.baselines import ideal_overlap, sequential_schedule
from t3.sim.engine import DeadlockError
from t3.sim.schedule import Schedule, ScheduleBuilder, hbm_timing
from t3.workload.sublayers import GemmShape, Operator

Piece = tuple[int, int, int, int]  # (sender wave, receiver wave or -1, first tile, end tile) of a chunk


def _segments(plan: GemmPlan) -> list[list[tuple[int, int, int]]]:
    """Tile groups by stage position: (wave, first tile, end tile) in the chunk's row-major order."""
    segs: list[list[tuple[int, int, int]]] = [[] for _ in range(plan.chunks)]
    for w in plan.waves:
        for pos, a, b in w.segments:  # the plan is built in identity order: chunk label = position
            segs[pos].append((w.index, a, b))
    return segs


def _pieces(segs, p: int, q: int, cut: bool) -> list[Piece]:
    """Groups sent from position ``p``; if the receiver (position ``q``) tracks them, cut at its groups."""
    if not cut:
        return [(w, -1, a, b) for w, a, b in segs[p]]
    out = []
    sq = segs[q]
    if any(sq[k][2] > sq[k + 1][1] for k in range(len(sq) - 1)):  # not in tile order: every pair
        for w1, a1, b1 in segs[p]:
            for w2, a2, b2 in sq:
                lo, hi = max(a1, a2), min(b1, b2)
                if lo < hi:
                    out.append((w1, w2, lo, hi))
        return out
    # both lists are in tile order and disjoint: merge them
    j, m = 0, len(sq)
    for w1, a1, b1 in segs[p]:
        while j < m and sq[j][2] <= a1:
            j += 1
        k = j
        while k < m and sq[k][1] < b1:
            w2, a2, b2 = sq[k]
            lo, hi = max(a1, a2), min(b1, b2)
            if lo < hi:
                out.append((w1, w2, lo, hi))
            k += 1
    return out


def staggered_plan(op: Operator, hw: Hardware, bypass: frozenset[int] = frozenset()) -> tuple[GemmPlan, bool]:
    """The GEMM cut into N = TP chunks, one per stage; returns (plan, chunks are output columns).

    Chunks are row blocks of the output. When a row block is shorter than a macro-tile (M/N <
    ``compute.tile_m``, e.g. 2048 tokens at TP 32) every tile would be partly empty, so the chunks are
    taken along the output columns instead if those are wide enough: the plan is then that of the
    transposed product C^T = B^T A^T (same FLOPs and tiles, operands swapped in the L2 reuse model), and
    a GPU owns a column block of C after the RS. If neither dimension is wide enough, the macro-tile
    height becomes M/N (the tile's compute time scales with its area)."""
    n, g = op.tp, op.gemm
    if g.m % n == 0 and g.m // n < hw.compute.tile_m:
        if g.n % n == 0 and g.n // n >= hw.compute.tile_m:
            return plan_gemm(GemmShape(g.n, g.m, g.k, g.dtype), hw, chunks=n, bypass=bypass), True
        hw = hw.with_overrides({"compute.tile_m": g.m // n})
    return plan_gemm(g, hw, chunks=n, bypass=bypass), False


_LOCK = threading.Lock()  # the memos below may be shared by threads running simulations
LAYOUT_CACHE_SIZE = 64
_LAYOUTS: dict[tuple, dict[str, Any]] = {}


def _layout(op: Operator, hw: Hardware) -> dict[str, Any]:
    """What a T3 schedule's structure derives from (operator, hardware) alone; the piece, sender and
    update-ref tables start empty and fill as builders ask for them."""
    n = op.tp
    plan, columns = staggered_plan(op, hw, bypass=frozenset(range(n - 1)))
    ring = hw.topology.kind == "ring"
    return {
        "plan": plan,
        "columns": columns,
        "ring": ring,
        "maps": ring_rs_maps(n) if ring else direct_rs_maps(n),
        "receivers": {},
        "tracker": TrackerModel.from_hardware(hw),
        "segs": _segments(plan),
        "tile_bytes": plan.chunk_rows
        * plan.shape.n
        * op.gemm.elem_bytes
        / (plan.tiles_m_chunk * plan.tiles_n),
        "order": [stagger_order(g, n) for g in range(n)],
        "out": {},
        "senders": {},
        "inc": {},
        "refs": {},
    }


FUNCTIONAL_CONFIGS = ("t3", "t3-mca")


def require_functional(config: str) -> None:
    """Functional mode (values carried through the schedule) exists for the T3 configurations only."""
    if config not in FUNCTIONAL_CONFIGS:
        raise ConfigError(
            f"functional: configuration '{config}' has no functional mode (available: {', '.join(FUNCTIONAL_CONFIGS)})"
        )


class T3Builder:
    """Builds the fused GEMM + RS (+ AG) schedule of a T3 configuration."""

    def __init__(self, name: str, op: Operator, hw: Hardware, opts: RunOptions, *, mca: bool):
        require_nmc(hw, name)
        self.name, self.op, self.hw, self.opts, self.mca = name, op, hw, opts, mca
        self.n = n = op.tp
        self.b = ScheduleBuilder(name, hw, n, symmetric=opts.symmetric and not opts.functional)
        # the plan, address maps, tile groups and the pieces / update refs derived from them depend on
        # (operator, hardware) only: shared by every builder of the same pair (never modified)
        key = (op, _hw_content(hw))
        lay = _LAYOUTS.get(key)
        if lay is None:
            lay = _layout(op, hw)
            with _LOCK:
                if len(_LAYOUTS) >= LAYOUT_CACHE_SIZE:
                    _LAYOUTS.pop(next(iter(_LAYOUTS)))
                lay = _LAYOUTS.setdefault(key, lay)
        self._lay = lay
        self.plan, self.columns, self.ring = lay["plan"], lay["columns"], lay["ring"]
        self.maps: list[AddressMap] = lay["maps"]
        self.tracker: TrackerModel = lay["tracker"]
        self.segs, self.tile_bytes = lay["segs"], lay["tile_bytes"]
        self.theta = self.intensity = None
        if mca:
            if "intensity" not in lay:
                lay["intensity"] = self._first_stage_intensity()
            self.intensity = lay["intensity"]
            self.theta = mca_threshold(self.intensity, hw)
            self.b.policies["hbm"] = McaPolicy(self.theta, hw.mca.starvation_share, hbm_timing(hw))
        self.comm_prio = 1 if mca else 0
        self.fn: FunctionalRun | None = None
        if opts.functional:
            self.fn = FunctionalRun(
                self.plan,
                n,
                seed=opts.params.get("functional_seed", 0),
                fault=opts.params.get("functional_fault"),
            )
        self._out: dict[tuple[int, int], tuple[str, int, list[Piece], bool]] = lay["out"]
        self._senders: dict[tuple[int, int], list[tuple[int, int]]] = lay["senders"]
        self._order: list[tuple[int, ...]] = lay["order"]
        self._inc: dict[tuple[int, int], list[tuple[int, int, list[Piece], list[int] | None]]] = lay["inc"]
        self._refs: dict[tuple[int, int, int, int], list[tuple[int, str]]] = lay["refs"]
        self.counts = {"gemm_write_local": 0.0, "gemm_write_remote": 0.0, "triggers": 0, "dma_commands": 0}
        self._refs_of: dict[int, tuple[list[tuple[int, str]], list[tuple[int, str]]]] = {}
        self._entries: dict[int, int] = {}  # tiles -> tracker entries

    def _wave_refs(self, g: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """The refs of GPU ``g``'s wave ops, (loads ``gemm.L<w>``, bodies ``gemm.C<w>``) by wave."""
        hit = self._refs_of.get(g)
        if hit is None:
            w = range(len(self.plan.waves))
            hit = self._refs_of[g] = ([(g, f"gemm.L{i}") for i in w], [(g, f"gemm.C{i}") for i in w])
        return hit

    def _first_stage_intensity(self) -> float:
        """HBM utilisation of the GEMM's first stage alone (its waves' bytes over their time alone):
        what the memory controller measures before any communication starts."""
        plan, hw = self.plan, self.hw
        first = plan.order[0]
        nbytes = t = 0.0
        for w in plan.waves:
            if any(c == first for c, _, _ in w.segments):
                nbytes += w.read_bytes + sum(w.write_bytes.values())
                t += sum(plan.wave_alone_s(w, hw))
        return first_stage_intensity(nbytes, t, hw)

    # ---- the address map seen from one GPU ------------------------------------------------------
    def position(self, gpu: int, chunk: int) -> int:
        return (chunk - gpu) % self.n

    def senders(self, gpu: int, chunk: int) -> list[tuple[int, int]]:
        """(sender GPU, its stage position) of the updates GPU ``gpu`` receives for ``chunk``."""
        key = (gpu % self.n, chunk)
        if key in self._senders:
            return self._senders[key]
        by_peer = self._lay["receivers"].get(chunk)
        if by_peer is None:  # one pass over the GPUs' maps: who sends this chunk to whom, in GPU order
            by_peer = {}
            for h in range(self.n):
                m = self.maps[h].lookup(chunk)
                if m.kind != "local":
                    by_peer.setdefault(m.peer, []).append(h)
            if not self.b.symmetric:  # every GPU asks about every chunk: kept (n^2 lookups, not n^3)
                self._lay["receivers"][chunk] = by_peer
        out = [(h, self.position(h, chunk)) for h in by_peer.get(key[0], ()) if h != key[0]]
        self._senders[key] = out
        return out

    def outgoing(self, gpu: int, p: int) -> tuple[str, int, list[Piece], bool]:
        """(mapping kind, receiver, pieces, receiver tracks them) of what ``gpu`` sends from position p."""
        key = (gpu % self.n, p)
        if key not in self._out:
            self._out[key] = self._outgoing(gpu, p)
        return self._out[key]

    def _outgoing(self, gpu: int, p: int) -> tuple[str, int, list[Piece], bool]:
        c = self._order[gpu % self.n][p]
        m = self.maps[gpu % self.n].lookup(c)
        if m.kind == "local":
            return "local", -1, [], False
        r = m.peer
        tracked = self.maps[r].lookup(c).kind == "dma"
        return m.kind, r, _pieces(self.segs, p, self.position(r, c), tracked), tracked

    def incoming(self, gpu: int, p: int, lo: int, hi: int) -> list[tuple[int, str]]:
        """Refs of the update ops carrying tiles [lo, hi) of the chunk ``gpu`` produces at position p
        (a list shared by every caller: not to be modified)."""
        hit = self._refs.get((gpu % self.n, p, lo, hi))
        if hit is not None:
            return hit
        key = (gpu % self.n, p)
        senders = self._inc.get(key)
        if senders is None:
            c = self._order[gpu % self.n][p]
            senders = []
            for h, ph in self.senders(gpu, c):
                _, _, pieces, _ = self.outgoing(h, ph)
                ends = [b for _, _, _, b in pieces]
                ordered = all(ends[k] <= pieces[k + 1][2] for k in range(len(pieces) - 1))
                senders.append((h, ph, pieces, ends if ordered else None))
            self._inc[key] = senders
        refs = []
        for h, ph, pieces, ends in senders:
            # pieces in tile order: the first that ends after lo, then on while they start before hi
            k0 = bisect_right(ends, lo) if ends is not None else 0
            for k in range(k0, len(pieces)):
                a, b = pieces[k][2], pieces[k][3]
                if a >= hi and ends is not None:
                    break
                if a < hi and lo < b:
                    refs.append((h, f"rs.{ph}.{k}"))
        self._refs[gpu % self.n, p, lo, hi] = refs
        return refs

    # ---- schedule -------------------------------------------------------------------------------
    def build(self) -> Schedule:
        b, n, plan = self.b, self.n, self.plan
        for g in b.gpus:
            order = self._order[g]
            kinds = [self.maps[g].lookup(c).kind for c in order]
            for c in order:
                m = self.maps[g].lookup(c)
                if m.kind == "dma":
                    ns = len(self.senders(g, c))
                    if ns != 1 or m.trigger_count != 1 + ns:
                        raise ScheduleError(
                            f"address map: GPU {g} chunk {c}: dma_map needs exactly one upstream producer and "
                            f"trigger_count 2 (got {ns} producers, trigger_count {m.trigger_count})"
                        )
            self._gemm(g, order, kinds)
            for p in range(n):
                self._updates(g, p)
            done = [(g, f"gemm.C{len(plan.waves) - 1}")]
            for p in range(n):
                _, _, pieces, _ = self.outgoing(g, p)
                done += [(g, f"rs.{p}.{i}") for i in range(len(pieces))]
                done += [
                    (g, f"rs.{p}.{i}.burst") for i in range(len(pieces)) if b.has(g, f"rs.{p}.{i}.burst")
                ]
            done += self.incoming(g, n - 1, 0, plan.tiles_m_chunk * plan.tiles_n)
            b.add(g, "rs.done", kind="rs-done", cat="rs", deps=done, prio=self.comm_prio)
        all_gather(b, self.op.comm_bytes, start=lambda g: [(g, "rs.done")])
        b.meta["gemm_plan"] = plan
        return b.build()

    def _gemm(self, g: int, order: tuple[int, ...], kinds: list[str]) -> None:
        """The GEMM's waves (:func:`t3.ops.gemm.add_gemm`'s prologue + body per wave), with T3's stores:
        a body writes locally only its tiles of local and dma_mapped chunks; its tiles of a
        remote_mapped chunk leave as remote stores while it computes, and the next wave's prologue
        waits for them to drain (store backpressure). A body opens the tracker entries of its
        dma_mapped tiles."""
        b, hw, plan, fn, tr = self.b, self.hw, self.plan, self.fn, self.tracker
        cu, hbm, hbm_w = b.cu(g), b.hbm(g), b.hbm_w(g)
        remote_pos = {p for p, k in enumerate(kinds) if k == "remote"}
        # table entries a wave opens: one per wavefront tile of its dma_mapped groups (as its DMAs release)
        opens = [0] * len(plan.waves)
        for p, k in enumerate(kinds):
            if k == "dma":
                for w1, _, lo, hi in self.outgoing(g, p)[2]:
                    opens[w1] += tr.entries_for(hi - lo)
        tr.check_fits(max(opens, default=0))
        stores_of: dict[int, list[tuple[int, str]]] = {}  # wave -> its remote stores, by position
        for p in remote_pos:
            for i, pc in enumerate(self.outgoing(g, p)[2]):
                stores_of.setdefault(pc[0], []).append((p, i))
        stores_prev: list[tuple[int, str]] = []
        stage_ops: list[list[int]] = [[] for _ in range(self.n)]
        # waves of the same numbers are the same ops but for their keys and dependencies: the first serves
        # as the template of the others (not in functional mode: callbacks differ)
        made = b.templates if fn is None else {}
        loads, bodies = self._wave_refs(g)
        last = len(plan.waves) - 1  # (a wave's rounds depend only on whether it is the last)
        tails = (gemm_tail(plan, plan.waves[0], hw), gemm_tail(plan, plan.waves[last], hw))
        counts = self.counts
        for w in plan.waves:
            wi = w.index
            load_deps = () if wi == 0 else (bodies[wi - 1], *stores_prev)
            lkey = ("t3-load", g, w.prologue_bytes, w.window_bytes, wi == 0)
            if lkey in made:
                lo = b.add_like(made[lkey], g, loads[wi][1], load_deps)
            else:
                lo = made[lkey] = b.add(
                    g, loads[wi][1], kind="gemm-load", cat="gemm", work=[(hbm, w.prologue_bytes)],
                    delay_s=hw.compute.kernel_launch_s if wi == 0 else 0.0,
                    deps=load_deps, traffic={"gemm_read": w.prologue_bytes}, window=w.window_bytes,
                )  # fmt: skip
            local = sum(v for pos, v in w.write_bytes.items() if pos not in remote_pos)
            counts["gemm_write_local"] += local
            body_reads = w.read_bytes - w.prologue_bytes
            rounds = tails[wi == last]
            ckey = (
                "t3-compute",
                g,
                w.compute_s,
                w.cus_used,
                body_reads,
                local,
                rounds,
                opens[w.index],
                w.window_bytes,
            )
            if ckey in made:
                o = b.add_like(made[ckey], g, bodies[wi][1], (loads[wi],))
            else:
                acquire = (
                    [(b.semaphore(g, SEMAPHORE_KIND, tr.entries), opens[w.index])] if opens[w.index] else []
                )
                o = b.add(
                    g, bodies[wi][1], kind="gemm-compute", cat="gemm",
                    work=[(cu, w.compute_s * w.cus_used), (hbm, body_reads), (hbm_w, local)],
                    caps=[(cu, float(w.cus_used))], rounds=rounds,
                    deps=(loads[wi],),
                    traffic={"gemm_read": body_reads, "gemm_write": local}, acquire=acquire,
                    window=w.window_bytes,
                )  # fmt: skip
                if fn is None:
                    made[ckey] = o
            for pos, _, _ in w.segments:
                stage_ops[pos] += [lo.id, o.id]
            if fn is not None:
                segs = [(order[pos], a, e) for pos, a, e in w.segments if pos not in remote_pos]
                o.on_finish = lambda g=g, segs=segs: fn.local_writes(g, segs)
            stores_prev = [(g, f"rs.{p}.{i}") for p, i in stores_of.get(w.index, ())]
        spans = b.meta.setdefault("trace_spans", [])
        for p, ids in enumerate(stage_ops):
            spans.append((g, "GEMM stages", f"stage {p + 1}: chunk {order[p]} ({kinds[p]})", ids))

    def _updates(self, g: int, p: int) -> None:
        b, hw, fn, tr = self.b, self.hw, self.fn, self.tracker
        kind, r, pieces, tracked = self.outgoing(g, p)
        if kind == "local" or not pieces:
            return
        c = self._order[g][p]
        lat = hw.link.latency_s
        # resources in the order the ops first name them (NMC updates at r: channel time per byte)
        upd_r, upd_cost = update_work(b, r, 1.0)[0]
        path = b.path(g, r)
        hbm = dma = sem = -1
        if kind == "dma":
            hbm, dma = b.hbm(g), b.dma(g)
            sem = b.semaphore(g, SEMAPHORE_KIND, tr.entries)
        window = hw.dma.engines * hw.dma.inflight_bytes
        staging = hw.dma.engines * hw.dma.staging_bytes
        # an update of the same size over the same resources is the same op but for its key and dependencies:
        # the first one serves as the template of the others (not in functional mode: callbacks differ). Its
        # resources name it, not its receiver: in symmetric mode on a switch every receiver's update runs on
        # GPU 0's port, NMC and DMA engines, so one op serves all of them
        made = b.templates if fn is None else {}
        res_key = ("t3-update", kind, tuple(path), upd_r, upd_cost, hbm, dma, sem)
        loads, bodies = self._wave_refs(g)
        entries = self._entries
        counts = self.counts
        for i, (w1, _, lo, hi) in enumerate(pieces):
            nb = (hi - lo) * self.tile_bytes
            ent = entries.get(hi - lo)
            if ent is None:
                ent = entries[hi - lo] = tr.entries_for(hi - lo)
            key = f"rs.{p}.{i}"
            tkey = (res_key, hi - lo)
            if kind == "remote":
                counts["gemm_write_remote"] += nb
                deps = (loads[w1],)
                if tkey in made:
                    b.add_like(made[tkey], g, key, deps)
                    continue
                work = [(x, nb) for x in path]
                work.append((upd_r, nb * upd_cost))
                o = b.add(
                    g, key, kind="remote-store", cat="rs", work=work, delay_s=lat, deps=deps,
                    traffic={"rs_write": nb, "link": nb}, prio=self.comm_prio,
                )  # fmt: skip
                if fn is not None:
                    o.on_finish = lambda g=g, r=r, c=c, lo=lo, hi=hi: fn.remote_store(g, r, c, lo, hi)
                else:
                    made[tkey] = o
            else:  # dma: triggered by the local tiles + the upstream updates of these tiles
                counts["triggers"] += ent
                counts["dma_commands"] += 1
                deps = (bodies[w1], *self.incoming(g, p, lo, hi))
                if tkey in made:
                    burst_op, dma_op = made[tkey]
                    if burst_op is not None:
                        b.add_like(burst_op, g, f"{key}.burst", deps)
                    b.add_like(dma_op, g, key, deps)
                    continue
                work = [(x, nb) for x in path]
                work.append((upd_r, nb * upd_cost))
                burst = min(nb, staging)
                burst_op = None
                if burst > 0:  # the engines read ahead of the link into their staging buffers
                    burst_op = b.add(
                        g, f"{key}.burst", kind="dma-burst", cat="rs", work=[(hbm, burst)],
                        delay_s=hw.dma.command_overhead_s, deps=deps, traffic={"rs_read": burst},
                        prio=self.comm_prio, window=window,
                    )  # fmt: skip
                work.append((hbm, nb - burst))
                work.append((dma, nb))
                o = b.add(
                    g, key, kind="dma", cat="rs", work=work, delay_s=lat + hw.dma.command_overhead_s,
                    deps=deps, traffic={"rs_read": nb - burst, "rs_write": nb, "link": nb},
                    prio=self.comm_prio, release=[(sem, ent)], window=window,
                )  # fmt: skip
                if fn is None:
                    made[tkey] = (burst_op, o)
                else:
                    o.on_start = lambda g=g, key=key, c=c, lo=lo, hi=hi: fn.dma_read(g, key, c, lo, hi)
                    o.on_finish = lambda g=g, r=r, key=key, c=c, lo=lo, hi=hi: fn.dma_apply(
                        g, r, key, c, lo, hi
                    )

    # ---- outcome --------------------------------------------------------------------------------
    def run(self, sched: Schedule | None = None, opts: RunOptions | None = None) -> Outcome:
        """Simulate ``sched`` (this builder's :meth:`build`, made now if not given) with the engine of
        ``opts`` (default: the builder's) and summarise it."""
        if sched is None:
            sched = self.build()
        try:
            res = (opts or self.opts).engine().run(sched)
        except DeadlockError as err:
            if err.kind == "semaphore" and all(n.startswith(SEMAPHORE_KIND) for n in err.names):
                raise ScheduleError(
                    f"tracker.entries: {self.tracker.entries} entries deadlock this schedule ({err})"
                ) from None
            raise
        out = summarize(res)
        k = len(sched.gpus)
        extra: dict[str, Any] = {
            "tracker": {
                **self.tracker.stats(res, k),
                "triggers": self.counts["triggers"] / k,
                "dma_commands": self.counts["dma_commands"] / k,
            },
            "gemm_write_bytes": {
                "local": self.counts["gemm_write_local"] / k,
                "remote": self.counts["gemm_write_remote"] / k,
            },
            "rs_algorithm": "ring" if self.ring else "direct",
            "chunks": "columns" if self.columns else "rows",
        }
        if self.mca:
            extra["mca"] = {
                "threshold": self.theta,
                "first_stage_intensity": self.intensity,
                "starvation_share": self.hw.mca.starvation_share,
            }
        if self.fn is not None:
            owned = {g: stagger_order(g, self.n)[self.n - 1] for g in range(self.n)}
            expected = {(g, c): len(self.senders(g, c)) for g in range(self.n) for c in range(self.n)}
            extra["functional"] = self.fn.check(owned, expected)
        out.extra.update(extra)
        return out


# Built schedules, reused across calls: a T3 schedule without functional mode is a pure function of
# (configuration, operator, hardware, symmetric mode), and neither the engine nor the summary modifies
# it. Keyed on the hardware's full content (not its identity); least recently used entries are dropped.
SCHEDULE_CACHE_SIZE = 32
SCHEDULE_CACHE_OPS = 20_000  # at most this many ops kept (about 2 KB each with the engine's data: ~40 MB)
_SCHEDULES: OrderedDict[tuple, tuple[T3Builder, Schedule]] = OrderedDict()
_HW_CONTENT: dict[int, tuple[Hardware, str]] = {}


def _hw_content(hw: Hardware) -> str:
    """Every field of ``hw`` as one string (computed once per hardware object)."""
    return per_hardware(_HW_CONTENT, hw, Hardware.model_dump_json)


def clear_schedule_cache() -> None:
    """Forget the built schedules (the next run of each configuration builds its schedule again; the
    layouts of :func:`_layout` and the GEMM plans stay memoised)."""
    with _LOCK:
        _SCHEDULES.clear()


def built_schedule(
    name: str, op: Operator, hw: Hardware, opts: RunOptions, *, mca: bool
) -> tuple[T3Builder, Schedule]:
    """The builder and schedule of a T3 configuration; memoised (the last :data:`SCHEDULE_CACHE_SIZE`
    schedules, :data:`SCHEDULE_CACHE_OPS` ops in all) unless functional mode attaches values to the ops."""
    if opts.functional:
        bld = T3Builder(name, op, hw, opts, mca=mca)
        return bld, bld.build()
    key = (name, mca, opts.symmetric, op, _hw_content(hw))
    with _LOCK:
        hit = _SCHEDULES.get(key)
        if hit is not None:
            _SCHEDULES.move_to_end(key)
            return hit
    bld = T3Builder(name, op, hw, opts, mca=mca)
    built = (bld, bld.build())
    with _LOCK:
        hit = _SCHEDULES.setdefault(key, built)
        while len(_SCHEDULES) > 1 and (
            len(_SCHEDULES) > SCHEDULE_CACHE_SIZE
            or sum(len(s.ops) for _, s in _SCHEDULES.values()) > SCHEDULE_CACHE_OPS
        ):
            _SCHEDULES.popitem(last=False)
    return hit


def t3_requires(name: str) -> Callable[[Operator, Hardware], None]:
    """What configuration ``name`` (T3's mechanisms) needs, checked before any work: near-memory compute,
    and a TP group inside one node (its stores, DMA and near-memory reductions use the node's fabric;
    across nodes only the library's collectives are modelled)."""

    def check(op: Operator, hw: Hardware) -> None:
        require_nmc(hw, name)
        if spans_nodes(hw, op.tp):
            k = hw.topology.gpus
            raise ConfigError(
                f"tp: configuration '{name}' on {op.tp} GPUs spans the nodes of '{hw.name}' ({k} GPUs per"
                f" node): its stores, DMA and near-memory reductions go over one node's fabric, and across"
                f" nodes only the library's collectives are modelled (tp <= {k})"
            )

    return check


FUNCTIONAL_PARAMS = {
    "functional_seed": Param((int,), "seed of the random operand values", needs="functional"),
    "functional_fault": Param((str, type(None)), "inject a fault the check must catch", FAULTS, "functional"),
}


@register(
    "t3",
    "T3: GEMM stores drive the RS (address map, tracker, DMA, NMC), default HBM arbitration; then AG",
    FUNCTIONAL_PARAMS,
    t3_requires("t3"),
)
def run_t3(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    bld, sched = built_schedule("t3", op, hw, opts, mca=False)
    return bld.run(sched, opts)


@register(
    "t3-mca",
    "T3 with memory-controller arbitration (GEMM first, occupancy threshold, starvation bound)",
    FUNCTIONAL_PARAMS,
    t3_requires("t3-mca"),
)
def run_t3_mca(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    bld, sched = built_schedule("t3-mca", op, hw, opts, mca=True)
    return bld.run(sched, opts)


def nmc_rs_schedule(op: Operator, hw: Hardware, opts: RunOptions) -> Schedule:
    require_nmc(hw, "ideal-rs-nmc")
    b = ScheduleBuilder("rs-nmc", hw, op.tp, symmetric=opts.symmetric)
    nmc_reduce_scatter(b, op.comm_bytes)
    return b.build()


@register(
    "ideal-rs-nmc",
    "GEMM and an RS with NMC reductions perfectly overlapped (isolated times), then AG",
    requires=t3_requires("ideal-rs-nmc"),
)
def run_ideal_rs_nmc(op: Operator, hw: Hardware, opts: RunOptions) -> Outcome:
    eng_opts = replace(opts, functional=False)
    parts = {
        "gemm": summarize(eng_opts.engine().run(sequential_schedule(op, hw, eng_opts, parts="gemm"))),
        "rs": summarize(eng_opts.engine().run(nmc_rs_schedule(op, hw, eng_opts))),
        "ag": summarize(eng_opts.engine().run(sequential_schedule(op, hw, eng_opts, parts="ag"))),
    }
    return ideal_overlap(parts)
