"""Accuracy of a trained engine model on task examples (shared by training and benchmarks)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from engine.baselines import autoregressive
from engine.constraints import CallGrammar
from engine.generate import Request, generate
from engine.model import DiffusionLM
from engine.schedule import Schedule
from engine.tokenizer import TextTokenizer
from voice_agent.brain.synthetic import TaskExample, action_of
from voice_agent.grounding import ground


def evaluate(
    model: DiffusionLM,
    tok: TextTokenizer,
    examples: list[TaskExample],
    kind: str,
    label: str,
    schedule: Schedule | None = None,
    grammar: CallGrammar | None = None,
) -> dict[str, Any]:
    """Exact-match accuracy of the action (tool call or reply), and tokens per forward.
    `grammar` constrains the diffusion decoder's tool calls (the AR twin decodes freely)."""
    schedule = schedule or Schedule(threshold=0.9, max_new_tokens=96)
    correct = forwards = decided = 0
    for ex in examples:
        prompt = tok.encode(ex.prompt)
        if kind == "diffusion":
            g = generate(
                model,
                tok.ids,
                Request(
                    tuple(prompt),
                    replace(schedule, effort=ex.effort),
                    grammar=grammar,
                    grounder=ground if grammar is not None else None,
                ),
                time.monotonic,
            )
        else:
            g = autoregressive(model, tok.ids, prompt, schedule.max_new_tokens, time.monotonic)
        answer = tok.decode(g.token_ids)
        correct += action_of(answer) == ex.action
        forwards += g.forwards
        decided += g.decided_tokens
    return {
        f"{label}_accuracy": round(correct / max(1, len(examples)), 4),
        f"{label}_tokens_per_forward": round(decided / max(1, forwards), 2),
    }
