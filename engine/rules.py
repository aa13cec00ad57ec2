"""The decode loop's rules: what may not be committed, what is taken back.

A request carries a list of rules (`DecodeState.rules`); the loop (`generate.decode_step`)
asks each, in order, every step:

* `ban(answer, canvas, logits, banned)`, before the commit: set `banned` (block, vocab)
  where a token may not go. A rule may also place tokens on `canvas` (a grammar's
  scaffold, a settled choice); it returns how many of those the model chose.
* `take_back(answer, canvas)`, after the commit: edit `canvas` (block,) in place and
  return the (block,) bool positions it re-masked. The loop does the counting (a taken-
  back token is not decided, nor does its confidence count) in one place.
* `fill_block(answer, canvas)` when a new block starts; `open(answer_len)` while a
  layout the rule placed goes on past `answer_len` (the loop then does not stop at a
  length or deadline boundary inside it).

`answer` holds the tokens of the blocks already finished. Rules compose: the turn format
(engine/turn_rules.py) then the call grammar (engine/constraints.py `CallPlan`).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor


class StepRule(Protocol):
    def ban(self, answer: list[int], canvas: Tensor, logits: Tensor, banned: Tensor) -> int: ...

    def take_back(self, answer: list[int], canvas: Tensor) -> Tensor: ...

    def fill_block(self, answer: list[int], canvas: Tensor) -> None: ...

    def open(self, answer_len: int) -> bool: ...


class Rule:
    """A rule that does nothing; subclasses override what they need."""

    def ban(self, answer: list[int], canvas: Tensor, logits: Tensor, banned: Tensor) -> int:
        return 0

    def take_back(self, answer: list[int], canvas: Tensor) -> Tensor:
        return torch.zeros_like(canvas, dtype=torch.bool)

    def fill_block(self, answer: list[int], canvas: Tensor) -> None:
        return None

    def open(self, answer_len: int) -> bool:
        return False
