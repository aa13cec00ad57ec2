"""Call events for the telemetry stream: what the pipeline tells, turned into messages.

`CallTelemetry` is the pipeline's one collaborator for telemetry. It builds the
messages (`topics`) and hands them to a `Sink` — the `MqttPublisher`, or a list in
tests. Every method returns at once: a sink must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from voice_agent.telemetry import topics
from voice_agent.telemetry.topics import Message
from voice_agent.turn_record import ToolCallRecord, TurnRecord


class Sink(Protocol):
    def publish(self, message: Message) -> None:
        """Take the message without blocking."""


class CallTelemetry:
    def __init__(self, node: str, sink: Sink, wall_clock: Callable[[], float]) -> None:
        """`wall_clock`: Unix seconds, for the payloads' `at_unix_s` (never a duration)."""
        self.node = node
        self._sink = sink
        self._now = wall_clock

    def call_started(self, call_id: str, active_calls: int) -> None:
        self._sink.publish(topics.call_started(self.node, call_id, self._now(), active_calls))

    def call_ended(self, call_id: str, turns: int, active_calls: int) -> None:
        self._sink.publish(topics.call_ended(self.node, call_id, self._now(), turns,
                                             active_calls))  # fmt: skip

    def turn_completed(self, record: TurnRecord) -> None:
        """The record, then one `budget_violated` per stage over its budget."""
        now = self._now()
        self._sink.publish(topics.turn_completed(self.node, record, now))
        for message in topics.budget_violations(self.node, record, now):
            self._sink.publish(message)

    def tool_called(self, call_id: str, turn: int, call: ToolCallRecord) -> None:
        self._sink.publish(topics.tool_called(self.node, call_id, turn, call, self._now()))
