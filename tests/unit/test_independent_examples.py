"""First caller lines written independently of the simulator become training examples
with the simulator's own answer in that state (voice_agent/brain/independent_examples.py);
lines it has no policy for are left out."""

from __future__ import annotations

from typing import Any

import pytest

from voice_agent.brain import lines
from voice_agent.brain.independent import parse_line
from voice_agent.brain.independent_examples import first_line_examples
from voice_agent.dialogue.format import AgentCall, AgentSay, CallerTurn
from voice_agent.dialogue.phrases import phrases


def case(line: str, act: str, **extra: Any) -> Any:
    return parse_line({"id": f"x-{abs(hash(line))}", "after": None, "line": line, "act": act,
                       **{"args": {}, **extra}})  # fmt: skip


@pytest.mark.parametrize(
    ("given", "action"),
    [
        (case("my gears keep slipping", "book", args={"service": "gear adjustment"}),
         AgentSay(lines.ASK_DAY)),
        (case("can i get a service", "book"), AgentSay(lines.ASK_SERVICE)),
        (case("brakes are grinding, tomorrow ok?", "book",
              args={"service": "brake check", "day": "tomorrow"}),
         AgentCall("check_availability", {"day": "tomorrow", "service": "brake check"})),
        (case("tune-up friday at ten", "book",
              args={"service": "tune-up", "day": "friday", "time": "10:00"}),
         AgentSay(lines.ASK_NAME)),
        (case("Tune-up friday at ten for Dev Patel", "book",
              args={"service": "tune-up", "day": "friday", "time": "10:00", "name": "dev patel"}),
         AgentSay("So a tune-up on friday at ten o'clock for Dev Patel. Shall I book that?")),
        (case("where's my order", "order"), AgentSay(lines.ASK_ORDER)),
        (case("order four oh two one three please", "order", args={"order_number": "40213"}),
         AgentCall("order_status", {"order_number": "40213"})),
        (case("got any d locks in", "search", products=["111"]),
         AgentCall("search_products", {"query": "d lock"})),
        (case("let me talk to the manager", "transfer", reason="complaint"),
         AgentCall("transfer_to_human", {"reason": "complaint"})),
        (case("that's all, ta-ra", "end"), AgentCall("end_call", {})),
        (case("can you recommend a pizza place", "out_of_scope"),
         AgentSay(phrases().out_of_scope)),
    ],
)  # fmt: skip
def test_a_first_line_gets_the_simulators_answer(given: Any, action: Any) -> None:
    [example] = first_line_examples([given])
    assert example.action == action
    assert example.history[0] == AgentSay(phrases().greeting)
    assert isinstance(example.history[1], CallerTurn)


def test_lines_without_a_policy_or_mid_call_are_left_out() -> None:
    skipped = [
        case("how much is a brake check", "info"),
        case("cancel my booking please", "cancel"),
        case("do you sell bikes", "search", products=["105"]),  # no product words in the line
        parse_line(
            {"id": "m-1", "after": "Shall I book it?", "line": "yes", "act": "yes", "args": {}}
        ),
    ]
    assert first_line_examples(skipped) == []


def test_digits_read_out_reach_the_model_as_digits() -> None:
    [example] = first_line_examples([case("order four oh two one three", "order",
                                          args={"order_number": "40213"})])  # fmt: skip
    assert example.history[1] == CallerTurn("order 4 0 2 1 3")
