"""The schedule vocabulary: operations with resource demands and dependencies.

A :class:`Schedule` is a DAG of :class:`Op`. Each op first waits ``delay_s`` (a pure latency: link
latency, kernel launch, DMA command overhead), then does *fluid work*: ``amount`` units on each
resource it names (CU-seconds on a GPU's CU pool, bytes on a GPU's HBM, bytes on a link direction).
The engine shares every resource among the ops using it and finishes an op when all its work is done.

Schedules are built with :class:`ScheduleBuilder`, which addresses ops by ``(gpu, key)`` and
resources by role (``cu``/``hbm``/``dma`` of a GPU, the transfer path between two GPUs). In
*symmetric* mode the builder materialises GPU 0 only and maps every other GPU onto it by rotation
(``gpu h -> 0``, ``link g>h -> link 0>(h-g) mod N``): for rotation-equivariant schedules (every
tensor-parallel collective on a ring, mesh or switch) this quotient is exact, and the cost of a
simulation no longer grows with the number of GPUs. The *all* mode materialises every GPU and is
used for asymmetric inputs (MoE imbalance, stragglers) and to test the quotient.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from t3.config.hardware import Hardware, tp_refusal
from t3.errors import ScheduleError
from t3.sim.memory import HbmTiming

# Traffic categories, per GPU, in bytes. "dram.*" are DRAM reads/writes by their cause.
DRAM_CATEGORIES = (
    "gemm_read",
    "gemm_write",
    "rs_read",
    "rs_write",
    "ag_read",
    "ag_write",
    "a2a_read",
    "a2a_write",
)


class Policy:
    """How a resource's capacity is offered to priority classes (default: one pool, first come)."""

    name = "default"

    def available(self, capacity: float, remaining: float, level: int, lower_demand: float) -> float:
        """Capacity class ``level`` may use, given what higher-priority classes left (``remaining``).

        ``lower_demand`` is the rate lower-priority ops active on this resource would use at their
        maximum rates (units/s; 0.0 when no lower-priority op waits for it)."""
        return remaining

    def latency(self, timing: HbmTiming, capacity: float, level: int, flows: dict[int, float]) -> float:
        """Loaded latency (s) requests of priority ``level`` see on a memory resource whose levels
        move ``flows`` (bytes/s by level) out of ``capacity``. First come: everyone waits behind all."""
        return timing.latency(sum(flows.values()) / capacity)

    def compiled(self) -> tuple | None:
        """The policy as the compiled engine core (:mod:`t3.sim._native`) knows it: ``(0,)`` for this
        default policy, a tuple naming a policy the core implements and its numbers
        (:meth:`t3.hardware.mca.McaPolicy.compiled`), None for any other (its schedules run in the
        Python engine). A subclass that changes :meth:`available` or :meth:`latency` is not the default."""
        t = type(self)
        return (0,) if t.available is Policy.available and t.latency is Policy.latency else None


@dataclass(slots=True)
class Resource:
    name: str
    capacity: float  # units per second
    kind: str  # "cu", "hbm", "link", "dma", "port", "nic", "l2", "switch", "proxy", "channels"
    gpu: int
    policy: Policy = field(default_factory=Policy)
    timing: HbmTiming | None = None  # a memory resource: turnaround and latency (t3.sim.memory)
    # an exclusive partition: while any op naming it is in progress (from its start, its delay included,
    # to its finish) its whole capacity is taken from resource ``parent`` (a kernel's thread blocks hold
    # their CUs for its whole duration, busy or waiting); -1: an ordinary resource
    parent: int = -1


@dataclass(slots=True)
class Op:
    id: int
    gpu: int
    key: Hashable
    kind: str  # "gemm-load", "gemm-compute", "rs-step", "ag-step", "send", "reduce", "dma", ...
    cat: str  # accounting / timeline class: "gemm", "rs", "ag", "a2a"
    demands: list[tuple[int, float]]  # (resource index, amount in resource units)
    caps: list[tuple[int, float]]  # (resource index, max usage rate of this op on it)
    delay_s: float
    deps: list[int]
    traffic: dict[str, float]  # e.g. {"gemm_read": bytes, "link": bytes}
    prio: int = 0  # 0 = served first on resources whose policy distinguishes classes
    on_start: Callable[[], None] | None = None
    on_finish: Callable[[], None] | None = None
    acquire: list[tuple[int, int]] = field(default_factory=list)  # (semaphore, units) taken before start
    release: list[tuple[int, int]] = field(default_factory=list)  # (semaphore, units) given back at finish
    writes: list[tuple[int, float]] = field(default_factory=list)  # (memory resource, bytes written)
    window: float = 0.0  # bytes in flight on the memory it reads (0: an open stream, paced from outside)
    like: int = -1  # an earlier op of the schedule with the same demands, caps, prio, writes and window
    # (tiles, width, cluster): the op is a wave of a GEMM of ``tiles`` thread blocks run ``width`` at a time
    # on one CU each (its caps count its blocks), in clusters of ``cluster`` blocks. The last wave: where
    # CUs held by an exclusive partition leave c, the GEMM ends after whole rounds, ceil(tiles / min(c,
    # width)) (t3.sim.engine.rounds_cap: the tail no later tile fills); tiles = 0: a wave before the last
    # (fluid). With clusters, c is what the held CUs leave in whole cluster slots
    # (t3.sim.engine.cluster_cus). (): fluid, no clusters
    rounds: tuple[float, float, float] | tuple[()] = ()
    # block dispatch (:meth:`ScheduleBuilder.kernel`): ``admit`` >= 0, the CU pool on which the op begins a
    # kernel whose blocks need free CUs: it begins only when no op filling that pool is in progress, in
    # launch order (first come, first served); ``fills`` >= 0, the CU pool whose free CUs the op's blocks
    # take while it is in progress, none given up to a kernel launched after it. -1: neither
    admit: int = -1
    fills: int = -1


@dataclass(slots=True)
class Semaphore:
    """A counting constraint (finite table entries, buffers): ops take units before they start and
    other ops give them back when they finish. Waiters are served first-come (FIFO); a request larger
    than the capacity is granted when nothing is held (it then runs alone)."""

    name: str
    capacity: int
    gpu: int


@dataclass
class Schedule:
    """Ops, resources and semaphores of one simulation. Not to be modified once run: the engine keeps
    what it derives from the schedule alone (children, static rates, per-op preparation) for later runs."""

    name: str
    ops: list[Op]
    resources: list[Resource]
    n_gpus: int  # GPUs of the modelled system
    gpus: list[int]  # GPUs materialised (symmetric: [0])
    meta: dict = field(default_factory=dict)
    semaphores: list[Semaphore] = field(default_factory=list)

    @property
    def symmetric(self) -> bool:
        return len(self.gpus) != self.n_gpus

    def __getstate__(self) -> dict:
        # the engine and the summary keep what they derived from the schedule on its first run (a
        # schedule is not modified once run); that is rebuilt, not pickled
        state = dict(self.__dict__)
        state.pop("_engine_static", None)
        state.pop("_summary_sums", None)
        state.pop("_summary_groups", None)
        state.pop("_holds", None)
        return state

    def sums_per_gpu(self) -> tuple[dict[str, float], float]:
        """(bytes by traffic category, HBM work: bytes of channel time on the HBM resources) per
        materialised GPU, in one pass over the ops (each sum in op order); computed once and kept with
        the schedule (it is not modified once run)."""
        hit = self.__dict__.get("_summary_sums")
        if hit is None:
            tot: dict[str, float] = {}
            work = 0.0
            hbm = [r.kind == "hbm" for r in self.resources]
            for op in self.ops:
                for k, v in op.traffic.items():
                    tot[k] = tot.get(k, 0.0) + v
                for r, a in op.demands:
                    if hbm[r]:
                        work += a
            g = len(self.gpus)
            hit = self.__dict__["_summary_sums"] = ({k: v / g for k, v in tot.items()}, work / g)
        return hit

    def traffic_per_gpu(self) -> dict[str, float]:
        return dict(self.sums_per_gpu()[0])


Ref = tuple[int, Hashable]


def _units(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """(semaphore, units) pairs that take or give back something, units as integers."""
    out = []
    for s, u in pairs:
        if u > 0:
            out.append((s, int(u)))
    return out


def hbm_timing(hw: Hardware) -> HbmTiming:
    """The memory model's closed forms for ``hw``'s DRAM (:mod:`t3.sim.memory`)."""
    h = hw.hbm
    return HbmTiming(h.turnaround, h.latency_s, h.service_s, h.queue_entries, h.channels, h.entry_bytes)


class ScheduleBuilder:
    """Builds a :class:`Schedule` for ``n_gpus`` GPUs of ``hw``, symmetric (quotient) or all-GPU."""

    def __init__(self, name: str, hw: Hardware, n_gpus: int, symmetric: bool = True):
        if n_gpus < 2:
            raise ScheduleError(f"gpus: need at least 2 GPUs, got {n_gpus}")
        if why := tp_refusal(hw, n_gpus):
            raise ScheduleError(why)
        self.name = name
        self.hw = hw
        self.n = n_gpus
        self.symmetric = symmetric
        self.gpus = [0] if symmetric else list(range(n_gpus))
        # GPUs per node where the GPUs span several nodes joined by hw.network (0: one node)
        self.node_gpus = hw.topology.gpus if hw.network is not None and n_gpus > hw.topology.gpus else 0
        self._ops: list[Op] = []
        self._index: dict[Ref, int] = {}
        self._deps: list[tuple[Ref, ...]] = []
        self._res: list[Resource] = []
        self._res_index: dict[str, int] = {}
        self._known: dict[tuple, Any] = {}  # (role, gpu...) -> resource index (or path), once created
        self.policies: dict[str, Policy] = {}  # resource kind -> policy
        self._sems: list[Semaphore] = []
        self._sem_index: dict[str, int] = {}
        self.meta: dict = {}
        # ops added before, by a caller's key of the arguments that made them (:meth:`add_like`)
        self.templates: dict = {}
        # a memory-side L2 (compute.l2_memory_side): every op's DRAM bytes also pass the GPU's L2
        c = hw.compute
        self.l2_side = bool(c.l2_memory_side and c.l2_Bps)
        self._l2_of: dict[int, int] = {}  # DRAM resource -> the L2 its bytes pass

    # ---- resources -------------------------------------------------------------------------
    def canon(self, gpu: int) -> int:
        return 0 if self.symmetric else gpu % self.n

    def _resource(self, name: str, capacity: float, kind: str, gpu: int) -> int:
        idx = self._res_index.get(name)
        if idx is None:
            idx = len(self._res)
            self._res.append(Resource(name, capacity, kind, gpu, self.policies.get(kind, Policy())))
            self._res_index[name] = idx
        return idx

    def cu(self, gpu: int) -> int:
        idx = self._known.get(("cu", gpu))
        if idx is None:
            g = self.canon(gpu)
            idx = self._known["cu", gpu] = self._resource(f"cu:{g}", float(self.hw.compute.cus), "cu", g)
        return idx

    def hbm(self, gpu: int) -> int:
        """The GPU's DRAM; work on it is bytes *read* (see :meth:`hbm_w` for writes)."""
        idx = self._known.get(("hbm", gpu))
        if idx is None:
            g = self.canon(gpu)
            idx = self._resource(f"hbm:{g}", self.hw.hbm.effective_Bps, "hbm", g)
            if self._res[idx].timing is None:
                self._res[idx].timing = hbm_timing(self.hw)
            self._known["hbm", gpu] = idx
            if self.l2_side:
                self._l2_of[idx] = self.l2(gpu)
        return idx

    def l2(self, gpu: int) -> int:
        """The GPU's L2 as a bandwidth (``compute.l2_Bps``): a GEMM's operand loads, and where the L2 is
        memory-side, every op's DRAM bytes (:meth:`add`)."""
        idx = self._known.get(("l2", gpu))
        if idx is None:
            g = self.canon(gpu)
            idx = self._known["l2", gpu] = self._resource(f"l2:{g}", float(self.hw.compute.l2_Bps), "l2", g)
        return idx

    def hbm_w(self, gpu: int) -> int:
        """The GPU's DRAM, for bytes *written*: ``work=[(b.hbm_w(g), nbytes)]`` costs the same
        capacity as a read and counts as a write for the read/write turnaround (a negative handle,
        ``~index``, that :meth:`add` resolves)."""
        return ~self.hbm(gpu)

    def partition(self, gpu: int, name: str, cus: int, exclusive: bool = False) -> int:
        """A CU partition of ``cus`` CUs owned by kernel ``name``. Ops demand it besides the CU pool; or,
        ``exclusive``, instead of it: the partition then holds its CUs out of the pool while any op of the
        kernel is in progress (:attr:`Resource.parent`)."""
        g = self.canon(gpu)
        if cus != int(cus) or cus <= 0:
            raise ScheduleError(f"partition {name}: cus must be a whole number > 0, got {cus}")
        known = f"cus:{g}:{name}" in self._res_index
        idx = self._resource(f"cus:{g}:{name}", float(cus), "cu-part", g)
        res = self._res[idx]
        parent = self.cu(gpu) if exclusive else -1
        if known and (res.capacity != float(cus) or res.parent != parent):
            raise ScheduleError(f"partition {name}: declared again with other CUs or exclusivity")
        res.parent = parent
        return idx

    def dma(self, gpu: int) -> int:
        idx = self._known.get(("dma", gpu))
        if idx is None:
            g = self.canon(gpu)
            d = self.hw.dma
            idx = self._known["dma", gpu] = self._resource(f"dma:{g}", d.engines * d.bandwidth_Bps, "dma", g)
        return idx

    def path(self, src: int, dst: int) -> list[int]:
        """Resources a transfer src -> dst occupies (per topology); each at bytes/s."""
        hit = self._known.get(("path", src, dst))
        if hit is None:
            hit = self._known["path", src, dst] = tuple(self._path(src, dst))
        return list(hit)

    def crosses_nodes(self, src: int, dst: int) -> bool:
        """Whether a transfer src -> dst leaves its node (GPUs of different nodes of ``network``)."""
        k = self.node_gpus
        return bool(k) and (src % self.n) // k != (dst % self.n) // k

    def nic_path(self, src: int, dst: int) -> list[int]:
        """Resources a transfer src -> dst between nodes occupies: src's NIC share out and dst's in
        (``network.nics_per_node`` NICs shared by the node's GPUs; rail-optimised: one leaf switch per
        rail, whose capacity is not a limit), each at bytes/s."""
        hit = self._known.get(("nic", src, dst))
        if hit is None:
            if not self.crosses_nodes(src, dst):
                raise ScheduleError(f"transfer {src % self.n}->{dst % self.n} does not cross nodes")
            net = self.hw.network
            bw = net.nic_Bps * net.nics_per_node / self.node_gpus
            s, d = self.canon(src), self.canon(dst)
            hit = self._known["nic", src, dst] = (
                self._resource(f"nic-out:{s}", bw, "nic", s),
                self._resource(f"nic-in:{d}", bw, "nic", d),
            )
        return list(hit)

    def proxy(self, gpu: int) -> int:
        """The host thread that drives the GPU's network transfers (NCCL's proxy: it posts each network send
        and receive of every channel the GPU serves, one after another); work on it is seconds."""
        idx = self._known.get(("proxy", gpu))
        if idx is None:
            g = self.canon(gpu)
            idx = self._known["proxy", gpu] = self._resource(f"proxy:{g}", 1.0, "proxy", g)
        return idx

    def _path(self, src: int, dst: int) -> list[int]:
        n = self.n
        src, dst = src % n, dst % n
        if src == dst:
            raise ScheduleError(f"transfer from GPU {src} to itself")
        if self.crosses_nodes(src, dst):
            k = self.node_gpus
            raise ScheduleError(
                f"transfer {src}->{dst} crosses from node {src // k} to node {dst // k} of '{self.hw.name}':"
                " across nodes only the library's collectives are modelled (ring all-reduce, all-gather,"
                " reduce-scatter; all-to-all), not this schedule's own transfers"
            )
        bw = self.hw.link.bandwidth_Bps
        kind = self.hw.topology.kind
        off = (dst - src) % n
        s = self.canon(src)
        if kind == "switch":
            d = self.canon(dst)
            return [self._resource(f"out:{s}", bw, "port", s), self._resource(f"in:{d}", bw, "port", d)]
        if kind == "ring" and off not in (1, n - 1):
            raise ScheduleError(f"ring topology has no link {src}->{dst}")
        name = f"link:{s}>{(s + off) % n}" if self.symmetric else f"link:{src}>{dst}"
        return [self._resource(name, bw, "link", s)]

    def semaphore(self, gpu: int, kind: str, capacity: int) -> int:
        """The counting semaphore ``kind`` of ``gpu`` (created on first use with ``capacity`` units)."""
        if capacity <= 0:
            raise ScheduleError(f"semaphore {kind}: capacity must be > 0, got {capacity}")
        g = self.canon(gpu)
        name = f"{kind}:{g}"
        idx = self._sem_index.get(name)
        if idx is None:
            idx = len(self._sems)
            self._sems.append(Semaphore(name, int(capacity), g))
            self._sem_index[name] = idx
        return idx

    # ---- ops -------------------------------------------------------------------------------
    def ref(self, gpu: int, key: Hashable) -> Ref:
        return (self.canon(gpu), key)

    def add(
        self,
        gpu: int,
        key: Hashable,
        *,
        kind: str,
        cat: str,
        work: Iterable[tuple[int, float]] = (),
        caps: Iterable[tuple[int, float]] = (),
        delay_s: float = 0.0,
        deps: Iterable[Ref] = (),
        traffic: dict[str, float] | None = None,
        prio: int = 0,
        acquire: Iterable[tuple[int, int]] = (),
        release: Iterable[tuple[int, int]] = (),
        window: float = 0.0,
        l2: float | None = None,
        rounds: tuple[float, float, float] | tuple[()] = (),
    ) -> Op:
        """Add an op (see :class:`Op`). With a memory-side L2 (``compute.l2_memory_side``) the op's DRAM
        bytes, read and written, also pass its GPU's L2 (:meth:`l2`), or ``l2`` bytes where given (a GEMM
        states the operand bytes its tiles load from the L2, hits and misses alike)."""
        ref = self._new_ref(gpu, key)
        merged: dict[int, float] = {}
        writes: dict[int, float] | None = None
        for r, a in work:
            if r < 0:
                r = ~r
                if a > 0:
                    if writes is None:
                        writes = {r: a}
                    elif r in writes:
                        writes[r] += a
                    else:
                        writes[r] = a
            if a > 0:
                if r in merged:
                    merged[r] += a
                else:
                    merged[r] = a
            elif a < 0:
                raise ScheduleError(f"op {ref}: negative work on {self._res[r].name}")
        if window < 0:
            raise ScheduleError(f"op {ref}: negative window")
        if self.l2_side:
            if l2 is None:
                through: dict[int, float] = {}
                for r, a in merged.items():
                    l2r = self._l2_of.get(r)
                    if l2r is not None:
                        through[l2r] = through.get(l2r, 0.0) + a
                for r, a in through.items():
                    merged[r] = merged.get(r, 0.0) + a
            elif l2 > 0:
                r = self.l2(gpu)
                merged[r] = merged.get(r, 0.0) + l2
        tr: dict[str, float] = {}
        if traffic:
            for k, v in traffic.items():
                if v:
                    tr[k] = v
        op = Op(
            len(self._ops),
            ref[0],
            key,
            kind,
            cat,
            sorted(merged.items()) if len(merged) > 1 else list(merged.items()),
            list(caps),
            float(delay_s),
            [],
            tr,
            prio,
            None,
            None,
            _units(acquire) if acquire else [],
            _units(release) if release else [],
            (sorted(writes.items()) if len(writes) > 1 else list(writes.items())) if writes else [],
            float(window),
            rounds=tuple(float(x) for x in rounds) if rounds else (),
        )
        self._append(ref, op, deps)
        return op

    def _new_ref(self, gpu: int, key: Hashable) -> Ref:
        """The reference of a new op ``key`` of ``gpu`` (GPU 0 in symmetric mode); refuses a duplicate."""
        n = self.n
        if self.symmetric:
            if gpu % n != 0:
                raise ScheduleError("symmetric builder materialises GPU 0 only: loop over builder.gpus")
            ref = (0, key)
        else:
            ref = (gpu % n, key)
        if ref in self._index:
            raise ScheduleError(f"duplicate op {ref}")
        return ref

    def _append(self, ref: Ref, op: Op, deps: Iterable[Ref]) -> None:
        self._index[ref] = op.id
        self._ops.append(op)
        # dependencies are resolved (and mapped onto the materialised GPUs) by build()
        self._deps.append(deps if type(deps) is tuple else tuple(deps))

    def add_like(self, op: Op, gpu: int, key: Hashable, deps: Iterable[Ref] = ()) -> Op:
        """A new op ``(gpu, key)`` after ``deps`` with everything else of ``op`` (an op of this builder
        without callbacks): what :meth:`add` makes of the arguments that made ``op``, without redoing
        their checks and merging."""
        ref = self._new_ref(gpu, key)
        if op.id >= len(self._ops) or self._ops[op.id] is not op:
            raise ScheduleError(f"add_like {ref}: the model op is not an op of this builder")
        # the copy shares the model's lists and traffic (an op's fields are not modified once added)
        new = Op(
            len(self._ops), ref[0], key, op.kind, op.cat, op.demands, op.caps, op.delay_s, [], op.traffic,
            op.prio, None, None, op.acquire, op.release, op.writes, op.window, op.id if op.like < 0 else op.like,
            op.rounds,  # (not its block dispatch: :meth:`kernel` declares each kernel's own)
        )  # fmt: skip
        self._append(ref, new, deps)
        return new

    def add_copy(self, tkey: Hashable, gpu: int, key: Hashable, deps: Iterable[Ref] = ()) -> Op | None:
        """A copy (:meth:`add_like`) of the op kept in :attr:`templates` under ``tkey``, as ``(gpu, key)``
        after ``deps``; None where none is kept (the caller adds the op and keeps it under ``tkey``, a key
        that names everything its fields depend on but its key and dependencies)."""
        like = self.templates.get(tkey)
        return None if like is None else self.add_like(like, gpu, key, deps)

    def kernel(self, gpu: int, first: Hashable, fills: Iterable[Hashable] = ()) -> None:
        """Declare how a kernel's thread blocks reach the CUs of ``gpu`` (NVIDIA's dispatch: a kernel's
        blocks go to CUs with room for them, and a kernel launched later gets only what the earlier
        kernels' blocks leave, all of whose blocks are dispatched first: the *left-over* policy, Pai et
        al., "Improving GPGPU concurrency with elastic kernels", ASPLOS 2013; NVIDIA/nccl#1431 shows it
        for a collective launched after a GEMM). The kernel begins with op ``first``: it begins only
        when no kernel launched before it fills the CUs, in launch order. While an op of ``fills`` is in
        progress the kernel takes every CU it can hold and gives none up to a later kernel: a kernel
        whose blocks outnumber the free CUs (its pending blocks are dispatched before any later
        kernel's), or a persistent kernel until its end. Ops not declared are dispatched as before: a
        fluid share of the CUs."""
        cu = self.cu(gpu)
        ops, index = self._ops, self._index
        for key, field_ in ((first, "admit"), *((k, "fills") for k in fills)):
            ref = self.ref(gpu, key)
            if ref not in index:
                raise ScheduleError(f"kernel: unknown op {ref}")
            setattr(ops[index[ref]], field_, cu)

    def has(self, gpu: int, key: Hashable) -> bool:
        return self.ref(gpu, key) in self._index

    def build(self) -> Schedule:
        get = self._index.get
        sym, n = self.symmetric, self.n
        for op, deps in zip(self._ops, self._deps, strict=True):
            if not deps:
                continue
            ids = []  # in order, duplicates dropped by the dict below (a list membership test was
            for g, k in deps:  # quadratic: T3's rs.done depends on every tile group)
                d = (0, k) if sym else (g % n, k)
                i = get(d)
                if i is None:
                    raise ScheduleError(f"op {(op.gpu, op.key)} depends on unknown op {d}")
                if i == op.id:
                    raise ScheduleError(
                        f"op {(op.gpu, op.key)} depends on itself (cyclic under GPU rotation)"
                    )
                ids.append(i)
            op.deps = ids if len(ids) == 1 else list(dict.fromkeys(ids))
        return Schedule(self.name, self._ops, self._res, self.n, self.gpus, dict(self.meta), list(self._sems))
