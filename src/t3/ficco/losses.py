"""Decomposition and contention losses, measured by the engine (no fudge factors).

For a schedule S of operator F (times are engine makespans):

- ``T(S)``: S simulated (full mode: GEMM pieces and transfers share CUs and HBM).
- ``T_ideal(S)``: the same DAG with nothing shared: transfers and reductions get a private HBM and
  CU pool, the GEMM pieces all CUs (``ideal`` mode). It is the ideal overlap of S's own pieces. For
  a CU-kernel schedule it is the better of that and the same isolated run with the GEMM pieces
  planned as in ``T(S)`` (for the CUs the kernel leaves; ``ideal-own`` mode): GEMM plans are chosen
  kernel by kernel (each as if alone), and with two streams the plans for fewer CUs sometimes fit
  side by side better, which used to make ``C(S)`` negative.
- **contention loss** ``C(S) = T(S) - T_ideal(S)``: time lost to sharing CUs (the CU kernel's
  partition, reductions) and HBM between compute and communication. Zero for a bulk schedule
  (nothing runs concurrently) and whenever the shared resources never saturate.
- **decomposition loss** ``D(S) = D_gemm + D_comm``:
  ``D_gemm = sum_i T_alone(piece_i) - T_alone(whole GEMM)``, each GEMM alone on one GPU with all CUs,
  one kernel launch each (wave quantization, partial tiles, lost L2 reuse, K-split accumulation
  reads, launches); ``D_comm = ovh(S) - ovh(bulk)`` with ``ovh(X) = T_comm(X) - T_comm(X | no
  per-command and launch overheads)``, ``T_comm`` the communication alone (``comm`` mode), i.e. the
  extra DMA command and kernel-launch time S puts on its communication critical path (measured on
  the unskewed operator for skewed MoE: same commands). Zero for bulk.

Percentages are of ``T(S)``. For skewed MoE (all GPUs simulated) piece times are those of the
hottest expert GPU (GPU 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from t3.config.hardware import Hardware
from t3.ficco.space import Axes, FiccoOperator, check_fits, enumerate_space
from t3.schedules.ficco import (
    ficco_schedule,
    fused_gemm_alone_schedule,
    gemm_alone_schedule,
    plan_pieces,
    shape_of,
)
from t3.sim.engine import Engine
from t3.workload.sublayers import GemmShape

ZERO_OVERHEADS = {"dma.command_overhead_s": 0.0, "compute.kernel_launch_s": 0.0}
# printed wherever losses are shown (t3 ficco explore, the reproduction's report)
NEGATIVE_LOSS = (
    "a loss is a difference of simulated times and can be negative: decomposition when the pieces cost "
    "less than the whole (column pieces re-read B fewer times under the L2 reuse model, or fewer launches "
    "and DMA commands than bulk on the communication's critical path); contention, rarely, when GEMM "
    "kernels run side by side and slowing one lets another piece take the CUs first (docs/ficco.md)"
)


@dataclass
class Evaluation:
    """A schedule's simulated time and, where they were computed (``explore(losses=...)``), its
    contention-free time and decomposition losses (None otherwise)."""

    name: str
    axes: Axes
    time_s: float
    ideal_s: float | None = None
    decomposition_gemm_s: float | None = None
    decomposition_comm_s: float | None = None

    @property
    def contention_s(self) -> float | None:
        return None if self.ideal_s is None else self.time_s - self.ideal_s

    @property
    def decomposition_s(self) -> float | None:
        if self.decomposition_gemm_s is None or self.decomposition_comm_s is None:
            return None
        return self.decomposition_gemm_s + self.decomposition_comm_s

    @property
    def complete(self) -> bool:
        return self.ideal_s is not None and self.decomposition_s is not None

    def losses(self) -> dict[str, float] | None:
        """Decomposition and contention losses (s, % of the time); None unless all were computed."""
        if not self.complete:
            return None
        t = self.time_s
        return {
            "decomposition_s": self.decomposition_s,
            "contention_s": self.contention_s,
            "decomposition_pct": 100.0 * self.decomposition_s / t,
            "contention_pct": 100.0 * self.contention_s / t,
            "decomposition_gemm_s": self.decomposition_gemm_s,
            "decomposition_comm_s": self.decomposition_comm_s,
        }


@dataclass
class Exploration:
    fop: FiccoOperator
    hw_name: str
    evaluations: list[Evaluation]
    skipped: list[tuple[str, str]]
    gemm_alone_s: float
    comm_alone_s: float
    extra: dict = field(default_factory=dict)

    def by_name(self) -> dict[str, Evaluation]:
        return {e.name: e for e in self.evaluations}

    def best(self, comm: str | None = None) -> Evaluation:
        ev = [e for e in self.evaluations if comm is None or e.axes.comm == comm]
        return min(ev, key=lambda e: (e.time_s, e.name))

    def bulk_s(self) -> float:
        return self.best("bulk").time_s

    def shard_s(self) -> float | None:
        ev = [e for e in self.evaluations if e.axes.comm == "shard"]
        return min(e.time_s for e in ev) if ev else None

    def to_json(self) -> dict:
        bulk, shard = self.bulk_s(), self.shard_s()
        rows = []
        for e in self.evaluations:
            rows.append({
                "name": e.name, "axes": e.axes.as_dict(), "time_s": e.time_s, "ideal_s": e.ideal_s,
                "speedup_vs_bulk": bulk / e.time_s,
                "speedup_vs_shard": (shard / e.time_s) if shard else None,
                "losses": e.losses(),
            })  # fmt: skip
        best = self.best()
        return {
            "operator": {
                "op": self.fop.op, "m": self.fop.m, "n": self.fop.n, "k": self.fop.k, "gpus": self.fop.gpus,
                "dtype": self.fop.dtype, "skew": self.fop.skew, "label": self.fop.label,
            },
            "hardware": self.hw_name,
            "gemm_alone_s": self.gemm_alone_s,
            "comm_alone_s": self.comm_alone_s,
            "ideal_overlap_bound_s": max(self.gemm_alone_s, self.comm_alone_s),
            "bulk_s": bulk,
            "best_shard_s": shard,
            "schedules": rows,
            "skipped": [{"name": n, "reason": r} for n, r in self.skipped],
            "best": best.name,
            "best_time_s": best.time_s,
        }  # fmt: skip


class LossModel:
    """Simulates schedules of one operator on one hardware and accounts their losses (cached)."""

    def __init__(self, fop: FiccoOperator, hw: Hardware):
        self.fop, self.hw = fop, hw
        self.hw0 = hw.with_overrides(ZERO_OVERHEADS)
        self._alone: dict[tuple, float] = {}
        self._ovh: dict[str, float] = {}

    @staticmethod
    def makespan(sched) -> float:
        return Engine().run(sched).makespan

    def alone(self, shapes: tuple[tuple[GemmShape, bool], ...]) -> float:
        if shapes not in self._alone:
            self._alone[shapes] = self.makespan(gemm_alone_schedule(list(shapes), self.hw, self.fop.gpus))
        return self._alone[shapes]

    def whole_gemm_s(self) -> float:
        return self.alone(
            tuple(shape_of(self.fop, Axes("bulk", 1), plan_pieces(self.fop, self.hw, Axes("bulk", 1))[0], 0))
        )

    def decomposition_gemm_s(self, ax: Axes) -> float:
        if ax.one_kernel:  # one kernel over the chunks: only chunk-edge tiles and lost L2 reuse remain
            return self.makespan(fused_gemm_alone_schedule(self.fop, self.hw, ax)) - self.whole_gemm_s()
        pieces = plan_pieces(self.fop, self.hw, ax)
        total = sum(self.alone(tuple(shape_of(self.fop, ax, p, 0))) for p in pieces)
        return total - self.whole_gemm_s()

    def comm_s(self, ax: Axes, zero: bool = False, fop: FiccoOperator | None = None) -> float:
        return self.makespan(ficco_schedule(fop or self.fop, self.hw0 if zero else self.hw, ax, mode="comm"))

    def overhead_s(self, ax: Axes) -> float:
        if ax.name not in self._ovh:
            # overheads are counted on the unskewed operator (same commands and launches; symmetric,
            # so one GPU is simulated instead of all)
            f = replace(self.fop, skew=0.0)
            self._ovh[ax.name] = self.comm_s(ax, fop=f) - self.comm_s(ax, zero=True, fop=f)
        return self._ovh[ax.name]

    def time_s(self, ax: Axes) -> float:
        """``T(S)``: the schedule simulated with the GPU shared."""
        return self.makespan(ficco_schedule(self.fop, self.hw, ax, "full"))

    def ideal_s(self, ax: Axes, t: float) -> float:
        """``T_ideal(S)`` (``t``: ``T(S)``, the answer for a bulk schedule: nothing runs concurrently)."""
        if ax.comm == "bulk":
            return t
        ti = self.makespan(ficco_schedule(self.fop, self.hw, ax, "ideal"))
        if ax.executor == "cu":
            # the all-CU plans are chosen kernel by kernel; the plans for the CUs the kernel leaves can
            # run better side by side (two streams), so the ideal is the better of the two plan sets
            ti = min(ti, self.makespan(ficco_schedule(self.fop, self.hw, ax, "ideal-own")))
        return ti

    def decomposition_parts_s(self, ax: Axes) -> tuple[float, float]:
        """``(D_gemm, D_comm)``."""
        dg = 0.0 if ax.g == 1 else self.decomposition_gemm_s(ax)
        dc = 0.0
        if ax.comm != "bulk":
            bulk = Axes(
                "bulk", 1, "M", "cu" if ax.executor == "ep" else ax.executor
            )  # ep replaces the library's
            dc = self.overhead_s(ax) - self.overhead_s(bulk)
        return dg, dc

    def evaluate(self, ax: Axes, losses: str = "all") -> Evaluation:
        """The schedule's evaluation: its time, with (``losses``) ``"all"`` its contention-free time and
        decomposition losses, ``"ideal"`` its contention-free time, ``"none"`` nothing more."""
        ev = Evaluation(ax.name, ax, self.time_s(ax))
        if losses in ("all", "ideal"):
            ev.ideal_s = self.ideal_s(ax, ev.time_s)
        if losses == "all":
            ev.decomposition_gemm_s, ev.decomposition_comm_s = self.decomposition_parts_s(ax)
        return ev

    def complete(self, ev: Evaluation) -> Evaluation:
        """Fill in whatever losses ``ev`` lacks."""
        if ev.ideal_s is None:
            ev.ideal_s = self.ideal_s(ev.axes, ev.time_s)
        if ev.decomposition_s is None:
            ev.decomposition_gemm_s, ev.decomposition_comm_s = self.decomposition_parts_s(ev.axes)
        return ev


LOSSES = ("all", "ideal", "best")


def explore(
    fop: FiccoOperator, hw: Hardware, schedules: list[Axes] | None = None,
    progress: Callable[[int, int], None] | None = None, losses: str = "all",
) -> Exploration:  # fmt: skip
    """Every legal schedule of ``fop`` on ``hw`` (or the given ones), simulated; ``progress(done,
    total)`` is called after each schedule. ``losses``: ``"all"`` accounts every schedule's losses,
    ``"ideal"`` every schedule's contention-free time only, ``"best"`` the losses of the fastest
    schedule of each communication kind (bulk, shard, ficco) only: the others, which cannot win, get
    their simulated time alone (a third to a fifth of the simulations)."""
    if losses not in LOSSES:
        raise ValueError(f"losses: must be one of {', '.join(LOSSES)}, got {losses!r}")
    check_fits(fop, hw)
    legal, skipped = enumerate_space(fop, hw)
    if schedules is not None:
        legal = schedules
    lm = LossModel(fop, hw)
    evs = []
    for ax in legal:
        evs.append(lm.evaluate(ax, "none" if losses == "best" else losses))
        if progress is not None:
            progress(len(evs), len(legal))
    if losses == "best":
        for comm in sorted({e.axes.comm for e in evs}):
            lm.complete(min((e for e in evs if e.axes.comm == comm), key=lambda e: (e.time_s, e.name)))
    comm_alone = min(lm.comm_s(Axes("bulk", 1, "M", ex)) for ex in ("cu", "dma"))
    return Exploration(fop, hw.name, evs, skipped, lm.whole_gemm_s(), comm_alone)
