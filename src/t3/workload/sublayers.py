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

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

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

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def out_bytes(self) -> int:
        return self.m * self.n * self.elem_bytes


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


def sublayer_operator(model: ModelSpec, sublayer: str, tp: int, tokens: int | None = None) -> Operator:
    if not isinstance(sublayer, str) or sublayer not in SUBLAYERS:
        raise WorkloadError(f"sublayer: unknown sublayer {sublayer!r} (available: {', '.join(SUBLAYERS)})")
    _whole("tp", tp)
    if tokens is not None:
        _whole("tokens", tokens)
    if tp < 2:
        raise WorkloadError(f"tp: must be >= 2, got {tp}")
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
