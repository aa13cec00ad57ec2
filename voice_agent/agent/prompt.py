"""The engine-facing side of the agent: the call grammar and prompts that fit the window."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from engine.checkpoint import ModelCard
from engine.constraints import CallGrammar
from engine.schedule import Effort
from engine.tokenizer import TextTokenizer
from tools.core import ToolPack
from voice_agent.dialogue.format import (
    MAX_PROMPT_TOKENS,
    CallerTurn,
    PromptTooLongError,
    Turn,
    last_caller,
    render_prompt,
)

CUT_SHARE = 4
"""A caller turn too long for the window loses a quarter of its words per try."""


@functools.cache
def pack_grammar(tok: TextTokenizer, pack: ToolPack[Any]) -> CallGrammar:
    """The call grammar of `pack`'s tools and read-backs for `tok`, built once per
    process, tokenizer and pack."""
    return CallGrammar(tok, pack.argument_models, pack.readbacks)


def prompt_budget(card: ModelCard) -> int:
    """The prompt budget for the model behind `card`: the prompt length it was trained on
    (`ModelCard.prompt_tokens`), never more than the window leaves beside the answer
    (MAX_PROMPT_TOKENS, also the budget when the card does not say)."""
    trained = card.prompt_tokens
    return MAX_PROMPT_TOKENS if trained is None else min(trained, MAX_PROMPT_TOKENS)


def fit_prompt(
    turns: list[Turn], effort: Effort, tok: TextTokenizer, max_prompt_tokens: int
) -> tuple[str, int | None]:
    """The prompt for `turns` (prompts/FORMAT.md: older turns are dropped to fit). When
    the last caller turn alone overflows, its first words are dropped until it fits and
    the shortened turn replaces it in `turns`; the second value is then the number of
    words kept (None when nothing was cut). Raises PromptTooLongError when not even its
    last word fits."""
    try:
        return render_prompt(turns, effort, tok, max_prompt_tokens), None
    except PromptTooLongError:
        pass
    last = last_caller(turns)
    caller = turns[last]
    assert isinstance(caller, CallerTurn)
    words = caller.text.split()
    while len(words) > 1:
        words = words[max(1, len(words) // CUT_SHARE) :]
        turns[last] = replace(caller, text=" ".join(words))
        try:
            return render_prompt(turns, effort, tok, max_prompt_tokens), len(words)
        except PromptTooLongError:
            continue
    raise PromptTooLongError(f"the caller's last word alone overflows {max_prompt_tokens} tokens")
