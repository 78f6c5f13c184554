"""Model zoo: Transformer dimensions by name, or from a user TOML file with the same keys."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from t3.errors import ConfigError


class ModelSpec(BaseModel):
    # strict: "1024" is not 1024, "yes" is not True, 2048.0 is not 2048
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: str
    hidden: int = Field(gt=0)
    layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0, description="KV heads (GQA); default = heads")
    ffn: int = Field(gt=0, description="MLP intermediate width")
    gated: bool = Field(default=False, description="gated MLP (SwiGLU): FC-1 produces 2*ffn")
    tokens: int = Field(gt=0, description="default tokens per iteration (batch x sequence)")
    dtype: str = "fp16"

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        """Dimensions that only make sense together: every derived width is a whole number >= 1."""
        from t3.workload.sublayers import DTYPE_BYTES

        if self.hidden % self.heads:
            raise ValueError(
                f"heads: hidden width {self.hidden} does not split into {self.heads} heads "
                f"(head dim {self.hidden / self.heads:g} is not a whole number)"
            )
        kv = self.kv_heads
        if kv is not None and (kv > self.heads or self.heads % kv):
            raise ValueError(f"kv_heads: {kv} KV heads do not divide the {self.heads} query heads")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype: unknown dtype '{self.dtype}' (available: {', '.join(DTYPE_BYTES)})")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def qkv_width(self) -> int:
        kv = self.kv_heads or self.heads
        return (self.heads + 2 * kv) * self.head_dim

    @property
    def fc1_width(self) -> int:
        return self.ffn * (2 if self.gated else 1)

    def params(self) -> int:
        """Weight parameters of the Transformer layers (embeddings excluded)."""
        h = self.hidden
        attn = h * self.qkv_width + h * h
        mlp = h * self.fc1_width + self.ffn * h
        return self.layers * (attn + mlp)


def _spec(name: str, data: dict, origin: str) -> ModelSpec:
    from t3.config.hardware import format_validation_error

    try:
        return ModelSpec.model_validate({"name": name, **data})
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"model '{origin}'")) from None


@cache
def _zoo() -> dict[str, ModelSpec]:
    text = resources.files("t3.workload").joinpath("models", "zoo.toml").read_text()
    return {k: _spec(k, v, k) for k, v in tomllib.loads(text).items()}


def model_names() -> list[str]:
    return list(_zoo())


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A zoo model by name (``t-nlg``) or a TOML file with the zoo's keys (top-level, no table)."""
    if not isinstance(name_or_path, str | Path):
        raise ConfigError(f"model: expected a zoo name or a model TOML file, got {name_or_path!r}")
    s = str(name_or_path)
    if s.endswith(".toml"):
        from t3.config.toml_file import read_toml

        p = Path(s)
        data = read_toml(p, "model")
        return _spec(data.pop("name", p.stem), data, s)
    zoo = _zoo()
    if s not in zoo:
        raise ConfigError(f"model: unknown model '{s}' (available: {', '.join(zoo)})")
    return zoo[s]
