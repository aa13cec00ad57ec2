"""The engine's call plan grounded as the agent grounds it (voice_agent.grounding), for
tests that build plans directly."""

from __future__ import annotations

from engine.constraints import CallGrammar, CallPlan
from voice_agent.grounding import CallSources, ground


def grounded_plan(
    grammar: CallGrammar,
    prompt_ids: tuple[int, ...],
    limit: int,
    sources: CallSources | None = None,
) -> CallPlan:
    return CallPlan(grammar, limit, ground(grammar, grammar.tok.decode(prompt_ids), sources))
