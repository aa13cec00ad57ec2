"""Pure pieces every adapter's loop shares: deadline pacing, one commit, EOS rules.

The commit rule is the engine's own (`engine.schedule.confidence` and
`positions_to_commit`): every open position at or above the threshold, at least one per
step, everything once the step cap or the deadline says so.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import torch
from torch import Tensor

from engine.generate import FinishReason
from engine.pacing import StepTimer
from engine.schedule import Schedule, confidence, positions_to_commit


@dataclass(slots=True)
class Pacer:
    """Deadline pressure for one request, from a running estimate of a step's duration."""

    deadline_s: float | None
    timer: StepTimer = field(default_factory=StepTimer)
    forced: bool = False
    """Sticky: once the deadline was near, every later step commits all it has."""

    def before_step(self, now_s: float) -> bool:
        """Whether this step must commit everything still open."""
        self.forced |= self.timer.late(now_s, self.deadline_s)
        return self.forced

    def after_step(self, took_s: float) -> None:
        self.timer.add(took_s)

    def out_of_time(self, now_s: float) -> bool:
        """After a forced block: no time for another step before the deadline."""
        return self.forced and self.timer.late(now_s, self.deadline_s)


def banned_ids(
    block: int,
    vocab: int,
    never: Collection[int],
    eos_ids: Collection[int],
    first_answer: int | None,
) -> Tensor:
    """(block, vocab) bool of tokens that may not be committed at each position.

    `never` (mask, pad, ...) is banned everywhere; EOS is banned at `first_answer`, the
    position of the answer's first token when it lies in this block, so no answer is empty.
    """
    banned = torch.zeros(block, vocab, dtype=torch.bool)
    banned[:, [i for i in never if i < vocab]] = True
    if first_answer is not None:
        banned[first_answer, [i for i in eos_ids if i < vocab]] = True
    return banned


def commit(
    logits: Tensor,  # (block, vocab)
    canvas: Tensor,  # (block,) int64
    open_: Tensor,  # (block,) bool: positions still to decide
    banned: Tensor,  # (block, vocab) bool
    schedule: Schedule,
    commit_all: bool,
) -> tuple[Tensor, Tensor]:
    """(new canvas, chosen positions) after one step; `canvas` is left untouched."""
    conf, pred = confidence(logits[None], banned[None])
    chosen = positions_to_commit(
        conf,
        open_[None],
        torch.tensor([schedule.threshold]),
        torch.tensor([commit_all]),
    )[0]
    return torch.where(chosen, pred[0], canvas), chosen


def close_after_eos(canvas: Tensor, open_: Tensor, eos_ids: Collection[int]) -> None:
    """In place: once an EOS is committed, the positions after it are closed (filled with it).

    Nothing after EOS is part of the answer, so denoising it would waste steps.
    """
    is_eos = torch.isin(canvas, torch.tensor(sorted(eos_ids))) & ~open_
    if not bool(is_eos.any()):
        return
    e = int(is_eos.nonzero()[0])
    canvas[e + 1 :] = canvas[e]
    open_[e + 1 :] = False


def cut_at_eos(tokens: list[int], eos_ids: Collection[int]) -> tuple[list[int], bool]:
    """(tokens before the first EOS, whether there was one)."""
    for i, t in enumerate(tokens):
        if t in eos_ids:
            return tokens[:i], True
    return tokens, False


def end_block(
    answer: list[int],
    block: list[int],
    eos_ids: Collection[int],
    schedule: Schedule,
    pacer: Pacer,
    now_s: float,
) -> FinishReason | None:
    """Append a finished block's tokens (up to EOS) to `answer`; the reason to stop after
    it, or None to decode another block."""
    tokens, ended = cut_at_eos(block, eos_ids)
    answer += tokens
    if ended:
        return FinishReason.EOS
    if len(answer) >= schedule.max_new_tokens:
        return FinishReason.LENGTH
    if pacer.out_of_time(now_s):
        return FinishReason.DEADLINE
    return None
