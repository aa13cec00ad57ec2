"""The shipped brain loads as the embedded default and answers held-out calls."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.checkpoint import load
from engine.constraints import CallGrammar
from engine.generate import Request, generate
from engine.schedule import Schedule
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.brain.dialogues import generate as dialogues
from voice_agent.brain.format import ANSWER_TOKENS, AgentCall
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scoring import Scorer

BRAIN = Path(__file__).resolve().parents[2] / "engine" / "checkpoints" / "brain-dlm"
PROMPT_TOKENS = 128  # as trained (scripts/train_brain.py --prompt-tokens)

pytestmark = pytest.mark.integration


def test_the_brain_answers_held_out_calls_with_valid_actions() -> None:
    brain = load(BRAIN)
    tok, grammar = brain.tokenizer, CallGrammar(brain.tokenizer, ARGUMENT_MODELS)
    assert brain.card.kind == "diffusion" and brain.card.config.max_seq_len == 256
    steps = [ex for d in dialogues(7, 6, Split.HELDOUT) for ex in d.examples][:40]
    assert any(isinstance(s.action, AgentCall) for s in steps)
    scorer = Scorer(ARGUMENT_MODELS)
    for step in steps:
        prompt = tuple(tok.encode(step.prompt(tok, PROMPT_TOKENS)))
        schedule = Schedule(threshold=0.9, max_new_tokens=ANSWER_TOKENS, effort=step.effort)
        g = generate(brain.model, tok.ids, Request(prompt, schedule, grammar=grammar),
                     time.monotonic)  # fmt: skip
        assert g.token_ids  # never empty
        if tok.ids.call in g.token_ids:  # every call the brain makes validates
            ids = list(g.token_ids)
            grammar.parse(ids[ids.index(tok.ids.call) + 1 :])
        scorer.add(step, tok.decode(g.token_ids))
    report = scorer.report()
    # Measured on 284 held-out actions: speak-vs-call 0.88, exact call 0.42; chance is far below.
    assert report["speak_vs_call"] >= 0.7
    assert report["unparseable_answers"] <= 4
