"""Collective algorithms as schedule fragments: ring / direct reduce-scatter and all-gather, all-to-all.

Each function adds ops to a :class:`~t3.sim.schedule.ScheduleBuilder` for every materialised GPU and
returns, per GPU, the refs of the ops that finish the collective there. ``start(g)`` gives the refs a
GPU's first step waits for.

Cost model of one transfer of ``c`` bytes from GPU s to GPU d (all parts progress together, i.e.
the slices of a step are pipelined, so a step lasts ``latency + max`` of its parts):
- the link path s -> d carries ``c`` bytes (``latency_s`` once per step);
- s reads ``c`` bytes from its HBM; d writes ``c`` bytes into its HBM (the landing buffer);
- with the ``cu`` executor the bytes pass through the CUs of a communication kernel at
  ``cu_copy_Bps`` per CU (the kernel owns ``cus`` CUs: a partition resource, plus the GPU's CU pool);
  with the ``dma`` executor they pass through the GPU's DMA engines instead, and each command pays
  ``dma.command_overhead_s``.
A ring reduce-scatter step also *reduces* on the receiver: it reads the landed chunk and its local
chunk and writes the sum (2 reads + 1 write of ``c`` bytes through the kernel's CUs and HBM). So an
idle ring RS of a tensor of S bytes over N GPUs takes
``launch + (N-1) * (latency + max(c/B_link, HBM bytes/B_hbm, CU bytes/B_cu))`` with c = S/N.
"""

from __future__ import annotations

from collections.abc import Callable

from t3.errors import ScheduleError
from t3.sim.schedule import Ref, ScheduleBuilder

StartFn = Callable[[int], list[Ref]]


def _no_deps(g: int) -> list[Ref]:
    return []


class Executor:
    """Where the data movement of a collective runs: a CU kernel with ``cus`` CUs, or DMA engines."""

    def __init__(self, kind: str = "cu", cus: int | None = None, name: str = "comm"):
        if kind not in ("cu", "dma"):
            raise ScheduleError(f"executor: unknown executor '{kind}' (cu, dma)")
        self.kind, self.cus, self.name = kind, cus, name

    def work(self, b: ScheduleBuilder, gpu: int, nbytes: float) -> list[tuple[int, float]]:
        """Resource work for moving ``nbytes`` through this executor on ``gpu``."""
        if self.kind == "dma":
            return [(b.dma(gpu), nbytes)]
        cu_s = nbytes / b.hw.compute.cu_copy_Bps
        out = [(b.cu(gpu), cu_s)]
        cus = self.cus or b.hw.compute.cus
        if cus < b.hw.compute.cus:
            out.append((b.partition(gpu, self.name, cus), cu_s))
        return out

    def reduce_work(self, b: ScheduleBuilder, gpu: int, nbytes: float) -> list[tuple[int, float]]:
        """Reductions always run on CUs (DMA engines cannot add; NMC is modelled by T3 schedules)."""
        ex = self if self.kind == "cu" else Executor("cu", self.cus, self.name)
        return ex.work(b, gpu, nbytes)

    def delay(self, b: ScheduleBuilder) -> float:
        return b.hw.dma.command_overhead_s if self.kind == "dma" else 0.0

    def step_delay(self, b: ScheduleBuilder, launch: bool) -> float:
        """Fixed delay of one transfer step: link latency, DMA command overhead, and the kernel launch
        when this step starts the collective's kernel."""
        return b.hw.link.latency_s + self.delay(b) + (b.hw.compute.kernel_launch_s if launch else 0.0)


def transfer_work(
    b: ScheduleBuilder, src: int, dst: int, nbytes: float, ex: Executor
) -> list[tuple[int, float]]:
    work = [(r, nbytes) for r in b.path(src, dst)]
    work += [(b.hbm(src), nbytes), (b.hbm(dst), nbytes)]
    work += ex.work(b, src, nbytes)
    return work


def ring_step_deps(start: StartFn, g: int, j: int, prefix: str, both_ends: bool = True) -> list[Ref]:
    """Dependencies of step ``j`` of a ring on GPU g (g sends to g-1): step 0 waits for ``start`` of
    g, and of its receiver g-1 when the receiver's own data takes part (a reduction); step j waits for
    g's own step j-1 and for the data g received from g+1 in step j-1."""
    if j == 0:
        return list(start(g)) + (list(start(g - 1)) if both_ends else [])
    return [(g, f"{prefix}.{j - 1}"), (g + 1, f"{prefix}.{j - 1}")]


def send_to_peers(
    b: ScheduleBuilder, g: int, sizes: Callable[[int], float], *, start: StartFn, ex: Executor,
    prefix: str, cat: str, prio: int, launch: bool,
) -> None:  # fmt: skip
    """GPU g sends ``sizes(off)`` bytes to GPU g+off for every peer offset, all at once (direct paths)."""
    lat = ex.step_delay(b, launch)
    for off in range(1, b.n):
        nb = sizes(off)
        b.add(
            g, f"{prefix}.send{off}", kind="send", cat=cat, work=transfer_work(b, g, g + off, nb, ex),
            delay_s=lat, deps=start(g), traffic={f"{cat}_read": nb, f"{cat}_write": nb, "link": nb}, prio=prio,
        )  # fmt: skip


def received_from_peers(b: ScheduleBuilder, g: int, prefix: str) -> list[Ref]:
    """The sends of :func:`send_to_peers` that land on GPU g."""
    return [(g - off, f"{prefix}.send{off}") for off in range(1, b.n)]


def ring_reduce_scatter(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "rs", cat: str = "rs", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """Ring RS of an ``nbytes`` tensor (per GPU); GPU g sends to g-1. Returns the last step per GPU."""
    ex = ex or Executor()
    n = b.n
    c = nbytes / n
    for g in b.gpus:
        r = g - 1
        for j in range(n - 1):
            work = transfer_work(b, g, r, c, ex)
            work += [(b.hbm(r), 3 * c)] + ex.reduce_work(b, r, 3 * c)
            b.add(
                g, f"{prefix}.{j}", kind="rs-step", cat=cat, work=work,
                delay_s=ex.step_delay(b, launch and j == 0),
                deps=ring_step_deps(start, g, j, prefix),
                traffic={f"{cat}_read": 3 * c, f"{cat}_write": 2 * c, "link": c}, prio=prio,
            )  # fmt: skip
    return {g: [(g, f"{prefix}.{n - 2}")] for g in b.gpus}


def ring_all_gather(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ag", cat: str = "ag", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """Ring AG producing an ``nbytes`` tensor on every GPU from its 1/N chunk."""
    ex = ex or Executor()
    n = b.n
    c = nbytes / n
    for g in b.gpus:
        for j in range(n - 1):
            b.add(
                g, f"{prefix}.{j}", kind="ag-step", cat=cat, work=transfer_work(b, g, g - 1, c, ex),
                delay_s=ex.step_delay(b, launch and j == 0),
                deps=ring_step_deps(start, g, j, prefix, both_ends=False),
                traffic={f"{cat}_read": c, f"{cat}_write": c, "link": c}, prio=prio,
            )  # fmt: skip
    return {g: [(g, f"{prefix}.{n - 2}")] for g in b.gpus}


def direct_reduce_scatter(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "rs", cat: str = "rs", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """Direct RS (mesh / switch): every GPU sends each chunk straight to its owner, which then reduces
    the N-1 received chunks with its own (N reads + 1 write)."""
    ex = ex or Executor()
    n = b.n
    c = nbytes / n
    for g in b.gpus:
        send_to_peers(
            b, g, lambda off: c, start=start, ex=ex, prefix=prefix, cat=cat, prio=prio, launch=launch
        )
        b.add(
            g, f"{prefix}.reduce", kind="reduce", cat=cat,
            work=[(b.hbm(g), (n + 1) * c)] + ex.reduce_work(b, g, (n + 1) * c),
            deps=received_from_peers(b, g, prefix) + list(start(g)),
            traffic={f"{cat}_read": n * c, f"{cat}_write": c}, prio=prio,
        )  # fmt: skip
    return {g: [(g, f"{prefix}.reduce")] for g in b.gpus}


def direct_all_gather(
    b: ScheduleBuilder, nbytes: float, *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "ag", cat: str = "ag", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """Direct AG (mesh / switch): every GPU sends its chunk to all peers at once."""
    ex = ex or Executor()
    c = nbytes / b.n
    for g in b.gpus:
        send_to_peers(
            b, g, lambda off: c, start=start, ex=ex, prefix=prefix, cat=cat, prio=prio, launch=launch
        )
    return {g: received_from_peers(b, g, prefix) for g in b.gpus}


def all_to_all(
    b: ScheduleBuilder, matrix: list[list[float]], *, start: StartFn = _no_deps, ex: Executor | None = None,
    prefix: str = "a2a", cat: str = "a2a", prio: int = 0, launch: bool = True,
) -> dict[int, list[Ref]]:  # fmt: skip
    """All-to-all: GPU g sends ``matrix[g][h]`` bytes to GPU h (direct paths; mesh or switch)."""
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
    for g in b.gpus:
        row = matrix[g]
        send_to_peers(
            b, g, lambda off, row=row, g=g: row[(g + off) % n], start=start, ex=ex, prefix=prefix,
            cat=cat, prio=prio, launch=launch,
        )  # fmt: skip
    return {g: received_from_peers(b, g, prefix) for g in b.gpus}


def reduce_scatter(b: ScheduleBuilder, nbytes: float, **kw) -> dict[int, list[Ref]]:
    """The topology's RS: ring on a ring, direct on mesh and switch."""
    fn = ring_reduce_scatter if b.hw.topology.kind == "ring" else direct_reduce_scatter
    return fn(b, nbytes, **kw)


def all_gather(b: ScheduleBuilder, nbytes: float, **kw) -> dict[int, list[Ref]]:
    fn = ring_all_gather if b.hw.topology.kind == "ring" else direct_all_gather
    return fn(b, nbytes, **kw)
