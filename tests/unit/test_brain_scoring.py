"""Scoring answers against gold actions, per tool included (literal answers, no model)."""

from __future__ import annotations

import json

from engine.schedule import Effort
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.brain.dialogues import Example, Intent
from voice_agent.brain.scoring import Scorer
from voice_agent.dialogue.format import AgentCall, AgentSay, CallerTurn

HOURS = AgentCall("opening_hours", {"day": "saturday"})
ORDER = AgentCall("order_status", {"order_number": "40213"})


def example(action: AgentCall | AgentSay) -> Example:
    history = (CallerTurn("hi, when do you open on saturday, and where is order 40213?"),)
    return Example("d1", 1, history, Effort.LOW, None, action, Intent.HOURS)


def call(tool: str, **arguments: str) -> str:
    return "<call>" + json.dumps({"name": tool, "arguments": arguments})


def test_calls_are_scored_per_tool() -> None:
    scorer = Scorer(ARGUMENT_MODELS)
    assert scorer.add(example(HOURS), call("opening_hours", day="saturday"))
    assert not scorer.add(example(HOURS), call("opening_hours", day="sunday"))
    assert not scorer.add(example(HOURS), "<say> We open at ten.")
    assert not scorer.add(example(ORDER), call("opening_hours", day="saturday"))
    assert not scorer.add(example(ORDER), "<call> not json")
    assert not scorer.add(example(ORDER), "<say> Sorry, could you say that again?")
    assert scorer.add(example(AgentSay("Hello!")), "<say> Hello!")
    report = scorer.report()
    assert report["calls"] == 6 and report["answers"] == 7
    assert report["exact_tool_call"] == 0.1667 and report["exact_reply"] == 1.0
    assert report["calls_asked_again"] == 0.1667
    assert report["by_tool"] == {
        "opening_hours": {"calls": 3, "right_tool": 2, "exact": 1, "said_instead": 1,
                          "asked_again": 0, "other_tool": 0, "unparseable": 0},
        "order_status": {"calls": 3, "right_tool": 0, "exact": 0, "said_instead": 1,
                         "asked_again": 1, "other_tool": 1, "unparseable": 1},
    }  # fmt: skip


def test_spoken_calls_split_by_what_the_recognizer_kept() -> None:
    """eval_brain's speech pass tells calls whose values the transcript lost (no brain
    can be exact there) from those it kept."""
    from scripts.eval_brain import by_recognition

    said = "hi, when do you open on saturday, and where is order 40213?"
    heard = {  # dialogue id -> (heard line, gold, answer)
        "kept": ("Hi, when do you open on Saturday? And where is order 40213?", ORDER,
                 call("order_status", order_number="40213")),
        "kept-wrong": ("when do you open on saturday order 40213", HOURS,
                       call("opening_hours", day="sunday")),
        "blurred": ("when do you open on saturdy", HOURS, call("opening_hours", day="saturday")),
        "lost": ("when do you open on sunday and where is order 4 0 2", ORDER,
                 "<say> Sorry, could you say that again?"),
        "spoken-reply": ("hello", AgentSay("Hello!"), "<say> Hello!"),
    }  # fmt: skip
    spoken, pairs, answers = [], [], {}
    for dialogue, (line, gold, answer) in heard.items():
        step = Example(dialogue, 1, (CallerTurn(line),), Effort.LOW, None, gold, Intent.HOURS)
        spoken.append(step)
        pairs.append({"said": said, "heard": line, "voice": "piper:joe"})
        answers[(dialogue, 1)] = answer
    parts = by_recognition(spoken, pairs, answers)
    assert parts == {
        "all": {"calls": 2, "share": 0.5, "exact_tool_call": 0.5, "asked_again": 0.0},
        "blurred": {"calls": 1, "share": 0.25, "exact_tool_call": 1.0, "asked_again": 0.0},
        "lost": {"calls": 1, "share": 0.25, "exact_tool_call": 0.0, "asked_again": 1.0},
    }
