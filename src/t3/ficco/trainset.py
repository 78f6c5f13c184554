"""Labelled training operators for the learned FiCCO selector, and the fresh blind set.

Training operators (:func:`training_operators`) are drawn by a seeded random rule from realistic
dimensions (the model zoo's hidden / FFN widths, Llama 3, GPT-3, Mixtral- and DeepSeek-V3-style
experts) and token counts 512..32768; they never equal an operator of the unseen or fresh sets.
Their labels (every legal schedule's simulated time) come from the exhaustive search
(``benchmarks/fit_ficco_selector.py``).

:data:`FRESH_OPERATORS` is a blind set drawn by the rule below and committed *before* any of its
results were computed and after the learned selector was frozen; it is only evaluated, never fitted
on: every (model, sublayer) pair of the four zoo models the scenario set lacks (Megatron GPT-2 8.3B,
Turing-NLG 17B, PaLM 540B, MT-NLG 530B; TP 8 + SP) at **6144 tokens**, plus Mixtral-8x7B-style and
DeepSeek-V3-style experts at 1024 tokens per GPU (uniform routing).
"""

from __future__ import annotations

import random

from t3.ficco.space import FiccoOperator

_F = FiccoOperator

# (name, hidden, QKV width, FC-1 width, FFN width): model zoo (src/t3/workload/models/zoo.toml),
# QKV = 3 x hidden without grouped-query attention, Llama 3 with 8 KV heads
ZOO = (
    ("mega-gpt-2", 3072, 9216, 12288, 12288),
    ("t-nlg", 4256, 12768, 17024, 17024),
    ("gpt-3", 12288, 36864, 49152, 49152),
    ("palm", 18432, 55296, 73728, 73728),
    ("mt-nlg", 20480, 61440, 81920, 81920),
    ("llama-3-8b", 4096, 6144, 28672, 14336),
    ("llama-3-70b", 8192, 10240, 57344, 28672),
    ("llama-3-405b", 16384, 18432, 106496, 53248),
)
# (name, hidden, expert FFN width, top-k): Mixtral-8x7B (Jiang et al. 2024), DeepSeek-V3 (2024)
EXPERTS = (("mixtral-8x7b", 4096, 14336, 2), ("deepseek-v3", 7168, 2048, 8))


def dense_operators(model: tuple, tokens: int, tp: int = 8) -> list[FiccoOperator]:
    """QKV and FC-1 (all-gather -> GEMM), out-projection and FC-2 (GEMM -> reduce-scatter)."""
    name, h, qkv, fc1, ffn = model
    t = f"{name} {tokens} tokens"
    return [
        _F("ag-gemm", tokens, qkv // tp, h, label=f"{t} QKV (TP8+SP)"),
        _F("gemm-rs", tokens, h, h // tp, label=f"{t} out-proj (TP8+SP)"),
        _F("ag-gemm", tokens, fc1 // tp, h, label=f"{t} FC-1 (TP8+SP)"),
        _F("gemm-rs", tokens, h, ffn // tp, label=f"{t} FC-2 (TP8+SP)"),
    ]


def expert_operator(ex: tuple, tokens_per_gpu: int, skew: float = 0.0) -> FiccoOperator:
    name, h, ffn, top = ex
    routing = f"skew {skew:g}" if skew else "uniform"
    lab = f"{name} {tokens_per_gpu} tokens/GPU experts (EP8, {routing})"
    return _F("moe", tokens_per_gpu * top, ffn, h, skew=skew, label=lab)


FRESH_OPERATORS: tuple[FiccoOperator, ...] = (
    *[op for m in ZOO[:5] if m[0] != "gpt-3" for op in dense_operators(m, 6144)],
    expert_operator(EXPERTS[0], 1024),
    expert_operator(EXPERTS[1], 1024),
)


def _zoo_set(tokens: int, mixtral_tokens: int, deepseek_tokens: int) -> tuple[FiccoOperator, ...]:
    """Every (model, sublayer) pair of the eight zoo models at ``tokens`` (TP 8 + SP), Mixtral-8x7B-
    and DeepSeek-V3-style experts at their tokens per GPU (uniform), minus any training operator."""
    ops = [op for m in ZOO for op in dense_operators(m, tokens)]
    ops += [expert_operator(EXPERTS[0], mixtral_tokens), expert_operator(EXPERTS[1], deepseek_tokens)]
    train = {_key(f) for f in training_operators(200)}
    return tuple(f for f in ops if _key(f) not in train)


def _fresh2() -> tuple[FiccoOperator, ...]:
    """Second fresh blind set (committed before any of its results existed, after the pipeline
    selector was frozen): every (model, sublayer) pair of the eight zoo models at **3584 tokens**
    (TP 8 + SP; a token count no design, unseen or fresh operator uses), Mixtral-8x7B-style experts at
    1536 tokens per GPU and DeepSeek-V3-style at 384 (uniform), minus any operator of the training
    set."""
    return _zoo_set(3584, 1536, 384)


def _tokens(rng: random.Random) -> int:
    """Log-uniform in 512..32768, rounded to a multiple of 512 (pieces of N^2 = 64 rows divide)."""
    return max(512, round(2 ** rng.uniform(9, 15) / 512) * 512)


def training_operators(count: int, seed: int = 0, skewed_share: float = 0.05) -> list[FiccoOperator]:
    """``count`` distinct random operators (dense TP+SP sublayers 70 %, FSDP weight gathers 15 %,
    MoE experts 15 %, a ``skewed_share`` of those skewed), none in the unseen or fresh sets."""
    from t3.ficco.scenarios import DESIGN_OPERATORS, UNSEEN_OPERATORS

    rng = random.Random(seed)
    banned = {_key(f) for f in (*UNSEEN_OPERATORS, *FRESH_OPERATORS, *DESIGN_OPERATORS)}
    out: list[FiccoOperator] = []
    seen: set[tuple] = set()
    while len(out) < count:
        u = rng.random()
        if u < 0.7:
            f = rng.choice(dense_operators(rng.choice(ZOO), _tokens(rng)))
        elif u < 0.85:  # FSDP: gathered weight (out x in) times local activations (in x tokens)
            name, h, qkv, fc1, ffn = rng.choice(ZOO[:3] + ZOO[5:7])
            out_f, in_f = rng.choice(((qkv, h), (h, h), (fc1, h), (h, ffn)))
            tok = rng.choice((2048, 4096, 8192))
            f = _F("ag-gemm", out_f, tok, in_f, label=f"{name} FSDP {out_f}x{in_f} weight gather")
        else:
            ex = rng.choice(EXPERTS)
            tok = max(256, round(2 ** rng.uniform(8, 13) / 256) * 256)
            skew = 0.3 if rng.random() < skewed_share / 0.15 else 0.0
            f = expert_operator(ex, tok, skew)
        k = _key(f)
        if k in banned or k in seen:
            continue
        seen.add(k)
        out.append(f)
    return out


def _key(f: FiccoOperator) -> tuple:
    return (f.op, f.m, f.n, f.k, f.gpus, f.dtype, f.skew)


FRESH2_OPERATORS: tuple[FiccoOperator, ...] = _fresh2()


def _fresh3() -> tuple[FiccoOperator, ...]:
    """Third fresh blind set (committed before any of its results existed, with the pipeline
    selector's exact piece model and per-schedule contention factors frozen): every (model,
    sublayer) pair of the eight zoo models at **2304 tokens** (TP 8 + SP; a token count no design,
    unseen, fresh or fresh2 operator uses, and not a multiple of 512 as every training token count
    is), Mixtral-8x7B-style experts at 3072 tokens per GPU and
    DeepSeek-V3-style at 1280 (uniform), and FSDP gathers of the FC-1 and FC-2 weights of the five
    FSDP models of the training rule at **3072 local tokens** (the training rule uses 2048, 4096,
    8192), minus any operator of the training set."""
    ops = [op for m in ZOO for op in dense_operators(m, 2304)]
    ops += [expert_operator(EXPERTS[0], 3072), expert_operator(EXPERTS[1], 1280)]
    for name, h, _qkv, fc1, ffn in ZOO[:3] + ZOO[5:7]:
        for out_f, in_f in ((fc1, h), (h, ffn)):
            ops.append(
                _F(
                    "ag-gemm",
                    out_f,
                    3072,
                    in_f,
                    label=f"{name} FSDP {out_f}x{in_f} weight gather (3072 tokens)",
                )
            )
    train = {_key(f) for f in training_operators(200)}
    return tuple(f for f in ops if _key(f) not in train)


FRESH3_OPERATORS: tuple[FiccoOperator, ...] = _fresh3()


def _fresh4() -> tuple[FiccoOperator, ...]:
    """Fourth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors refitted on the current engine, whose memory and collective models
    changed): every (model, sublayer) pair of the eight zoo models at **2816 tokens** (TP 8 + SP; a
    token count no other set uses, and not a multiple of 512 as every training token count is),
    Mixtral-8x7B-style experts at 2560 tokens per GPU and DeepSeek-V3-style at 768 (uniform), minus
    any operator of the training set."""
    return _zoo_set(2816, 2560, 768)


FRESH4_OPERATORS: tuple[FiccoOperator, ...] = _fresh4()


def _fresh5() -> tuple[FiccoOperator, ...]:
    """Fifth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors refitted on the current engine, whose GEMM pieces on two compute
    streams now take turns on the CUs where the GPU dispatches in launch order): every (model,
    sublayer) pair of the eight zoo models at **3328 tokens** (TP 8 + SP; a token count no other set
    uses, and not a multiple of 512 as every training token count is), Mixtral-8x7B-style experts at
    1792 tokens per GPU and DeepSeek-V3-style at 1152 (uniform), minus any operator of the training
    set."""
    return _zoo_set(3328, 1792, 1152)


FRESH5_OPERATORS: tuple[FiccoOperator, ...] = _fresh5()


def _fresh6() -> tuple[FiccoOperator, ...]:
    """Sixth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors refitted on the current engine, whose GEMM tiles now pay their
    exposed epilogue and whose H100 / H200 GEMM rates were recalibrated on measured rows): every
    (model, sublayer) pair of the eight zoo models at **3840 tokens** (TP 8 + SP; a token count no other
    set uses, and not a multiple of 512 as every training token count is), Mixtral-8x7B-style experts
    at 2304 tokens per GPU and DeepSeek-V3-style at 640 (uniform), minus any operator of the training
    set."""
    return _zoo_set(3840, 2304, 640)


FRESH6_OPERATORS: tuple[FiccoOperator, ...] = _fresh6()


def _fresh7() -> tuple[FiccoOperator, ...]:
    """Seventh fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors refitted on the current engine, whose H100 / H200 GEMMs now lose a
    thread-block cluster slot per CU a communication kernel holds): every (model, sublayer) pair of the
    eight zoo models at **4352 tokens** (TP 8 + SP; a token count no other set uses, and not a multiple
    of 512 as every training token count is), Mixtral-8x7B-style experts at 1280 tokens per GPU and
    DeepSeek-V3-style at 896 (uniform), minus any operator of the training set."""
    return _zoo_set(4352, 1280, 896)


FRESH7_OPERATORS: tuple[FiccoOperator, ...] = _fresh7()


def _fresh8() -> tuple[FiccoOperator, ...]:
    """Eighth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors refitted on the current engine, whose MI300X GEMMs now choose among
    hipBLASLt's own macro-tiles, ``compute.tiles``): every (model, sublayer) pair of the eight zoo models
    at **4864 tokens** (TP 8 + SP; a token count no other set uses, and not a multiple of 512 as every
    training token count is), Mixtral-8x7B-style experts at 1664 tokens per GPU and DeepSeek-V3-style at
    832 (uniform), minus any operator of the training set."""
    return _zoo_set(4864, 1664, 832)


FRESH8_OPERATORS: tuple[FiccoOperator, ...] = _fresh8()


def _fresh9() -> tuple[FiccoOperator, ...]:
    """Ninth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors and tree refitted on the current engine, whose GEMMs narrower than a
    tile now load only their in-bounds rows and whose plain GEMMs of few tiles may split K): every
    (model, sublayer) pair of the eight zoo models at **5376 tokens** (TP 8 + SP; a token count no other
    set uses, and not a multiple of 512 as every training token count is), Mixtral-8x7B-style experts at
    1408 tokens per GPU and DeepSeek-V3-style at 704 (uniform), minus any operator of the training set."""
    return _zoo_set(5376, 1408, 704)


FRESH9_OPERATORS: tuple[FiccoOperator, ...] = _fresh9()


def _fresh10() -> tuple[FiccoOperator, ...]:
    """Tenth fresh blind set (committed before any of its results existed, together with the pipeline
    selector's contention factors and tree refitted on the current GEMM model, whose tiles keep as many K
    stages in flight as fit in shared memory): every (model, sublayer) pair of the eight zoo models at
    **5888 tokens** (TP 8 + SP; a token count no other set uses, and not a multiple of 512 as every
    training token count is), Mixtral-8x7B-style experts at 1920 tokens per GPU and DeepSeek-V3-style at
    960 (uniform), minus any operator of the training set."""
    return _zoo_set(5888, 1920, 960)


FRESH10_OPERATORS: tuple[FiccoOperator, ...] = _fresh10()
