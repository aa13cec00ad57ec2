"""Turn records, versions 3 and 4: each tool call keeps the arguments it ran with and
its refusal (3), the answer's first frame is marked apart from a filler's (4); older
lines still read, with those None."""

from __future__ import annotations

import json

import pytest

from voice_agent.clock import FakeClock
from voice_agent.latency import TurnTracker
from voice_agent.turn_record import (
    SCHEMA_VERSION,
    Budgets,
    Mark,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)

BOOKING = {"name": "Ann Lee", "day": "tomorrow", "time": "10:00", "service": "tune-up"}


def test_the_tracker_records_a_calls_arguments_and_refusal() -> None:
    clock = FakeClock(10.0)
    t = TurnTracker(clock, Budgets.default(), call_id="CA3", turn=1)
    args = dict(BOOKING)
    with t.tool_call("book_service", args):
        clock.advance(0.1)
    handle = t.start_tool("book_service", {**BOOKING, "time": "11:00"})
    t.end_tool(handle, ToolOutcome.REFUSED, refusal="slot_taken")
    args["name"] = "someone else"  # the record keeps its own copy
    first, second = t.record().tool_calls
    assert (first.arguments, first.outcome, first.refusal) == (BOOKING, ToolOutcome.OK, None)
    assert second.arguments == {**BOOKING, "time": "11:00"} and second.refusal == "slot_taken"


def test_arguments_and_refusal_round_trip_through_a_json_line() -> None:
    calls = (
        ToolCallRecord("book_service", 5.0, 40.0, ToolOutcome.OK, dict(BOOKING)),
        ToolCallRecord(
            "order_status",
            50.0,
            60.0,
            ToolOutcome.REFUSED,
            {"order_number": "98765"},
            "no_such_order",
        ),
        ToolCallRecord("opening_hours", 70.0),  # still running, arguments unknown
    )
    record = TurnRecord("CA3", 2, Budgets.default(), tool_calls=calls, wall_time_unix_s=1e9)
    line = record.to_json_line()
    data = json.loads(line)
    assert data["schema_version"] == SCHEMA_VERSION == 6
    assert data["tool_calls"][0]["arguments"] == BOOKING
    assert data["tool_calls"][1]["refusal"] == "no_such_order"
    back = TurnRecord.from_json_line(line)
    assert back == record
    assert back.tool_calls[0].arguments == BOOKING and back.tool_calls[2].arguments is None


def test_a_version_2_line_reads_with_arguments_unknown() -> None:
    call = ToolCallRecord("book_service", 5.0, 40.0, ToolOutcome.OK, dict(BOOKING), "x")
    data = json.loads(TurnRecord("CA1", 1, Budgets.default(), tool_calls=(call,)).to_json_line())
    for tool in data["tool_calls"]:
        del tool["arguments"], tool["refusal"]
    data["schema_version"] = 2
    record = TurnRecord.from_json_line(json.dumps(data))
    assert record.schema_version == SCHEMA_VERSION
    [read] = record.tool_calls
    assert (read.name, read.outcome, read.arguments, read.refusal) == (
        "book_service", ToolOutcome.OK, None, None
    )  # fmt: skip


def test_a_record_with_arguments_still_hashes() -> None:
    call = ToolCallRecord("book_service", 5.0, 40.0, ToolOutcome.OK, dict(BOOKING))
    record = TurnRecord("CA1", 1, Budgets.default(), tool_calls=(call,))
    assert call in {call} and record in {record}  # the dict is left out of the hash


def test_version_4_marks_the_answer_apart_from_a_filler_and_version_3_reads() -> None:
    clock = FakeClock(10.0)
    t = TurnTracker(clock, Budgets.default(), call_id="CA4", turn=1)
    t.mark(Mark.FIRST_AUDIO_SENT, 10.3)  # "one moment please"
    t.mark(Mark.ANSWER_AUDIO_SENT, 11.5)
    record = t.record()
    assert (record.first_audio_sent_at_ms, record.answer_audio_sent_at_ms) == (
        pytest.approx(300.0), pytest.approx(1500.0)
    )  # fmt: skip
    data = json.loads(record.to_json_line())
    del data["answer_audio_sent_at_ms"]
    data["schema_version"] = 3
    old = TurnRecord.from_json_line(json.dumps(data))
    assert old.answer_audio_sent_at_ms is None and old.first_audio_sent_at_ms == pytest.approx(300)


@pytest.mark.parametrize(
    ("old", "refusal", "now"),
    [
        ("error", None, ToolOutcome.FAILED),
        ("cancelled", None, ToolOutcome.RAN_CANCELLED),
        ("ok", "slot_taken", ToolOutcome.REFUSED),
        ("ok", None, ToolOutcome.OK),
        ("timeout", None, ToolOutcome.TIMEOUT),
    ],
)
def test_a_version_5_tool_outcome_reads_in_the_agents_vocabulary(
    old: str, refusal: str | None, now: ToolOutcome
) -> None:
    call = ToolCallRecord("book_service", 5.0, 40.0, ToolOutcome.OK, dict(BOOKING), refusal)
    data = json.loads(TurnRecord("CA5", 1, Budgets.default(), tool_calls=(call,)).to_json_line())
    data["schema_version"] = 5
    data["tool_calls"][0]["outcome"] = old
    [read] = TurnRecord.from_json_line(json.dumps(data)).tool_calls
    assert (read.outcome, read.refusal) == (now, refusal)
