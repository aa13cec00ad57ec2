"""A block-diffusion transformer: RoPE, RMSNorm, SwiGLU, attention under any boolean mask.

The same weights serve three uses, chosen by the attention mask the caller builds
(`engine/masks.py`): block-diffusion training over `[prompt | clean | noisy]`, block
decoding against an exact KV cache, and causal autoregressive decoding (the AR twin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.config import ModelConfig


@dataclass(slots=True)
class KVCache:
    """Keys and values of committed tokens, per layer; row b holds `lengths[b]` tokens.

    Tensors are (batch, heads, capacity, head_dim). Rows are independent requests, so
    a batch can mix prompts of different lengths.
    """

    keys: list[Tensor]
    values: list[Tensor]
    lengths: Tensor  # (batch,) int64

    @classmethod
    def empty(
        cls,
        config: ModelConfig,
        batch: int,
        capacity: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> KVCache:
        shape = (batch, config.n_heads, capacity, config.head_dim)
        return cls(
            keys=[torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)],
            values=[torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)],
            lengths=torch.zeros(batch, dtype=torch.long, device=device),
        )

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    def rows(self, index: list[int]) -> KVCache:
        """A copy holding only the given rows (for requests leaving or joining a batch)."""
        idx = torch.tensor(index, device=self.lengths.device)
        return KVCache(
            [k.index_select(0, idx) for k in self.keys],
            [v.index_select(0, idx) for v in self.values],
            self.lengths.index_select(0, idx),
        )

    @staticmethod
    def stack(caches: list[KVCache]) -> KVCache:
        """Concatenate single- or multi-row caches along the batch (same capacity)."""
        n_layers = len(caches[0].keys)
        return KVCache(
            [torch.cat([c.keys[i] for c in caches]) for i in range(n_layers)],
            [torch.cat([c.values[i] for c in caches]) for i in range(n_layers)],
            torch.cat([c.lengths for c in caches]),
        )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).type_as(x) * self.weight


def rope_tables(config: ModelConfig, device: torch.device) -> tuple[Tensor, Tensor]:
    """cos/sin tables (max_seq_len, head_dim/2)."""
    half = config.head_dim // 2
    freqs = config.rope_theta ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.arange(config.max_seq_len, device=device, dtype=torch.float32)[:, None] * freqs
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: (batch, heads, seq, head_dim); cos/sin: (batch, 1, seq, head_dim/2)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(
        self,
        x: Tensor,  # (batch, seq, d_model)
        cos: Tensor,
        sin: Tensor,
        mask: Tensor,  # (batch, 1, seq, past + seq) bool, True = may attend
        past: tuple[Tensor, Tensor] | None,  # (batch, heads, past, head_dim) each
    ) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        keys, values = (
            (k, v) if past is None else (torch.cat([past[0], k], 2), torch.cat([past[1], v], 2))
        )
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, -1)), k, v


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config)
        self.ff_norm = RMSNorm(config.d_model, config.norm_eps)
        self.gate_up = nn.Linear(config.d_model, 2 * config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor, past: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        h, k, v = self.attn(self.attn_norm(x), cos, sin, mask, past)
        x = x + h
        gate, up = self.gate_up(self.ff_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up), k, v


class DiffusionLM(nn.Module):
    """Token embeddings → blocks → logits. Attention is governed entirely by `mask`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        cos, sin = rope_tables(config, torch.device("cpu"))
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(_init_weights)
        for block in self.layers():
            # Residual projections start small so the deep stack begins near identity.
            nn.init.normal_(block.down.weight, std=0.02 / math.sqrt(2 * config.n_layers))
            nn.init.normal_(block.attn.out.weight, std=0.02 / math.sqrt(2 * config.n_layers))

    def layers(self) -> list[Block]:
        return [b for b in self.blocks if isinstance(b, Block)]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        tokens: Tensor,  # (batch, seq) int64
        positions: Tensor,  # (batch, seq) int64
        mask: Tensor,  # (batch, 1, seq, past + seq) bool
        cache: KVCache | None = None,
        past_len: int = 0,
        write: Tensor | None = None,
        tail: int = 0,
    ) -> Tensor:
        """Logits (batch, seq, vocab); with `tail` > 0 only for the last `tail` positions,
        (batch, tail, vocab), so a large vocabulary's head is not applied where no loss is.

        With `cache`, the first `past_len` cache slots are visible as past keys (the mask
        decides which of them each row may see). With `write` — a (batch, seq) bool of
        the tokens to store — their keys/values are appended to each row's cache after
        its `lengths[b]` committed tokens, and `lengths` grows; written tokens must come
        first in each row and be contiguous.
        """
        cos = self.rope_cos[positions][:, None]  # type: ignore[index]
        sin = self.rope_sin[positions][:, None]  # type: ignore[index]
        x = self.embed(tokens)
        for i, block in enumerate(self.layers()):
            past = None
            if cache is not None and past_len:
                past = (cache.keys[i][:, :, :past_len], cache.values[i][:, :, :past_len])
            x, k, v = block(x, cos, sin, mask, past)
            if cache is not None and write is not None:
                _write_rows(cache.keys[i], k, cache.lengths, write)
                _write_rows(cache.values[i], v, cache.lengths, write)
        if cache is not None and write is not None:
            cache.lengths += write.sum(1)
        if tail:
            x = x[:, -tail:]
        logits: Tensor = self.lm_head(self.norm(x))
        return logits


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def _write_rows(store: Tensor, new: Tensor, lengths: Tensor, write: Tensor) -> None:
    """store[b, :, lengths[b] + j] = new[b, :, j] for every j with write[b, j]."""
    rows, cols = write.nonzero(as_tuple=True)
    if rows.numel() == 0:
        return
    store[rows, :, lengths[rows] + cols] = new[rows, :, cols]
