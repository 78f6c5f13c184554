"""Collectives as NCCL / RCCL run them, as schedule fragments: ring, direct and NVLS algorithms with
the libraries' protocols (LL, LL128, Simple), channels, latencies and per-step data movement.

Every function that adds a collective to a :class:`~t3.sim.schedule.ScheduleBuilder` adds ops for every
materialised GPU and returns, per GPU, the refs of the ops that finish the collective there;
``start(g)`` gives the refs GPU g's collective waits for. ``docs/architecture.md`` ("Collectives")
explains the model with its formulas; in short, for a per-GPU block of ``c`` bytes:

- **Ring** (NCCL/RCCL ``runRing``; GPU g sends to g-1): a sequence of *steps*, one primitive per step,
  each moving ``c`` over the link while reading and writing HBM. Reduce-scatter: ``send`` (read c,
  land c at the peer), N-2 x ``recvReduceSend`` (read the landed chunk and the local one, land the sum
  at the peer), then ``recvReduceCopy`` (read both, write the output): per GPU (2N-1)c read, Nc written.
  All-gather (out of place): ``copySend``, N-2 x ``recvCopySend``, ``recv`` (read the landed chunk,
  write the output): Nc read, (2N-1)c written. All-reduce: the two chained, 2(N-1) link steps:
  (3N-2)c read, (3N-2)c written. The primitives of a channel run one after the other in one thread
  block (``prims_simple.h`` ``genericOp``), so the *last* primitive (the final ``recvReduceCopy`` /
  ``recv``, no link) starts when the channel's last link step ends: it is the *tail*, one op, not
  hidden behind the link.
- **Direct** (mesh / switch; one-shot all-pairs): every GPU writes each peer's block straight to it
  (all peers at once); the owner reduces its N blocks (N reads + 1 write) as they land (with DMA
  engines, after they landed). RCCL runs it (MSCCL) for all-reduces up to ``direct_max_bytes``.
- **NVLS** (NVSwitch, all-reduce): ``multimem.ld_reduce`` (the switch reads every GPU's copy of a
  shard and returns the sum) pipelined with ``multimem.st`` (the switch writes the shard to every GPU);
  its port bytes move at ``nvls_efficiency`` x the ring's achievable link rate; the switch's reduction
  throughput is a resource.
- **All-to-all**: grouped send/recv (a p2p kernel): the sender writes into the receiver's buffer, the
  receiver copies it out (pipelined); with DMA engines the copy lands directly.

A step op's work: its link bytes divided by ``collective.link_efficiency`` x the protocol's payload
share, its HBM reads (``b.hbm``) and writes (``b.hbm_w``; a landing write is the receiver's), and its
loads + stores through the kernel's CUs (``channels`` of them, ``compute.cu_copy_Bps`` each) or the
DMA engines. Its delay is the protocol's per-hop latency ``protocol.step_latency_s`` (unset:
``link.latency_s``; the first step also pays the kernel launch and the protocol's base latency).
The library moves a step's bytes in loops of chunks and slices pipelined from hop to hop, every GPU
busy from the start, so the per-hop latency is paid once per step, not once per loop or slice (NCCL's
tuning model: base + steps x hwLatency + bytes / bandwidth): the pipeline's fill; the drain is the
final primitive (the tail). Bus bandwidth therefore rises with size towards the achievable link rate.
Traffic (``Op.traffic``) counts payload bytes where they are read and where they land.

:func:`simulate_collective` simulates one collective alone; :func:`idle_time` is the closed form of an
idle collective (used to select the algorithm and protocol as the libraries do: least predicted time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from t3.config.hardware import Hardware
from t3.errors import ConfigError, ScheduleError
from t3.ops import nccl_tuning
from t3.sim.schedule import Op, Ref, ScheduleBuilder, hbm_timing

StartFn = Callable[[int], list[Ref]]
Work = list[tuple[int, float]]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
PROTOCOLS = ("ll", "ll128", "simple")
# Named implementations of each operation (the library's own: ring, nvls; one-shot direct; the
# store-and-forward ring RS that lands, reduces and re-reads every chunk).
ALGORITHMS = {
    "reduce_scatter": ("ring", "direct", "ring-sf"),
    "all_gather": ("ring", "direct"),
    "all_reduce": ("ring", "direct", "nvls", "tree", "nvls-tree"),
    "all_to_all": ("direct",),
}


def _no_deps(g: int) -> list[Ref]:
    return []


@dataclass(frozen=True)
class Algo:
    """An algorithm and its protocol, reported as ``"ring/simple"``."""

    name: str
    proto: str = "simple"

    def __str__(self) -> str:
        return f"{self.name}/{self.proto}"


class Executor:
    """Where a collective's data movement runs: a CU kernel of ``cus`` CUs (channels; default: the
    preset's ``collective.channels``) or the DMA engines (reductions still run on CUs)."""

    def __init__(
        self, kind: str = "cu", cus: int | None = None, name: str = "comm", exclusive: bool | None = None
    ):
        if kind not in ("cu", "dma"):
            raise ScheduleError(f"executor: unknown executor '{kind}' (cu, dma)")
        self.kind, self.cus, self.name = kind, cus, name
        self._exclusive = exclusive
        self.share = 1.0  # of the library's channels this call runs on (:meth:`for_call`)

    def for_call(self, hw: Hardware, algo: Algo, nbytes: float, n: int) -> Executor:
        """The library's kernel for one ring call of ``nbytes`` (NCCL's nBytes: the all-reduce buffer, the
        all-gather output, the reduce-scatter input) on ``n`` GPUs. NCCL runs a call on fewer channels
        while ``nBytes < channels x threads x threshold`` (src/enqueue.cc topoGetAlgoInfo, its ring/tree
        channel tuning: one channel less at a time, down to one), so that each thread of a block handles
        at least ``collective.<proto>.thread_threshold_bytes`` (LL on a ring: times the ranks,
        src/graph/tuning.cc): ``min(channels, max(1, floor(nBytes / (threads x threshold))))``. Such a call
        runs on that many CUs and reaches their share of the protocol's bus bandwidth (NCCL's tuning model
        gives it as channels x a per-channel rate: LL128's cap is channels x perChMaxRingLL128Bw; LL's cap,
        llMaxBw, is taken as reached on all the preset's channels). Not modelled: the halving of a lone
        channel's threads below one channel's worth (under ~1.5 us on 8 GPUs). Only the library's own
        channel count (``cus`` unset) is reduced; an executor given its CUs keeps them. The same loop
        runs NCCL's tree across nodes (:func:`tree_program`), its LL threshold not multiplied by the
        ranks (that is the ring's alone), and the ring across nodes (all its ranks, as NCCL counts them)."""
        if self.kind != "cu" or self.cus is not None or algo.name not in ("ring", "tree"):
            return self
        c = self.channels(hw)
        p = protocol(hw, algo.proto)
        per = p.threads * p.thread_threshold_bytes * (n if algo.proto == "ll" and algo.name == "ring" else 1)
        nc = min(c, max(1, int(nbytes // per)))
        if nc >= c:
            return self
        ex = Executor("cu", nc, f"{self.name}.{nc}ch", self._exclusive)
        ex.share = nc / c
        return ex

    def channels(self, hw: Hardware) -> int:
        """CUs of the kernel: ``cus`` if given, else ``collective.channels`` (0: every CU)."""
        ch = self.cus or hw.collective.channels or hw.compute.cus
        return min(ch, hw.compute.cus)

    def exclusive(self, hw: Hardware) -> bool:
        """Whether the kernel's thread blocks hold their CUs for its whole duration (a persistent
        communication kernel: ``collective.exclusive_cus`` unless the executor says otherwise; a library
        kernel of many short blocks, e.g. a sum over all CUs, does not)."""
        if self.kind != "cu":
            return False
        return hw.collective.exclusive_cus if self._exclusive is None else self._exclusive

    def cu_work(self, b: ScheduleBuilder, gpu: int, mem_bytes: float) -> Work:
        """CU work of ``mem_bytes`` of loads + stores on the kernel's CUs: on the GPU's CU pool and the
        kernel's partition, or, for an exclusive kernel, on its partition alone, whose CUs leave the
        pool while the kernel runs (:meth:`ScheduleBuilder.partition`)."""
        cu_s = mem_bytes / b.hw.compute.cu_copy_Bps
        ch = self.channels(b.hw)
        if self.exclusive(b.hw):
            return [(b.partition(gpu, self.name, ch, exclusive=True), cu_s)]
        out = [(b.cu(gpu), cu_s)]
        if ch < b.hw.compute.cus:
            out.append((b.partition(gpu, self.name, ch), cu_s))
        return out

    def work(self, b: ScheduleBuilder, gpu: int, mem_bytes: float, moved: float | None = None) -> Work:
        """Work of a copy: ``mem_bytes`` of loads + stores through the CUs, or ``moved`` payload bytes
        (default ``mem_bytes / 2``: one load and one store per byte) through the DMA engines."""
        if self.kind == "dma":
            return [(b.dma(gpu), mem_bytes / 2 if moved is None else moved)]
        return self.cu_work(b, gpu, mem_bytes)

    def reduce_work(self, b: ScheduleBuilder, gpu: int, mem_bytes: float) -> Work:
        """Reductions always run on CUs (DMA engines cannot add)."""
        ex = self if self.kind == "cu" else Executor("cu", self.cus, self.name, self._exclusive)
        return ex.cu_work(b, gpu, mem_bytes)

    def window(self, hw: Hardware) -> float:
        """Bytes in flight of the kernel (channels x per-CU) or of the DMA engines (0: no limit)."""
        if self.kind == "dma":
            return hw.dma.engines * hw.dma.inflight_bytes
        return self.channels(hw) * hw.compute.cu_inflight_bytes

    def delay(self, b: ScheduleBuilder) -> float:
        return b.hw.dma.command_overhead_s if self.kind == "dma" else 0.0

    def step_delay(self, b: ScheduleBuilder, launch: bool) -> float:
        """Fixed delay of one transfer of a schedule's own copy kernel or DMA command: link latency,
        DMA command overhead, and the kernel launch when this step starts a kernel."""
        return b.hw.link.latency_s + self.delay(b) + (b.hw.compute.kernel_launch_s if launch else 0.0)


# ---- the library's parameters ----------------------------------------------------------------------
def protocol(hw: Hardware, proto: str):
    if proto not in PROTOCOLS:
        raise ConfigError(f"algo: unknown protocol '{proto}' (valid: {', '.join(PROTOCOLS)})")
    return getattr(hw.collective, proto)


def step_latency(hw: Hardware, algo: Algo, ex: Executor) -> float:
    """Latency of one step (hop): the protocol's per-hop latency (default: the link's) for a CU kernel;
    the link's plus the DMA command overhead for DMA engines."""
    if ex.kind == "dma":
        return hw.link.latency_s + hw.dma.command_overhead_s
    if algo.name == "nvls":
        return 0.0
    step = protocol(hw, algo.proto).step_latency_s
    return hw.link.latency_s if step is None else step


def base_latency(hw: Hardware, algo: Algo, ex: Executor) -> float:
    """Fixed latency of the collective kernel (once per call, besides the kernel launch)."""
    if ex.kind == "dma":
        return 0.0
    if algo.name == "nvls":
        return hw.collective.nvls_latency_s
    return protocol(hw, algo.proto).base_latency_s


def _wire(hw: Hardware, algo: Algo) -> float:
    """Wire bytes per payload byte on a link: one physical link model for every algorithm. The ring
    reaches ``link_efficiency`` of the line rate times its protocol's payload share; NVLS reaches
    ``nvls_efficiency`` of that same achievable rate (NCCL ``src/graph/tuning.cc`` scales NVLS's bus
    bandwidth by ``nvlsEfficiency`` relative to the graph bandwidth the ring uses)."""
    col = hw.collective
    if algo.name == "nvls":
        return 1.0 / (col.link_efficiency * col.nvls_efficiency)
    return 1.0 / (col.link_efficiency * protocol(hw, algo.proto).bw_fraction)


def _busbw_cap(hw: Hardware, algo: Algo, ex: Executor) -> float:
    if ex.kind == "dma" or algo.name == "nvls":
        return 0.0
    return protocol(hw, algo.proto).max_busbw_Bps * ex.share


def ring_offsets(hw: Hardware, n: int) -> list[int]:
    """Peer offsets a ring step's bytes go to (g sends to g + off). A ring: the neighbour (both
    neighbours when ``topology.bidirectional_ring``: two rings, one each way); a switch: one ring through
    the ports; a fully-connected mesh: N-1 edge-disjoint rings, one per link (the complete directed
    graph decomposes into N-1 Hamiltonian cycles; RCCL builds its rings over every xGMI link), so a
    step's bytes are spread evenly over the N-1 links."""
    kind = hw.topology.kind
    if kind == "mesh":
        return [-o for o in range(1, n)]
    if kind == "ring" and hw.topology.bidirectional_ring and n > 2:
        return [-1, 1]
    return [-1]


def spans_nodes(hw: Hardware, n: int) -> bool:
    """Whether ``n`` GPUs of ``hw`` span several nodes joined by its network (``hw.network``)."""
    return hw.network is not None and n > hw.topology.gpus


@dataclass(frozen=True)
class Hop:
    """Where a share of a ring step's bytes goes: GPU g sends ``num / den`` of them to ``dst(g)`` and
    forwards in the next step what it received from ``src(g)``; ``net``: over the scale-out network."""

    dst: Callable[[int], int]
    src: Callable[[int], int]
    num: int
    den: int
    net: bool = False


def ring_hops(hw: Hardware, n: int) -> list[Hop]:
    """The hops of a ring step on ``n`` GPUs. In one node, the peer offsets of :func:`ring_offsets`
    with equal shares. Across nodes, NCCL's ring visits every GPU of a node then crosses to the next
    node, and its channels leave each node from a different GPU (rail-aligned: through that GPU's NIC
    to the same GPU of the next node); over the channels every GPU thus sends ``1/k`` of a step's bytes
    to its own rail's GPU of the next node through its NIC and the rest to a GPU of its own node (``k``
    GPUs per node), a ring of the same steps."""
    if not spans_nodes(hw, n):
        offs = ring_offsets(hw, n)
        return _hops(offs)
    k = hw.topology.gpus

    def peer(g: int, d: int) -> int:
        return g - g % k + (g % k + d) % k

    return [
        Hop(lambda g: peer(g, -1), lambda g: peer(g, 1), k - 1, k),
        Hop(lambda g: g - k, lambda g: g + k, 1, k, net=True),
    ]


def _hops(offs: list[int] | list[Hop]) -> list[Hop]:
    """Peer offsets (equal shares, the node's fabric) or hops, as hops."""
    if offs and isinstance(offs[0], Hop):
        return list(offs)
    return [Hop(lambda g, o=o: g + o, lambda g, o=o: g - o, 1, len(offs)) for o in offs]


def net_wire(hw: Hardware, algo: Algo) -> float:
    """Wire bytes per payload byte on a NIC: its achievable share of the line rate times the protocol's
    payload share."""
    return 1.0 / (hw.network.efficiency * protocol(hw, algo.proto).bw_fraction)


def ring_step_latency(hw: Hardware, algo: Algo, ex: Executor, n: int) -> float:
    """Latency of one ring step. Across nodes, NCCL's tuning model (src/graph/tuning.cc) charges a
    ring of ``nsteps`` steps ``(nsteps - nInter) x max(intra, net overhead) + nInter x inter``, with
    ``nInter / nsteps = (nodes - 1) / (n - 1)`` for every ring collective, the network post overhead
    three times for Simple and ``hwLatencies[NET][Ring]`` across nodes; each step here takes that mean."""
    alpha = step_latency(hw, algo, ex)
    if not spans_nodes(hw, n) or ex.kind == "dma":
        return alpha
    net, proto = hw.network, protocol(hw, algo.proto)
    intra = max(alpha, net.overhead_s * (3 if algo.proto == "simple" else 1))
    inter = proto.net_step_latency_s
    nodes = n // hw.topology.gpus
    return intra + (nodes - 1) / (n - 1) * (inter - intra)


def tree_levels(hw: Hardware, n: int) -> int:
    """Levels of NCCL's binary trees between the nodes of ``n`` GPUs: its log2i(nodes), floor(log2)."""
    return (n // hw.topology.gpus).bit_length() - 1


def tree_available(hw: Hardware, n: int, proto: str) -> bool:
    """Whether the library's tree all-reduce across nodes is modelled for ``proto`` on ``n`` GPUs (NCCL
    enables it across nodes; the preset gives its hop latencies)."""
    p = protocol(hw, proto)
    return spans_nodes(hw, n) and p.enabled and p.tree_net_step_latency_s is not None


def tree_step_latency(hw: Hardware, algo: Algo, n: int) -> float:
    """Latency of one direction of NCCL's tree all-reduce across nodes (src/graph/tuning.cc: a call pays
    ``2 x ((ranks per node - 1) x intraLat + log2i(nodes) x interLat)``): the chain through the node's
    GPUs (``collective.<proto>.tree_step_latency_s``, NCCL's hwLatencies[NVLINK][Tree]) and one level
    per doubling of the nodes of its binary trees (``tree_net_step_latency_s``, hwLatencies[NET][Tree])."""
    p = protocol(hw, algo.proto)
    intra = hw.link.latency_s if p.tree_step_latency_s is None else p.tree_step_latency_s
    return (hw.topology.gpus - 1) * intra + tree_levels(hw, n) * p.tree_net_step_latency_s


def tree_chunk_bytes(hw: Hardware, algo: Algo, nbytes: float, nc: int, n: int) -> int:
    """Payload bytes a channel moves per hop of the tree's pipeline (NCCL src/enqueue.cc): the protocol's
    chunk (``collective.<proto>.chunk_bytes``); LL128's halves while the call has few chunks per channel
    for its depth (``nBytes / (channels x chunk) < (1 + log2i(nodes) + 0.1 ppn) x 64 / ppn`` down to
    128 KiB, ``x 16 / ppn`` down to 32 KiB)."""
    chunk = protocol(hw, algo.proto).chunk_bytes
    if algo.proto == "ll128":
        ppn = hw.topology.gpus
        nsteps = 1 + tree_levels(hw, n) + 0.1 * ppn
        while nbytes // (nc * chunk) < nsteps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while nbytes // (nc * chunk) < nsteps * 16 / ppn and chunk > 32768:
            chunk //= 2
    return chunk


def tree_alphas(hw: Hardware, algo: Algo, ex: Executor, nbytes: float, n: int) -> list[float]:
    """Each direction's fixed time of the tree all-reduce on ``n`` GPUs: its hop latencies
    (:func:`tree_step_latency`) and its pipeline's fill. A channel moves the buffer in chunks
    (:func:`tree_chunk_bytes`); a hop that forwards a chunk only once it has landed whole (store and
    forward) delays the end by one chunk's time at the direction's rate alone (its step's idle time,
    :func:`step_time`, per channel). Simple's every hop does (a step's slice is forwarded after its
    fence and flag: ``D - 1`` such delays after the first hop, ``D = (ranks per node - 1) +
    log2i(nodes)``); LL and LL128 forward each line as it lands (flag per line) within a node, but the
    network proxy sends a step's chunk once it is written (src/transport/net.cc): one delay per level
    between nodes. A buffer below one chunk per channel crosses such a hop whole. NCCL's own model leaves
    this out and corrects trees at medium sizes by a table (src/graph/tuning.cc treeCorrectionFactor,
    0.4-0.9); here it follows from the chunks."""
    levels = tree_levels(hw, n)
    held = (hw.topology.gpus - 1) + levels - 1 if algo.proto == "simple" else levels
    nc = ex.channels(hw)
    share = min(1.0, nc * tree_chunk_bytes(hw, algo, nbytes, nc, n) / nbytes)
    lat = tree_step_latency(hw, algo, n)
    steps, _ = tree_program()
    hops = ring_hops(hw, n)
    return [lat + held * share * step_time(hw, n, st, nbytes, algo, ex, hops=hops) for st in steps]


def proxy_steps_s(
    hw: Hardware, algo: Algo, ex: Executor, n: int, nbytes: float, alphas: list[float]
) -> list[float]:
    """Seconds of each step's work on a GPU's network proxy beyond the step's latency (``alphas``): a ring
    (or the tree) across nodes, 0 elsewhere. NCCL's proxy, one host thread per GPU, posts every network
    send and receive of the channels whose ring (or tree) leaves or enters the node at that GPU, one after
    another (src/proxy.cc; src/transport/net.cc: a post per chunk of ``collective.<proto>.chunk_bytes``),
    each at ``network.overhead_s`` (NCCL's getNetOverhead), whatever the protocol (NCCL's tuning model
    charges a Simple step three, but at three per post no proxy could keep a NIC busy with the 128 KiB
    chunks of the 2-node NVLS-Tree, measured at 469 GB/s of bus bandwidth). With rail-aligned channels a
    GPU serves ``ceil(channels / GPUs per node)`` of them; per ring step each sends one block and receives
    one, per tree direction each chunk crosses one level of NCCL's double binary tree (a node is a leaf in
    one tree and has two children in the other: two posts per chunk on average, one between two nodes).
    A step lasts at least its proxy's cycle, its latency and its transfer running within it (the cycle is
    this work plus the latency). NVLS-Tree's posts are not modelled: at one per 64 KiB chunk they would
    hold 4-node NVLS-Tree below the rate it is measured at, so NCCL posts its chunks for less there."""
    net = hw.network
    if not spans_nodes(hw, n) or ex.kind != "cu" or not net.overhead_s or algo.name not in ("ring", "tree"):
        return [0.0] * len(alphas)
    p = protocol(hw, algo.proto)
    nc = ex.channels(hw)
    if algo.name == "ring":
        posts, per_channel, chunk = 2, nbytes / n / nc, p.chunk_bytes
    else:
        posts = 1 if n // hw.topology.gpus == 2 else 2
        per_channel, chunk = nbytes / nc, tree_chunk_bytes(hw, algo, nbytes, nc, n)
    cycle = posts * math.ceil(nc / hw.topology.gpus) * max(1, math.ceil(per_channel / chunk)) * net.overhead_s
    return [max(0.0, cycle - a) for a in alphas]


def p2p_step_latency(hw: Hardware, algo: Algo, ex: Executor, n: int) -> float:
    """Latency of a grouped send/recv (all-to-all) on ``n`` GPUs: a step's (:func:`step_latency`) in one
    node; across nodes, where some peers are reached through the NICs, the network step's
    (``collective.<proto>.net_step_latency_s``: NCCL's ``hwLatencies[NET]``, which holds the proxy's post
    and the wire), taken by every send of the call (the call ends with its network sends)."""
    alpha = step_latency(hw, algo, ex)
    if not spans_nodes(hw, n):
        return alpha
    return max(alpha, protocol(hw, algo.proto).net_step_latency_s)


def nic_Bps_per_gpu(hw: Hardware) -> float:
    """A GPU's share of its node's NICs (bytes/s per direction)."""
    net = hw.network
    return net.nic_Bps * net.nics_per_node / hw.topology.gpus


def _ring_busbw_cap(hw: Hardware, algo: Algo, ex: Executor, n: int) -> float:
    """A ring's (or the tree's) bus bandwidth cap on ``n`` GPUs: the protocol's, or across nodes NCCL's
    llMaxBws by node count (2 nodes, more) where the preset gives one; either times the call's share of
    the library's channels (:meth:`Executor.for_call`)."""
    cap = _busbw_cap(hw, algo, ex)
    if not spans_nodes(hw, n):
        return cap
    proto = protocol(hw, algo.proto)
    net = proto.net2_max_busbw_Bps if n // hw.topology.gpus <= 2 else proto.net_max_busbw_Bps
    return net * ex.share if net else cap


@dataclass(frozen=True)
class Step:
    """One primitive of a ring, in units of the block ``c``: bytes read and written locally by the
    sender, bytes sent to the peer (landing in its HBM)."""

    rd: float
    wl: float
    send: float

    @property
    def mem(self) -> float:  # loads + stores through the CUs
        return self.rd + self.wl + self.send


SEND, RRS, RRC = Step(1, 0, 1), Step(2, 0, 1), Step(2, 1, 0)
COPY_SEND, RECV = Step(1, 1, 1), Step(1, 1, 0)
RRCS = Step(2, 1, 1)


def tree_program() -> tuple[list[Step], None]:
    """NCCL's tree all-reduce (``runTreeSplit``) per GPU, in units of the whole buffer: up the tree
    ``recvReduceSend`` (read what the child landed and the local input, land the sum at the parent), then
    down ``recvCopySend`` (read what the parent landed, write the output, land it at the child); every
    byte passes each GPU once up and once down. Leaves and roots do one primitive less of each (a send,
    a recv); every GPU is given an interior GPU's, which keeps every GPU alike (the symmetric mode)."""
    return [RRS, COPY_SEND], None


def ring_program(op: str, n: int) -> tuple[list[Step], Step]:
    """The link steps and the final (tail) primitive of NCCL's ``runRing`` for ``op``."""
    if op == "reduce_scatter":
        return [SEND] + [RRS] * (n - 2), RRC
    if op == "all_gather":
        return [COPY_SEND] * (n - 1), RECV
    if op == "all_reduce":
        return [SEND] + [RRS] * (n - 2) + [RRCS] + [COPY_SEND] * (n - 2), RECV
    raise ScheduleError(f"op: no ring program for '{op}'")


# ---- building blocks ----------------------------------------------------------------------------------
def transfer_work(
    b: ScheduleBuilder, src: int, dst: int, nbytes: float, ex: Executor, wire: float | None = None,
    net: bool = False,
) -> Work:  # fmt: skip
    """Work of one copy of ``nbytes`` from ``src``'s HBM to ``dst``'s HBM over the link (``net``: through
    the two GPUs' NIC shares, between nodes): link bytes at ``wire`` per payload byte (default: the
    achievable link efficiency), a read at src, a write at dst, a load and a store through the executor."""
    w = 1.0 / b.hw.collective.link_efficiency if wire is None else wire
    work = [(r, nbytes * w) for r in (b.nic_path(src, dst) if net else b.path(src, dst))]
    work += [(b.hbm(src), nbytes), (b.hbm_w(dst), nbytes)]
    return work + ex.work(b, src, 2 * nbytes, nbytes)


def step_op(
    b: ScheduleBuilder, g: int, key: str, st: Step, c: float, offs: list[int] | list[Hop], *, algo: Algo,
    ex: Executor, cat: str, delay: float, deps: list[Ref], prio: int, land=None, recv_reduce: bool = False,
    proxy: float = 0.0,
) -> Op:  # fmt: skip
    """One primitive on GPU g (the op it adds): reads and local writes at g, ``st.send * c`` spread over the peers
    ``g + off`` or over the hops (:class:`Hop`; across nodes through the NICs), landing there, or
    ``land(dst, nbytes)`` -> (work, written bytes) for NMC updates. ``recv_reduce``: the receiver also
    reduces each landed share into its own block (2 reads + 1 write on its CUs), the store-and-forward
    ring. ``proxy``: seconds of the step's work on g's network proxy (:func:`proxy_steps_s`)."""
    hw = b.hw
    work: Work = [(b.proxy(g), proxy)] if proxy else []
    if st.rd:
        work.append((b.hbm(g), st.rd * c))
    if st.wl:
        work.append((b.hbm_w(g), st.wl * c))
    caps = []
    reads, written = st.rd * c, st.wl * c
    sent = st.send * c
    if sent:
        hops = _hops(offs)
        cap = _ring_busbw_cap(hw, algo, ex, b.n)
        for h in hops:
            share = sent * h.num / h.den
            dst = h.dst(g)
            wire = net_wire(hw, algo) if h.net else _wire(hw, algo)
            for r in b.nic_path(g, dst) if h.net else b.path(g, dst):
                work.append((r, share * wire))
                if cap:
                    caps.append((r, cap * h.num / h.den * wire))
            if land is None:
                work.append((b.hbm_w(dst), share))
                written += share
            else:
                lw, lb = land(dst, share)
                work += lw
                written += lb
            if recv_reduce:
                work += [(b.hbm(dst), 2 * share), (b.hbm_w(dst), share)] + ex.reduce_work(b, dst, 3 * share)
                reads, written = reads + 2 * share, written + share
    if ex.kind == "dma":
        work += ex.work(b, g, 2 * sent, sent + st.wl * c)
        if st.rd > 1:  # the reduction of a DMA ring runs on CUs
            work += ex.reduce_work(b, g, st.mem * c)
    else:
        work += ex.cu_work(b, g, st.mem * c)
    return b.add(
        g, key, kind=f"{cat}-step", cat=cat, work=work, caps=caps, delay_s=delay, deps=deps,
        traffic={f"{cat}_read": reads, f"{cat}_write": written, "link": sent}, prio=prio,
        window=ex.window(hw),
    )  # fmt: skip


def ring_step_deps(start: StartFn, g: int, j: int, prefix: str, hops: list[Hop]) -> list[Ref]:
    """Dependencies of step ``j`` of a ring on GPU g (g sends to each hop's ``dst(g)``): step 0 waits
    for ``start`` of g and of its receivers (their kernels must be running to accept data); step j waits
    for g's own step j-1 and for the data g received in step j-1 (from each hop's ``src(g)``)."""
    if j == 0:
        out = list(start(g))
        for h in hops:
            out += [r for r in start(h.dst(g)) if r not in out]
        return out
    return [(g, f"{prefix}.{j - 1}")] + [(h.src(g), f"{prefix}.{j - 1}") for h in hops]


def run_ring(
    b: ScheduleBuilder, c: float, steps: list[Step], tail: Step | None, *, algo: Algo, ex: Executor,
    start: StartFn, prefix: str, cats: Callable[[int], str], prio: int, launch: bool, land=None,
    recv_reduce: bool = False, alphas: list[float] | None = None,
) -> dict[int, list[Ref]]:  # fmt: skip
    """A ring program: link steps ``steps`` then the ``tail`` primitive (none: the last step ends it).
    ``recv_reduce``: the store-and-forward ring: the receiver also reduces each landed chunk into its
    own (2 reads + 1 write, in the step). ``alphas``: each step's fixed time (default: the ring's
    step latency, :func:`ring_step_latency`; the tree's: :func:`tree_alphas`)."""
    hw, n = b.hw, b.n
    if spans_nodes(hw, n) and ex.kind == "dma":
        raise ConfigError(
            f"executor: a ring of copy engines across the nodes of '{hw.name}' is not modelled (the network's"
            " transfers are the library kernel's)"
        )
    hops = ring_hops(hw, n)
    alphas = alphas or [ring_step_latency(hw, algo, ex, n)] * len(steps)
    proxies = proxy_steps_s(hw, algo, ex, n, c if algo.name == "tree" else c * n, alphas)
    first = (hw.compute.kernel_launch_s if launch else 0.0) + base_latency(hw, algo, ex)
    last = len(steps) - 1
    # a ring's steps of the same primitive, category and delay on one GPU are the same op but for their
    # keys and dependencies: the first is the template of the others (not where ``land`` makes the
    # landing work: it may differ per call)
    made: dict[tuple, Op] | None = {} if land is None else None
    for g in b.gpus:
        for j, st in enumerate(steps):
            cat = cats(j)
            key = f"{prefix}.{j}"
            deps = ring_step_deps(start, g, j, prefix, hops)
            delay = alphas[j] + (first if j == 0 else 0.0)
            if made is not None:
                tkey = (g, st, cat, delay, proxies[j])
                like = made.get(tkey)
                if like is not None:
                    b.add_like(like, g, key, deps)
                    continue
            op = step_op(b, g, key, st, c, hops, algo=algo, ex=ex, cat=cat, delay=delay, deps=deps, prio=prio,
                         land=land, recv_reduce=recv_reduce, proxy=proxies[j])  # fmt: skip
            if made is not None:
                made[tkey] = op
        if tail is not None:
            deps = [(g, f"{prefix}.{last}")] + [(h.src(g), f"{prefix}.{last}") for h in hops]
            cat = cats(last + 1)
            work: Work = [(b.hbm(g), tail.rd * c)] + ([(b.hbm_w(g), tail.wl * c)] if tail.wl else [])
            work += ex.reduce_work(b, g, tail.mem * c) if tail.rd > 1 else ex.work(b, g, tail.mem * c)
            b.add(
                g, f"{prefix}.tail", kind=f"{cat}-tail", cat=cat, work=work, deps=deps, prio=prio,
                traffic={f"{cat}_read": tail.rd * c, f"{cat}_write": tail.wl * c}, window=ex.window(hw),
            )  # fmt: skip
    end = f"{prefix}.tail" if tail is not None else f"{prefix}.{last}"
    return {g: [(g, end)] for g in b.gpus}


def send_to_peers(
    b: ScheduleBuilder, g: int, sizes: Callable[[int], float], *, start: StartFn, ex: Executor,
    prefix: str, cat: str, prio: int, delay: float, algo: Algo = Algo("direct"), recv_copy: bool = False,
    local: float = 0.0, owner_reduce: float = 0.0,
    p2p: Callable[[float], tuple[float, float]] | None = None,
) -> None:  # fmt: skip
    """GPU g sends ``sizes(off)`` bytes to GPU g+off for every peer offset, all at once (direct paths).
    ``recv_copy``: the receiver copies the landed bytes out of its buffer (p2p send/recv), pipelined.
    ``local``: bytes g also copies into its own output, spread evenly over the sends (same kernel).
    ``owner_reduce``: the receiver reduces N blocks of ``owner_reduce / N`` bytes (N reads + 1 write),
    its work spread evenly over the N-1 sends that land there (pipelined with the arrivals).
    ``p2p``: a send of ``nb`` bytes moves at most ``p2p(nb)[0]`` payload bytes/s (its connections' rate,
    0: no limit) and ends ``p2p(nb)[1]`` s later (the receiver's copy of its last step). A peer on another
    node (``network``) is reached through g's NIC share and the peer's (:meth:`ScheduleBuilder.nic_path`,
    at :func:`net_wire`); the per-connection rate is the node fabric's and does not cap it."""
    wire = _wire(b.hw, algo)
    nwire = net_wire(b.hw, algo) if b.node_gpus else 0.0
    n = b.n
    share = local / (n - 1)
    rr, rw = owner_reduce / (n - 1), owner_reduce / n / (n - 1)  # per landing send: reads, writes
    for off in range(1, b.n):
        nb = sizes(off)
        remote = b.crosses_nodes(g, g + off)
        work = transfer_work(b, g, g + off, nb, ex, nwire if remote else wire, net=remote)
        rd = wr = nb
        if recv_copy:
            work += [(b.hbm(g + off), nb), (b.hbm_w(g + off), nb)] + ex.work(b, g + off, 2 * nb, nb)
            rd, wr = rd + nb, wr + nb
        if share:
            work += [(b.hbm(g), share), (b.hbm_w(g), share)] + ex.work(b, g, 2 * share, share)
            rd, wr = rd + share, wr + share
        if rr:
            work += [(b.hbm(g + off), rr), (b.hbm_w(g + off), rw)] + ex.reduce_work(b, g + off, rr + rw)
            rd, wr = rd + rr, wr + rw
        conn, drain = p2p(nb) if p2p else (0.0, 0.0)
        caps = [(r, conn * wire) for r in b.path(g, g + off)] if conn and not remote else []
        b.add(
            g, f"{prefix}.send{off}", kind="send", cat=cat, work=work, caps=caps, delay_s=delay + drain,
            deps=start(g),
            traffic={f"{cat}_read": rd, f"{cat}_write": wr, "link": nb}, prio=prio, window=ex.window(b.hw),
        )  # fmt: skip


def received_from_peers(b: ScheduleBuilder, g: int, prefix: str) -> list[Ref]:
    """The sends of :func:`send_to_peers` that land on GPU g (and, with ``local``, g's own copy)."""
    return [(g - off, f"{prefix}.send{off}") for off in range(1, b.n)]


# ---- algorithm choice -----------------------------------------------------------------------------------
def candidates(
    op: str, hw: Hardware, n: int, ex: Executor | None = None, nbytes: float | None = None
) -> list[Algo]:
    """The algorithms/protocols the library would consider for ``op`` of ``nbytes`` (ties resolve in
    this order): with DMA engines, direct copies (a ring's steps on a ring); a CU kernel: every enabled
    protocol of the ring (and NVLS for an all-reduce on a switch), or of the direct algorithm for an
    all-reduce of at most ``collective.direct_max_bytes`` on a mesh or switch."""
    ex = ex or Executor()
    kind = hw.topology.kind
    protos = [p for p in PROTOCOLS if protocol(hw, p).enabled] or ["simple"]
    if spans_nodes(hw, n):
        # NCCL across nodes: the ring, the tree and NVLS-Tree for an all-reduce (its CollNet is not
        # modelled here; its PAT runs with one GPU per node only) and the grouped send/recv of an
        # all-to-all; NVLS alone needs CollNet there (tuning.cc), the copy engines do not drive the NICs
        if ex.kind == "dma":
            return []
        if op == "all_to_all":
            return [Algo("direct", p) for p in protos]
        out = [Algo("ring", p) for p in protos]
        if op == "all_reduce":
            out += [Algo("tree", p) for p in protos if tree_available(hw, n, p)]
            if nvls_tree_available(hw, n):
                out.append(Algo("nvls-tree"))
        return out
    if ex.kind == "dma":
        if kind == "ring":
            return [Algo("ring-sf" if op == "reduce_scatter" else "ring")] if op != "all_to_all" else []
        return [Algo("direct")]
    if op == "all_to_all":
        return [Algo("direct", p) for p in protos] if kind != "ring" else []
    if (
        op == "all_reduce"
        and kind != "ring"
        and nbytes is not None
        and nbytes <= hw.collective.direct_max_bytes
    ):
        return [Algo("direct", p) for p in protos]  # the library's one-shot algorithm covers this size
    out = [Algo("ring", p) for p in protos]
    if op == "all_reduce" and nvls_available(hw, n):
        out.append(Algo("nvls"))
    return out


def nvls_available(hw: Hardware, n: int) -> bool:
    return (
        hw.topology.kind == "switch"
        and hw.collective.nvls_reduce_Bps > 0
        and n >= 2
        and not spans_nodes(hw, n)
    )


def nvls_tree_available(hw: Hardware, n: int) -> bool:
    """Whether NCCL's NVLS-Tree all-reduce is modelled on ``n`` GPUs: across nodes of switch nodes with
    NVLS, where the preset gives its network latency (``collective.nvls_tree_net_latency_s``)."""
    col = hw.collective
    return (
        spans_nodes(hw, n)
        and hw.topology.kind == "switch"
        and col.nvls_reduce_Bps > 0
        and col.nvls_tree_net_latency_s is not None
    )


def valid_algos(op: str, hw: Hardware, n: int) -> list[str]:
    """Every ``algo`` string :func:`simulate_collective` accepts for ``op`` on ``hw``."""
    kind = hw.topology.kind
    out = ["auto"]
    for name in ALGORITHMS[op]:
        if name == "direct" and (kind == "ring" or (spans_nodes(hw, n) and op != "all_to_all")):
            continue
        if name == "nvls":
            if nvls_available(hw, n):
                out.append("nvls/simple")
            continue
        if name == "tree":
            out += [f"tree/{p}" for p in PROTOCOLS if tree_available(hw, n, p)]
            continue
        if name == "nvls-tree":
            if nvls_tree_available(hw, n):
                out.append("nvls-tree/simple")
            continue
        out += [f"{name}/{p}" for p in PROTOCOLS]
    return out


def choose(op: str, nbytes: float, hw: Hardware, n: int, ex: Executor | None = None) -> Algo:
    """The library's choice (memoised per hardware object, operation, size, GPUs and executor): across
    nodes, where the preset gives NCCL's graphs (``collective.nccl``), the candidate NCCL's own tuning
    model estimates fastest (:mod:`t3.ops.nccl_tuning`; ties: the candidates' order); otherwise the
    candidate with the least predicted (closed-form) time."""
    ex = ex or Executor()
    key = (id(hw), op, nbytes, n, ex.kind, ex.cus)
    hit = _CHOICES.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    cands = candidates(op, hw, n, ex, nbytes)
    if not cands and spans_nodes(hw, n):
        raise ScheduleError(
            f"gpus: {op} {'on copy engines ' if ex.kind == 'dma' else ''}across the {n // hw.topology.gpus} nodes"
            f" of '{hw.name}' is not modelled (across nodes: the library's ring all-reduce, all-gather and"
            " reduce-scatter, and its all-to-all, on the CUs)"
        )
    if not cands:
        raise ScheduleError(f"topology: {op} is not modelled on a {hw.topology.kind} topology")
    best = fastest(op, nbytes, hw, n, cands, ex)
    if len(_CHOICES) > 10_000:
        _CHOICES.clear()
    _CHOICES[key] = (hw, best)
    return best


_CHOICES: dict[tuple, tuple[Hardware, Algo]] = {}


def fastest(
    op: str, nbytes: float, hw: Hardware, n: int, cands: list[Algo], ex: Executor | None = None
) -> Algo:
    """The one of ``cands`` the library runs: across nodes, where its choice is NCCL's
    (:func:`nccl_estimates`), the least of NCCL's estimate among those it would run; otherwise the least
    predicted (closed-form) time. Ties: the candidates' order."""
    est = nccl_estimates(op, nbytes, hw, n, cands) or {}
    times = {a: t for a, t in est.items() if t < float("inf")}
    times = times or {a: idle_time(op, a, nbytes, hw, n, ex) for a in cands}
    best = None
    for a, t in times.items():
        if best is None or t < best[0] * (1 - 1e-12):
            best = (t, a)
    return best[1]


def nccl_estimates(
    op: str, nbytes: float, hw: Hardware, n: int, cands: list[Algo]
) -> dict[Algo, float] | None:
    """NCCL's own estimate (us, :func:`t3.ops.nccl_tuning.time_us`; inf: it would not run it) of each of
    ``cands`` for ``op`` of ``nbytes`` on ``n`` GPUs, where that is the library's choice: across nodes of a
    preset with NCCL's graphs (``collective.nccl``), for an all-reduce, all-gather or reduce-scatter
    (NCCL's all-to-all is grouped send/recv, which its tuning model does not choose); None elsewhere."""
    if hw.collective.nccl is None or not spans_nodes(hw, n) or op not in nccl_tuning.OPS:
        return None
    nodes = -(-n // hw.topology.gpus)
    return {a: nccl_tuning.time_us(op, a.name, a.proto, nbytes, nodes, n // nodes, hw) for a in cands}


def parse_algo(op: str, algo: str | Algo, hw: Hardware, n: int) -> Algo | None:
    """``"ring/simple"`` -> Algo; ``"auto"`` -> None. Unknown names raise a ConfigError listing the valid."""
    if isinstance(algo, Algo):
        return algo
    valid = valid_algos(op, hw, n)
    if algo == "auto":
        return None
    name = algo if "/" in algo else f"{algo}/simple"
    if name not in valid:
        raise ConfigError(
            f"algo: unknown algorithm '{algo}' for {op} on {hw.topology.kind} (valid: {', '.join(valid)})"
        )
    a, p = name.split("/")
    return Algo(a, p)


# ---- collectives ---------------------------------------------------------------------------------------
def _resolve(op, nbytes, b, ex, algo) -> tuple[Algo, Executor]:
    """The algorithm of one call (``algo``, or the library's choice) and the kernel it runs on
    (:meth:`Executor.for_call`: the channels the library gives a call of this size)."""
    ex = ex or Executor()
    a = algo if isinstance(algo, Algo) else parse_algo(op, algo or "auto", b.hw, b.n)
    if a is None:
        a = choose(op, nbytes, b.hw, b.n, ex)
    return a, ex.for_call(b.hw, a, nbytes, b.n)


def reduce_scatter(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "rs", cat: str = "rs", prio: int = 0, launch: bool = True, algo: str | Algo = "auto",
) -> dict[int, list[Ref]]:  # fmt: skip
    """Reduce-scatter of an ``nbytes`` tensor per GPU (each GPU ends with its reduced 1/N block)."""
    a, ex = _resolve("reduce_scatter", nbytes, b, ex, algo)
    b.meta.setdefault("algos", {})[prefix] = str(a)
    c = nbytes / b.n
    kw = dict(start=start, prefix=prefix, prio=prio, launch=launch)
    if a.name == "ring":
        steps, tail = ring_program("reduce_scatter", b.n)
        return run_ring(b, c, steps, tail, algo=a, ex=ex, cats=lambda j: cat, **kw)
    if a.name == "ring-sf":
        return run_ring(
            b, c, [SEND] * (b.n - 1), None, algo=a, ex=ex, cats=lambda j: cat, recv_reduce=True, **kw
        )
    if a.name == "direct":
        return direct_reduce_scatter(b, nbytes, ex=ex, cat=cat, algo=a, **kw)
    raise ConfigError(f"algo: '{a}' is not a reduce-scatter algorithm")


def all_gather(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ag", cat: str = "ag", prio: int = 0, launch: bool = True, algo: str | Algo = "auto",
) -> dict[int, list[Ref]]:  # fmt: skip
    """All-gather producing an ``nbytes`` tensor on every GPU from its 1/N block (out of place)."""
    a, ex = _resolve("all_gather", nbytes, b, ex, algo)
    b.meta.setdefault("algos", {})[prefix] = str(a)
    c = nbytes / b.n
    kw = dict(start=start, prefix=prefix, prio=prio, launch=launch)
    if a.name == "ring":
        steps, tail = ring_program("all_gather", b.n)
        return run_ring(b, c, steps, tail, algo=a, ex=ex, cats=lambda j: cat, **kw)
    if a.name == "direct":
        return direct_all_gather(b, nbytes, ex=ex, cat=cat, algo=a, **kw)
    raise ConfigError(f"algo: '{a}' is not an all-gather algorithm")


def all_reduce(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ar", cats: tuple[str, str] = ("rs", "ag"), prio: int = 0, launch: bool = True,
    algo: str | Algo = "auto",
) -> dict[int, list[Ref]]:  # fmt: skip
    """All-reduce of an ``nbytes`` buffer; traffic of the reduction phase goes to ``cats[0]``, of the
    gather phase to ``cats[1]``."""
    a, ex = _resolve("all_reduce", nbytes, b, ex, algo)
    b.meta.setdefault("algos", {})[prefix] = str(a)
    n = b.n
    c = nbytes / n
    kw = dict(start=start, prio=prio, launch=launch)
    if a.name == "ring":
        steps, tail = ring_program("all_reduce", n)
        return run_ring(b, c, steps, tail, algo=a, ex=ex, prefix=prefix,
                        cats=lambda j: cats[0] if j < n else cats[1], **kw)  # fmt: skip
    if a.name == "direct":
        done = direct_reduce_scatter(b, nbytes, ex=ex, cat=cats[0], algo=a, prefix=f"{prefix}.rs", **kw)
        return direct_all_gather(b, nbytes, ex=ex, cat=cats[1], algo=a, prefix=f"{prefix}.ag", start=lambda g: done[b.canon(g)],
                                 prio=prio, launch=False, chained=True)  # fmt: skip
    if a.name == "nvls":
        return nvls_all_reduce(b, nbytes, ex=ex, prefix=prefix, cats=cats, **kw)
    if a.name == "nvls-tree":
        return nvls_tree_all_reduce(b, nbytes, ex=ex, prefix=prefix, cats=cats, **kw)
    if a.name == "tree":
        steps, tail = tree_program()
        return run_ring(b, nbytes, steps, tail, algo=a, ex=ex, prefix=prefix, alphas=tree_alphas(b.hw, a, ex, nbytes, n),
                        cats=lambda j: cats[0] if j < 1 else cats[1], **kw)  # fmt: skip
    raise ConfigError(f"algo: '{a}' is not an all-reduce algorithm")


def direct_reduce_scatter(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "rs", cat: str = "rs", prio: int = 0, launch: bool = True, algo: Algo = Algo("direct"),
) -> dict[int, list[Ref]]:  # fmt: skip
    """Direct RS (mesh / switch; one-shot all-pairs): every GPU writes each block straight to its owner,
    which reduces the N blocks (N reads + 1 write). A CU kernel reduces chunk by chunk as the blocks
    land (the reduction rides on the arrivals, no tail); DMA engines cannot add, so with them a CU
    reduction runs after every block landed (exposed)."""
    ex = _direct_ex(b.hw, ex)
    hw, n = b.hw, b.n
    c = nbytes / n
    delay = (
        step_latency(hw, algo, ex)
        + base_latency(hw, algo, ex)
        + (hw.compute.kernel_launch_s if launch else 0.0)
    )
    pipelined = ex.kind == "cu"
    for g in b.gpus:
        send_to_peers(
            b, g, lambda off: c, start=start, ex=ex, prefix=prefix, cat=cat, prio=prio, delay=delay, algo=algo,
            owner_reduce=n * c if pipelined else 0.0,
        )  # fmt: skip
        if not pipelined:
            b.add(
                g, f"{prefix}.reduce", kind="reduce", cat=cat,
                work=[(b.hbm(g), n * c), (b.hbm_w(g), c)] + ex.reduce_work(b, g, (n + 1) * c),
                deps=received_from_peers(b, g, prefix) + list(start(g)),
                traffic={f"{cat}_read": n * c, f"{cat}_write": c}, prio=prio, window=ex.window(hw),
            )  # fmt: skip
    if pipelined:
        return {g: received_from_peers(b, g, prefix) for g in b.gpus}
    return {g: [(g, f"{prefix}.reduce")] for g in b.gpus}


def _direct_ex(hw: Hardware, ex: Executor | None) -> Executor:
    """The executor of a direct kernel: ``collective.direct_channels`` CUs unless given."""
    ex = ex or Executor()
    if ex.kind == "cu" and ex.cus is None and hw.collective.direct_channels:
        return Executor("cu", hw.collective.direct_channels, ex.name)
    return ex


def direct_all_gather(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ag", cat: str = "ag", prio: int = 0, launch: bool = True, algo: Algo = Algo("direct"),
    chained: bool = False,
) -> dict[int, list[Ref]]:  # fmt: skip
    """Direct AG (mesh / switch): every GPU writes its block to all peers at once and copies it into
    its own output (out of place). ``chained``: the second phase of a kernel already running."""
    ex = _direct_ex(b.hw, ex)
    hw = b.hw
    c = nbytes / b.n
    delay = step_latency(hw, algo, ex)
    if not chained:
        delay += base_latency(hw, algo, ex) + (hw.compute.kernel_launch_s if launch else 0.0)
    for g in b.gpus:
        send_to_peers(
            b, g, lambda off: c, start=start, ex=ex, prefix=prefix, cat=cat, prio=prio, delay=delay, algo=algo,
            local=c,
        )  # fmt: skip
    return {g: received_from_peers(b, g, prefix) + _own_sends(b, g, prefix) for g in b.gpus}


# NCCL's NVLS chunk (src/enqueue.cc, v2.19-2.29; NCCL_NVLS_CHUNKSIZE default 128 KiB): with ops = the NVLS
# channels x the N heads (one per rank), the chunk halves to 64 KiB below 64 loops of ops x chunk, then to
# 32 KiB below 8 loops, then to 16 KiB below 2 loops (on 8 H100s: 64 KiB below 1 GiB, 32 KiB below 64 MiB,
# 16 KiB below 8 MiB). A loop moves ops x chunk bytes; each of its steps costs every warp group a flag wait
# through the switch, a barrier and a system fence (src/device/all_reduce.h runNvls, prims_simple.h).
NVLS_CHUNK = 128 << 10


def _nvls_ops(hw: Hardware, n: int) -> int:
    """NCCL's NVLS ``ops`` on ``n`` GPUs: the NVLS kernel's channels x the n heads."""
    return Executor("cu", hw.collective.nvls_channels or None).channels(hw) * n


def nvls_chunk_bytes(hw: Hardware, n: int, nbytes: float) -> float:
    """NCCL's NVLS chunk for an all-reduce of ``nbytes`` on ``n`` GPUs (the rule above)."""
    ops = _nvls_ops(hw, n)
    chunk = float(NVLS_CHUNK)
    for loops, smaller in ((64, 64 << 10), (8, 32 << 10), (2, 16 << 10)):
        if nbytes < loops * ops * chunk:
            chunk = float(smaller)
    return chunk


def nvls_extra_loops_s(hw: Hardware, n: int, nbytes: float) -> float:
    """The fixed cost (``collective.nvls_loop_s`` each) of the loops NCCL's smaller NVLS chunks add over
    the 128 KiB chunk, at whose size the port rate (``nvls_efficiency``) is calibrated."""
    loop = hw.collective.nvls_loop_s
    if not loop or nbytes <= 0:
        return 0.0
    ops = _nvls_ops(hw, n)
    return loop * (nbytes / (ops * nvls_chunk_bytes(hw, n, nbytes)) - nbytes / (ops * NVLS_CHUNK))


def _nvls_node_work(b: ScheduleBuilder, g: int, S: float, heads: int, sw: int) -> Work:
    """One GPU's part of an NVLS all-reduce of ``S`` bytes over the ``heads`` GPUs of its node (GPU g owns
    shard c = S / heads): HBM reads S (its copy of every shard) and writes S (every reduced shard); its
    switch port carries S + c each way; the switch ``sw`` reduces heads x c. Its CUs' work is the
    caller's (after what it adds)."""
    c = S / heads
    wire = _wire(b.hw, Algo("nvls"))
    peer = g - g % heads + (g % heads + 1) % heads  # any GPU of the node: a port out and one in
    return [
        (b.hbm(g), S),
        (b.hbm_w(g), S),
        (b.path(g, peer)[0], (S + c) * wire),
        (b.path(peer, g)[1], (S + c) * wire),
        (sw, heads * c),
    ]


def _nvls_node_s(hw: Hardware, S: float, heads: int, nv: Executor, staged: float = 0.0) -> tuple:
    """The closed form of :func:`_nvls_node_work` alone: (port, HBM with ``staged`` more bytes read and
    written, switch, CUs) seconds."""
    c = S / heads
    port = (S + c) * _wire(hw, Algo("nvls")) / hw.link.bandwidth_Bps
    sw = heads * S / hw.collective.nvls_reduce_Bps
    return port, _hbm_s(hw, S + staged, S + staged), sw, _cu_s(hw, nv, 2 * c)


def nvls_all_reduce(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ar", cats: tuple[str, str] = ("rs", "ag"), prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """NVLS all-reduce (NCCL ``runNvls``): GPU g owns shard g (c = S/N); ``multimem.ld_reduce`` makes the
    switch read shard g from every GPU and return the sum, ``multimem.st`` makes it write the sum to
    every GPU; the two are pipelined. Per GPU: HBM reads S (its copy of every shard), writes S (every
    reduced shard); port out S + c, port in c + S; the switch reduces N x c input bytes per shard."""
    ex = ex or Executor()
    hw, n = b.hw, b.n
    S = nbytes
    c = S / n
    col = hw.collective
    nv = Executor("cu", ex.cus or col.nvls_channels or None, ex.name)
    # the switch is one resource of the node; the symmetric quotient gives GPU 0 its 1/N share
    sw = b._resource("nvls:switch", col.nvls_reduce_Bps * len(b.gpus) / n, "switch", 0)
    for g in b.gpus:
        work = _nvls_node_work(b, g, S, n, sw) + nv.cu_work(b, g, 2 * c)
        b.add(
            g, f"{prefix}.nvls", kind="nvls", cat=cats[0], work=work,
            delay_s=base_latency(hw, Algo("nvls"), nv) + (hw.compute.kernel_launch_s if launch else 0.0)
            + nvls_extra_loops_s(hw, n, S),
            deps=list(start(g)), prio=prio, window=nv.window(hw),
            traffic={f"{cats[0]}_read": S, f"{cats[1]}_write": S, "link": S + c},
        )  # fmt: skip
    return {g: [(g, f"{prefix}.nvls")] for g in b.gpus}


def nvls_tree_parts(hw: Hardware, n: int, nbytes: float) -> tuple[float, float, int]:
    """NCCL's NVLS-Tree all-reduce on ``n`` GPUs of ``k``-GPU nodes (src/device/all_reduce.h
    ``NCCL_ALGO_NVLS_TREE``): each GPU is the head of shard ``c = S / k`` of its node; the node's switch
    reduces it (``multimem.ld_reduce``), the head sends it up a binary tree between the nodes' heads of the
    same shard (through its NIC, on its rail), receives the total from the tree and the switch writes it to
    every GPU of the node (``multimem.st``); all pipelined. Two trees carry half the shard each, so a
    GPU's NIC moves ``c`` each way between 2 nodes (each node a root of one tree and a leaf of the
    other) and ``2c`` between more (an inner node of one tree: two children's halves in, a half up, two
    halves down; a leaf of the other); NCCL's tuning doubles the inter-node bandwidth on 2 nodes
    alike. Returns (c, the NIC's bytes each way, the tree's levels log2i(nodes))."""
    c = nbytes / hw.topology.gpus
    return c, c if n // hw.topology.gpus <= 2 else 2 * c, tree_levels(hw, n)


def nvls_tree_chunk_bytes(hw: Hardware, n: int, nbytes: float, nc: int) -> int:
    """NCCL's NVLS-Tree chunk (src/enqueue.cc; src/transport/nvls.cc): 128 KiB (NCCL_NVLS_CHUNKSIZE), 64 KiB
    on 4 nodes or more (its treeMaxChunkSize), then 64 KiB below 4 x ops x chunk and 32 KiB below
    ops x chunk, ops = the kernel's ``nc`` channels x the node's heads (its GPUs)."""
    k = hw.topology.gpus
    ops = nc * k
    chunk = NVLS_CHUNK if n // k < 4 else 65536
    if nbytes < 4 * ops * chunk and chunk > 65536:
        chunk = 65536
    if nbytes < ops * chunk and chunk > 32768:
        chunk = 32768
    return chunk


def nvls_tree_fill_s(hw: Hardware, n: int, nbytes: float, bulk_s: float, nc: int) -> float:
    """The pipeline's fill of NVLS-Tree: its shard crosses 2 x log2i(nodes) network hops (up, then down
    the tree), each of which holds a chunk until it has landed whole (the proxy sends a step once written,
    :func:`tree_alphas`), so each adds one chunk's time: ``bulk_s`` (the op's time alone) per chunk of a
    channel's share of the shard (``c / (channels x chunk)`` chunks; a shard below one chunk per channel
    crosses each hop whole; ``nc``: the kernel's channels)."""
    c, _, levels = nvls_tree_parts(hw, n, nbytes)
    share = min(1.0, nc * nvls_tree_chunk_bytes(hw, n, nbytes, nc) / c)
    return 2 * levels * share * bulk_s


def nvls_tree_bulk_s(hw: Hardware, n: int, nbytes: float, ex: Executor, res: dict | None = None) -> float:
    """The NVLS-Tree op's time alone, its latency and fill aside: its slowest resource."""
    _, net, _ = nvls_tree_parts(hw, n, nbytes)
    nv = Executor("cu", ex.cus or hw.collective.nvls_channels or None)
    port, hb, sw, cu = _nvls_node_s(hw, nbytes, hw.topology.gpus, nv, 2 * net)
    nic = net * net_wire(hw, Algo("ring", "simple")) / nic_Bps_per_gpu(hw)
    bus, cap = nvls_tree_channel_bound(hw, n, nbytes, nv.channels(hw))
    heads = bus / cap if cap else 0.0
    if res is not None:
        _add_parts(res, link=port, hbm=hb, switch=sw, cu=cu, nic=nic)
        if cap:
            _add_parts(res, tree_channels=heads)
    return max(port, hb, sw, cu, nic, heads)


def nvls_tree_channel_bound(hw: Hardware, n: int, nbytes: float, ctas: int) -> tuple[float, float]:
    """NCCL's per-channel maximum of NVLS-Tree (src/graph/tuning.cc ``perChMaxNVLSTreeBws``: Hopper 57.7 GB/s
    of bus bandwidth on 2 nodes and 45.5 beyond, Blackwell 96 and 80, per channel of the NVLS graph,
    ``collective.nccl.nvls_tree.channels``, one per head GPU of the node): the most the algorithm's channels
    move, which NCCL's tuning model takes for its bandwidth, as its per-channel LL128 maximum is the CU
    kernels' rate (``compute.cu_copy_Bps``). The kernel that moves it runs ``collective.nvls_channels``
    thread blocks by default; ``ctas`` of them (NCCL_MIN_CTAS raises them) move that many times more.
    Returns (the call's bus bytes per GPU, ``2 (n - 1) / n`` of the buffer; the bytes/s the channels give
    it); (0, 0) where the preset has no NCCL graphs."""
    t, col = hw.collective.nccl, hw.collective
    if t is None or t.nvls_tree is None or not col.nvls_channels:
        return 0.0, 0.0
    nodes = n // hw.topology.gpus
    per = nccl_tuning.PER_CH_MAX_NVLS_TREE_BW[nccl_tuning.ARCHS[t.arch]][0 if nodes <= 2 else 1]
    return nbytes * 2 * (n - 1) / n, t.nvls_tree.channels * per * 1e9 * ctas / col.nvls_channels


def nvls_tree_latency(hw: Hardware, n: int) -> float:
    """NCCL's NVLS-Tree latency (src/graph/tuning.cc): the node's NVLS latency (``nvls_latency_s``,
    hwLatencies[NVLINK][NVLSTree] = its NVLS's) + 2 x log2i(nodes) x ``nvls_tree_net_latency_s``."""
    col = hw.collective
    return col.nvls_latency_s + 2 * nvls_tree_parts(hw, n, 1.0)[2] * col.nvls_tree_net_latency_s


def nvls_tree_all_reduce(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ar", cats: tuple[str, str] = ("rs", "ag"), prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """NVLS-Tree all-reduce (:func:`nvls_tree_parts`), one pipelined op per GPU: the node's NVLS
    all-reduce's work (:func:`nvls_all_reduce` on the node's k GPUs: HBM S read and S written, port
    S + c each way, its node's switch reducing k x c) and its shard's tree traffic through its NIC share
    to the same GPU of another node (the NIC bytes each way, staged in HBM: written and read at each
    end), after its latency (:func:`nvls_tree_latency`) and its pipeline's fill at its rate alone
    (:func:`nvls_tree_fill_s`), at most NCCL's per-channel maximum (:func:`nvls_tree_channel_bound`). The
    loops NCCL's smaller NVLS-Tree chunks add are not charged."""
    ex = ex or Executor()
    hw, n = b.hw, b.n
    k = hw.topology.gpus
    S = nbytes
    c, net, _ = nvls_tree_parts(hw, n, S)
    col = hw.collective
    nv = Executor("cu", ex.cus or col.nvls_channels or None, ex.name)
    nwire = net_wire(hw, Algo("ring", "simple"))
    bus, cap = nvls_tree_channel_bound(hw, n, S, nv.channels(hw))
    delay = (
        nvls_tree_latency(hw, n)
        + (hw.compute.kernel_launch_s if launch else 0.0)
        + nvls_tree_fill_s(hw, n, S, nvls_tree_bulk_s(hw, n, S, ex), nv.channels(hw))
    )
    switches: dict[int, int] = {}
    for g in b.gpus:
        node = (g % n) // k
        if node not in switches:  # a node's switch: its materialised GPUs' share of it
            held = sum(1 for h in b.gpus if (h % n) // k == node)
            switches[node] = b._resource(f"nvls:switch:{node}", col.nvls_reduce_Bps * held / k, "switch", 0)
        work = _nvls_node_work(b, g, S, k, switches[node])  # and its shard staged for the NICs, through them:
        work += [(b.hbm(g), 2 * net), (b.hbm_w(g), 2 * net)]
        work += [(r, net * nwire) for r in b.nic_path(g, (g + k) % n)]
        work += nv.cu_work(b, g, 2 * c)
        if cap:  # NCCL's per-channel maximum (nvls_tree_channel_bound): the node's heads, per GPU
            h = b.canon(g)
            work.append((b._resource(f"nvls-tree:channels:{h}", cap, "channels", h), bus))
        b.add(
            g, f"{prefix}.nvls-tree", kind="nvls", cat=cats[0], work=work, delay_s=delay,
            deps=list(start(g)), prio=prio, window=nv.window(hw),
            traffic={f"{cats[0]}_read": S + 2 * net, f"{cats[1]}_write": S + 2 * net, "link": S + c + net},
        )  # fmt: skip
    return {g: [(g, f"{prefix}.nvls-tree")] for g in b.gpus}


# NCCL's send/recv (src/enqueue.cc, scheduleP2pTasksToPlan, v2.18-2.27): a send is split over the
# channels of its peer in slices of at least 64 KiB; the channels per peer (collective.p2p_channels / N)
# double while a slice would exceed 16 MiB; within a channel, a step of collective.p2p_chunk_bytes is
# posted to the receiver once it has fully landed, and the receiver's warps (9 of a block's 20:
# src/device/sendrecv.h) copy it out, so the last step's copy follows the last arrival.
P2P_MIN_SLICE = 64 << 10
P2P_MAX_SLICE = 16 << 20
P2P_RECV_SHARE = 9 / 20


def p2p_connections(hw: Hardware, n: int, peer_bytes: float, ex: Executor) -> tuple[int, float, float]:
    """A CU kernel's send/recv of ``peer_bytes`` to each of ``n - 1`` peers: (channels per peer, the
    per-peer rate those connections sustain in B/s, the receiver's copy of its last step in s). (0, 0, 0)
    where the preset gives no per-connection rate or the copy engines move the data."""
    col = hw.collective
    if ex.kind != "cu" or not col.p2p_channels or not col.p2p_connection_Bps or peer_bytes <= 0:
        return 0, 0.0, 0.0
    p = col.p2p_channels
    cpp = max(1, p // n)
    while peer_bytes / cpp > P2P_MAX_SLICE and cpp < p:
        cpp *= 2
    cpp = max(1, min(cpp, int(peer_bytes // P2P_MIN_SLICE)))
    last = min(col.p2p_chunk_bytes, peer_bytes / cpp)
    drain = last / (hw.compute.cu_copy_Bps / 2 * P2P_RECV_SHARE)
    # every channel carries its rate of remote payload per connection it serves: the N - 1 peers share
    # the P channels x (cpp N / P connections per channel), i.e. cpp N connections; the 4- and 8-GPU H100
    # runs move the same bytes/s, so the channels of the local copy take nothing from the remote rate
    return cpp, cpp * n * col.p2p_connection_Bps / (n - 1), drain


def all_to_all(
    b: ScheduleBuilder, matrix: list[list[float]], *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "a2a", cat: str = "a2a", prio: int = 0, launch: bool = True, algo: str | Algo = "auto",
) -> dict[int, list[Ref]]:  # fmt: skip
    """All-to-all: GPU g sends ``matrix[g][h]`` bytes to GPU h (direct paths; mesh or switch). A CU
    kernel runs it as grouped send/recv: the receiver copies each message out of its buffer."""
    ex = ex or Executor()
    n = b.n
    if b.hw.topology.kind == "ring":
        raise ScheduleError("topology: all-to-all is modelled on mesh and switch topologies only")
    if len(matrix) != n or any(len(row) != n for row in matrix):
        raise ScheduleError(f"all-to-all: traffic matrix must be {n}x{n}")
    if b.symmetric:
        for g in range(n):
            for h in range(n):
                if abs(matrix[g][h] - matrix[0][(h - g) % n]) > 1e-9 * max(1.0, matrix[0][(h - g) % n]):
                    raise ScheduleError("all-to-all: uneven traffic needs the all-GPU mode (symmetric=False)")
    peer = max((matrix[0][h] for h in range(1, n)), default=0.0)
    a = algo if isinstance(algo, Algo) else parse_algo("all_to_all", algo, b.hw, n)
    a = a if a is not None else choose("all_to_all", peer * (n - 1), b.hw, n, ex)
    b.meta.setdefault("algos", {})[prefix] = str(a)
    hw = b.hw
    delay = (
        p2p_step_latency(hw, a, ex, n)
        + base_latency(hw, a, ex)
        + (hw.compute.kernel_launch_s if launch else 0.0)
    )
    for g in b.gpus:
        row = matrix[g]
        send_to_peers(
            b, g, lambda off, row=row, g=g: row[(g + off) % n], start=start, ex=ex, prefix=prefix, cat=cat,
            prio=prio, delay=delay, algo=a, recv_copy=ex.kind == "cu", local=row[g % n],
            p2p=lambda nb: p2p_connections(hw, n, nb, ex)[1:],
        )  # fmt: skip
    return {g: received_from_peers(b, g, prefix) + _own_sends(b, g, prefix) for g in b.gpus}


def _own_sends(b: ScheduleBuilder, g: int, prefix: str) -> list[Ref]:
    """g's own sends (they carry its local copy)."""
    return [(g, f"{prefix}.send{off}") for off in range(1, b.n)]


# ---- closed forms ------------------------------------------------------------------------------------
def _hbm_s(hw: Hardware, reads: float, writes: float) -> float:
    """Time of ``reads`` + ``writes`` bytes alone on one GPU's HBM (read/write turnaround included)."""
    tot = reads + writes
    if tot <= 0:
        return 0.0
    return tot / (hw.hbm.effective_Bps * hbm_timing(hw).eta(writes / tot))


def _cu_s(hw: Hardware, ex: Executor, mem: float, moved: float = 0.0, reduce: bool = False) -> float:
    if ex.kind == "dma" and not reduce:
        return moved / (hw.dma.engines * hw.dma.bandwidth_Bps)
    return mem / (Executor("cu", ex.cus, ex.name).channels(hw) * hw.compute.cu_copy_Bps)


def step_time(
    hw: Hardware,
    n: int,
    st: Step,
    c: float,
    algo: Algo,
    ex: Executor,
    recv_reduce: bool = False,
    parts: dict[str, float] | None = None,
    hops: list[Hop] | None = None,
) -> float:
    """Duration (s, delay excluded) of one ring step on an idle node: its slowest resource (every GPU
    runs the same step at once, so each resource carries one GPU's share). ``parts``: each resource's
    seconds are added to it under its name (``link``, ``hbm``, ``cu``). ``hops``: :func:`ring_hops`
    (given by a caller that times many steps)."""
    hops = ring_hops(hw, n) if hops is None else hops
    sent = st.send * c
    wire, bw = _wire(hw, algo), hw.link.bandwidth_Bps
    if any(h.net for h in hops):
        nwire, nbw = net_wire(hw, algo), nic_Bps_per_gpu(hw)
    # each hop's share on its resource: a switch port or a link, or (across nodes) the GPU's NIC share
    link = max(
        sent * h.num / h.den * nwire / nbw if h.net else sent * h.num / h.den * wire / bw for h in hops
    )
    cap = _ring_busbw_cap(hw, algo, ex, n)
    if cap and sent:
        link = max(link, sent / cap)
    reads, writes = st.rd * c, st.wl * c + sent
    if ex.kind == "dma":
        eng = _cu_s(hw, ex, 0.0, sent + st.wl * c)
        red = (st.mem * c if st.rd > 1 else 0.0) + (3 * sent if recv_reduce else 0.0)
        cu = max(eng, _cu_s(hw, ex, red, reduce=True))
    else:
        cu = _cu_s(hw, ex, (st.mem + (3 * st.send if recv_reduce else 0.0)) * c)
    if recv_reduce:
        reads, writes = reads + 2 * sent, writes + sent
    hbm = _hbm_s(hw, reads, writes)
    if parts is not None:
        _add_parts(parts, link=link, hbm=hbm, cu=cu)
    return max(link, hbm, cu)


def _add_parts(parts: dict[str, float], **secs: float) -> None:
    for k, v in secs.items():
        parts[k] = parts.get(k, 0.0) + v


def idle_time(op: str, algo: Algo, nbytes: float, hw: Hardware, n: int, ex: Executor | None = None,
              launch: bool = True, terms: dict[str, Any] | None = None) -> float:  # fmt: skip
    """Closed form (s) of ``op`` on an idle node: the simulated time of the collective alone, exact for
    every algorithm here while windows do not limit (``compute.cu_inflight_bytes``/``dma.inflight_bytes``
    0 or ``hbm.latency_s`` 0). ``nbytes`` as in :func:`simulate_collective` (all_to_all: the bytes one
    GPU sends to its N-1 peers). ``terms``, when given, receives the time's parts (launch, base latency, hops, transfer, and
    each resource's seconds; ``t3 validate --explain`` prints them)."""
    ex = (ex or Executor()).for_call(hw, algo, nbytes, n)
    launch_s = hw.compute.kernel_launch_s if launch else 0.0
    base = base_latency(hw, algo, ex)
    t0 = launch_s + base
    if algo.name in ("ring", "ring-sf"):
        alpha = ring_step_latency(hw, algo, ex, n)
    elif algo.name == "tree":
        alpha = tree_step_latency(hw, algo, n)  # the hops (reported); the pipeline's fill below
    else:
        alpha = step_latency(hw, algo, ex)
    c = nbytes / n
    res: dict[str, float] = {}  # each resource's seconds over the steps (the slowest one sets a step)
    hops = 1
    kernel = ex  # the executor whose CUs run it (reported in ``terms``)
    if algo.name in ("ring", "ring-sf", "tree"):
        if algo.name == "ring-sf":
            steps, tail, rr = [SEND] * (n - 1), None, True
        elif algo.name == "tree":
            if op != "all_reduce":
                raise ConfigError(f"algo: no closed form for '{algo}' ({op})")
            (steps, tail), rr, c = tree_program(), False, nbytes
        else:
            steps, tail = ring_program(op, n)
            rr = False
        part = res if terms is not None else None
        hops_of = ring_hops(hw, n)
        alphas = tree_alphas(hw, algo, ex, nbytes, n) if algo.name == "tree" else [alpha] * len(steps)
        proxies = proxy_steps_s(hw, algo, ex, n, nbytes, alphas)
        t = t0 + sum(
            a + max(step_time(hw, n, st, c, algo, ex, rr, part, hops_of), p)
            for a, p, st in zip(alphas, proxies, steps, strict=True)
        )
        if part is not None and any(proxies):
            _add_parts(res, proxy=sum(proxies))
        hops = len(steps)
        if algo.name == "tree":  # each direction crosses the chain of a node and the trees' levels
            hops = 2 * ((hw.topology.gpus - 1) + tree_levels(hw, n))
        if algo.name == "tree" and terms is not None:
            _add_parts(res, pipeline_fill=sum(alphas) - len(steps) * alpha)
        if tail is not None:
            red = tail.rd > 1
            hb = _hbm_s(hw, tail.rd * c, tail.wl * c)
            cu = _cu_s(hw, ex, tail.mem * c, tail.mem * c / 2, reduce=red)
            t += max(hb, cu)
            if terms is not None:
                _add_parts(res, hbm=hb, cu=cu)
    elif algo.name == "direct":
        dx = kernel = _direct_ex(hw, ex)
        if op == "reduce_scatter":
            t = t0 + alpha + _direct_rs_s(hw, n, c, algo, dx)
        elif op == "all_gather":
            t = t0 + alpha + _direct_gather_s(hw, n, c, algo, dx)
        elif op == "all_reduce":
            t = t0 + 2 * alpha + _direct_rs_s(hw, n, c, algo, dx) + _direct_gather_s(hw, n, c, algo, dx)
            hops = 2
        elif op == "all_to_all":
            m = nbytes / (n - 1)
            _, conn, drain = p2p_connections(hw, n, m, ex)
            alpha = p2p_step_latency(hw, algo, ex, n)
            remote = n - hw.topology.gpus if spans_nodes(hw, n) else 0  # peers on other nodes
            nic = remote * m * net_wire(hw, algo) / nic_Bps_per_gpu(hw) if remote else 0.0
            send = _direct_send_s(hw, n, m, algo, ex, recv_copy=ex.kind == "cu", link_peers=n - 1 - remote)
            t = t0 + alpha + drain + max(send, nic, m / conn if conn else 0.0)
            if terms is not None and conn:
                _add_parts(res, connections=m / conn, drain=drain)
            if terms is not None and remote:
                _add_parts(res, nic=nic)
        else:
            raise ConfigError(f"algo: no closed form for '{algo}' ({op})")
    elif algo.name == "nvls":
        S = nbytes
        col = hw.collective
        nv = kernel = Executor("cu", ex.cus or col.nvls_channels or None)
        port, hb, sw, cu = _nvls_node_s(hw, S, n, nv)
        loops = nvls_extra_loops_s(hw, n, S)
        t = hw.compute.kernel_launch_s * launch + col.nvls_latency_s + loops + max(port, hb, sw, cu)
        base, hops, alpha = col.nvls_latency_s, 0, 0.0  # (whatever the executor: the switch's latency)
        if terms is not None:
            _add_parts(res, link=port, hbm=hb, switch=sw, cu=cu)
            if loops:
                _add_parts(res, chunk_loops=loops)
    elif algo.name == "nvls-tree":
        kernel = Executor("cu", ex.cus or hw.collective.nvls_channels or None)
        bulk = nvls_tree_bulk_s(hw, n, nbytes, ex, res if terms is not None else None)
        fill = nvls_tree_fill_s(hw, n, nbytes, bulk, kernel.channels(hw))
        base, hops, alpha = nvls_tree_latency(hw, n), 0, 0.0
        t = launch_s + base + fill + bulk
        if terms is not None:
            _add_parts(res, pipeline_fill=fill)
    else:
        raise ConfigError(f"algo: no closed form for '{algo}' ({op})")
    if terms is not None:
        hop_lat = 2 * alpha if algo.name == "tree" else hops * alpha  # (the tree: alpha per direction)
        terms.update(
            launch_s=launch_s, base_latency_s=base, hops=hops, hop_latency_s=hop_lat,
            transfer_s=t - launch_s - base - hop_lat, resources_s=res, total_s=t,
            channels=kernel.channels(hw) if kernel.kind == "cu" else 0, channel_share=ex.share,
        )  # fmt: skip
    return t


def _direct_send_s(hw, n, m, algo, ex, recv_copy=False, reduce=0.0, link_peers=None) -> float:
    """N-1 concurrent sends of ``m`` bytes per GPU (each GPU receives as many); ``reduce``: the owner's
    N-input reduction of blocks of ``reduce`` bytes rides on the arrivals. ``link_peers``: how many of
    the N-1 go over the node's fabric (the others cross the network: their NIC time is the caller's)."""
    k = n - 1
    wire = _wire(hw, algo)
    lk = k if link_peers is None else link_peers
    link = (lk if hw.topology.kind == "switch" else min(lk, 1)) * m * wire / hw.link.bandwidth_Bps
    reads, writes = k * m, k * m
    mem, moved = 2 * k * m, k * m
    if recv_copy:
        reads, writes, mem, moved = 2 * reads, 2 * writes, 2 * mem, 2 * moved
    reads, writes, mem = reads + n * reduce, writes + reduce, mem + (n + 1) * reduce
    return max(link, _hbm_s(hw, reads, writes), _cu_s(hw, ex, mem, moved))


def _direct_rs_s(hw, n, c, algo, ex) -> float:
    """Direct RS after its delay: a CU kernel reduces on arrival; with DMA the reduction follows."""
    if ex.kind == "cu":
        return _direct_send_s(hw, n, c, algo, ex, reduce=c)
    return _direct_send_s(hw, n, c, algo, ex) + max(
        _hbm_s(hw, n * c, c), _cu_s(hw, ex, (n + 1) * c, reduce=True)
    )


def _direct_gather_s(hw, n, c, algo, ex) -> float:
    """N-1 sends of c carrying the local copy of c."""
    k = n - 1
    wire = _wire(hw, algo)
    link = (k if hw.topology.kind == "switch" else 1) * c * wire / hw.link.bandwidth_Bps
    return max(link, _hbm_s(hw, n * c, n * c), _cu_s(hw, ex, 2 * n * c, n * c))


# ---- one collective alone ------------------------------------------------------------------------------
def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n otherwise."""
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def simulate_collective(
    op: str, nbytes: float, gpus: int, hw: Hardware, algo: str = "auto", *, symmetric: bool = True,
    executor: str = "cu",
) -> dict:  # fmt: skip
    """Simulate one collective alone on ``gpus`` GPUs of ``hw``.

    ``nbytes`` follows nccl-tests: all_reduce = the buffer, reduce_scatter = the full input, all_gather
    = the full output, all_to_all = one GPU's send buffer (N blocks, one per rank; its own block stays
    in place). Returns ``time_s`` (kernel launch included), ``device_s`` (without the launch),
    ``algo`` (e.g. ``"ring/simple"``), ``algbw_Bps`` = nbytes / time, ``busbw_Bps`` = algbw x 2(n-1)/n
    (all-reduce) or x (n-1)/n, ``predicted_s`` (the closed form the choice used), ``terms`` (its parts:
    :func:`idle_time`) and ``events``."""
    from t3.sim.engine import Engine

    if op not in OPS:
        raise ConfigError(f"op: unknown collective '{op}' (valid: {', '.join(OPS)})")
    if (
        isinstance(nbytes, bool)
        or not isinstance(nbytes, int | float)
        or not math.isfinite(nbytes)
        or nbytes <= 0
    ):
        raise ConfigError(f"nbytes: must be a finite number > 0, got {nbytes!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 2:
        raise ConfigError(f"gpus: must be an integer >= 2, got {gpus!r}")
    from t3.config.hardware import tp_refusal

    if why := tp_refusal(hw, gpus, "gpus"):  # the rule t3 run's TP follows (whole nodes on a ring)
        raise ConfigError(why)
    if executor not in ("cu", "dma"):
        raise ConfigError(f"executor: unknown executor '{executor}' (cu, dma)")
    if op == "all_to_all" and hw.topology.kind == "ring":
        raise ConfigError(
            "op: all_to_all is modelled on mesh and switch topologies only (topology.kind = ring)"
        )
    ex = Executor(executor)
    pred_bytes = nbytes * (gpus - 1) / gpus if op == "all_to_all" else nbytes
    a = parse_algo(op, algo, hw, gpus)
    if a is None:
        a = choose(op, pred_bytes, hw, gpus, ex)
    b = ScheduleBuilder(f"collective:{op}", hw, gpus, symmetric=symmetric)
    if op == "reduce_scatter":
        reduce_scatter(b, nbytes, ex=ex, algo=a)
    elif op == "all_gather":
        all_gather(b, nbytes, ex=ex, algo=a)
    elif op == "all_reduce":
        all_reduce(b, nbytes, ex=ex, algo=a)
    else:
        m = nbytes / gpus
        all_to_all(b, [[0.0 if g == h else m for h in range(gpus)] for g in range(gpus)], ex=ex, algo=a)
    res = Engine().run(b.build())
    t = res.makespan
    terms: dict[str, Any] = {}
    pred = idle_time(op, a, pred_bytes, hw, gpus, ex, terms=terms)
    algbw = nbytes / t
    return {
        "op": op,
        "nbytes": float(nbytes),
        "gpus": gpus,
        "hardware": hw.name,
        "algo": str(a),
        "time_s": t,
        "device_s": t - hw.compute.kernel_launch_s,
        "algbw_Bps": algbw,
        "busbw_Bps": algbw * busbw_factor(op, gpus),
        "predicted_s": pred,
        "terms": terms,
        "traffic_bytes": res.schedule.traffic_per_gpu(),
        "events": res.events,
    }
