"""The turn format's rules (prompts/FORMAT.md), as decode-loop rules (engine/rules.py).

An answer is never empty (`NeverEmpty`, for every model); at `instant` effort it has no
reasoning; reasoning (`<think>`) must lead to an action (`<say>` or `<call>`) within its
effort's budget; and an answer holds one action. Bans keep the model from committing
what breaks them; take-backs undo what one step committed against them before the ban
could see it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from engine.rules import Rule
from engine.schedule import Effort
from engine.tokenizer import SpecialIds


class NeverEmpty(Rule):
    """No answer ends before its first token: every model, turn format or not."""

    def __init__(self, ends: tuple[int, ...]) -> None:
        self.ends = list(ends)

    def ban(self, answer: list[int], canvas: Tensor, logits: Tensor, banned: Tensor) -> int:
        if not answer:
            banned[0, [i for i in self.ends if i < banned.shape[-1]]] = True
        return 0


class TurnFormat(Rule):
    """The turn format's rules past the first token (`NeverEmpty` comes before it)."""

    def __init__(self, ids: SpecialIds, effort: Effort) -> None:
        self.ids = ids
        self.effort = effort

    def ban(self, answer: list[int], canvas: Tensor, logits: Tensor, banned: Tensor) -> int:
        ids = self.ids
        if self.effort is Effort.INSTANT:
            banned[:, ids.think] = True  # act at once: no reasoning segment
        reasoning_ends_in_an_action(answer, canvas, ids, self.effort, banned)
        one_action(answer, canvas, ids, banned)
        return 0

    def take_back(self, answer: list[int], canvas: Tensor) -> Tensor:
        early = early_eos(answer, canvas, self.ids) | second_actions(answer, canvas, self.ids)
        canvas[early] = self.ids.mask
        return early


def reasoning_open(answer: list[int], canvas: Tensor, ids: SpecialIds) -> int | None:
    """For an answer that opens with `<think>` and whose reasoning has not yet reached
    `<say>` or `<call>`: the block position of the first action marker on `canvas`, or
    the block's length when there is none (the EOS may not come before it). None for any
    other answer."""
    first = answer[0] if answer else int(canvas[0])
    if first != ids.think or ids.say in answer or ids.call in answer:
        return None
    marks = torch.nonzero((canvas == ids.say) | (canvas == ids.call))
    return int(marks[0, 0]) if len(marks) else len(canvas)


def early_eos(answer: list[int], canvas: Tensor, ids: SpecialIds) -> Tensor:
    """(block,) bool: EOS positions of `canvas` (just committed) that would end reasoning
    before any action; they are taken back. The ban in `reasoning_ends_in_an_action`
    cannot see them in the step that commits an answer's `<think>` itself."""
    out = torch.zeros_like(canvas, dtype=torch.bool)
    upto = reasoning_open(answer, canvas, ids)
    if upto is not None:
        out[:upto] = canvas[:upto] == ids.eos
    return out


def reasoning_ends_in_an_action(
    answer: list[int], canvas: Tensor, ids: SpecialIds, effort: Effort, banned: Tensor
) -> None:
    """Reasoning must lead to `<say>` or `<call>`: until one is committed the EOS is banned
    before it, and once the reasoning has outrun its effort's budget (the data never
    reasons longer) the next block must open with one of them. Without this a small
    model's reasoning can run on to the EOS or the length limit, an answer with no action."""
    upto = reasoning_open(answer, canvas, ids)
    if upto is None:
        return
    banned[:upto, ids.eos] = True
    no_action_yet = upto == len(canvas)
    over_budget = len(answer) > effort.reasoning_budget_tokens
    if answer and over_budget and int(canvas[0]) == ids.mask and no_action_yet:
        keep = banned[0].clone()
        banned[0] = True
        banned[0, [ids.say, ids.call]] = keep[[ids.say, ids.call]]


def first_action(answer: list[int], canvas: Tensor, ids: SpecialIds) -> int | None:
    """Block position of the answer's `<say>`/`<call>`: -1 when an earlier block holds it,
    else the first one on `canvas`; None when there is none yet."""
    if ids.say in answer or ids.call in answer:
        return -1
    marks = torch.nonzero((canvas == ids.say) | (canvas == ids.call))
    return int(marks[0, 0]) if len(marks) else None


def one_action(answer: list[int], canvas: Tensor, ids: SpecialIds, banned: Tensor) -> None:
    """An answer holds one action: once a `<say>` or `<call>` stands in it, no later
    position may take either (a second marker, "<say>.<call>...", makes the answer
    unparseable). An earlier position still may: the marker the model commits first is
    not always its choice, and an earlier one takes over (`second_actions`)."""
    first = first_action(answer, canvas, ids)
    if first is None:
        return
    banned[first + 1 :, ids.say] = True
    banned[first + 1 :, ids.call] = True


def second_actions(answer: list[int], canvas: Tensor, ids: SpecialIds) -> Tensor:
    """(block,) bool: `<say>`/`<call>` on `canvas` (just committed) after the answer's
    first; they are taken back (two committed in one step, or an earlier one committed
    after a later one)."""
    out = (canvas == ids.say) | (canvas == ids.call)
    first = first_action(answer, canvas, ids)
    if first is not None and first >= 0:
        out[first] = False
    return out
