"""Hugging Face config.json -> ModelSpec -> TP sublayer GEMM shapes, against hand derivations.

The configs in data/hf/ are written by hand from each model's published config.json (URL and licence
inside each file). Oracles: the GEMM shapes derived by hand below from the published widths, and the
models' published parameter counts (embeddings added back: vocab x hidden, twice unless tied).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t3.api import run
from t3.errors import ConfigError, WorkloadError
from t3.workload import get_model, sublayer_operator
from t3.workload.hf import DEFAULT_TOKENS, moe_operator

DATA = Path(__file__).parent / "data" / "hf"
T, TP = 4096, 8


def shapes(path: str, tp: int = TP, tokens: int = T) -> dict[str, tuple[int, int, int]]:
    m = get_model(DATA / path)
    return {sl: (g.m, g.n, g.k) for sl in ("op", "fc2", "fc1-bwd", "ip-bwd")
            for g in [sublayer_operator(m, sl, tp, tokens).gemm]}  # fmt: skip


# (file, {sublayer: (M, N, K)}) derived by hand: M = tokens, N = hidden, K = width / TP with
# op: heads x head_dim; fc2: intermediate (MoE: top_k x expert + shared); fc1-bwd: 2 x that if
# gated; ip-bwd: (heads + 2 kv_heads) x head_dim
HAND = [
    # Llama 3.1 8B: 32 heads x 128, 8 KV heads, intermediate 14336, SwiGLU
    ("llama-3.1-8b.json", {"op": (T, 4096, 4096 // 8), "fc2": (T, 4096, 14336 // 8),
                           "fc1-bwd": (T, 4096, 2 * 14336 // 8), "ip-bwd": (T, 4096, (32 + 2 * 8) * 128 // 8)}),
    ("mistral-7b-v0.1.json", {"op": (T, 4096, 512), "fc2": (T, 4096, 1792), "fc1-bwd": (T, 4096, 3584),
                              "ip-bwd": (T, 4096, 768)}),
    # Qwen3 8B: explicit head_dim 128 (= 4096 / 32)
    ("qwen3-8b.json", {"op": (T, 4096, 512), "fc2": (T, 4096, 12288 // 8), "fc1-bwd": (T, 4096, 24576 // 8),
                       "ip-bwd": (T, 4096, 768)}),
    # Gemma 7B: head_dim 256 x 16 heads = 4096 != hidden 3072; MHA (16 KV heads); GeGLU
    ("gemma-7b.json", {"op": (T, 3072, 16 * 256 // 8), "fc2": (T, 3072, 24576 // 8),
                       "fc1-bwd": (T, 3072, 2 * 24576 // 8), "ip-bwd": (T, 3072, 3 * 16 * 256 // 8)}),
    # GPT-2 124M: n_inner null -> 4 x 768; plain GELU MLP; MHA
    ("gpt2.json", {"op": (T, 768, 768 // 4), "fc2": (T, 768, 3072 // 4), "fc1-bwd": (T, 768, 3072 // 4),
                   "ip-bwd": (T, 768, 3 * 768 // 4)}),
    # Pythia 1.4B (GPT-NeoX): plain MLP 8192
    ("pythia-1.4b.json", {"op": (T, 2048, 256), "fc2": (T, 2048, 1024), "fc1-bwd": (T, 2048, 1024),
                          "ip-bwd": (T, 2048, 768)}),
    # Mixtral 8x7B: top-2 of 8 experts of 14336
    ("mixtral-8x7b-v0.1.json", {"op": (T, 4096, 512), "fc2": (T, 4096, 2 * 14336 // 8),
                                "fc1-bwd": (T, 4096, 4 * 14336 // 8), "ip-bwd": (T, 4096, 768)}),
    # Qwen1.5-MoE-A2.7B: top-4 of 60 experts of 1408 + shared 5632; MHA 16 x 128
    ("qwen1.5-moe-a2.7b.json", {"op": (T, 2048, 256), "fc2": (T, 2048, (4 * 1408 + 5632) // 8),
                                "fc1-bwd": (T, 2048, 2 * (4 * 1408 + 5632) // 8), "ip-bwd": (T, 2048, 768)}),
    # Qwen3-30B-A3B: 32 heads x 128 = 4096 != hidden 2048, 4 KV heads (so TP 4: whole KV heads per GPU);
    # top-8 of 128 experts of 768
    ("qwen3-30b-a3b.json", {"op": (T, 2048, 4096 // 4), "fc2": (T, 2048, 8 * 768 // 4),
                            "fc1-bwd": (T, 2048, 2 * 8 * 768 // 4), "ip-bwd": (T, 2048, (32 + 8) * 128 // 4)}),
    # DeepSeekMoE 16B: top-6 of 64 experts of 1408 + 2 shared experts of 1408
    ("deepseek-moe-16b-base.json", {"op": (T, 2048, 256), "fc2": (T, 2048, (6 + 2) * 1408 // 8),
                                    "fc1-bwd": (T, 2048, 2 * 8 * 1408 // 8), "ip-bwd": (T, 2048, 768)}),
]  # fmt: skip


@pytest.mark.parametrize("path,expect", HAND, ids=[h[0] for h in HAND])
def test_gemm_shapes_match_hand_derivation(path, expect):
    tp = 4 if path in ("gpt2.json", "qwen3-30b-a3b.json") else TP
    assert shapes(path, tp) == expect


# published parameter counts (model cards; MoE: activated parameters), all embeddings included
PUBLISHED = [
    ("llama-3.1-8b.json", 8.03e9, 128256, False),
    ("gemma-7b.json", 8.54e9, 256000, True),
    ("gpt2.json", 124e6, 50257 + 1024, True),  # + learned positions
    ("pythia-1.4b.json", 1.41e9, 50304, False),
    ("mixtral-8x7b-v0.1.json", 12.9e9, 32000, False),  # "12.9B active parameters"
    ("qwen3-30b-a3b.json", 3.3e9, 151936, False),  # "3.3B activated"
    ("qwen1.5-moe-a2.7b.json", 2.7e9, 151936, False),  # "2.7B activated"
    ("deepseek-moe-16b-base.json", 2.8e9, 102400, False),  # "2.8B activated"
]


@pytest.mark.parametrize("path,published,vocab,tied", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_counts_match_published(path, published, vocab, tied):
    m = get_model(DATA / path)
    total = m.params() + vocab * m.hidden * (1 if tied else 2)
    assert total == pytest.approx(published, rel=0.03)


def test_families_fields_and_defaults():
    m = get_model(DATA / "qwen3-30b-a3b.json")
    assert (m.experts, m.top_k, m.expert_ffn, m.shared_ffn, m.kv_heads, m.head_dim) == (
        128,
        8,
        768,
        0,
        4,
        128,
    )
    assert m.gated and m.dtype == "bf16" and m.tokens == DEFAULT_TOKENS and m.name == "qwen3-30b-a3b"
    assert get_model(DATA / "pythia-1.4b.json").dtype == "fp16"
    assert not get_model(DATA / "gpt2.json").gated
    d = get_model(DATA / "deepseek-moe-16b-base.json")
    assert (d.experts, d.top_k, d.shared_ffn) == (64, 6, 2 * 1408)


def test_moe_operator_is_ficco_moe():
    m = get_model(DATA / "mixtral-8x7b-v0.1.json")
    f = moe_operator(m, 1024, gpus=8)
    assert (f.op, f.m, f.n, f.k, f.gpus) == ("moe", 1024 * 2, 14336, 4096, 8)
    with pytest.raises(WorkloadError, match="no experts"):
        moe_operator(get_model(DATA / "llama-3.1-8b.json"), 1024)


def _write(tmp_path, data, name="config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def test_missing_key_is_named(tmp_path):
    data = json.loads((DATA / "llama-3.1-8b.json").read_text())
    del data["intermediate_size"]
    with pytest.raises(ConfigError, match="intermediate_size: missing key"):
        get_model(_write(tmp_path, data))
    data = json.loads((DATA / "mixtral-8x7b-v0.1.json").read_text())
    del data["num_experts_per_tok"]
    with pytest.raises(ConfigError, match="num_experts_per_tok: missing key"):
        get_model(_write(tmp_path, data))


@pytest.mark.parametrize(
    "patch,match",
    [
        ({"model_type": "t5"}, "model_type: unsupported architecture 't5'"),
        ({"model_type": None}, "model_type: missing key"),
        ({"kv_lora_rank": 512}, "kv_lora_rank: multi-head latent attention"),
        ({"hidden_size": "4096"}, "hidden_size: expected an integer"),
        ({"num_attention_heads": 0}, "num_attention_heads: must be > 0"),
        ({"torch_dtype": "int4"}, "torch_dtype: unsupported precision"),
    ],
)
def test_bad_configs_are_one_line_errors(tmp_path, patch, match):
    data = json.loads((DATA / "llama-3.1-8b.json").read_text())
    data.update(patch)
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        get_model(_write(tmp_path, data))


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        get_model(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        get_model(_write_text(tmp_path / "bad.json", '{"model_type": "llama",'))
    (tmp_path / "d.json").mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        get_model(tmp_path / "d.json")


def _write_text(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_api_run_and_zoo_agree(tmp_path):
    """The API takes a config.json path; Llama 3.1 8B from its config has the widths of the zoo's
    llama-3-8b (bf16 there, fp16 in the zoo: same rate and size on h100-8, so the same time)."""
    a = run(model=str(DATA / "llama-3.1-8b.json"), tp=8, sublayer="fc2", tokens=8192, hardware="h100-8")
    b = run(model="llama-3-8b", tp=8, sublayer="fc2", tokens=8192, hardware="h100-8")
    assert a["gemm"] == {"m": 8192, "n": 4096, "k": 1792, "dtype": "bf16"}
    assert b["gemm"] == {"m": 8192, "n": 4096, "k": 1792, "dtype": "fp16"}
    assert a["model"] == "llama-3.1-8b" and a["time_s"] == b["time_s"] > 0
