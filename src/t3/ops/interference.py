"""A GEMM and a communication on the same GPU at the same time: how much each slows the other.

This is the engine's own answer, not a separate model: the GEMM's plan (:mod:`t3.ops.gemm`) and the
communication (a library collective of :mod:`t3.ops.collectives`, or one GPU's own traffic) are put in
one schedule with no dependency between them and simulated together, then each alone; the slowdown is
``time together / time alone - 1``. Every mechanism of the engine acts on it (shared CUs and the CUs a
communication kernel holds, HBM bandwidth, read/write turnaround and loaded latency, the copy engines).

The interferers (the measurement kit ``t3 measure`` produces the local ones on one GPU):

- a collective (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``) of ``nbytes``
  (nccl-tests sizes) on ``gpus`` GPUs, as the library runs it (algorithm chosen as ``api.collective``);
- ``sm_copy``: a copy kernel on ``cus`` CUs (0: every CU) moving ``nbytes`` (reads ``nbytes``, writes
  ``nbytes``);
- ``sm_reduce``: a reduction kernel ``c = a + b`` on ``cus`` CUs with ``nbytes`` of output (reads twice
  that);
- ``memcpy``: the driver's device-to-device copy of ``nbytes`` on one GPU (``cudaMemcpyAsync``, what
  ``tensor.copy_`` issues), which CUDA runs as a copy kernel on every SM, not on the copy engines: the same
  as ``sm_copy`` on every CU (on an H100 and an H200 ``t3 measure`` times the two alike, 180 / 184 us and
  128 / 132 us for 256 MiB, and either waits for a GEMM launched before it; CUDA's
  ``CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE`` exists to ask for the copy engines instead);
- ``ce_copy``: a device-to-device copy of ``nbytes`` on the copy (DMA) engines; ``ce_d2h`` / ``ce_h2d``:
  a copy to / from host memory (a DRAM read / write only), over the host link (``dma.host_link_Bps``).

Block dispatch (:meth:`ScheduleBuilder.kernel`, on a preset whose ``compute.dispatch`` is
``launch_order``; ``shared``: the fluid share of the CUs): the communication is launched first, as ``t3 measure``
queues it (its stream's launches before the GEMM's). The GEMM fills the CUs from its start to its end
(the cuBLAS kernels of the H100 and H200 are persistent, one block per SM looping over the tiles, whose
blocks retire only in the last round, ``measurements/*/kernel-facts.json``; the CUs a GEMM of fewer
tiles than CUs leaves idle are not offered to a later kernel: ``t3 measure`` shows its blocks packed
several to an SM there, a case not modelled) and a local kernel on every CU fills them for its whole
run (a library kernel of many short blocks); a kernel on ``cus`` blocks holds them and fills nothing.
A collective's kernels and the copy engines are not declared: they share the CUs as the fluid model
does.

Arrangements: ``background`` (the other kernel runs back to back for the whole of the victim's span,
as a measurement keeps it busy), ``held`` (one launch of the communication that holds its CUs for
longer than the GEMM, launched first, as a collective's kernel holds its channels: the engine's
background is exactly that, since its communication holds its CUs from the first repetition to the
last) and ``together`` (both launched once at the same moment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from t3.config.hardware import Hardware
from t3.errors import ConfigError, SimulationError
from t3.sim.schedule import Ref, ScheduleBuilder
from t3.workload.sublayers import GemmShape

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
LOCAL = ("sm_copy", "sm_reduce", "memcpy", "ce_copy", "ce_d2h", "ce_h2d")
ARRANGEMENTS = ("background", "together", "held")
# background runs: repetitions of the other kernel are added until they outlast the victim; at most this
# many (a communication this much shorter than the GEMM is better measured another way)
MAX_REPEATS = 4096


@dataclass(frozen=True)
class Comm:
    """One communication beside the GEMM (see the module's docstring)."""

    kind: str
    nbytes: float
    gpus: int = 1
    cus: int = 0
    algo: str = "auto"
    executor: str = "cu"  # a collective's: the library's CU kernels, or the copy engines ("dma")
    channels: int = 0  # a collective's channels (its kernels' CUs); 0: the preset's collective.channels

    def describe(self) -> str:
        if self.kind in COLLECTIVES:
            return f"{self.kind} {self.nbytes:.0f} B on {self.gpus} GPUs ({self.algo}, {self.executor})"
        on = f" on {self.cus} CUs" if self.cus else ""
        return f"{self.kind} {self.nbytes:.0f} B{on}"


def add_comm(b: ScheduleBuilder, comm: Comm, prefix: str, after: list[Ref], launch: bool = True) -> list[Ref]:
    """Add one instance of ``comm`` on GPU 0 (every GPU, symmetric) starting after ``after``; returns
    the refs that end it. ``launch``: a kernel of its own (block dispatch declared); False: the
    continuation of the kernel before it (one launch looping on, as ``held`` runs it)."""
    from t3.ops import collectives as co

    hw = b.hw
    if comm.kind in COLLECTIVES:
        start = (lambda g: list(after)) if after else co._no_deps
        ex = co.Executor(comm.executor, comm.channels or None)
        kw = dict(start=start, prefix=prefix, algo=comm.algo, ex=ex)
        if comm.kind == "all_reduce":
            ends = co.all_reduce(b, comm.nbytes, **kw)
        elif comm.kind == "reduce_scatter":
            ends = co.reduce_scatter(b, comm.nbytes, **kw)
        elif comm.kind == "all_gather":
            ends = co.all_gather(b, comm.nbytes, **kw)
        else:
            n = b.n
            m = comm.nbytes / n
            mat = [[0.0 if g == h else m for h in range(n)] for g in range(n)]
            ends = co.all_to_all(b, mat, **kw)
        return list(ends[0])
    s = comm.nbytes
    if comm.kind in ("ce_d2h", "ce_h2d"):
        ex = co.Executor("dma")
        g = b.canon(0)
        host = b._resource(f"host:{g}:{comm.kind[3:]}", hw.dma.host_link_Bps, "link", g)
        mem = (b.hbm(0), s) if comm.kind == "ce_d2h" else (b.hbm_w(0), s)
        rw = "a2a_read" if comm.kind == "ce_d2h" else "a2a_write"
        b.add(0, prefix, kind="comm", cat="a2a", work=[mem, (host, s), *ex.work(b, 0, 2 * s, s)],
              delay_s=hw.dma.command_overhead_s, deps=list(after), traffic={rw: s}, window=ex.window(hw))  # fmt: skip
        return [(0, prefix)]
    if comm.kind == "ce_copy":
        ex = co.Executor("dma")
        work = [(b.hbm(0), s), (b.hbm_w(0), s), *ex.work(b, 0, 2 * s, s)]
        b.add(0, prefix, kind="comm", cat="a2a", work=work, delay_s=hw.dma.command_overhead_s, deps=list(after),
              traffic={"a2a_read": s, "a2a_write": s}, window=ex.window(hw))  # fmt: skip
        return [(0, prefix)]
    reads, writes = (2 * s, s) if comm.kind == "sm_reduce" else (s, s)
    cus = 0 if comm.kind == "memcpy" else comm.cus
    add_stream_kernel(b, prefix, reads, writes, cus, after, cat="a2a")
    if launch and hw.compute.dispatch == "launch_order":
        b.kernel(0, prefix, fills=() if cus else (prefix,))
    return [(0, prefix)]


# bytes read and written per byte of a stream kernel's pass (t3 measure's memory streams)
STREAMS = {"read": (1.0, 0.0), "write": (0.0, 1.0), "copy": (0.5, 0.5), "triad": (2.0 / 3.0, 1.0 / 3.0)}


def add_stream_kernel(
    b: ScheduleBuilder, key: str, reads: float, writes: float, cus: int, after: list[Ref], cat: str = "a2a"
) -> None:
    """A memory-bound kernel on GPU 0 reading ``reads`` and writing ``writes`` bytes through ``cus`` CUs
    (0: every CU). On a given number of blocks it loops over its bytes on them and holds those CUs
    (an exclusive partition); on every CU it is a library kernel of many short blocks, sharing the CUs
    as they free up. Its loads and stores go through the CUs at ``compute.cu_copy_Bps`` each (a
    two-input reduction as :meth:`Executor.reduce_work`). On k blocks each keeps
    ``compute.stream_inflight_bytes`` of loads in flight where the preset gives it (t3 measure's kernels
    load a block of 32 KiB and store it before the next: bound by the memory's loaded latency, as a GEMM
    beside them raises it); otherwise, and on every CU, a communication kernel's window."""
    from t3.ops import collectives as co

    hw = b.hw
    ex = co.Executor("cu", cus=cus or hw.compute.cus, name=f"{key}.k", exclusive=bool(cus))
    work = []
    if reads:
        work.append((b.hbm(0), reads))
    if writes:
        work.append((b.hbm_w(0), writes))
    mem = reads + writes
    work += ex.reduce_work(b, 0, mem) if reads > writes > 0 else ex.cu_work(b, 0, mem)
    own = hw.compute.stream_inflight_bytes
    window = cus * own if cus and own else ex.window(hw)
    b.add(0, key, kind="comm", cat=cat, work=work, delay_s=hw.compute.kernel_launch_s, deps=list(after),
          traffic={f"{cat}_read": reads, f"{cat}_write": writes}, window=window)  # fmt: skip


def stream_bandwidth(hw: Hardware, stream: str, nbytes: float, cus: int = 0) -> dict[str, float]:
    """A memory stream kernel alone (:data:`STREAMS`: ``nbytes`` read + written in one pass) on the
    engine: its device time (the launch left out, as CUDA events around a long kernel measure it) and
    bytes per second."""
    from t3.sim.engine import Engine

    if stream not in STREAMS:
        raise ConfigError(f"stream: unknown stream '{stream}' ({', '.join(STREAMS)})")
    rd, wr = STREAMS[stream]
    b = ScheduleBuilder("stream", hw, hw.topology.gpus, symmetric=True)
    add_stream_kernel(b, "s", rd * nbytes, wr * nbytes, cus, [])
    t = Engine().run(b.build()).makespan - hw.compute.kernel_launch_s
    return {"time_s": t, "Bps": nbytes / t}


def _builder(hw: Hardware, comm: Comm) -> ScheduleBuilder:
    n = comm.gpus if comm.kind in COLLECTIVES else hw.topology.gpus
    return ScheduleBuilder("interference", hw, n, symmetric=True)


def _span(res, prefixes: tuple[str, ...]) -> float:
    """Time from 0 to the end of the last op whose key starts with one of ``prefixes``."""
    t = 0.0
    for op in res.schedule.ops:
        if str(op.key).startswith(prefixes):
            t = max(t, res.end[op.id])
    return t


def _run(
    hw: Hardware, shape: GemmShape, comm: Comm, gemms: int, comms: int, lead_s: float = 0.0,
    first: str = "comm", one_launch: bool = False,
) -> tuple[float, float, int]:  # fmt: skip
    """GEMMs run ``gemms`` times back to back and the communication ``comms`` times back to back, the
    two chains side by side from time 0 (0 repetitions: absent); ``first``: the chain launched first
    (``"comm"`` or ``"gemm"``), the other starting ``lead_s`` later; ``one_launch``: the communication's
    repetitions are one kernel looping on (``held``), not launches of their own. Returns (end of the
    GEMM chain, end of the communication chain, engine events)."""
    from t3.ops.gemm import add_gemm, declare_kernel, plan_gemm
    from t3.sim.engine import Engine

    b = _builder(hw, comm)
    plan = plan_gemm(shape, hw)

    def start(chain: str) -> list[Ref]:
        if lead_s <= 0 or first == chain:
            return []
        b.add(0, f"{chain}.lead", kind="lead", cat="gemm" if chain == "gemm" else "a2a", delay_s=lead_s)
        return [(0, f"{chain}.lead")]

    def comms_chain() -> None:
        after: list[Ref] = start("comm") if comms else []
        for i in range(comms):
            after = add_comm(b, comm, f"comm{i}", after, launch=not (one_launch and i))

    def gemms_chain() -> None:
        after: list[Ref] = start("gemm") if gemms else []
        for i in range(gemms):
            after = add_gemm(b, 0, plan, prefix=f"gemm{i}", deps=after)[-1:]
            declare_kernel(b, 0, plan, f"gemm{i}")

    # the chain launched first is added first (block dispatch, see the module's docstring)
    for chain in (comms_chain, gemms_chain) if first == "comm" else (gemms_chain, comms_chain):
        chain()
    res = Engine().run(b.build())
    return _span(res, ("gemm",)), _span(res, ("comm",)), res.events


def held_cus(hw: Hardware, comm: Comm) -> int:
    """CUs ``comm``'s kernel holds for its whole run (an exclusive partition): a copy or reduction on a
    given number of blocks, a collective's CU kernel where ``collective.exclusive_cus``; else 0."""
    from t3.ops import collectives as co

    if comm.kind in COLLECTIVES:
        ex = co.Executor(comm.executor, comm.channels or None)
        return ex.channels(hw) if ex.exclusive(hw) else 0
    return comm.cus if comm.kind in ("sm_copy", "sm_reduce") else 0


def _check_room(hw: Hardware, comm: Comm) -> None:
    """Refuse a held communication beside which the GEMM gets no CU: it would wait for the kernel's end,
    which a held kernel (outlasting the GEMM by construction) never reaches."""
    from t3.ops.gemm import cus_beside

    k = held_cus(hw, comm)
    if k and cus_beside(hw, k) < 1:
        m = hw.compute.cluster_ctas
        why = (
            f" in thread-block clusters of {m} (compute.cluster_ctas: a held CU takes its slot)"
            if m > 1
            else ""
        )
        raise SimulationError(
            f"cus: the {comm.kind} kernel holds {k} of the {hw.compute.cus} CUs, which leaves the GEMM none{why};"
            " it would wait for the kernel's end, which a held communication never reaches"
        )


def interference(
    shape: GemmShape, comm: Comm, hw: Hardware, arrangement: str = "background",
    lead_s: float = 0.0, first: str = "comm",
) -> dict[str, float]:  # fmt: skip
    """Times (s) of the GEMM and of the communication each alone and beside the other, and the
    slowdowns ``together / alone - 1`` of each (:data:`ARRANGEMENTS`; the inputs are checked by
    :func:`t3.api.interference`). With ``together``: ``first`` is launched first (``"comm"`` or
    ``"gemm"``; elsewhere the communication), the other ``lead_s`` later, and its time together includes
    the wait (a benchmark's sleep on its stream)."""
    if arrangement not in ARRANGEMENTS:
        raise ConfigError(f"arrangement: unknown arrangement '{arrangement}' ({', '.join(ARRANGEMENTS)})")
    if lead_s and arrangement != "together":
        raise ConfigError("lead: a lead is a delay after a launch together: arrangement = 'together'")
    if arrangement == "held":
        _check_room(hw, comm)
    gemm_alone, _, _ = _run(hw, shape, comm, 1, 0)
    _, comm_alone, _ = _run(hw, shape, comm, 0, 1)
    events = 0
    if arrangement == "together":
        g, c, events = _run(hw, shape, comm, 1, 1, lead_s, first)
        gemm_with, comm_with = g, c
    else:
        # the GEMM beside communication that outlasts it, and the communication beside GEMMs that do
        gemm_with = comm_with = math.nan
        for victim in ("gemm", "comm"):
            own, other = (gemm_alone, comm_alone) if victim == "gemm" else (comm_alone, gemm_alone)
            reps = max(2, math.ceil(2.0 * own / other) + 1)
            while True:
                if reps > MAX_REPEATS:
                    raise SimulationError(
                        f"nbytes: the {'communication' if victim == 'gemm' else 'GEMM'} is over "
                        f"{MAX_REPEATS} times shorter than the {victim}; a background of it is not modelled"
                    )
                args = (1, reps) if victim == "gemm" else (reps, 1)
                g, c, ev = _run(hw, shape, comm, *args, one_launch=arrangement == "held")
                events += ev
                mine, theirs = (g, c) if victim == "gemm" else (c, g)
                if theirs > mine * (1 + 1e-9):  # the background outlasted the victim
                    break
                reps *= 2
            if victim == "gemm":
                gemm_with = g
            else:
                comm_with = c
    out = {
        "gemm_alone_s": gemm_alone,
        "comm_alone_s": comm_alone,
        "gemm_together_s": gemm_with,
        "comm_together_s": comm_with,
        "gemm_slowdown": slowdown(gemm_with, gemm_alone),
        "comm_slowdown": slowdown(comm_with, comm_alone),
        "events": float(events),
    }
    if arrangement == "together":  # both launched at once, against one after the other
        pair = max(gemm_with, comm_with)
        out["pair_together_s"] = pair
        out["pair_slowdown"] = slowdown(pair, gemm_alone + comm_alone)
    return out


SAME = 1e-12  # relative: two simulated times closer than this are the same time (the runs' rounding)


def slowdown(together: float, alone: float) -> float:
    """``together / alone - 1``; 0 where the two differ by less than :data:`SAME` of ``alone``: the same
    work simulated in two schedules sums its steps in another order, and a slowdown of 1e-14 % is that
    rounding, not a prediction."""
    x = together / alone - 1.0
    return 0.0 if abs(x) < SAME else x
