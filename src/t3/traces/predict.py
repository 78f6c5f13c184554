"""The one place :mod:`t3.traces` calls the simulator: times of a pair's GEMM and collective alone,
sequential, ideal overlap, T3 / T3-MCA and FiCCO's best schedule on a hardware preset.

What each schedule means per pair kind (``m x n x k`` the GEMM, N the collective's group size):

- ``gemm-ar`` (GEMM -> all-reduce): the ``t3 run`` configurations on an operator of that GEMM
  shape: ``sequential`` (GEMM, reduce-scatter, all-gather), ``ideal-gemm-rs-overlap``, ``t3``,
  ``t3-mca``; FiCCO: the best ``gemm-rs`` schedule, then the all-gather alone.
- ``gemm-rs`` (GEMM -> reduce-scatter): the same configurations without their final all-gather
  (it runs after the reduce-scatter has finished, so its time is subtracted); FiCCO ``gemm-rs``.
- ``ag-gemm`` (all-gather -> GEMM): sequential = all-gather alone + GEMM alone, ideal = the larger;
  FiCCO ``ag-gemm``. ``ag-gemm-w`` (a gathered weight): FiCCO's ``ag-gemm`` by transposition
  (``m`` = weight rows). T3 does not apply (it overlaps a GEMM with the reduction of its output).
- ``a2a-gemm`` / ``gemm-a2a``: sequential and ideal from the all-to-all (uniform, 1/N of the buffer
  to every peer) and the GEMM alone. FiCCO's ``moe`` operation covers dispatch, both expert GEMMs
  and combine together, not one of them, so it is not used for a single pair.

A batched GEMM (``bmm``) is simulated as one GEMM of ``batch x m`` rows. T3 needs near-memory
compute: on a preset without it, T3 and T3-MCA run on the same preset with ``nmc.present = true``
and are labelled *hypothetical*. Anything the simulator cannot build (a group larger than the
preset's node, a precision it has no rate for, rows that do not split over the group) is "n/a" with
the simulator's reason; nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from t3.config.hardware import Hardware
from t3.errors import T3Error
from t3.sim.engine import DeadlockError

FAILURES = (T3Error, DeadlockError)  # the simulator's refusals: reported as n/a with their reason

SCHEDULES = ("sequential", "ideal", "t3", "t3-mca", "ficco")


@dataclass(frozen=True)
class Prediction:
    time_s: float | None
    schedule: str = ""  # the FiCCO schedule's name
    note: str = ""  # "hypothetical: ..." or the reason for n/a
    applies: bool = True  # False: the schedule does not apply to this kind of pair (not a failure)

    @property
    def ok(self) -> bool:
        return self.time_s is not None


@dataclass
class PairPrediction:
    gemm_s: float | None
    comm_s: float | None
    schedules: dict[str, Prediction] = field(default_factory=dict)
    note: str = ""


def _na(why: str, applies: bool = True) -> Prediction:
    return Prediction(None, note=f"n/a: {why}", applies=applies)


class Predictor:
    """Predictions on one hardware preset, cached per distinct (kind, shape, dtype, group)."""

    def __init__(self, hw: Hardware, ficco: str = "explore"):
        if ficco not in ("explore", "select", "none"):
            raise T3Error(f"ficco: expected explore, select or none, got '{ficco}'")
        self.hw, self.ficco = hw, ficco
        self.hw_t3 = hw if hw.nmc.present else hw.with_overrides({"nmc.present": True})
        self._cache: dict[tuple, PairPrediction] = {}

    # ---- the simulator's pieces ----------------------------------------------------------------------
    def _operator(self, m: int, n: int, k: int, dtype: str, gpus: int):
        from t3.workload.sublayers import GemmShape, Operator

        return Operator("trace", "pair", "forward", gpus, m, GemmShape(m, n, k, dtype))

    def _configs(self, op, names: tuple[str, ...], hw: Hardware) -> dict:
        from t3.schedules import CONFIGS, RunOptions

        return {c: CONFIGS[c].run(op, hw, RunOptions()) for c in names}

    def _gemm_s(self, m: int, n: int, k: int, dtype: str, gpus: int) -> float:
        from t3.schedules import RunOptions, simulate_schedule
        from t3.schedules.baselines import sequential_schedule

        op = self._operator(m, n, k, dtype, gpus)
        return simulate_schedule(
            sequential_schedule(op, self.hw, RunOptions(), parts="gemm"), RunOptions()
        ).time_s

    def _collective_s(self, kind: str, nbytes: float, gpus: int) -> float:
        from t3.ops.collectives import all_gather, all_to_all, reduce_scatter
        from t3.sim.engine import Engine
        from t3.sim.schedule import ScheduleBuilder

        b = ScheduleBuilder("collective", self.hw, gpus, symmetric=True)
        if kind == "all-gather":
            all_gather(b, nbytes)
        elif kind == "reduce-scatter":
            reduce_scatter(b, nbytes)
        else:  # all-to-all: every GPU sends 1/N of its buffer to each peer
            share = nbytes / gpus
            all_to_all(b, [[0.0 if g == h else share for h in range(gpus)] for g in range(gpus)])
        return Engine().run(b.build()).makespan

    def _ficco(self, op: str, m: int, n: int, k: int, dtype: str, gpus: int) -> Prediction:
        from t3.ficco.learned import select_shipped
        from t3.ficco.losses import explore
        from t3.ficco.space import FiccoOperator, parse_name

        fop = FiccoOperator(op, m, n, k, gpus, dtype)
        if self.ficco == "select":
            name, _ = select_shipped(fop, self.hw)
            best = explore(fop, self.hw, [parse_name(name)]).best()
            return Prediction(best.time_s, best.name, "the selector's pick, simulated")
        best = explore(fop, self.hw).best()
        return Prediction(best.time_s, best.name, "best of every legal schedule, simulated")

    # ---- per pair ------------------------------------------------------------------------------------
    def predict(
        self, kind: str, m: int, n: int, k: int, batch: int, dtype: str, gpus: int | None
    ) -> PairPrediction:
        key = (kind, m, n, k, batch, dtype, gpus)
        if key not in self._cache:
            self._cache[key] = self._predict(*key)
        return self._cache[key]

    def _predict(self, kind, m, n, k, batch, dtype, gpus) -> PairPrediction:
        from t3.workload.sublayers import DTYPE_BYTES

        if gpus is None:
            return self._all_na("group size unknown (pass --gpus)")
        if gpus < 2:
            return self._all_na(f"group of {gpus} GPU: nothing to communicate")
        if dtype not in DTYPE_BYTES:
            return self._all_na(f"precision '{dtype}' is not modelled ({', '.join(DTYPE_BYTES)})")
        if dtype not in self.hw.compute.matrix_flops_per_clk_per_cu:
            return self._all_na(f"hardware '{self.hw.name}' has no {dtype} matrix rate")
        rows, eb = m * batch, DTYPE_BYTES[dtype]
        try:
            if kind in ("gemm-ar", "gemm-rs"):
                return self._gemm_reduce(kind, rows, n, k, dtype, gpus)
            gemm = self._gemm_s(rows, n, k, dtype, gpus)
            if kind == "ag-gemm":
                comm = self._collective_s("all-gather", rows * k * eb, gpus)
                fic = self._try(lambda: self._ficco("ag-gemm", rows, n, k, dtype, gpus))
            elif kind == "ag-gemm-w":
                comm = self._collective_s("all-gather", n * k * eb, gpus)
                fic = self._try(lambda: self._ficco("ag-gemm", n, rows, k, dtype, gpus))
            else:
                elems = rows * k if kind == "a2a-gemm" else rows * n
                comm = self._collective_s("all-to-all", elems * eb, gpus)
                fic = _na(
                    "FiCCO's moe operation spans dispatch, both expert GEMMs and combine, not one pair", False
                )
        except FAILURES as err:
            return self._all_na(str(err))
        t3 = _na("T3 overlaps a GEMM with the reduce-scatter of its own output", False)
        return PairPrediction(gemm, comm, {
            "sequential": Prediction(gemm + comm), "ideal": Prediction(max(gemm, comm)),
            "t3": t3, "t3-mca": t3, "ficco": fic,
        })  # fmt: skip

    def _gemm_reduce(self, kind, m, n, k, dtype, gpus) -> PairPrediction:
        op = self._operator(m, n, k, dtype, gpus)
        base = self._configs(op, ("sequential", "ideal-gemm-rs-overlap"), self.hw)
        seq = base["sequential"]
        ag = seq.breakdown_s["all_gather"] if kind == "gemm-rs" else 0.0
        gemm = seq.breakdown_s["gemm"]
        comm = seq.breakdown_s["reduce_scatter"] + (seq.breakdown_s["all_gather"] - ag)
        out = {"sequential": Prediction(seq.time_s - ag),
               "ideal": Prediction(base["ideal-gemm-rs-overlap"].time_s - ag)}  # fmt: skip
        hyp = "" if self.hw.nmc.present else f"hypothetical: {self.hw.name} with near-memory compute"
        for c in ("t3", "t3-mca"):

            def run(c=c):
                o = self._configs(op, (c,), self.hw_t3)[c]
                return Prediction(
                    o.time_s - (o.breakdown_s["all_gather"] if kind == "gemm-rs" else 0.0), note=hyp
                )

            out[c] = self._try(run)
        fic = self._try(lambda: self._ficco("gemm-rs", m, n, k, dtype, gpus))
        if fic.ok and kind == "gemm-ar":  # FiCCO reduce-scatters; the all-gather follows alone
            fic = Prediction(
                fic.time_s + seq.breakdown_s["all_gather"], f"{fic.schedule} + all-gather", fic.note
            )
        out["ficco"] = fic
        return PairPrediction(gemm, comm, out)

    @staticmethod
    def _try(fn) -> Prediction:
        try:
            return fn()
        except FAILURES as err:
            return _na(str(err))

    @staticmethod
    def _all_na(why: str) -> PairPrediction:
        return PairPrediction(None, None, {s: _na(why) for s in SCHEDULES}, note=f"n/a: {why}")
