"""FiCCO's schedule design space: operators, axes, stable names and legality.

A FiCCO *operator* is one communication-dependent GEMM on ``gpus`` GPUs:

- ``ag-gemm``: all-gather then GEMM. Every GPU holds ``m/gpus`` rows of A (m x k) and computes
  ``C = A_full @ B`` (B: k x n). Covers TP + sequence-parallel QKV / FC-1, and FSDP weight gathers by
  transposition (gathered weight rows become the ``m`` dimension).
- ``gemm-rs``: GEMM then reduce-scatter. Every GPU computes a partial ``C`` (m x n, inner dim k) that
  is reduce-scattered by rows (sequence parallelism after the out-projection / FC-2).
- ``moe``: all-to-all dispatch -> expert FFN -> all-to-all combine (expert parallelism, one expert
  group per GPU). ``m`` = routed token rows per GPU (tokens x top-k), ``k`` = hidden width (bytes
  moved per row), ``n`` = expert FFN width; the expert is a gated FFN: GEMM (rows, 2n, k) then GEMM
  (rows, k, n). ``skew`` in [0, 1) makes routing uneven: expert h receives a share
  ``(1 + skew * (N-1-2h)/(N-1)) / N`` of every GPU's rows (GPU 0 hottest, ``1+skew`` times the mean).

A *schedule* is a point on these axes, named ``<comm>-g<G>-<split>-<exec>[-p<D>][-s2][-ll][-rb|-rsum][-sb][-fk]``:

=========  =========================================================================================
comm       ``bulk`` (one collective, no overlap), ``shard`` (N-1 peer-to-peer steps, one link per
           step), ``ficco`` (N^2 pieces, each step sends one piece to every peer at once)
g<G>       compute granularity: number of GEMM pieces (1, N, 2N, 4N, N^2)
split      dimension the GEMM is cut along: ``M`` (independent rows), ``K`` (partial sums that
           accumulate in the output; ag-gemm), ``N`` (column blocks; gemm-rs)
exec       who moves the bytes: ``cu`` (a communication kernel on CUs), ``dma`` (DMA engines) or ``ep``
           (gemm-rs: the GEMM's own epilogue stores each output tile to the GPU that owns its rows; the
           wave's CUs stay busy until the stores drained, ``fused.store_Bps_per_cu``; implies one fused
           GEMM kernel, like ``-fk``)
-p<D>      prefetch depth: step t's transfers wait until the compute of step t-D finished (bounded
           landing buffers); absent = unbounded (all transfers issue as early as possible)
-s2        two compute streams (piece i waits for piece i-2, not i-1); absent = one stream
-ll        local pieces last; absent = local pieces first (the local data needs no transfer)
-rb        gemm-rs: batched reductions: the owner reduces all partials of one transfer step (ficco:
           sub-block j; shard: everything) in one reduction kernel on all CUs once they landed;
           absent = incremental: each arrival is added to the owner's accumulator as it lands, on
           the communication kernel's CUs
-rsum      gemm-rs: one library sum kernel over the N stacked partials (``torch.sum``), after every
           partial landed, reaching ``fused.reduce_hbm_fraction`` of the HBM peak (Flux's and PyTorch
           async-TP's final reduction)
-sb        symmetric-memory handshakes of PyTorch async-TP (shard, one piece per peer): gemm-rs
           (``_pipelined_produce_and_all2all``): on each stream, a step's partial, a barrier of all
           GPUs, the pull of the partial, a second barrier, and only then the stream's next partial;
           a final barrier before the sum (``-rsum``). ag-gemm (``_pipelined_all_gather_and_consume``):
           the local shard is copied into the symmetric buffer and a barrier of all GPUs precedes
           every pull; the local shard is copied into the gathered output after its GEMM, and a
           final barrier ends the operation. A barrier is one kernel (``compute.kernel_launch_s``)
           whose signals cross the fabric once (``link.latency_s``)
-fk        one fused GEMM kernel: the G pieces are the row chunks of a single persistent GEMM (one
           launch, one plan, waves run on across chunks) whose tiles wait for their own data (ag-gemm)
           or signal their own rows (gemm-rs) instead of G kernels; split M, one stream, no prefetch
=========  =========================================================================================

Names with ``ep``, ``-rsum``, ``-sb`` or ``-fk`` are *named implementations* of real fused kernels (Flux, async
TP): they can be run by name (``t3.api.overlap``, the validation rows) but are not part of the space
:func:`candidates` enumerates, so FiCCO's exploration, selectors and training data do not see them.

Illegal combinations are reported with a reason by :func:`legality`, never raised mid-run.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from t3.config.hardware import Hardware, tp_refusal
from t3.errors import ConfigError, ScheduleError
from t3.workload.sublayers import DTYPE_BYTES

OPS = ("ag-gemm", "gemm-rs", "moe")
COMMS = ("bulk", "shard", "ficco")
SPLITS = ("M", "K", "N")
EXECS = ("cu", "dma")  # the executors of the explored space
NAMED_EXECS = ("ep",)  # executors of named implementations only (not enumerated by candidates())

NAME_RE = re.compile(
    r"^(bulk|shard|ficco)-g(\d+)-([MKN])-(cu|dma|ep)(?:-p(\d+))?(?:-s([12]))?(?:-(ll|lf))?(?:-(rb|rsum))?"
    r"(?:-(sb))?(?:-(fk))?$"
)
GRAMMAR = "<bulk|shard|ficco>-g<pieces>-<M|K|N>-<cu|dma|ep>[-p<depth>][-s2][-ll][-rb|-rsum][-sb][-fk]"
REDUCES = ("inc", "batched", "sum")
_REDUCE_SUFFIX = {"batched": "-rb", "sum": "-rsum"}


@functools.lru_cache(maxsize=256)
def _expert_rows(m: int, n: int, skew: float) -> tuple[int, ...]:
    """Rows each source sends to expert GPU h (cached: schedules ask for it per unit)."""
    w = [(1.0 + skew * (n - 1 - 2 * h) / (n - 1)) / n for h in range(n)]
    raw = [m * x for x in w]
    rows = [int(r) for r in raw]
    rest = m - sum(rows)
    for h in sorted(range(n), key=lambda h: (-(raw[h] - rows[h]), h))[:rest]:
        rows[h] += 1
    return tuple(rows)


@dataclass(frozen=True)
class FiccoOperator:
    """One communication-dependent GEMM (global sizes, see the module docstring)."""

    op: str
    m: int
    n: int
    k: int
    gpus: int = 8
    dtype: str = "bf16"
    skew: float = 0.0
    label: str = ""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ConfigError(f"op: unknown operation '{self.op}' (available: {', '.join(OPS)})")
        for f in ("m", "n", "k"):
            if getattr(self, f) <= 0:
                raise ConfigError(f"{f}: must be > 0, got {getattr(self, f)}")
        if self.gpus < 2:
            raise ConfigError(f"gpus: need at least 2, got {self.gpus}")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"dtype: unknown dtype '{self.dtype}' (available: {', '.join(DTYPE_BYTES)})")
        if not 0.0 <= self.skew < 1.0:
            raise ConfigError(f"skew: must be in [0, 1), got {self.skew}")
        if self.skew and self.op != "moe":
            raise ConfigError("skew: only the moe operation has uneven routing")
        if self.m % self.gpus:
            raise ConfigError(f"m: {self.m} rows do not split over {self.gpus} GPUs")

    @property
    def eb(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def symmetric(self) -> bool:
        """Rotation-equivariant (simulate one GPU) unless MoE routing is skewed."""
        return self.skew == 0.0

    def expert_rows(self) -> list[int]:
        """MoE: rows each source GPU sends to expert GPU h (same for every source)."""
        return list(_expert_rows(self.m, self.gpus, self.skew))

    def comm_bytes(self) -> float:
        """Bytes one GPU sends in the operation's collective(s) (MoE: the busiest direction of the
        hottest GPU; equal to the bytes sent when routing is uniform)."""
        n, eb = self.gpus, self.eb
        if self.op == "ag-gemm":
            return (n - 1) * self.m // n * self.k * eb
        if self.op == "gemm-rs":
            return (n - 1) * self.m // n * self.n * eb
        rows = self.expert_rows()
        # dispatch + combine on the busiest direction of the hottest GPU (0): it sends m - rows[0]
        # rows and receives (N-1) rows[0] rows in each all-to-all
        return 2 * max(self.m - rows[0], (n - 1) * rows[0]) * self.k * eb

    def flops(self) -> float:
        """Matrix FLOPs on one GPU (the hottest expert GPU for MoE)."""
        if self.op == "moe":
            r = self.expert_rows()[0] * self.gpus
            return 2.0 * r * (2 * self.n) * self.k + 2.0 * r * self.k * self.n
        return 2.0 * self.m * self.n * self.k

    def describe(self) -> str:
        s = f"{self.op} M={self.m} N={self.n} K={self.k} {self.dtype} on {self.gpus} GPUs"
        return s + (f", skew {self.skew:g}" if self.skew else "")


@dataclass(frozen=True)
class Axes:
    """One point of the design space; :attr:`name` is its stable, parseable name."""

    comm: str
    g: int
    split: str = "M"
    executor: str = "cu"
    prefetch: int = 0  # 0 = unbounded
    streams: int = 1
    local_first: bool = True
    reduce: str = "inc"  # gemm-rs: "inc" (each arrival as it lands), "batched" (per step, all CUs) or
    # "sum" (one library sum kernel over the stacked partials at the end)
    fused: bool = False  # -fk: the pieces are row chunks of one persistent GEMM kernel
    handshake: bool = False  # -sb: async-TP's symmetric-memory barriers around the transfers

    @property
    def one_kernel(self) -> bool:
        """The GEMM runs as one fused kernel (``-fk``, or epilogue stores, which imply it)."""
        return self.fused or self.executor == "ep"

    @property
    def name(self) -> str:
        s = f"{self.comm}-g{self.g}-{self.split}-{self.executor}"
        if self.prefetch:
            s += f"-p{self.prefetch}"
        if self.streams == 2:
            s += "-s2"
        if not self.local_first:
            s += "-ll"
        s += _REDUCE_SUFFIX.get(self.reduce, "")
        if self.handshake:
            s += "-sb"
        if self.fused:
            s += "-fk"
        return s

    def as_dict(self) -> dict:
        d = {
            "comm": self.comm, "pieces": self.g, "split": self.split, "executor": self.executor,
            "prefetch": self.prefetch or None, "streams": self.streams, "local_first": self.local_first,
            "reduce": self.reduce,
        }  # fmt: skip
        if self.fused:
            d["fused"] = True
        if self.handshake:
            d["handshake"] = True
        return d


def parse_name(name: str) -> Axes:
    """Axes of a schedule name (the inverse of :attr:`Axes.name`); one-line error if malformed."""
    mt = NAME_RE.match(name.strip())
    if not mt:
        raise ConfigError(f"schedule: '{name}' does not match {GRAMMAR}")
    comm, g, split, ex, p, s, loc, red, sb, fk = mt.groups()
    if int(g) < 1:
        raise ConfigError(f"schedule: '{name}': pieces must be >= 1")
    if p is not None and int(p) < 1:
        raise ConfigError(f"schedule: '{name}': prefetch depth must be >= 1")
    reduce = {"rb": "batched", "rsum": "sum"}.get(red or "", "inc")
    return Axes(
        comm, int(g), split, ex, int(p or 0), int(s or 1), loc != "ll", reduce, fk is not None, sb is not None
    )


def check_fits(fop: FiccoOperator, hw: Hardware) -> None:
    """One-line :class:`ConfigError` (naming the field) if ``fop`` cannot run on ``hw`` at all."""
    kind = hw.topology.kind
    if why := tp_refusal(hw, fop.gpus, "gpus"):
        raise ConfigError(why)
    if hw.network is not None and fop.gpus > hw.topology.gpus:
        raise ConfigError(
            f"gpus: FiCCO's schedules on {fop.gpus} GPUs span nodes of '{hw.name}'; its transfers are modelled"
            f" within one node's fabric only (gpus <= {hw.topology.gpus})"
        )
    if fop.op == "moe" and kind == "ring":
        raise ConfigError(
            f"op: moe (all-to-all) is modelled on mesh and switch topologies only, '{hw.name}' is a ring"
        )
    if fop.op == "moe" and min(fop.expert_rows()) < 1:
        raise ConfigError(f"m: {fop.m} rows leave an expert GPU without tokens")


def granularities(n: int) -> list[int]:
    return sorted({1, n, 2 * n, 4 * n, n * n})


def candidates(fop: FiccoOperator) -> list[Axes]:
    """Every point of the space we enumerate for ``fop`` (legal or not). Ordering variants (local
    last, prefetch depth 1) are enumerated with one stream only, to keep the space modest, and not
    for skewed MoE (simulated on all GPUs, 8x the events): on the 110 symmetric and skewed cases of
    the scenario set they never beat the same schedule with the default ordering."""
    n = fop.gpus
    out = [Axes("bulk", 1, "M", ex) for ex in EXECS]
    for comm in ("shard", "ficco"):
        for g in granularities(n):
            for split in SPLITS:
                for ex in EXECS:
                    out.append(Axes(comm, g, split, ex, 0, 1, True))
                    out.append(Axes(comm, g, split, ex, 0, 2, True))
                    if fop.symmetric:
                        out.append(Axes(comm, g, split, ex, 0, 1, False))
                        out.append(Axes(comm, g, split, ex, 1, 1, True))
                    if fop.op == "gemm-rs":
                        out.append(Axes(comm, g, split, ex, 0, 1, True, "batched"))
                        out.append(Axes(comm, g, split, ex, 0, 2, True, "batched"))
    return out


def no_gemm_cus_left(hw: Hardware, n: int) -> str | None:
    """Why the cu executor cannot overlap on ``hw`` (its communication kernel would take every CU),
    else None."""
    from t3.ops.gemm import cus_beside
    from t3.schedules.ficco import comm_cus

    k = comm_cus(hw, n)
    if cus_beside(hw, k) >= 1:
        return None
    clusters = (
        f", in clusters of {hw.compute.cluster_ctas} (compute.cluster_ctas)"
        if hw.compute.cluster_ctas > 1
        else ""
    )
    return (
        f"the cu executor's communication kernel takes {k} of the {hw.compute.cus} CUs"
        f" (compute.cus): none is left for the GEMM{clusters}"
    )


def legality(fop: FiccoOperator, hw: Hardware, ax: Axes) -> str | None:
    """``None`` if the schedule can be built, else the reason it cannot (one line)."""
    n = fop.gpus
    topo = hw.topology.kind
    if (
        ax.comm not in COMMS or ax.split not in SPLITS or ax.executor not in EXECS + NAMED_EXECS
        or ax.reduce not in REDUCES
    ):  # fmt: skip
        return "unknown axis value"
    if ax.reduce in ("batched", "sum"):
        if fop.op != "gemm-rs" or ax.comm == "bulk":
            return "batched reductions apply to overlapped GEMM -> reduce-scatter only"
        if topo == "ring":
            return "a ring reduce-scatter reduces at every hop (running partial sums): nothing to batch"
    why = _fused_legality(fop, hw, ax) or _handshake_legality(fop, hw, ax)
    if why:
        return why
    if why := tp_refusal(hw, n, "gpus"):
        return why.removeprefix("gpus: ")
    if fop.op == "moe" and topo == "ring":
        return "all-to-all is modelled on mesh and switch topologies only"
    if ax.comm == "bulk":
        if ax.g != 1 or ax.split != "M" or ax.prefetch or ax.streams != 1 or not ax.local_first:
            return "bulk has exactly one compute piece (g1, M, one stream)"
        return None
    if ax.g not in granularities(n):
        return f"pieces must be one of {granularities(n)} for {n} GPUs"
    if ax.g == 1 and (ax.split != "M" or ax.streams != 1 or not ax.local_first or ax.prefetch):
        return "one compute piece: split, streams and ordering do not apply (use g1-M)"
    if ax.split == "K" and fop.op != "ag-gemm":
        return "a K split leaves partial sums of the whole output: nothing can be sent before the last piece"
    if ax.split == "N" and fop.op != "gemm-rs":
        return "an N split needs all of the gathered rows before any column piece can start"
    if ax.split == "K" and ax.streams == 2:
        return "two streams would accumulate K pieces into the same output rows concurrently"
    if ax.prefetch and fop.op == "gemm-rs":
        return "prefetch depth applies to transfers that feed the GEMM (ag-gemm, moe)"
    if fop.op == "moe" and min(fop.expert_rows()) < n:
        return f"fewer than {n} rows per GPU pair: pieces would be empty"
    if ax.executor == "cu" and (why := no_gemm_cus_left(hw, n)):
        return why
    try:
        from t3.schedules.ficco import plan_pieces

        plan_pieces(fop, hw, ax)
    except ScheduleError as err:
        return str(err)
    return None


def _handshake_legality(fop: FiccoOperator, hw: Hardware, ax: Axes) -> str | None:
    """Reasons async-TP's handshakes (``-sb``) do not apply (None: no objection)."""
    if not ax.handshake:
        return None
    if fop.op == "moe" or ax.comm != "shard" or ax.g != fop.gpus or ax.split != "M" or ax.one_kernel:
        return "symmetric-memory handshakes (-sb): async-TP's shard steps, one GEMM piece per peer (shard-g<N>-M)"
    if ax.executor == "ep" or hw.topology.kind == "ring":
        return "symmetric-memory handshakes (-sb): async-TP pulls from every peer directly (no ring, no ep)"
    if fop.op == "gemm-rs" and ax.reduce != "sum":
        return (
            "symmetric-memory handshakes (-sb): async-TP's reduce-scatter sums the stacked partials (-rsum)"
        )
    if fop.op == "ag-gemm" and not ax.local_first:
        return "symmetric-memory handshakes (-sb): async-TP's all-gather consumes the local shard first"
    return None


def _fused_legality(fop: FiccoOperator, hw: Hardware, ax: Axes) -> str | None:
    """Reasons a one-kernel implementation (``-fk``, ``ep``) cannot be built (None: no objection)."""
    if ax.executor == "ep":
        if fop.op != "gemm-rs":
            return "epilogue stores (ep) send a GEMM's output tiles: GEMM -> reduce-scatter only"
        if hw.topology.kind == "ring":
            return "epilogue stores (ep) go straight to the owner: a ring has no direct path to every GPU"
        if ax.reduce == "inc":
            return (
                "epilogue stores (ep) land every peer's partial in its own buffer slot: the owner reduces them "
                "in a kernel (-rb or -rsum)"
            )
        if ax.fused:
            return "epilogue stores (ep) are one fused kernel already: drop -fk"
    if not ax.one_kernel:
        return None
    what = "epilogue stores (ep)" if ax.executor == "ep" else "one fused kernel (-fk)"
    if ax.comm == "bulk":
        return f"{what}: bulk has no overlap to fuse"
    if fop.op == "moe":
        return f"{what}: an expert FFN is two GEMMs; not modelled for moe"
    if ax.split != "M":
        return f"{what}: the pieces are row chunks of one GEMM (split M)"
    if ax.g == 1:
        return f"{what}: one piece is one kernel already (use g1 without it, or more pieces)"
    if ax.streams != 1:
        return f"{what}: one kernel has no second stream"
    if ax.prefetch:
        return f"{what}: a wave spanning two chunks would wait for data its own chunk's prefetch bound holds back"
    return None


def enumerate_space(fop: FiccoOperator, hw: Hardware) -> tuple[list[Axes], list[tuple[str, str]]]:
    """(legal schedules, [(name, reason)] of skipped ones), in a fixed order. Memoised (an
    exploration and the selectors of one case ask for the same space)."""
    key = (fop, id(hw))
    hit = _SPACES.get(key)
    if hit is None or hit[0] is not hw:
        if len(_SPACES) > 1_000:
            _SPACES.clear()
        hit = _SPACES[key] = (hw, *_enumerate_space(fop, hw))
    return list(hit[1]), list(hit[2])


_SPACES: dict[tuple, tuple] = {}


def _enumerate_space(fop: FiccoOperator, hw: Hardware) -> tuple[list[Axes], list[tuple[str, str]]]:
    legal, skipped = [], []
    seen = set()
    for ax in candidates(fop):
        if ax.name in seen:
            continue
        seen.add(ax.name)
        why = legality(fop, hw, ax)
        if why is None:
            legal.append(ax)
        else:
            skipped.append((ax.name, why))
    return legal, skipped
