"""Tensor-parallel sublayers -> operator shapes (GEMM M, N, K and the collective that follows).

Every tensor-sliced sublayer below produces, on every GPU, a full-size partial output of
``tokens x hidden`` that must be all-reduced (T3 paper, Table "Sliced sublayers"):

=========  ==========================================  =====  ======  ==========
name       sublayer                                    M      N       K
=========  ==========================================  =====  ======  ==========
op         attention output projection, forward        T      H       A/t
fc2        FC-2, forward                               T      H       ffn/t
fc1-bwd    FC-1 data gradient, backward                T      H       fc1/t
ip-bwd     QKV input projection data gradient, bwd     T      H       qkv/t
=========  ==========================================  =====  ======  ==========

(T tokens, H hidden, t TP degree; A = heads * head_dim, = H unless the model sets its head width;
ffn = 4H for GPT-style models, fc1 = ffn or 2*ffn if gated, qkv = 3H, or (heads + 2*kv_heads) *
head_dim with grouped-query attention.)
"""

from __future__ import annotations

from dataclasses import dataclass

from t3.errors import WorkloadError
from t3.workload.models import ModelSpec

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}  # tf32: FP32 operands in memory, read by
# the tensor cores with a 10-bit mantissa (PyTorch's allow_tf32 / float32_matmul_precision "high")

SUBLAYERS = {
    "op": ("forward", "attention output projection"),
    "fc2": ("forward", "FC-2"),
    "fc1-bwd": ("backward", "FC-1 data gradient"),
    "ip-bwd": ("backward", "QKV input projection data gradient"),
}


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    dtype: str = "fp16"
    # the output's type where the caller sets it (e.g. cublasGemmEx with an FP32 C); None: the library's
    # default (below)
    out_dtype: str | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def out_elem_bytes(self) -> int:
        """Bytes of one output element: the input's, but 2 for FP8, whose GEMMs write a 16-bit result (the
        libraries' FP8 GEMMs take a BF16 or FP16 output: torch._scaled_mm's out_dtype, cuBLASLt's D type in
        every FP8 row of the dataset and of `t3 measure`); ``out_dtype``'s where given."""
        return DTYPE_BYTES[self.out_type]

    @property
    def out_type(self) -> str:
        """The output's type: ``out_dtype`` where given, else the input's, BF16 for FP8 (above)."""
        if self.out_dtype is not None:
            return self.out_dtype
        return "bf16" if self.dtype == "fp8" else self.dtype

    @property
    def out_bytes(self) -> int:
        return self.m * self.n * self.out_elem_bytes


@dataclass(frozen=True)
class Operator:
    """One sliced sublayer on one GPU: a GEMM whose output is all-reduced over ``tp`` GPUs."""

    model: str
    sublayer: str
    phase: str
    tp: int
    tokens: int
    gemm: GemmShape
    collective: str = "all-reduce"

    @property
    def comm_bytes(self) -> int:
        """Bytes of the tensor being all-reduced (per GPU)."""
        return self.gemm.out_bytes


def _whole(name: str, v: object) -> None:
    if not isinstance(v, int) or isinstance(v, bool):
        raise WorkloadError(f"{name}: expected an integer, got {v!r} ({type(v).__name__})")


# Which TP degrees split a model. The rule is Megatron-LM's, as it trains with these sublayers (forward and
# backward): it asserts num_attention_heads % tp == 0 and num_query_groups % tp == 0 (KV heads), and
# divides the MLP's intermediate width (of each expert too) by tp. vLLM (inference only) requires
# total_num_heads % tp == 0 and, for KV heads, kv_heads % tp == 0 or tp % kv_heads == 0: with tp > kv_heads
# it replicates each KV head on tp / kv_heads GPUs, which would change the ip-bwd width per GPU; t3 does
# not model that replication. A model with ``split_heads = false`` (the T3 paper's T-NLG and PaLM, whose
# heads do not divide the paper's TP degrees) is split by width only: K = heads x head_dim / tp.
MAX_TP = 1024  # the largest TP degree the list of valid degrees goes up to


def shard_problem(model: ModelSpec, tp: int) -> str | None:
    """Why ``model`` cannot be split over ``tp`` GPUs (None: it can), naming the model's own key."""

    def bad(field: str, value: int, why: str) -> str:
        return f"{model.key(field)} = {value} is not divisible by tp={tp} ({why})"

    if model.split_heads:
        if model.heads % tp:
            return bad("heads", model.heads, "every GPU holds whole attention heads, as Megatron-LM requires")
        if model.kv_heads is not None and model.kv_heads % tp:
            return bad(
                "kv_heads", model.kv_heads,
                "every GPU holds whole KV heads, as Megatron-LM requires; vLLM's replication of KV heads when "
                "TP > KV heads is not modelled",
            )  # fmt: skip
    else:
        for name, width in (("attention width (heads x head_dim)", model.attn_width),
                            ("QKV width", model.qkv_width)):  # fmt: skip
            if width % tp:
                return f"the {name} {width} is not divisible by tp={tp} (this model is split by width)"
    if model.expert_ffn is not None:
        if model.expert_ffn % tp:
            return bad(
                "expert_ffn", model.expert_ffn, "each expert's intermediate width is split over the TP group"
            )
        if model.shared_ffn % tp:
            return bad("shared_ffn", model.shared_ffn, "the shared experts' width is split over the TP group")
    if model.ffn % tp:
        return bad("ffn", model.ffn, "the MLP's intermediate width is split over the TP group")
    return None


def valid_tps(model: ModelSpec, upto: int = MAX_TP) -> list[int]:
    """The TP degrees from 2 to ``upto`` that split ``model``."""
    return [t for t in range(2, upto + 1) if shard_problem(model, t) is None]


def check_tp(model: ModelSpec, tp: int) -> None:
    """Refuses a TP degree that does not split ``model`` (the one check every model/TP pair goes through:
    :func:`sublayer_operator`), naming the key, its value, the TP and the degrees that do."""
    why = shard_problem(model, tp)
    if why is None:
        return
    ok = valid_tps(model)
    listed = ", ".join(map(str, ok)) if ok else "none"
    raise WorkloadError(
        f"tp: model '{model.name}' cannot be split over {tp} GPUs: {why}; valid TP degrees for this model "
        f"(2 to {MAX_TP}): {listed}"
    )


def sublayer_operator(model: ModelSpec, sublayer: str, tp: int, tokens: int | None = None) -> Operator:
    if not isinstance(sublayer, str) or sublayer not in SUBLAYERS:
        raise WorkloadError(f"sublayer: unknown sublayer {sublayer!r} (available: {', '.join(SUBLAYERS)})")
    _whole("tp", tp)
    if tokens is not None:
        _whole("tokens", tokens)
    if tp < 2:
        raise WorkloadError(f"tp: must be >= 2, got {tp}")
    check_tp(model, tp)
    t = model.tokens if tokens is None else tokens
    if t <= 0:
        raise WorkloadError(f"tokens: must be > 0, got {t}")
    if model.dtype not in DTYPE_BYTES:
        raise WorkloadError(f"dtype: unknown dtype '{model.dtype}'")
    width = {"op": model.attn_width, "fc2": model.ffn, "fc1-bwd": model.fc1_width, "ip-bwd": model.qkv_width}[
        sublayer
    ]
    if width % tp:
        raise WorkloadError(f"tp: {model.name} {sublayer} K dimension {width} is not divisible by tp={tp}")
    if t % tp:
        raise WorkloadError(f"tokens: {t} tokens do not split into tp={tp} reduce-scatter chunks")
    phase = SUBLAYERS[sublayer][0]
    return Operator(model.name, sublayer, phase, tp, t, GemmShape(t, model.hidden, width // tp, model.dtype))
