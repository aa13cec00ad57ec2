"""Independent caller data (voice_agent/brain/independent.py): the label format is
enforced with errors naming file:line, and the scorer (independent_score.py) counts
unasked irreversible actions, writes before a read-back and invented values."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from voice_agent.brain.independent import (
    CALL_DAY,
    CaseError,
    day_date,
    hint_label,
    parse_call,
    parse_line,
    read_cases,
)
from voice_agent.brain.independent_score import (
    Booking,
    Hold,
    Observed,
    ObservedCall,
    Outcome,
    score_call,
    score_line,
)

LINE = {"id": "x-1", "after": None, "line": "my gears keep skipping, can you fit me in friday",
        "act": "book", "args": {"service": "gear adjustment", "day": "friday"}}  # fmt: skip
CALL = {
    "id": "x-d1", "goal": "book", "setup": None,
    "turns": ["hi, my rim is buckled", "thursday at three", "dev patel", "yes", "bye"],
    "expect": {"writes": [{"tool": "book_service", "args": {"name": "dev patel",
               "day": "thursday", "time": "15:00", "service": "wheel true"}}],
               "lookups": [], "end": "end_call"},
}  # fmt: skip


def test_the_call_day_is_a_tuesday_and_day_words_resolve_against_it() -> None:
    assert CALL_DAY.weekday() == 1
    assert day_date("tomorrow") == day_date("wednesday") == date(2026, 12, 9)
    assert day_date("next tuesday") == date(2026, 12, 15)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"act": "buy"}, "act 'buy'"),
        ({"args": {"service": "oil change"}}, "service 'oil change'"),
        ({"args": {"day": "sunday", "time": "10:00"}}, "closed on sunday"),
        ({"args": {"time": "10:15"}}, "half-hour"),
        ({"args": {"name": "Dev Patel"}}, "lower case"),
        ({"args": {"order_number": "40213"}}, "does not belong to book_service"),
        ({"line": ""}, "'line'"),
    ],
)
def test_a_bad_label_is_refused_with_the_reason(change: dict[str, Any], why: str) -> None:
    with pytest.raises(CaseError, match=why):
        parse_line({**LINE, **change})


def test_a_search_needs_the_products_that_fit() -> None:
    with pytest.raises(CaseError, match="products"):
        parse_line({**LINE, "act": "search", "args": {}})
    assert parse_line({**LINE, "act": "search", "args": {}, "products": ["108"]}).products == (
        "108",
    )


def test_a_call_write_must_validate_against_the_tool_schema() -> None:
    bad = json.loads(json.dumps(CALL))
    del bad["expect"]["writes"][0]["args"]["name"]
    with pytest.raises(CaseError, match="book_service"):
        parse_call(bad)
    assert parse_call(CALL).writes[0].args["service"] == "wheel true"


def test_files_are_read_with_file_and_line_in_errors_and_ids_unique(tmp_path: Path) -> None:
    good = tmp_path / "a.jsonl"
    good.write_text(json.dumps(LINE) + "\n\n" + json.dumps(CALL) + "\n")
    cases = read_cases([good])
    assert len(cases.lines) == 1 and len(cases.calls) == 1
    dup = tmp_path / "b.jsonl"
    dup.write_text(json.dumps(LINE) + "\n")
    with pytest.raises(CaseError, match=r"b\.jsonl:1: id 'x-1' already used at .*a\.jsonl:1"):
        read_cases([good, dup])
    torn = tmp_path / "c.jsonl"
    torn.write_text('{"id": "x-9", "line": "hi"')
    with pytest.raises(CaseError, match=r"c\.jsonl:1"):
        read_cases([torn])


def test_acts_map_to_the_simulators_hint_labels() -> None:
    assert hint_label(parse_line(LINE)) == "book"
    transfer = parse_line({**LINE, "act": "transfer", "args": {}, "reason": "refund"})
    assert hint_label(transfer) == "transfer refund"
    name = parse_line({**LINE, "after": "Your name?", "act": "give_info", "args": {"name": "al x"}})
    assert hint_label(name) == "give name"
    assert hint_label(parse_line({**LINE, "act": "info", "args": {}})) is None


def seen(kind: str, *calls: ObservedCall) -> Observed:
    return Observed(kind, calls)


def test_a_symptom_line_asked_about_is_right_and_a_transfer_is_unasked() -> None:
    case = parse_line(LINE)
    assert score_line(case, seen("say")).correct
    wrong = score_line(
        case,
        seen("transfer", ObservedCall("transfer_to_human", {"reason": "could not help"}, True)),
    )
    assert not wrong.correct and wrong.unasked_irreversible
    assert not score_line(case, seen("hang_up")).correct


def test_a_lookup_with_a_value_nobody_said_is_invented() -> None:
    case = parse_line(LINE)
    ok = ObservedCall("check_availability", {"day": "friday", "service": "gear adjustment"}, True)
    assert score_line(case, seen("say", ok)).correct
    other_day = ObservedCall(
        "check_availability", {"day": "monday", "service": "gear adjustment"}, True
    )
    assert score_line(case, seen("say", other_day)).invented
    booked = ObservedCall("book_service", {**LINE["args"], "name": "x y", "time": "10:00"}, True)  # type: ignore[dict-item]
    assert score_line(case, seen("say", booked)).wrong_write


def test_a_search_is_right_when_its_hits_hold_a_product_that_fits() -> None:
    case = parse_line({**LINE, "act": "search", "args": {}, "products": ["111", "112"]})
    assert score_line(
        case, seen("say", ObservedCall("search_products", {"query": "lock"}, True, ("111",)))
    ).correct
    assert not score_line(
        case, seen("say", ObservedCall("search_products", {"query": "x"}, True, ("108",)))
    ).correct


def test_a_call_is_complete_when_the_database_ends_as_asked() -> None:
    case = parse_call(CALL)
    want = Booking("dev patel", "wheel true", day_date("thursday"), "15:00")
    turns = (seen("say"), seen("say"), seen("say"), seen("say"), seen("hang_up"))
    done = score_call(case, Outcome(frozenset({want}), frozenset(), turns))
    assert done.completed and not done.unasked_irreversible and not done.wrong_write
    wrong_time = Booking("dev patel", "wheel true", day_date("thursday"), "16:00")
    missed = score_call(case, Outcome(frozenset({wrong_time}), frozenset(), turns))
    assert not missed.completed and missed.wrong_write
    early = score_call(
        case, Outcome(frozenset(), frozenset(), (seen("hang_up"),), hung_up_early=True)
    )
    assert not early.completed and early.unasked_irreversible
    held = score_call(
        case, Outcome(frozenset({want}), frozenset({Hold("111", 1, "dev patel")}), turns)
    )
    assert not held.completed and held.wrong_write


def test_opening_hours_asked_without_a_day_are_todays() -> None:
    case = parse_line({**LINE, "act": "hours", "args": {}})
    today = ObservedCall("opening_hours", {"day": "today"}, True)
    assert score_line(case, seen("say", today)).correct
    friday = ObservedCall("opening_hours", {"day": "friday"}, True)
    assert score_line(case, seen("say", friday)).invented
