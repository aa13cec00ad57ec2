"""First caller lines written independently of the simulator become training examples
with the simulator's own answer in that state (voice_agent/brain/independent_examples.py);
lines it has no policy for are left out."""

from __future__ import annotations

from typing import Any

import pytest

from voice_agent.brain import lines
from voice_agent.brain.dialogues import Split
from voice_agent.brain.independent import parse_call, parse_line
from voice_agent.brain.independent_examples import (
    exit_examples,
    exit_lines,
    first_line_examples,
    mid_call_examples,
)
from voice_agent.brain.scenarios import generate
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


def mid(line: str, act: str, after: str, **args: str) -> Any:
    return parse_line({"id": f"m-{abs(hash(line))}", "after": after, "line": line, "act": act,
                       "args": args})  # fmt: skip


MID_LINES = [
    mid("yeah go on, do it", "yes", "Shall I book that?"),
    mid("yes please cancel it", "yes", "Shall I cancel it?"),
    mid("it's Priya Nair", "give_info", "Can I take your name?", name="priya nair"),
    mid("er, let's say half two", "give_info", "What time?", time="14:30"),
    mid("no sorry, thursday I meant", "correction", "So on tuesday?", day="thursday"),
    mid("the day after tomorrow", "give_info", "Which day?", day="thursday"),
]


def test_mid_call_lines_stand_in_for_the_simulators_with_the_answer_they_need() -> None:
    dialogues = list(generate(13, 120, Split.TRAIN))
    examples = mid_call_examples(dialogues, MID_LINES, seed=1)
    by_line: dict[str, list[Any]] = {}
    for ex in examples:
        last = ex.history[-1]
        assert isinstance(last, CallerTurn)
        by_line.setdefault(last.text, []).append(ex)
    assert "the day after tomorrow" not in by_line  # its day is not in its words
    yes = by_line["yeah go on, do it"]
    assert yes and all(isinstance(e.action, AgentCall) for e in yes)
    for ex in by_line.get("yes please cancel it", []):  # never as a yes to a booking
        assert isinstance(ex.action, AgentCall) and ex.action.tool == "cancel_booking"
    for ex in by_line["it's Priya Nair"]:  # the read-back takes the name as said
        assert isinstance(ex.action, AgentSay)
        assert ex.action.text.endswith("for Priya Nair. Shall I book that?")
    for ex in by_line["er, let's say half two"]:  # the next question, the time not repeated
        assert ex.action == AgentSay(lines.ASK_NAME)
    for ex in by_line["no sorry, thursday I meant"]:
        assert isinstance(ex.action, AgentSay) and " on thursday at " in ex.action.text
        assert ex.history[-2] != ex.action  # a correction changes the read-back
    originals = {(e.dialogue_id, e.step) for d in dialogues for e in d.examples}
    assert all((e.dialogue_id.split("+")[0], e.step) in originals for e in examples)


def call(last: str, end: str | None) -> Any:
    return parse_call({"id": f"x-d{abs(hash(last))}", "goal": "g", "setup": None,
                       "turns": ["what time do you close today?", last],
                       "expect": {"writes": [], "lookups": [], "end": end}})  # fmt: skip


def test_goodbyes_are_lines_that_only_say_goodbye_in_words_the_gate_knows() -> None:
    lines_ = [case("that's all, ta-ra", "end"), case("right, off I go", "end"),
              case("let me talk to the manager", "transfer", reason="complaint")]  # fmt: skip
    calls = [call("lovely, cheers, bye", "end_call"), call("yes please, bye", "end_call"),
             call("see you thursday, bye", "end_call"), call("cheers, bye", None)]  # fmt: skip
    goodbyes, transfers = exit_lines(lines_, calls)
    # "right, off I go" is no goodbye the end_call gate would let through; a call's last
    # line that also says yes or a day does more than say goodbye
    assert goodbyes == ["that's all, ta-ra", "lovely, cheers, bye"]
    assert [t.line for t in transfers] == ["let me talk to the manager"]


def test_a_goodbye_or_a_request_for_a_person_can_come_anywhere_but_after_a_read_back() -> None:
    dialogues = list(generate(13, 200, Split.TRAIN))
    lines_ = [case("ok I'll just pop in then, bye", "end"),
              case("put me through to a person", "transfer", reason="caller asked")]  # fmt: skip
    examples = exit_examples(dialogues, lines_, seed=1)
    tools = {e.action.tool for e in examples if isinstance(e.action, AgentCall)}
    assert tools == {"end_call", "transfer_to_human"}
    assert 0.4 * 200 < len(examples) <= 0.6 * 200 + 15  # about EXIT_SHARES of the dialogues
    for ex in examples:
        assert ex.history[-1] in (CallerTurn("ok I'll just pop in then, bye"),
                                  CallerTurn("put me through to a person"))  # fmt: skip
        said = [t for t in ex.history[:-1] if isinstance(t, AgentSay)]
        assert len(said) >= 2  # after the agent's first answer, never the first line
        assert not said[-1].text.endswith(("Shall I book that?", "is that right?"))
        if ex.history[-1].text.endswith("bye"):
            assert ex.action == AgentCall("end_call", {})
        else:
            assert ex.action == AgentCall("transfer_to_human", {"reason": "caller asked"})
    assert len({e.dialogue_id.split("+")[0] for e in examples}) == len(examples)  # one each
