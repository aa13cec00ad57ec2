"""Turn records, version 2: engine figures, concurrent calls, the tool-call hook, and
version-1 lines still read."""

from __future__ import annotations

import json

import pytest

from voice_agent.clock import FakeClock
from voice_agent.latency import TurnTracker
from voice_agent.turn_record import (
    SCHEMA_VERSION,
    Budgets,
    EngineRecord,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)


def test_engine_figures_add_up_per_request() -> None:
    clock = FakeClock(10.0)
    t = TurnTracker(clock, Budgets.default(), call_id="CA9", turn=2, concurrent_calls=3)
    assert t.record().engine is None
    figures = EngineRecord().add(forwards=6, emitted_tokens=20, decided_tokens=12,
                                 deadline_forced=False)  # fmt: skip
    t.engine_figures(figures.add(forwards=4, emitted_tokens=10, decided_tokens=8,
                                 deadline_forced=True))  # fmt: skip
    record = t.record()
    assert record.engine == EngineRecord(2, 10, 30, 20, True)
    assert record.engine.tokens_per_forward == 2.0
    assert record.engine.emitted_per_forward == 3.0
    assert record.concurrent_calls == 3
    assert EngineRecord().tokens_per_forward is None
    assert TurnRecord.from_json_line(record.to_json_line()) == record


def test_tool_hook_is_told_each_finished_call() -> None:
    clock = FakeClock(10.0)
    seen: list[tuple[str, int, ToolCallRecord]] = []
    t = TurnTracker(clock, Budgets.default(), call_id="CA9", turn=4,
                    on_tool_call=lambda *a: seen.append(a))  # fmt: skip
    with t.tool_call("lookup_order"):
        clock.advance(0.25)
    assert [(c, n, r.name, r.outcome) for c, n, r in seen] == [
        ("CA9", 4, "lookup_order", ToolOutcome.OK)
    ]
    assert seen[0][2].duration_ms == pytest.approx(250.0)


def test_version_1_lines_read_as_current() -> None:
    data = json.loads(TurnRecord("CA1", 1, Budgets.default()).to_json_line())
    for key in ("engine", "concurrent_calls"):
        del data[key]
    data["schema_version"] = 1
    record = TurnRecord.from_json_line(json.dumps(data))
    assert record.schema_version == SCHEMA_VERSION
    assert record.engine is None and record.concurrent_calls is None
