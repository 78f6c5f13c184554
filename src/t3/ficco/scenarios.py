"""The FiCCO scenario set: realistic operators with a fixed design / unseen split.

Shapes (global GEMM sizes, see :mod:`t3.ficco.space`), bf16, 8 GPUs:

- TP 8 + sequence parallelism (Llama-3 8B / 70B / 405B, GPT-3 175B): the QKV and FC-1 GEMMs follow an
  all-gather of the sequence-sharded activations (``ag-gemm``, M = tokens, N = width / 8, K = hidden);
  the out-projection and FC-2 precede a reduce-scatter (``gemm-rs``, M = tokens, N = hidden,
  K = width / 8). Prefill: 8192 tokens (4096 for 405B and GPT-3); decode: 512 tokens in flight.
- MoE with expert parallelism 8 (``moe``): Mixtral-8x7B-style (hidden 4096, expert FFN 14336, top-2)
  and DeepSeek-V3-style (hidden 7168, expert FFN 2048, top-8, the 32 experts of a GPU grouped into
  one GEMM); m = tokens per GPU x top-k; routing uniform or skewed.
- FSDP weight gathers (8 ranks): the gathered weight's output features are the ``m`` dimension of
  an ``ag-gemm`` (C^T = W_full x X^T), n = local tokens, k = input features.

Model dimensions: Llama 3 (Dubey et al. 2024, Table 3), GPT-3 (Brown et al. 2020), Mixtral
(Jiang et al. 2024), DeepSeek-V3 (DeepSeek-AI 2024). Token counts are our choice (documented).

The split is fixed. :data:`DESIGN_OPERATORS` (32 operators) are the *design* cases: the heuristic's
form and thresholds were developed and fitted on them (all their results have been looked at).
:data:`UNSEEN_OPERATORS` (23 operators) are the *unseen* cases. They were drawn by the rule below and
committed before any of their results were computed, and the heuristic was frozen (committed) before
the first run on them; they are only evaluated, never fitted on:

- every (model, sublayer) pair of the four dense models at 2048 tokens (a token count the design set
  does not use): QKV and FC-1 (``ag-gemm``), out-projection and FC-2 (``gemm-rs``): 16 operators;
- MoE at a new token count: Mixtral-8x7B-style at 2048 tokens per GPU (m = 4096, uniform and skew
  0.3) and DeepSeek-V3-style at 512 tokens per GPU (m = 4096, uniform): 3 operators;
- the four FSDP weight gathers the design set lacks (8B out-projection and FC-2, 70B QKV and
  out-projection; n = local tokens 8192 for 8B, 4096 for 70B as in the design set): 4 operators.

Every operator runs on both hardware presets; both cases of an operator are in the same set.
"""

from __future__ import annotations

from dataclasses import dataclass

from t3.ficco.space import FiccoOperator

HARDWARE = ("mi300x-8", "h100-8")

_F = FiccoOperator
DESIGN_OPERATORS: tuple[FiccoOperator, ...] = (
    _F("ag-gemm", 8192, 768, 4096, label="llama3-8b prefill QKV (TP8+SP)"),
    _F("ag-gemm", 8192, 3584, 4096, label="llama3-8b prefill FC-1 (TP8+SP)"),
    _F("gemm-rs", 8192, 4096, 512, label="llama3-8b prefill out-proj (TP8+SP)"),
    _F("gemm-rs", 8192, 4096, 1792, label="llama3-8b prefill FC-2 (TP8+SP)"),
    _F("ag-gemm", 512, 3584, 4096, label="llama3-8b decode FC-1 (TP8+SP)"),
    _F("gemm-rs", 512, 4096, 1792, label="llama3-8b decode FC-2 (TP8+SP)"),
    _F("ag-gemm", 8192, 1280, 8192, label="llama3-70b prefill QKV (TP8+SP)"),
    _F("ag-gemm", 8192, 7168, 8192, label="llama3-70b prefill FC-1 (TP8+SP)"),
    _F("gemm-rs", 8192, 8192, 1024, label="llama3-70b prefill out-proj (TP8+SP)"),
    _F("gemm-rs", 8192, 8192, 3584, label="llama3-70b prefill FC-2 (TP8+SP)"),
    _F("ag-gemm", 512, 7168, 8192, label="llama3-70b decode FC-1 (TP8+SP)"),
    _F("gemm-rs", 512, 8192, 3584, label="llama3-70b decode FC-2 (TP8+SP)"),
    _F("ag-gemm", 4096, 2304, 16384, label="llama3-405b prefill QKV (TP8+SP)"),
    _F("ag-gemm", 4096, 13312, 16384, label="llama3-405b prefill FC-1 (TP8+SP)"),
    _F("gemm-rs", 4096, 16384, 2048, label="llama3-405b prefill out-proj (TP8+SP)"),
    _F("gemm-rs", 4096, 16384, 6656, label="llama3-405b prefill FC-2 (TP8+SP)"),
    _F("ag-gemm", 512, 13312, 16384, label="llama3-405b decode FC-1 (TP8+SP)"),
    _F("gemm-rs", 512, 16384, 2048, label="llama3-405b decode out-proj (TP8+SP)"),
    _F("ag-gemm", 4096, 4608, 12288, label="gpt3-175b QKV (TP8+SP)"),
    _F("ag-gemm", 4096, 6144, 12288, label="gpt3-175b FC-1 (TP8+SP)"),
    _F("gemm-rs", 4096, 12288, 1536, label="gpt3-175b out-proj (TP8+SP)"),
    _F("gemm-rs", 4096, 12288, 6144, label="gpt3-175b FC-2 (TP8+SP)"),
    _F("moe", 8192, 14336, 4096, label="mixtral-8x7b prefill experts (EP8, uniform)"),
    _F("moe", 8192, 14336, 4096, skew=0.5, label="mixtral-8x7b prefill experts (EP8, skew 0.5)"),
    _F("moe", 512, 14336, 4096, label="mixtral-8x7b decode experts (EP8, uniform)"),
    _F("moe", 16384, 2048, 7168, label="deepseek-v3-style prefill experts (EP8, uniform)"),
    _F("moe", 16384, 2048, 7168, skew=0.3, label="deepseek-v3-style prefill experts (EP8, skew 0.3)"),
    _F("moe", 1024, 2048, 7168, label="deepseek-v3-style decode experts (EP8, uniform)"),
    _F("ag-gemm", 28672, 8192, 4096, label="llama3-8b FSDP FC-1 weight gather"),
    _F("ag-gemm", 6144, 8192, 4096, label="llama3-8b FSDP QKV weight gather"),
    _F("ag-gemm", 57344, 4096, 8192, label="llama3-70b FSDP FC-1 weight gather"),
    _F("ag-gemm", 8192, 4096, 28672, label="llama3-70b FSDP FC-2 weight gather"),
)

# (label prefix, hidden, QKV width / 8, FFN width / 8, gated FFN): Llama 3 (Dubey et al. 2024), GPT-3
# (Brown et al. 2020)
_DENSE = (
    ("llama3-8b", 4096, 768, 1792, True),
    ("llama3-70b", 8192, 1280, 3584, True),
    ("llama3-405b", 16384, 2304, 6656, True),
    ("gpt3-175b", 12288, 4608, 6144, False),
)


def _dense_at(tokens: int) -> list[FiccoOperator]:
    out = []
    for name, h, qkv, ffn, gated in _DENSE:
        t = f"{name} {tokens} tokens"
        out += [
            _F("ag-gemm", tokens, qkv, h, label=f"{t} QKV (TP8+SP)"),
            _F("gemm-rs", tokens, h, h // 8, label=f"{t} out-proj (TP8+SP)"),
            _F("ag-gemm", tokens, 2 * ffn if gated else ffn, h, label=f"{t} FC-1 (TP8+SP)"),
            _F("gemm-rs", tokens, h, ffn, label=f"{t} FC-2 (TP8+SP)"),
        ]
    return out


UNSEEN_OPERATORS: tuple[FiccoOperator, ...] = (
    *_dense_at(2048),
    _F("moe", 4096, 14336, 4096, label="mixtral-8x7b 2048 tokens/GPU experts (EP8, uniform)"),
    _F("moe", 4096, 14336, 4096, skew=0.3, label="mixtral-8x7b 2048 tokens/GPU experts (EP8, skew 0.3)"),
    _F("moe", 4096, 2048, 7168, label="deepseek-v3-style 512 tokens/GPU experts (EP8, uniform)"),
    _F("ag-gemm", 4096, 8192, 4096, label="llama3-8b FSDP out-proj weight gather"),
    _F("ag-gemm", 4096, 8192, 14336, label="llama3-8b FSDP FC-2 weight gather"),
    _F("ag-gemm", 10240, 4096, 8192, label="llama3-70b FSDP QKV weight gather"),
    _F("ag-gemm", 8192, 4096, 8192, label="llama3-70b FSDP out-proj weight gather"),
)

OPERATORS: tuple[FiccoOperator, ...] = DESIGN_OPERATORS + UNSEEN_OPERATORS


@dataclass(frozen=True)
class Case:
    index: int
    fop: FiccoOperator
    hardware: str
    subset: str  # "design" or "unseen"

    @property
    def key(self) -> str:
        return f"{self.index:02d}:{self.hardware}"


def cases(limit: int | None = None) -> list[Case]:
    """Every (operator, hardware) case in a fixed order; ``limit`` keeps the first ``limit`` design
    and the first ``limit`` unseen operators only (a quick look)."""
    d, u = DESIGN_OPERATORS, UNSEEN_OPERATORS
    if limit is not None:
        d, u = d[:limit], u[:limit]
    out = []
    for i, fop in enumerate(d + u):
        for hw in HARDWARE:
            out.append(Case(i if i < len(d) else len(DESIGN_OPERATORS) + i - len(d), fop, hw,
                            "design" if i < len(d) else "unseen"))  # fmt: skip
    return out


def subset_of(index: int) -> str:
    return "design" if index < len(DESIGN_OPERATORS) else "unseen"
