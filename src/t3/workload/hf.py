"""Hugging Face ``config.json`` -> :class:`~t3.workload.models.ModelSpec`.

A ``config.json`` names its family in ``model_type``; each family spells the same quantities with
its own keys. The loader reads only the keys that fix the tensor-parallel GEMM shapes and ignores
the rest (vocabulary, rope, norms, dropout, ...):

==================================  ===================================================================
family (``model_type``)             keys read
==================================  ===================================================================
llama, mistral, qwen2, qwen3,       ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
gemma, gemma2, phi3, granite,       ``intermediate_size``; optional ``num_key_value_heads`` (GQA,
olmo2                               default = heads), ``head_dim`` (default hidden / heads).
                                    Gated MLP (gate + up): FC-1 is ``2 x intermediate_size`` wide
gpt2                                ``n_embd``, ``n_layer``, ``n_head``; optional ``n_inner``
                                    (default 4 x n_embd). Plain MLP
gpt_neox                            ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
                                    ``intermediate_size``. Plain MLP
mixtral                             the llama keys + ``num_local_experts``, ``num_experts_per_tok``
                                    (expert width = ``intermediate_size``)
qwen2_moe, qwen3_moe                the llama keys + ``num_experts``, ``num_experts_per_tok``,
                                    ``moe_intermediate_size``; optional
                                    ``shared_expert_intermediate_size`` (qwen2_moe)
deepseek (DeepSeekMoE)              the llama keys + ``n_routed_experts``, ``num_experts_per_tok``,
                                    ``moe_intermediate_size``; optional ``n_shared_experts``
==================================  ===================================================================

Precision: ``torch_dtype`` (or ``dtype``): bfloat16 -> bf16, float16 -> fp16, float32 -> fp32;
bf16 when absent. ``config.json`` holds no batch: ``tokens`` defaults to :data:`DEFAULT_TOKENS`
(pass ``--tokens``).

MoE layers: ``ModelSpec.ffn`` is the per-token MLP width of a MoE layer, ``top_k x expert width +
shared-expert width``. With the experts sliced over the TP group (expert tensor parallelism), the
FC-2 of a MoE layer does the FLOPs of a dense GEMM ``T x H x ffn/t`` and ends in the same ``T x H``
all-reduce, so the TP sublayers keep their meaning; ``params()`` then counts the *active*
parameters. The expert-parallel form (all-to-all dispatch, expert FFN, combine) is FiCCO's ``moe``
operation: :func:`moe_operator`.

Not mapped, a clear error naming the key: multi-head latent attention (``kv_lora_rank``,
DeepSeek-V2/V3), and any ``model_type`` outside the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t3.errors import ConfigError

DEFAULT_TOKENS = 8192  # tokens per iteration when none is given: the zoo's Llama 3 default (batch unknown)

LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "granite", "olmo2")
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek")
FAMILIES = (*LLAMA_LIKE, "gpt2", "gpt_neox", *MOE)
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


class _Config:
    """Typed reads of one config.json; every error names the key and the file."""

    def __init__(self, data: dict[str, Any], origin: str):
        self.data, self.origin = data, origin

    def _fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"model '{self.origin}': {key}: {msg}")

    def int(self, key: str, default: int | None = None, *, required: bool = True) -> int | None:
        v = self.data.get(key)
        if v is None:
            if default is not None or not required:
                return default
            raise self._fail(key, "missing key (required for this model_type)")
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._fail(key, f"expected an integer, got {v!r}")
        if v <= 0:
            raise self._fail(key, f"must be > 0, got {v}")
        return v

    def req(self, key: str) -> int:
        v = self.int(key)
        assert v is not None
        return v


def _dtype(c: _Config) -> str:
    for key in ("torch_dtype", "dtype"):
        v = c.data.get(key)
        if v is None:
            continue
        name = str(v).removeprefix("torch.")
        if name not in DTYPES:
            raise c._fail(key, f"unsupported precision '{v}' (supported: {', '.join(DTYPES)})")
        return DTYPES[name]
    return "bf16"


def _moe(c: _Config, family: str) -> dict[str, int]:
    if family == "mixtral":
        return {
            "experts": c.req("num_local_experts"), "top_k": c.req("num_experts_per_tok"),
            "expert_ffn": c.req("intermediate_size"), "shared_ffn": 0,
        }  # fmt: skip
    if family in ("qwen2_moe", "qwen3_moe"):
        return {
            "experts": c.req("num_experts"), "top_k": c.req("num_experts_per_tok"),
            "expert_ffn": c.req("moe_intermediate_size"),
            "shared_ffn": c.int("shared_expert_intermediate_size", required=False) or 0,
        }  # fmt: skip
    width = c.req("moe_intermediate_size")  # deepseek: shared experts have the routed experts' width
    shared = c.int("n_shared_experts", required=False) or 0
    return {"experts": c.req("n_routed_experts"), "top_k": c.req("num_experts_per_tok"),
            "expert_ffn": width, "shared_ffn": shared * width}  # fmt: skip


LLAMA_KEYS = {"hidden": "hidden_size", "layers": "num_hidden_layers", "heads": "num_attention_heads",
              "kv_heads": "num_key_value_heads", "kv_channels": "head_dim", "ffn": "intermediate_size"}  # fmt: skip
MOE_KEYS = {
    "mixtral": {"experts": "num_local_experts", "top_k": "num_experts_per_tok", "expert_ffn": "intermediate_size"},
    "qwen2_moe": {"experts": "num_experts", "top_k": "num_experts_per_tok", "expert_ffn": "moe_intermediate_size",
                  "shared_ffn": "shared_expert_intermediate_size"},
    "deepseek": {"experts": "n_routed_experts", "top_k": "num_experts_per_tok", "expert_ffn": "moe_intermediate_size",
                 "shared_ffn": "n_shared_experts x moe_intermediate_size"},
}  # fmt: skip
MOE_KEYS["qwen3_moe"] = MOE_KEYS["qwen2_moe"]


def field_keys(data: dict[str, Any]) -> dict[str, str]:
    """The config.json key of each ModelSpec field of this family (errors name the key, not the field)."""
    family = data.get("model_type")
    if family == "gpt2":
        ffn = "n_inner" if data.get("n_inner") is not None else "n_inner (default 4 x n_embd)"
        return {"hidden": "n_embd", "layers": "n_layer", "heads": "n_head", "ffn": ffn}
    keys = dict(LLAMA_KEYS)
    if family in MOE_KEYS:
        keys["ffn"] = "top_k x expert width + shared width"  # derived: no key of its own
        keys.update(MOE_KEYS[family])
    return keys


def spec_fields(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """The ModelSpec fields of a parsed config.json (raises ConfigError naming the key)."""
    if not isinstance(data, dict):
        raise ConfigError(f"model '{origin}': expected a JSON object (a Hugging Face config.json)")
    family = data.get("model_type")
    if family is None:
        raise ConfigError(f"model '{origin}': model_type: missing key (is this a Hugging Face config.json?)")
    if family not in FAMILIES:
        raise ConfigError(
            f"model '{origin}': model_type: unsupported architecture '{family}' (supported: {', '.join(FAMILIES)})"
        )
    c = _Config(data, origin)
    if data.get("kv_lora_rank") is not None:
        raise c._fail(
            "kv_lora_rank", "multi-head latent attention (DeepSeek-V2/V3) is not mapped to TP sublayers"
        )
    if family == "gpt2":
        h = c.req("n_embd")
        return {"hidden": h, "layers": c.req("n_layer"), "heads": c.req("n_head"),
                "ffn": c.int("n_inner", 4 * h), "gated": False, "dtype": _dtype(c)}  # fmt: skip
    out: dict[str, Any] = {
        "hidden": c.req("hidden_size"),
        "layers": c.req("num_hidden_layers"),
        "heads": c.req("num_attention_heads"),
        "dtype": _dtype(c),
    }
    if family == "gpt_neox":
        return {**out, "ffn": c.req("intermediate_size"), "gated": False}
    kv = c.int("num_key_value_heads", required=False)
    if kv is not None and kv != out["heads"]:
        out["kv_heads"] = kv
    head_dim = c.int("head_dim", required=False)
    if head_dim is not None and head_dim * out["heads"] != out["hidden"]:
        out["kv_channels"] = head_dim
    out["gated"] = True
    if family in MOE:
        moe = _moe(c, family)
        out.update(moe)
        out["ffn"] = moe["top_k"] * moe["expert_ffn"] + moe["shared_ffn"]
        if not moe["shared_ffn"]:
            out.pop("shared_ffn")
    else:
        out["ffn"] = c.req("intermediate_size")
    return out


def _unique_keys(origin: str):
    """A ``json.loads`` object hook that refuses a key given twice in one object (Python's JSON reader
    keeps the last silently; Hugging Face's reader too, so which one a model meant is unknown)."""

    def hook(pairs: list[tuple[str, object]]) -> dict:
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(f"model '{origin}': key '{k}' is given twice in one object (give it once)")
            out[k] = v
        return out

    return hook


def load_hf_config(path: str | Path):
    """A :class:`~t3.workload.models.ModelSpec` from a Hugging Face ``config.json`` file."""
    from t3.workload.models import _spec

    p = Path(path)
    s = str(path)
    if p.is_dir():
        raise ConfigError(f"model: '{s}' is a directory; pass its config.json")
    if not p.is_file():
        raise ConfigError(f"model: file '{s}' not found")
    try:
        data = json.loads(p.read_text(), object_pairs_hook=_unique_keys(s))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"model '{s}': not valid JSON: {err}") from None
    name = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return _spec(name, {**spec_fields(data, s), "tokens": DEFAULT_TOKENS}, s, field_keys(data))


def moe_operator(model, tokens_per_gpu: int, gpus: int = 8, skew: float = 0.0):
    """FiCCO's expert-parallel ``moe`` operation of a MoE model: ``tokens_per_gpu x top_k`` routed
    rows per GPU, expert width ``n``, hidden ``k`` (all-to-all dispatch, gated expert FFN, combine)."""
    from t3.errors import WorkloadError
    from t3.ficco.space import FiccoOperator

    if model.experts is None or model.top_k is None or model.expert_ffn is None:
        raise WorkloadError(f"model: {model.name} has no experts (not a mixture-of-experts model)")
    if tokens_per_gpu <= 0:
        raise WorkloadError(f"tokens: must be > 0, got {tokens_per_gpu}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 2:
        raise WorkloadError(f"gpus: expected an integer >= 2 (the expert-parallel degree), got {gpus!r}")
    # Megatron-LM asserts num_moe_experts % expert_model_parallel_size == 0: every GPU holds as many experts
    if model.experts % gpus:
        ok = [g for g in range(2, model.experts + 1) if model.experts % g == 0]
        raise WorkloadError(
            f"gpus: model '{model.name}' has {model.experts} routed experts ({model.key('experts')}), not "
            f"divisible by {gpus} GPUs of expert parallelism (every GPU holds as many experts, as Megatron-LM "
            f"requires); valid expert-parallel degrees: {', '.join(map(str, ok)) or 'none'}"
        )
    return FiccoOperator(
        "moe",
        tokens_per_gpu * model.top_k,
        model.expert_ffn,
        model.hidden,
        gpus,
        model.dtype,
        skew,
        label=f"{model.name} experts (EP{gpus})",
    )
