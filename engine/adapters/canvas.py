"""The canvas sampler for masked-diffusion models without a cache (LLaDA, Dream).

Canvas rules (those of LLaDA's reference sampler): the prompt is followed by the whole
answer budget as mask tokens, `max_new_tokens` rounded up to blocks; blocks are denoised
left to right (semi-autoregressive), each step forwarding the full sequence, so later
masked blocks stay visible as a length budget. Per step: commit every open position of
the current block above the threshold (at least one); when the deadline nears, commit
the rest of the block at once and stop at its end.

`shift_logits` covers Dream, trained from an autoregressive model: its output at
position i predicts token i + 1, so the logits for position i are read at i - 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.adapters.steps import Pacer, banned_ids, close_after_eos, commit, end_block
from engine.generate import FinishReason, Generation
from engine.schedule import Schedule

Forward = Callable[[Tensor], Tensor]
"""(1, seq) int64 token ids → (1, seq, vocab) logits, full bidirectional attention."""


@dataclass(frozen=True, slots=True)
class CanvasRules:
    mask_id: int
    eos_ids: frozenset[int]
    block_length: int
    shift_logits: bool = False
    never: frozenset[int] = frozenset()
    """Ids besides the mask that are never emitted (pad, bos)."""

    def __post_init__(self) -> None:
        if self.block_length < 1:
            raise ValueError(f"block_length must be positive, got {self.block_length}")
        if self.mask_id in self.eos_ids:
            raise ValueError("the mask id cannot also be an EOS id")


def aligned_logits(logits: Tensor, shift: bool) -> Tensor:
    """(batch, seq, vocab) logits with row i predicting token i.

    With `shift`, row i is the model's output at i - 1 (row 0 repeats output 0, which
    only matters when position 0 is masked: never, as the prompt comes first).
    """
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1) if shift else logits


@torch.inference_mode()
def canvas_generate(
    forward: Forward,
    rules: CanvasRules,
    prompt_ids: list[int],
    schedule: Schedule,
    deadline_s: float | None,
    clock: Callable[[], float],
) -> Generation:
    """Decode one answer on a full masked canvas; see the module docstring for the rules."""
    if not prompt_ids:
        raise ValueError("empty prompt")
    start = clock()
    bl = rules.block_length
    n_blocks = -(-schedule.max_new_tokens // bl)
    x = torch.tensor(prompt_ids + [rules.mask_id] * (n_blocks * bl))  # (seq,)
    never = rules.never | {rules.mask_id}
    pacer = Pacer(deadline_s)
    answer: list[int] = []
    forwards = decided = 0
    finish = FinishReason.LENGTH
    for b in range(n_blocks):
        lo = len(prompt_ids) + b * bl
        block, open_ = x[lo : lo + bl], torch.ones(bl, dtype=torch.bool)  # views into x
        steps = 0
        while bool(open_.any()):
            t0 = clock()
            forced = pacer.before_step(t0)
            logits = aligned_logits(forward(x[None]), rules.shift_logits)[0, lo : lo + bl]
            forwards, steps = forwards + 1, steps + 1
            banned = banned_ids(bl, logits.shape[-1], never, rules.eos_ids, 0 if b == 0 else None)
            commit_all = forced or steps >= schedule.max_steps_per_block
            new, chosen = commit(logits.float(), block, open_, banned, schedule, commit_all)
            block.copy_(new)
            open_ &= ~chosen
            decided += int(chosen.sum())
            close_after_eos(block, open_, rules.eos_ids)
            pacer.after_step(clock() - t0)
        stop = end_block(answer, block.tolist(), rules.eos_ids, schedule, pacer, clock())
        if stop is not None:
            finish = stop
            break
    return Generation(tuple(answer), finish, pacer.forced, forwards, decided, clock() - start)
