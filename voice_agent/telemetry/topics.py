"""The MQTT topic tree and the messages published on it (pure: no I/O).

    voice-agent/<node>/status                               retained, QoS 1
    voice-agent/<node>/calls/<call_id>/started              QoS 1
    voice-agent/<node>/calls/<call_id>/ended                QoS 1
    voice-agent/<node>/calls/<call_id>/turns/<turn>         QoS 1  (the TurnRecord)
    voice-agent/<node>/calls/<call_id>/tools/<tool>         QoS 0
    voice-agent/<node>/calls/<call_id>/violations/<stage>   QoS 1

Every payload is a JSON object with `event` (an `EventKind` value), `node`, `call_id`
(except status) and `at_unix_s` (publishing time, wall clock). Subscribe to
`voice-agent/+/calls/+/turns/+` for every turn of every node.

Choices: only `status` is retained (a late subscriber learns whether a node is up; the
node's last will sets it offline when it vanishes). Call events are a stream, not
state: retaining them would leave one stale message per call in the broker forever.
Call lifecycle, turn records and budget violations are QoS 1 (at least once: reports
and alerts want every one; `call_id` + `turn` identify duplicates). Tool calls are
QoS 0: frequent, and each one is also inside its turn's record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from voice_agent.turn_record import Stage, ToolCallRecord, TurnRecord

ROOT = "voice-agent"
AT_MOST_ONCE = 0
AT_LEAST_ONCE = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9._:@=-]")
"""Characters kept out of a topic level: `/`, `+`, `#`, spaces, control characters and
anything not plain ASCII (a lone surrogate cannot even be encoded)."""


class EventKind(Enum):
    NODE_STATUS = "status"
    CALL_STARTED = "call_started"
    CALL_ENDED = "call_ended"
    TURN_COMPLETED = "turn_completed"
    TOOL_CALLED = "tool_called"
    BUDGET_VIOLATED = "budget_violated"


class NodeState(Enum):
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True, slots=True)
class Message:
    """One MQTT publication."""

    topic: str
    payload: bytes
    qos: int
    retain: bool = False


def level(name: str) -> str:
    """`name` made safe as one topic level (anything but ASCII letters, digits and
    `._:@=-` -> `_`; empty -> `_`)."""
    return _UNSAFE.sub("_", name) or "_"


def node_topic(node: str) -> str:
    return f"{ROOT}/{level(node)}"


def call_topic(node: str, call_id: str) -> str:
    return f"{node_topic(node)}/calls/{level(call_id)}"


TURNS_FILTER = f"{ROOT}/+/calls/+/turns/+"
"""Every turn record of every node."""
ALL_FILTER = f"{ROOT}/#"


def _message(topic: str, data: dict[str, Any], qos: int, retain: bool = False) -> Message:
    payload = json.dumps(data, separators=(",", ":")).encode()
    return Message(topic, payload, qos, retain)


def status(node: str, state: NodeState, at_unix_s: float) -> Message:
    """The node's retained status (also its last will, with `OFFLINE`)."""
    data = {"event": EventKind.NODE_STATUS.value, "node": node, "state": state.value,
            "at_unix_s": at_unix_s}  # fmt: skip
    return _message(f"{node_topic(node)}/status", data, AT_LEAST_ONCE, retain=True)


def call_started(node: str, call_id: str, at_unix_s: float, active_calls: int) -> Message:
    """`active_calls`: calls in progress on the node, this one included."""
    data = _base(EventKind.CALL_STARTED, node, call_id, at_unix_s)
    data["active_calls"] = active_calls
    return _message(f"{call_topic(node, call_id)}/started", data, AT_LEAST_ONCE)


def call_ended(node: str, call_id: str, at_unix_s: float, turns: int, active_calls: int) -> Message:
    """`turns`: caller turns answered; `active_calls`: calls left on the node."""
    data = _base(EventKind.CALL_ENDED, node, call_id, at_unix_s)
    data |= {"turns": turns, "active_calls": active_calls}
    return _message(f"{call_topic(node, call_id)}/ended", data, AT_LEAST_ONCE)


def turn_completed(node: str, record: TurnRecord, at_unix_s: float) -> Message:
    """The turn's record under `record` (`TurnRecord.from_json_data` reads it back)."""
    data = _base(EventKind.TURN_COMPLETED, node, record.call_id, at_unix_s)
    data["record"] = record.to_json_data()
    return _message(f"{call_topic(node, record.call_id)}/turns/{record.turn}", data,
                    AT_LEAST_ONCE)  # fmt: skip


def tool_called(
    node: str, call_id: str, turn: int, call: ToolCallRecord, at_unix_s: float
) -> Message:
    data = _base(EventKind.TOOL_CALLED, node, call_id, at_unix_s)
    data |= {
        "turn": turn,
        "tool": call.name,
        "started_at_ms": call.started_at_ms,
        "duration_ms": call.duration_ms,
        "outcome": call.outcome.value if call.outcome is not None else None,
    }
    return _message(f"{call_topic(node, call_id)}/tools/{level(call.name)}", data,
                    AT_MOST_ONCE)  # fmt: skip


def budget_violations(node: str, record: TurnRecord, at_unix_s: float) -> list[Message]:
    """One message per stage of `record` that overran its own budget."""
    out = []
    for stage in record.over_budget():
        data = _base(EventKind.BUDGET_VIOLATED, node, record.call_id, at_unix_s)
        data |= {
            "turn": record.turn,
            "stage": stage.value,
            "took_ms": record.duration_ms(stage),
            "budget_ms": record.budgets.for_stage(stage),
            "degrades": [d.action.value for d in record.degrades if _counts(d.stage, stage)],
        }
        topic = f"{call_topic(node, record.call_id)}/violations/{stage.value}"
        out.append(_message(topic, data, AT_LEAST_ONCE))
    return out


def _counts(degrade_stage: Stage, violated: Stage) -> bool:
    """A degrade explains a violation of its own stage, and every degrade explains the
    turn's."""
    return violated is Stage.TURN or degrade_stage is violated


def _base(kind: EventKind, node: str, call_id: str, at_unix_s: float) -> dict[str, Any]:
    return {"event": kind.value, "node": node, "call_id": call_id, "at_unix_s": at_unix_s}


def parse(payload: bytes) -> dict[str, Any]:
    """A payload back as data. Raises ValueError when it is not a JSON object with an
    `event` this module knows."""
    try:
        data = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"telemetry payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("telemetry payload must be a JSON object")
    try:
        EventKind(data.get("event"))
    except ValueError:
        raise ValueError(f"unknown telemetry event {data.get('event')!r}") from None
    return data
