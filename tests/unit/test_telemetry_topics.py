"""The telemetry topic tree and payloads, and the call events built from a pipeline's
calls (pure: a list stands in for the publisher)."""

from __future__ import annotations

import json

import pytest

from voice_agent.telemetry import CallTelemetry, EventKind, Message, topics
from voice_agent.telemetry.publisher import BrokerAddress
from voice_agent.telemetry.topics import AT_LEAST_ONCE, AT_MOST_ONCE, NodeState
from voice_agent.turn_record import (
    Budgets,
    DegradeAction,
    DegradeCause,
    DegradeRecord,
    Stage,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)

BUDGETS = Budgets(turn_ms=1200, end_of_turn_ms=450, asr_final_ms=250, engine_ms=500,
                  tts_first_audio_ms=250)  # fmt: skip


class ListSink:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    def publish(self, message: Message) -> None:
        self.messages.append(message)


def slow_turn() -> TurnRecord:
    """Engine 700 ms (budget 500) and voice to voice 1500 ms (budget 1200)."""
    degrade = DegradeRecord(Stage.ENGINE, DegradeCause.STAGE_BUDGET, DegradeAction.FEWER_STEPS,
                            600.0)  # fmt: skip
    return TurnRecord("CA/1+x", 3, BUDGETS, end_of_turn_at_ms=400, final_transcript_at_ms=500,
                      engine_start_at_ms=500, engine_done_at_ms=1200, tts_start_at_ms=1200,
                      first_tts_audio_at_ms=1400, first_audio_sent_at_ms=1500,
                      degrades=(degrade,))  # fmt: skip


def test_topic_levels_are_made_safe() -> None:
    assert topics.level("CA/1+x #") == "CA_1_x__"
    assert topics.level("") == "_"
    assert topics.call_topic("n1", "CA/1") == "voice-agent/n1/calls/CA_1"


def test_call_events_topics_qos_and_payloads() -> None:
    sink = ListSink()
    telemetry = CallTelemetry("n1", sink, lambda: 1.7e9)
    record = slow_turn()
    telemetry.call_started("CA/1+x", 2)
    telemetry.tool_called("CA/1+x", 3, ToolCallRecord("lookup_order", 10.0, 60.0,
                                                       ToolOutcome.OK))  # fmt: skip
    telemetry.turn_completed(record)
    telemetry.call_ended("CA/1+x", 3, 1)
    base = "voice-agent/n1/calls/CA_1_x"
    assert [(m.topic, m.qos, m.retain) for m in sink.messages] == [
        (f"{base}/started", AT_LEAST_ONCE, False),
        (f"{base}/tools/lookup_order", AT_MOST_ONCE, False),
        (f"{base}/turns/3", AT_LEAST_ONCE, False),
        (f"{base}/violations/engine", AT_LEAST_ONCE, False),
        (f"{base}/violations/turn", AT_LEAST_ONCE, False),
        (f"{base}/ended", AT_LEAST_ONCE, False),
    ]
    data = [topics.parse(m.payload) for m in sink.messages]
    assert [d["event"] for d in data] == [
        "call_started", "tool_called", "turn_completed", "budget_violated",
        "budget_violated", "call_ended",
    ]  # fmt: skip
    assert all(d["call_id"] == "CA/1+x" and d["at_unix_s"] == 1.7e9 for d in data)
    assert data[0]["active_calls"] == 2 and data[5] | {"turns": 3, "active_calls": 1} == data[5]
    assert data[1]["duration_ms"] == 50.0 and data[1]["outcome"] == "ok"
    assert TurnRecord.from_json_data(data[2]["record"]) == record
    engine, turn = data[3], data[4]
    assert (engine["took_ms"], engine["budget_ms"], engine["degrades"]) == (700, 500,
                                                                             ["fewer_steps"])  # fmt: skip
    assert (turn["took_ms"], turn["budget_ms"]) == (1500, 1200)


def test_status_is_retained_and_parse_refuses_strangers() -> None:
    m = topics.status("n1", NodeState.OFFLINE, 5.0)
    assert (m.topic, m.qos, m.retain) == ("voice-agent/n1/status", AT_LEAST_ONCE, True)
    assert topics.parse(m.payload)["state"] == "offline"
    assert EventKind(topics.parse(m.payload)["event"]) is EventKind.NODE_STATUS
    for bad in (b"{", b"[1]", json.dumps({"event": "nope"}).encode()):
        with pytest.raises(ValueError):
            topics.parse(bad)


def test_broker_urls() -> None:
    assert BrokerAddress.parse("mqtt://127.0.0.1:1884") == BrokerAddress("127.0.0.1", 1884)
    assert BrokerAddress.parse("mqtt://broker") == BrokerAddress("broker", 1883)
    for bad in ("http://x", "mqtt://", "mqtt://h:99999", "mqtt://h/path", "mqtt://u@h"):
        with pytest.raises(ValueError):
            BrokerAddress.parse(bad)
