"""Scoring the brain's answers against the dialogue data's gold actions.

`Scorer.add(example, answer_text)` parses one decoded answer and compares it with the
example's action; `Scorer.report()` gives the figures `scripts/eval_brain.py` writes:
exact tool-call match (name and every argument), argument-level accuracy, speak-vs-call
decisions, empty/unparseable answers, exact replies, and replies that state a number or
time found neither in the caller's lines nor in a tool result, and per gold tool how
its calls went (right tool, exact, a reply instead, the repeat request among those,
another tool, unparseable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from voice_agent.brain.dialogues import Example
from voice_agent.brain.grounding import ungrounded
from voice_agent.dialogue.format import (
    AgentCall,
    AgentSay,
    AnswerError,
    CallerTurn,
    ToolResultTurn,
    parse_answer,
)
from voice_agent.dialogue.phrases import phrases


@dataclass(slots=True)
class Scorer:
    tools: Mapping[str, type[BaseModel]]
    fixed_phrases: tuple[str, ...] = ()
    answers: int = 0
    calls: int = 0
    exact_calls: int = 0
    arguments: int = 0
    arguments_right: int = 0
    says: int = 0
    exact_says: int = 0
    kind_right: int = 0
    unparseable: int = 0
    empty: int = 0
    ungrounded_says: int = 0
    predicted_says: int = 0
    asked_again: int = 0
    """Gold calls answered with the repeat request (a miss, but not a wrong action)."""
    errors: list[str] = field(default_factory=list)
    by_tool: dict[str, Counter[str]] = field(default_factory=dict)
    """Per gold tool: calls, right_tool, exact, said_instead, asked_again, other_tool,
    unparseable."""

    def add(self, example: Example, answer_text: str) -> bool:
        """Score one answer; True when its action equals the gold action exactly."""
        self.answers += 1
        gold = example.action
        tally: Counter[str] = Counter()
        if isinstance(gold, AgentCall):
            self.calls += 1
            self.arguments += len(gold.arguments)
            tally = self.by_tool.setdefault(gold.tool, Counter())
            tally["calls"] += 1
        else:
            self.says += 1
        try:
            got = parse_answer(answer_text, tools=self.tools).action
        except AnswerError as exc:
            tally["unparseable"] += isinstance(gold, AgentCall)
            self.unparseable += 1
            self.empty += "empty" in str(exc)
            if len(self.errors) < MAX_KEPT_ERRORS:
                self.errors.append(str(exc))
            return False
        self.kind_right += type(got) is type(gold)
        if isinstance(got, AgentSay):
            self.predicted_says += 1
            sources = [
                t.text for t in example.history if isinstance(t, CallerTurn | ToolResultTurn)
            ]
            self.ungrounded_says += bool(ungrounded(got.text, sources, self.fixed_phrases))
        if isinstance(gold, AgentCall):
            if isinstance(got, AgentSay):
                tally["said_instead"] += 1
                again = got.text.strip() == phrases().say_again
                tally["asked_again"] += again
                self.asked_again += again
            elif got.tool != gold.tool:
                tally["other_tool"] += 1
        if isinstance(gold, AgentCall) and isinstance(got, AgentCall) and got.tool == gold.tool:
            right = sum(_same(got.arguments.get(k), v) for k, v in gold.arguments.items())
            self.arguments_right += right
            exact = right == len(gold.arguments)
            self.exact_calls += exact
            tally["right_tool"] += 1
            tally["exact"] += exact
            return exact
        if isinstance(gold, AgentSay) and isinstance(got, AgentSay):
            exact = got.text.strip() == gold.text.strip()
            self.exact_says += exact
            return exact
        return False

    def report(self) -> dict[str, Any]:
        return {
            "exact_tool_call": _ratio(self.exact_calls, self.calls),
            "arguments": _ratio(self.arguments_right, self.arguments),
            "speak_vs_call": _ratio(self.kind_right, self.answers),
            "empty_answers": self.empty,
            "unparseable_answers": self.unparseable,
            "exact_reply": _ratio(self.exact_says, self.says),
            "ungrounded_replies": _ratio(self.ungrounded_says, self.predicted_says),
            "answers": self.answers,
            "calls": self.calls,
            "calls_asked_again": _ratio(self.asked_again, self.calls),
            "by_tool": {
                tool: {key: tally[key] for key in _TALLY_KEYS}
                for tool, tally in sorted(self.by_tool.items())
            },
        }


MAX_KEPT_ERRORS = 20
_TALLY_KEYS = (
    "calls", "right_tool", "exact", "said_instead", "asked_again", "other_tool", "unparseable"
)  # fmt: skip


def _same(got: Any, want: Any) -> bool:
    return str(got).strip().lower() == str(want).strip().lower()


def _ratio(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None
