"""The project's own view of a profiled run: GEMMs, collectives and the pairs they form.

Foreign formats are parsed once, at the edge (:mod:`t3.traces.kineto`), into these objects; nothing
past the edge knows the file format. Times are seconds from the first event of the trace; sizes are
elements; shapes are the GEMM's ``C[m, n] = A[m, k] @ B[k, n]`` (times ``batch`` for batched GEMMs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from t3.errors import T3Error

# bytes per element of the precisions a trace can name (t3's names where t3 has one)
ELEM_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int64": 8, "int32": 4, "int8": 1,
              "uint8": 1, "bool": 1}  # fmt: skip

# canonical collective names
ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL = (
    "all-reduce",
    "reduce-scatter",
    "all-gather",
    "all-to-all",
)
PAIRABLE = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL)

# pair kinds: what the pair is in the simulator's vocabulary
PAIR_KINDS = {
    "gemm-ar": "GEMM -> all-reduce (tensor parallel, no sequence parallelism)",
    "gemm-rs": "GEMM -> reduce-scatter (tensor + sequence parallel)",
    "ag-gemm": "all-gather -> GEMM of the gathered activations (tensor + sequence parallel)",
    "ag-gemm-w": "all-gather of a weight -> GEMM (FSDP / ZeRO-3)",
    "a2a-gemm": "all-to-all dispatch -> expert GEMM (expert parallel)",
    "gemm-a2a": "expert GEMM -> all-to-all combine (expert parallel)",
}


class TraceError(T3Error):
    """A trace file cannot be read or is not a PyTorch profiler trace; the message says why."""


@dataclass(frozen=True)
class TraceGemm:
    """One GEMM as it ran: shape from ``record_shapes``, time from its kernels (GPU) or op (CPU)."""

    index: int
    op: str  # the framework op, e.g. aten::mm
    m: int
    n: int
    k: int
    batch: int
    dtype: str
    start_s: float
    end_s: float
    busy_s: float  # time its kernels ran (sum; CPU: the op's duration)
    launch_s: float  # when the host issued it (program order)
    thread: str
    kernels: int  # GPU kernels it launched (0 on CPU)

    @property
    def a_elems(self) -> int:
        return self.batch * self.m * self.k

    @property
    def b_elems(self) -> int:
        return self.batch * self.k * self.n

    @property
    def out_elems(self) -> int:
        return self.batch * self.m * self.n

    def shape(self) -> str:
        b = f"{self.batch}x" if self.batch > 1 else ""
        return f"{b}{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class TraceCollective:
    """One collective as it ran: what (op, elements, dtype, group), when, and how much was exposed."""

    index: int
    op: str  # canonical: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, ...
    name: str  # as the trace names it (kernel or annotation)
    in_elems: int | None
    out_elems: int | None
    dtype: str | None
    group_size: int | None
    group: str | None
    start_s: float
    end_s: float
    launch_s: float
    thread: str
    exposed_s: float  # part of [start, end] during which no compute ran on the device
    timing: str  # "gpu-kernel", "gloo-thread", or "cpu-enqueue" (host call only: not the transfer)

    @property
    def dur_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def elem_bytes(self) -> int | None:
        return ELEM_BYTES.get(self.dtype) if self.dtype else None

    @property
    def nbytes(self) -> int | None:
        """Bytes of the collective's full tensor: the reduced tensor (all-reduce, reduce-scatter
        input), the gathered tensor (all-gather output), the exchanged buffer (all-to-all)."""
        eb = self.elem_bytes
        el = self.full_elems
        return None if eb is None or el is None else eb * el

    @property
    def full_elems(self) -> int | None:
        if self.op == ALL_GATHER:
            if self.out_elems is not None:
                return self.out_elems
            return (
                None if self.in_elems is None or self.group_size is None else self.in_elems * self.group_size
            )
        if self.op == REDUCE_SCATTER:
            if self.in_elems is not None:
                return self.in_elems
            return (
                None
                if self.out_elems is None or self.group_size is None
                else self.out_elems * self.group_size
            )
        return self.in_elems if self.in_elems is not None else self.out_elems


@dataclass(frozen=True)
class Pair:
    """A GEMM and the collective that consumes (``produces``) or feeds (``consumes``) its tensor."""

    gemm: TraceGemm
    collective: TraceCollective
    kind: str  # a key of PAIR_KINDS
    relation: str  # "produces": GEMM -> collective; "consumes": collective -> GEMM
    label: str = ""  # the model sublayer it matches, when a model is given

    @property
    def measured_s(self) -> float:
        """What the pair puts on the critical path: its GEMM's busy time plus the exposed collective."""
        return self.gemm.busy_s + self.collective.exposed_s

    def as_dict(self) -> dict[str, Any]:
        c = self.collective
        return {
            "kind": self.kind, "relation": self.relation, "label": self.label,
            "gemm": {"op": self.gemm.op, "m": self.gemm.m, "n": self.gemm.n, "k": self.gemm.k,
                     "batch": self.gemm.batch, "dtype": self.gemm.dtype, "start_s": self.gemm.start_s,
                     "time_s": self.gemm.busy_s, "kernels": self.gemm.kernels},
            "collective": {"op": c.op, "name": c.name, "bytes": c.nbytes, "in_elems": c.in_elems,
                           "out_elems": c.out_elems, "dtype": c.dtype, "group_size": c.group_size,
                           "start_s": c.start_s, "time_s": c.dur_s, "exposed_s": c.exposed_s,
                           "overlapped_s": c.dur_s - c.exposed_s, "timing": c.timing},
            "measured_s": self.measured_s,
        }  # fmt: skip


@dataclass
class ImportedTrace:
    """One rank's profile in the project's terms."""

    source: str
    device: str  # "gpu" or "cpu"
    device_name: str
    backend: str | None
    rank: int | None
    world_size: int | None
    steps: int  # ProfilerStep annotations (0 if none)
    window_s: float  # from the first to the last device activity
    window_start_s: float
    gemms: list[TraceGemm]
    collectives: list[TraceCollective]
    unshaped_gemms: int  # GEMM ops without record_shapes dimensions
    exposed_union_s: float = (
        0.0  # time some collective ran while no compute did (overlapping collectives once)
    )
    pairs: list[Pair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def unpaired(self) -> list[TraceCollective]:
        used = {p.collective.index for p in self.pairs}
        return [c for c in self.collectives if c.index not in used]

    def summary(self) -> dict[str, Any]:
        comm = sum(c.dur_s for c in self.collectives)
        exposed = sum(c.exposed_s for c in self.collectives)
        return {
            "collective_time_s": comm, "exposed_collective_s": exposed,
            "exposed_communication_s": self.exposed_union_s,
            "source": self.source, "device": self.device, "device_name": self.device_name,
            "backend": self.backend, "rank": self.rank, "world_size": self.world_size, "steps": self.steps,
            "window_s": self.window_s, "window_start_s": self.window_start_s, "gemms": len(self.gemms), "unshaped_gemms": self.unshaped_gemms,
            "gemm_time_s": sum(g.busy_s for g in self.gemms), "collectives": len(self.collectives),
            "pairs": len(self.pairs),
        }  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace": self.summary(),
            "pairs": [p.as_dict() for p in self.pairs],
            "unpaired_collectives": [
                {k: v for k, v in asdict(c).items() if k not in ("index", "thread")} | {"bytes": c.nbytes}
                for c in self.unpaired()
            ],
            "notes": list(self.notes),
        }
