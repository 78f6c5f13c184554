"""Model zoo: Transformer dimensions by name, or from a user TOML file with the same keys."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from t3.errors import ConfigError


class ModelSpec(BaseModel):
    # strict: "1024" is not 1024, "yes" is not True, 2048.0 is not 2048
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: str
    hidden: int = Field(gt=0)
    layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0, description="KV heads (GQA); default = heads")
    kv_channels: int | None = Field(
        default=None,
        gt=0,
        description="per-head width (Megatron kv_channels, HF head_dim); default hidden // heads",
    )
    ffn: int = Field(gt=0, description="MLP intermediate width")
    gated: bool = Field(default=False, description="gated MLP (SwiGLU): FC-1 produces 2*ffn")
    tokens: int = Field(gt=0, description="default tokens per iteration (batch x sequence)")
    dtype: str = "fp16"
    # mixture of experts (None = dense). ``ffn`` is then the per-token MLP width of a MoE layer:
    # top_k x expert_ffn + shared_ffn (docs/traces.md: how MoE maps to the TP sublayers)
    experts: int | None = Field(default=None, gt=0, description="routed experts per MoE layer")
    top_k: int | None = Field(default=None, gt=0, description="experts each token is routed to")
    expert_ffn: int | None = Field(default=None, gt=0, description="intermediate width of one expert")
    shared_ffn: int = Field(default=0, ge=0, description="intermediate width of the shared expert(s)")
    split_heads: bool = Field(
        default=True,
        description="TP splits the attention by whole heads (heads and kv_heads divide by TP, as Megatron-LM "
        "requires); false: by width only (heads x head_dim / TP), as the T3 paper slices T-NLG and PaLM",
    )
    # the key a field has in the file the model came from (a config.json's num_attention_heads for heads),
    # for errors; empty for the zoo and model TOML files, whose keys are the field names
    _keys: dict[str, str] = PrivateAttr(default_factory=dict)

    def key(self, field: str) -> str:
        """The name of ``field`` in the file this model was read from (errors name it)."""
        return self._keys.get(field, field)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ModelSpec:
        """Dimensions that only make sense together: every derived width is a whole number >= 1; the
        mixture-of-experts fields are set together and agree. Errors name the file's key
        (``info.context["keys"]``: a config.json's names)."""
        from t3.workload.sublayers import DTYPE_BYTES

        keys = (info.context or {}).get("keys", {})

        def k(field: str) -> str:
            return keys.get(field, field)

        if self.kv_channels is None and self.hidden % self.heads:
            raise ValueError(
                f"{k('heads')}: hidden width {self.hidden} does not split into {self.heads} heads "
                f"(head dim {self.hidden / self.heads:g} is not a whole number"
                + (f"; {k('hidden')} / {k('heads')})" if keys else ")")
            )
        kv = self.kv_heads
        if kv is not None and (kv > self.heads or self.heads % kv):
            raise ValueError(
                f"{k('kv_heads')}: {kv} KV heads do not divide the {self.heads} query heads ({k('heads')})"
            )
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype: unknown dtype '{self.dtype}' (available: {', '.join(DTYPE_BYTES)})")
        moe = {"experts": self.experts, "top_k": self.top_k, "expert_ffn": self.expert_ffn}
        if any(v is not None for v in moe.values()) or self.shared_ffn:
            missing = [k(f) for f, v in moe.items() if v is None]
            if missing:
                raise ValueError(
                    f"{missing[0]}: missing field (a mixture-of-experts model sets {', '.join(map(k, moe))})"
                )
            assert self.experts is not None and self.top_k is not None and self.expert_ffn is not None
            if self.top_k > self.experts:
                raise ValueError(
                    f"{k('top_k')}: each token is routed to {self.top_k} experts but a layer has only "
                    f"{self.experts} ({k('experts')}); must be <= {self.experts}"
                )
            want = self.top_k * self.expert_ffn + self.shared_ffn
            if self.ffn != want:
                raise ValueError(
                    f"ffn: a mixture-of-experts layer's per-token MLP width is top_k x expert_ffn + shared_ffn "
                    f"= {self.top_k} x {self.expert_ffn} + {self.shared_ffn} = {want}, got {self.ffn}"
                )
        return self

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads

    @property
    def attn_width(self) -> int:
        """Input width of the attention output projection: heads x head_dim (= hidden unless set)."""
        return self.heads * self.head_dim

    @property
    def qkv_width(self) -> int:
        kv = self.kv_heads or self.heads
        return (self.heads + 2 * kv) * self.head_dim

    @property
    def fc1_width(self) -> int:
        return self.ffn * (2 if self.gated else 1)

    def params(self) -> int:
        """Weight parameters of the Transformer layers (embeddings excluded; MoE: active per token)."""
        h = self.hidden
        attn = h * self.qkv_width + self.attn_width * h
        mlp = h * self.fc1_width + self.ffn * h
        return self.layers * (attn + mlp)


def _spec(name: str, data: dict, origin: str, keys: dict[str, str] | None = None) -> ModelSpec:
    """``keys``: the file's name of each field, when they differ (a config.json's): errors use them."""
    from t3.config.hardware import format_validation_error

    try:
        spec = ModelSpec.model_validate({"name": name, **data}, context={"keys": keys or {}})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"model '{origin}'")) from None
    spec._keys = dict(keys or {})
    return spec


@cache
def _zoo() -> dict[str, ModelSpec]:
    text = resources.files("t3.workload").joinpath("models", "zoo.toml").read_text()
    return {k: _spec(k, v, k) for k, v in tomllib.loads(text).items()}


def model_names() -> list[str]:
    return list(_zoo())


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A zoo model by name (``t-nlg``), a TOML file with the zoo's keys (top-level, no table), or a
    Hugging Face ``config.json`` (:mod:`t3.workload.hf`)."""
    if not isinstance(name_or_path, str | Path):
        raise ConfigError(
            f"model: expected a zoo name, a model TOML or a config.json file, got {name_or_path!r}"
        )
    s = str(name_or_path)
    if s.endswith(".json"):
        from t3.workload.hf import load_hf_config

        return load_hf_config(s)
    if s.endswith(".toml"):
        from t3.config.toml_file import read_toml

        p = Path(s)
        data = read_toml(p, "model")
        _refuse_table_of_models(data, s)
        name = data.pop("name", p.stem)
        if not isinstance(name, str) or not name.strip() or not name.isprintable():
            raise ConfigError(
                f"model '{s}': name: expected a non-empty string of printable characters, got {name!r}"
            )
        return _spec(name, data, s)
    zoo = _zoo()
    if s not in zoo:
        raise ConfigError(f"model: unknown model '{s}' (available: {', '.join(zoo)})")
    return zoo[s]


def _refuse_table_of_models(data: dict, origin: str) -> None:
    """A file laid out like the zoo (one ``[name]`` table per model) is not a model file: say how to use it."""
    tables = [k for k, v in data.items() if isinstance(v, dict)]
    if not tables or set(data) & set(ModelSpec.model_fields):
        return  # a model file (with perhaps a stray table: the field checks name it)
    listed = ", ".join(tables[:8]) + (f", ... ({len(tables)} in all)" if len(tables) > 8 else "")
    what = "several models" if len(tables) > 1 else "a model as a table"
    zoo = [t for t in tables if t in _zoo()]
    hint = f"; the zoo's own models are passed by name (--model {zoo[0]})" if zoo else ""
    raise ConfigError(
        f"model: '{origin}' holds {what} ([{listed}]) laid out like the zoo; a model file has its fields "
        f"at top level (hidden = ..., layers = ..., heads = ..., ffn = ..., tokens = ...): copy one table's "
        f"fields, without its [name] line, into a file of its own and pass that file{hint}"
    )
