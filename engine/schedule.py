"""Decoding schedules: how much to commit per step, effort levels, deadline pressure.

Pure functions over tensors; the decoding loop in `engine/generate.py` calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor


class Effort(Enum):
    """How much short reasoning precedes the action."""

    INSTANT = "instant"
    LOW = "low"
    MEDIUM = "medium"

    @property
    def reasoning_budget_tokens(self) -> int:
        """Most reasoning tokens the model writes at this effort (data is built to it)."""
        return {Effort.INSTANT: 0, Effort.LOW: 8, Effort.MEDIUM: 24}[self]


@dataclass(frozen=True, slots=True)
class Schedule:
    """Per-request decoding settings.

    `effort`: the prompt's effort token asks the model for that much reasoning; at
    `instant` the decoder also bans `<think>`, so the action comes first.
    `threshold`: commit every masked position whose confidence reaches it (at least
    one per step). `max_steps_per_block`: after this many steps the rest of the block
    is committed at once. `max_new_tokens` is rounded up to whole blocks.
    """

    threshold: float = 0.9
    max_steps_per_block: int = 16
    max_new_tokens: int = 96
    effort: Effort = Effort.LOW

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.max_steps_per_block < 1 or self.max_new_tokens < 1:
            raise ValueError("max_steps_per_block and max_new_tokens must be positive")


def confidence(logits: Tensor, banned: Tensor) -> tuple[Tensor, Tensor]:
    """Greedy prediction and its probability per position.

    logits: (batch, block, vocab); banned: (batch, block, vocab) bool of tokens that
    may not be chosen there. Returns (confidence, prediction), each (batch, block).
    """
    probs = torch.softmax(logits.float().masked_fill(banned, float("-inf")), dim=-1)
    conf, pred = probs.max(dim=-1)
    return conf, pred


def positions_to_commit(
    conf: Tensor,  # (batch, block)
    masked: Tensor,  # (batch, block) bool
    threshold: Tensor,  # (batch,)
    commit_all: Tensor,  # (batch,) bool: deadline or step cap reached
) -> Tensor:
    """(batch, block) bool: masked positions to commit this step.

    Every masked position at or above its row's threshold, and at least the single
    most confident masked position of each row that still has masks; everything
    masked in rows where `commit_all` is set.
    """
    live = conf.masked_fill(~masked, -1.0)
    chosen = masked & (live >= threshold[:, None])
    best = torch.zeros_like(masked).scatter_(1, live.argmax(dim=1, keepdim=True), True)
    chosen |= best & masked
    return chosen | (masked & commit_all[:, None])


def without_adjacent_twins(
    chosen: Tensor,  # (batch, block) bool
    pred: Tensor,  # (batch, block) token ids
    keep: Tensor,  # (batch,) bool: rows left as they are (a forced commit fills its block)
    exempt: Tensor,  # (n,) ids that repeat by design (EOS fill, gap padding)
) -> Tensor:
    """`chosen` less each position committed in the same step as its left neighbour with
    the same token. The two were predicted without seeing each other, which is how
    parallel decoding writes "Anything Anything"; the right one is decided again in the
    next step, when it sees the left. The leftmost of a run stays, so a row still makes
    progress."""
    twin = torch.zeros_like(chosen)
    twin[:, 1:] = chosen[:, 1:] & chosen[:, :-1] & (pred[:, 1:] == pred[:, :-1])
    twin &= ~torch.isin(pred, exempt) & ~keep[:, None]
    return chosen & ~twin
