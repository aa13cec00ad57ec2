"""Model configuration: a frozen dataclass with named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Shape of the transformer. `block_size` is the diffusion block (1 = autoregressive)."""

    vocab_size: int
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 704
    """Hidden width of the SwiGLU feed-forward."""
    max_seq_len: int = 512
    block_size: int = 16
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head size must be even for RoPE")
        if self.block_size < 1 or self.vocab_size < 1:
            raise ValueError("block_size and vocab_size must be positive")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown model config fields: {sorted(unknown)}")
        return cls(**data)


PRESETS: dict[str, dict[str, Any]] = {
    # Runs and trains on a 2-core CPU: about 3.5M parameters with a 1k vocabulary.
    "tiny": {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 704},
    "small": {"d_model": 384, "n_layers": 6, "n_heads": 6, "d_ff": 1024},
    # GPU sizes.
    "base": {"d_model": 768, "n_layers": 12, "n_heads": 12, "d_ff": 2048},
    "large": {"d_model": 1024, "n_layers": 24, "n_heads": 16, "d_ff": 2816},
}


def preset(name: str, vocab_size: int, **overrides: Any) -> ModelConfig:
    """A named preset with a vocabulary size; raises KeyError naming the presets."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return ModelConfig(vocab_size=vocab_size, **{**PRESETS[name], **overrides})
