"""The one model interface the decode core (engine/generate.py) runs on.

A backend holds a pool of rows, one per request in flight. Each row stands for the
tokens its request has committed so far (prompt, then finished blocks); a model with a
cache keeps their keys and values, one without keeps the ids. One step is one call:

    logits = backend.forward(fresh, canvas)

`fresh[b]` are row b's newly committed tokens (the prompt at the first step, the block
just finished at the first step of the next): the backend appends them to the row, then
forwards `canvas[b]`, the block being denoised, after everything the row holds, and
returns the canvas's logits. The shipped model writes the fresh tokens' cache entries
in that same forward (`NativeBackend`); the adapters (engine/adapters/) do what their
model allows. `clear(row)` empties a row for a new request, `move(src, dst)` moves one
(the batching engine keeps its active rows at the front).

`DecodeIds` names the ids the loop itself needs: the mask (an undecided position), the
ids that end an answer, the ids never committed, the padding id, and the turn format's
tokens when the tokenizer has them (the turn rules apply only then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from engine.masks import PROMPT_BLOCK, block_diffusion_mask, with_self
from engine.model import DiffusionLM, KVCache
from engine.tokenizer import SpecialIds


@dataclass(frozen=True, slots=True)
class DecodeIds:
    mask: int
    """Marks an undecided canvas position. A model whose canvas starts as noise, not
    masks (DiffusionGemma), gets an id outside its vocabulary here; its backend puts
    noise in those positions before each forward."""
    ends: tuple[int, ...]
    """Ids that end an answer; the first fills the canvas after an end."""
    never: frozenset[int]
    """Ids never committed into an answer (padding, mask, BOS)."""
    pad: int
    """Fills the unused part of a batched input row."""
    turn: SpecialIds | None = None
    """The turn format's tokens (prompts/FORMAT.md) when the tokenizer has them: only
    then do the turn rules (engine/turn_rules.py) and a call grammar apply."""

    def __post_init__(self) -> None:
        if not self.ends:
            raise ValueError("a model needs at least one end-of-answer id")
        if self.mask in self.ends:
            raise ValueError(f"the mask id {self.mask} cannot also end an answer")

    @property
    def eos(self) -> int:
        return self.ends[0]

    @classmethod
    def of(cls, ids: SpecialIds) -> DecodeIds:
        """The ids of a tokenizer with the turn format's tokens (engine/tokenizer.py)."""
        return cls(ids.mask, (ids.eos,), frozenset(ids.never_generated()), ids.pad, ids)

    def repeating(self) -> Tensor:
        """Ids that legitimately stand side by side in one step: end fill, gap padding."""
        gap = () if self.turn is None else (self.turn.gap,)
        return torch.tensor([*self.ends, self.pad, *gap])


class BlockBackend(Protocol):
    """A diffusion LM as the decode core drives it (see the module docstring)."""

    @property
    def ids(self) -> DecodeIds: ...
    @property
    def block_size(self) -> int: ...
    @property
    def max_seq_len(self) -> int:
        """Longest prompt plus answer a row can hold."""
        ...

    @property
    def rows(self) -> int:
        """Requests the pool can hold at once."""
        ...

    def forward(self, fresh: list[list[int]], canvas: Tensor) -> Tensor:
        """Append `fresh[b]` to row b, forward `canvas` (n, block) int64 after each row's
        tokens; (n, block, vocab) float32 logits on the CPU, row b's position i scoring
        the token at canvas position i. Uses rows 0..n-1."""
        ...

    def clear(self, row: int) -> None: ...
    def move(self, src: int, dst: int) -> None: ...


class NativeBackend:
    """The shipped model (engine/model.py) over an exact, batched KV cache.

    The fresh tokens ride along with the canvas in one forward, which writes their keys
    and values; the cache is padded per row (`KVCache.lengths`), so rows of different
    lengths share each forward."""

    def __init__(
        self, model: DiffusionLM, ids: SpecialIds, rows: int, capacity: int | None = None
    ) -> None:
        cfg = model.config
        self.model = model
        self.ids = DecodeIds.of(ids)
        self.block_size = cfg.block_size
        self.max_seq_len = cfg.max_seq_len
        param = next(model.parameters())
        size = min(capacity or cfg.max_seq_len, cfg.max_seq_len)
        self.cache = KVCache.empty(cfg, rows, size, param.device, param.dtype)

    @property
    def rows(self) -> int:
        return int(self.cache.lengths.shape[0])

    def forward(self, fresh: list[list[int]], canvas: Tensor) -> Tensor:
        n, bs = canvas.shape
        cache = self.cache
        device = cache.lengths.device
        tokens, positions, mask, write, past_len = step_inputs(
            fresh, canvas, cache.lengths[:n], self.ids.pad
        )
        keys, values = [k[:n] for k in cache.keys], [v[:n] for v in cache.values]
        view = KVCache(keys, values, cache.lengths[:n])
        logits: Tensor = self.model(
            tokens.to(device), positions.to(device), mask.to(device), view, past_len,
            write.to(device),
        )  # fmt: skip
        return logits[:, -bs:].float().cpu()

    def clear(self, row: int) -> None:
        self.cache.lengths[row] = 0

    def move(self, src: int, dst: int) -> None:
        cache = self.cache
        with torch.no_grad():
            for store in (*cache.keys, *cache.values):
                store[dst] = store[src]
            cache.lengths[dst] = cache.lengths[src]


def step_inputs(
    fresh: list[list[int]], canvas: Tensor, lengths: Tensor, pad: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """One cached step's inputs for n rows: tokens (n, f + block) = [fresh, padded to the
    longest f | canvas]; positions (n, f + block) after each row's cached length; the
    attention mask (n, 1, f + block, past + f + block); write flags (n, f) marking the
    real fresh tokens, whose keys and values the forward stores; past = longest cache."""
    n, bs = canvas.shape
    f = max(len(x) for x in fresh)
    fresh_len = torch.tensor([len(x) for x in fresh])
    tokens = torch.full((n, f + bs), pad, dtype=torch.long)
    for b, row in enumerate(fresh):
        tokens[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    tokens[:, f:] = canvas
    lengths = lengths.cpu()
    write = torch.arange(f)[None] < fresh_len[:, None]  # (n, f)
    offsets = torch.cat([torch.arange(f).expand(n, f), fresh_len[:, None] + torch.arange(bs)], 1)
    positions = lengths[:, None] + offsets
    past_len = int(lengths.max())
    # Cached tokens are clean and earlier than everything here; fresh tokens are the
    # clean block 0 of this step and the canvas its noisy block 1.
    block_q = torch.cat(
        [torch.zeros(n, f, dtype=torch.long), torch.ones(n, bs, dtype=torch.long)], 1
    )
    noisy_q = torch.cat(
        [torch.zeros(n, f, dtype=torch.bool), torch.ones(n, bs, dtype=torch.bool)], 1
    )
    valid_q = torch.cat([write, torch.ones(n, bs, dtype=torch.bool)], 1)
    block_k = torch.cat([torch.full((n, past_len), PROMPT_BLOCK), block_q], 1)
    noisy_k = torch.cat([torch.zeros(n, past_len, dtype=torch.bool), noisy_q], 1)
    valid_k = torch.cat([torch.arange(past_len)[None] < lengths[:, None], valid_q], 1)
    mask = with_self(block_diffusion_mask(block_q, noisy_q, block_k, noisy_k, valid_k), past_len)
    return tokens, positions, mask, write, past_len
