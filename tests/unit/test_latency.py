"""The latency tracker on a fake clock: durations, deadlines, degrades, admission, JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from voice_agent.clock import FakeClock
from voice_agent.config import BudgetSettings
from voice_agent.degrade import DegradePolicy, TranscriptChoice
from voice_agent.latency import TurnTracker
from voice_agent.turn_record import (
    SCHEMA_VERSION,
    Budgets,
    DegradeAction,
    DegradeCause,
    EffortLevel,
    Mark,
    Stage,
    ToolOutcome,
    TurnRecord,
    read_jsonl,
)

START_S = 100.0
BUDGETS = Budgets(turn_ms=1200, end_of_turn_ms=300, asr_final_ms=250, engine_ms=500,
                  tts_first_audio_ms=250)  # fmt: skip
POLICY = DegradePolicy(instant_engine_ms=120, low_engine_ms=250, medium_engine_ms=400,
                       min_engine_ms=120, expected_tts_ms=150, low_effort_queue_depth=2,
                       instant_queue_depth=4)  # fmt: skip


def tracker(clock: FakeClock, **kwargs: object) -> TurnTracker:
    return TurnTracker(clock, BUDGETS, POLICY, call_id="CA1", turn=3, **kwargs)  # type: ignore[arg-type]


def at(clock: FakeClock, elapsed_ms: float) -> None:
    """Move the clock to `elapsed_ms` after the turn's origin."""
    clock.advance(START_S + elapsed_ms / 1000 - clock.now())


def full_turn() -> TurnRecord:
    clock = FakeClock(START_S)
    t = tracker(clock, wall_time_unix_s=1.7e9)
    at(clock, 320)
    t.mark(Mark.END_OF_TURN)
    at(clock, 450)
    t.mark(Mark.FINAL_TRANSCRIPT)
    t.mark(Mark.ENGINE_START)
    at(clock, 500)
    t.mark(Mark.ENGINE_DONE)  # the tool call's request
    with t.tool_call("book_service"):
        at(clock, 540)
    t.mark(Mark.ENGINE_START)  # the second request: ignored, the stage started earlier
    at(clock, 600)
    t.mark(Mark.ENGINE_FIRST_BLOCK)
    t.mark(Mark.TTS_START)
    at(clock, 700)
    t.mark(Mark.ENGINE_DONE)  # moves to the last request's end
    at(clock, 760)
    t.mark(Mark.FIRST_TTS_AUDIO)
    at(clock, 765)
    t.mark(Mark.FIRST_AUDIO_SENT)
    return t.record()


def test_durations_are_derived_from_the_marks() -> None:
    record = full_turn()
    assert record.end_of_turn_at_ms == pytest.approx(320)
    assert record.engine_start_at_ms == pytest.approx(450)
    assert record.engine_done_at_ms == pytest.approx(700)
    durations = record.durations_ms()
    expected = {"end_of_turn": 320, "asr_final": 130, "engine": 250, "tool": 40,
                "tts_first_audio": 160, "send": 5, "turn": 765,
                "engine_first_block": 150}  # fmt: skip
    assert durations.keys() == expected.keys()
    for key, value in expected.items():
        assert durations[key] == pytest.approx(value), key
    (call,) = record.tool_calls
    assert (call.name, call.outcome) == ("book_service", ToolOutcome.OK)
    assert call.started_at_ms == pytest.approx(500)
    assert record.over_budget() == [Stage.END_OF_TURN]  # 320 > 300; the rest fit


def test_unfinished_stages_have_no_duration() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 200)
    t.mark(Mark.END_OF_TURN)
    record = t.record()
    assert record.duration_ms(Stage.END_OF_TURN) == pytest.approx(200)
    assert record.duration_ms(Stage.ASR_FINAL) is None
    assert record.duration_ms(Stage.TURN) is None
    assert record.duration_ms(Stage.TOOL) is None


def test_origin_may_be_in_the_past() -> None:
    clock = FakeClock(START_S)
    t = TurnTracker(clock, BUDGETS, speech_ended_s=START_S - 0.4)  # learned after the fact
    t.mark(Mark.END_OF_TURN)
    assert t.record().end_of_turn_at_ms == pytest.approx(400)
    assert t.remaining_ms() == pytest.approx(800)


def test_deadlines_shrink_as_the_turn_consumes_its_budget() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    assert t.turn_deadline_s == pytest.approx(START_S + 1.2)
    assert t.deadline_for(Stage.END_OF_TURN) == pytest.approx(START_S + 0.3)
    assert t.deadline_for(Stage.TURN) == pytest.approx(START_S + 1.2)
    # Not started: each stage's budget runs from now, capped by the turn.
    assert t.deadline_for(Stage.ENGINE) == pytest.approx(START_S + 0.5)
    at(clock, 400)
    assert t.deadline_for(Stage.ENGINE) == pytest.approx(START_S + 0.9)
    at(clock, 900)
    assert t.deadline_for(Stage.ENGINE) == pytest.approx(START_S + 1.2)  # 300 ms, not 500
    at(clock, 1100)
    assert t.deadline_for(Stage.ENGINE) == pytest.approx(START_S + 1.2)  # 100 ms left
    assert t.deadline_for(Stage.TOOL) == pytest.approx(START_S + 1.2)  # turn only
    assert t.remaining_ms() == pytest.approx(100)


def test_a_started_stage_keeps_its_deadline() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 300)
    t.mark(Mark.END_OF_TURN)
    at(clock, 350)
    assert t.deadline_for(Stage.ASR_FINAL) == pytest.approx(START_S + 0.55)
    t.mark(Mark.ENGINE_START)
    at(clock, 600)
    assert t.deadline_for(Stage.ENGINE) == pytest.approx(START_S + 0.85)
    assert t.deadline_for(Stage.ASR_FINAL) == pytest.approx(START_S + 0.55)


def test_engine_keeps_the_asked_effort_when_it_fits() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    plan = t.plan_engine(EffortLevel.MEDIUM)
    assert (plan.effort, plan.max_steps_per_block) == (EffortLevel.MEDIUM, None)
    assert plan.deadline_s == pytest.approx(START_S + 0.5)
    assert t.record().degrades == ()


def test_engine_effort_is_lowered_when_the_turn_runs_short() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 950)  # 250 ms of the turn left: low fits exactly, medium does not
    plan = t.plan_engine(EffortLevel.MEDIUM)
    assert (plan.effort, plan.max_steps_per_block) == (EffortLevel.LOW, None)
    assert plan.deadline_s == pytest.approx(START_S + 1.2)
    (degrade,) = t.record().degrades
    assert degrade.stage is Stage.ENGINE
    assert degrade.action is DegradeAction.LOWER_EFFORT
    assert degrade.cause is DegradeCause.TURN_BUDGET
    assert degrade.at_ms == pytest.approx(950)
    assert "medium -> low" in degrade.detail
    assert t.record().effort is EffortLevel.LOW


def test_engine_effort_is_lowered_by_its_own_stage_budget() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 100)
    t.mark(Mark.ENGINE_START)
    at(clock, 450)  # a tool ran; 150 ms of the engine's 500 are left, the turn has 750
    plan = t.plan_engine(EffortLevel.LOW)
    assert plan.effort is EffortLevel.INSTANT
    assert plan.deadline_s == pytest.approx(START_S + 0.6)
    (degrade,) = t.record().degrades
    assert (degrade.action, degrade.cause) == (
        DegradeAction.LOWER_EFFORT,
        DegradeCause.STAGE_BUDGET,
    )


def test_engine_steps_are_capped_when_not_even_instant_fits() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 1140)  # 60 ms left: half of instant's expected 120 ms
    plan = t.plan_engine(EffortLevel.LOW)
    assert plan.effort is EffortLevel.INSTANT
    assert plan.max_steps_per_block == 8  # 16 * 60 / 120
    actions = [d.action for d in t.record().degrades]
    assert actions == [DegradeAction.LOWER_EFFORT, DegradeAction.FEWER_STEPS]
    assert t.record().max_steps_per_block == 8
    at(clock, 1300)  # overrun: still an answer, one step per block
    assert t.plan_engine().max_steps_per_block == 1


def test_partial_transcript_is_used_past_the_asr_deadline() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 300)
    t.mark(Mark.END_OF_TURN)
    assert t.transcript_deadline_s() == pytest.approx(START_S + 0.55)
    at(clock, 400)
    assert t.choose_transcript(final_ready=False, have_partial=True) is TranscriptChoice.WAIT
    assert t.choose_transcript(final_ready=True, have_partial=True) is TranscriptChoice.FINAL
    assert t.record().degrades == ()
    at(clock, 550)
    assert t.choose_transcript(final_ready=False, have_partial=False) is TranscriptChoice.WAIT
    assert t.record().degrades == ()
    assert t.choose_transcript(final_ready=False, have_partial=True) is TranscriptChoice.PARTIAL
    (degrade,) = t.record().degrades
    assert (degrade.stage, degrade.action, degrade.cause) == (
        Stage.ASR_FINAL,
        DegradeAction.USE_PARTIAL_TRANSCRIPT,
        DegradeCause.STAGE_BUDGET,
    )


def test_transcript_wait_leaves_time_for_the_engine_and_tts() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 850)  # a late end of turn: ASR's 250 ms would end at 1100
    t.mark(Mark.END_OF_TURN)
    # 1200 - (120 engine + 150 tts) = 930 ms
    assert t.transcript_deadline_s() == pytest.approx(START_S + 0.93)
    at(clock, 930)
    assert t.choose_transcript(final_ready=False, have_partial=True) is TranscriptChoice.PARTIAL
    assert t.record().degrades[0].cause is DegradeCause.TURN_BUDGET


def test_filler_when_the_first_audio_would_be_late() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    at(clock, 500)
    t.mark(Mark.ENGINE_START)
    # low effort expects 250 ms, tts 150 ms: first audio at ~900 ms, on time
    assert t.expected_first_audio_s() == pytest.approx(START_S + 0.9)
    assert not t.should_play_filler()
    # a tool with a 2 s timeout starts: the first audio would be late
    assert t.should_play_filler(expected_wait_ms=2000)
    assert not t.should_play_filler(expected_wait_ms=2000)  # once per turn
    (degrade,) = t.record().degrades
    assert (degrade.stage, degrade.action) == (Stage.TURN, DegradeAction.PLAY_FILLER)
    assert degrade.at_ms == pytest.approx(500)


def test_filler_at_the_deadline_but_not_after_audio_went_out() -> None:
    clock = FakeClock(START_S)
    late = tracker(clock)
    at(clock, 1200)
    assert late.should_play_filler()

    clock = FakeClock(START_S)
    on_time = tracker(clock)
    at(clock, 700)
    on_time.mark(Mark.FIRST_AUDIO_SENT)
    at(clock, 5000)
    assert not on_time.should_play_filler(expected_wait_ms=2000)
    assert on_time.record().degrades == ()


@pytest.mark.parametrize(
    ("depth", "requested", "admitted"),
    [
        (0, EffortLevel.MEDIUM, EffortLevel.MEDIUM),
        (2, EffortLevel.MEDIUM, EffortLevel.MEDIUM),
        (3, EffortLevel.MEDIUM, EffortLevel.LOW),
        (4, EffortLevel.MEDIUM, EffortLevel.LOW),
        (5, EffortLevel.MEDIUM, EffortLevel.INSTANT),
        (3, EffortLevel.LOW, EffortLevel.LOW),
        (9, EffortLevel.INSTANT, EffortLevel.INSTANT),
    ],
)
def test_admission_lowers_effort_by_queue_depth(
    depth: int, requested: EffortLevel, admitted: EffortLevel
) -> None:
    t = tracker(FakeClock(START_S))
    assert t.admit(depth, requested) is admitted
    record = t.record()
    assert (record.queue_depth, record.effort) == (depth, admitted)
    if admitted is requested:
        assert record.degrades == ()
    else:
        (degrade,) = record.degrades
        assert (degrade.cause, degrade.action) == (
            DegradeCause.QUEUE_DEPTH,
            DegradeAction.LOWER_EFFORT,
        )


def test_engine_plan_starts_from_the_admitted_effort() -> None:
    t = tracker(FakeClock(START_S))
    t.admit(5, EffortLevel.MEDIUM)
    assert t.plan_engine().effort is EffortLevel.INSTANT


def test_tool_call_outcomes() -> None:
    clock = FakeClock(START_S)
    t = tracker(clock)
    with pytest.raises(TimeoutError), t.tool_call("lookup_order"):
        clock.advance(2.0)
        raise TimeoutError
    with pytest.raises(ValueError), t.tool_call("book_service"):
        raise ValueError("no slot")
    with pytest.raises(asyncio.CancelledError), t.tool_call("check_stock"):
        raise asyncio.CancelledError
    handle = t.start_tool("opening_hours")
    running = t.record().tool_calls[-1]
    assert (running.ended_at_ms, running.outcome, running.duration_ms) == (None, None, None)
    t.end_tool(handle, ToolOutcome.OK)
    with pytest.raises(ValueError, match="already ended"):
        t.end_tool(handle, ToolOutcome.OK)
    calls = t.record().tool_calls
    assert [c.outcome for c in calls] == [
        ToolOutcome.TIMEOUT,
        ToolOutcome.FAILED,
        ToolOutcome.RAN_CANCELLED,
        ToolOutcome.OK,
    ]
    assert calls[0].duration_ms == pytest.approx(2000)


def test_budgets_come_from_settings() -> None:
    budgets = Budgets.from_settings(BudgetSettings(turn_ms=900, engine_ms=300))
    default_end_of_turn_ms = BudgetSettings().end_of_turn_ms
    assert (budgets.turn_ms, budgets.engine_ms) == (900, 300)
    assert budgets.end_of_turn_ms == default_end_of_turn_ms
    assert budgets.for_stage(Stage.TOOL) is None
    assert Budgets.default().engine_ms == 500


def test_policy_rejects_inconsistent_thresholds() -> None:
    with pytest.raises(ValueError, match="rise with effort"):
        DegradePolicy(instant_engine_ms=300, low_engine_ms=200)
    with pytest.raises(ValueError, match="ordered"):
        DegradePolicy(low_effort_queue_depth=5, instant_queue_depth=2)


def degraded_turn() -> TurnRecord:
    clock = FakeClock(START_S)
    t = tracker(clock)
    t.admit(3, EffortLevel.MEDIUM)
    at(clock, 1150)
    t.plan_engine()
    t.should_play_filler()
    with pytest.raises(TimeoutError), t.tool_call("lookup_order"):
        raise TimeoutError
    return t.record()


def test_json_line_round_trip() -> None:
    for record in (full_turn(), degraded_turn(), tracker(FakeClock()).record()):
        line = record.to_json_line()
        assert "\n" not in line
        assert TurnRecord.from_json_line(line) == record
        data = json.loads(line)
        assert data["schema_version"] == SCHEMA_VERSION
        assert data["durations_ms"] == record.durations_ms()
    assert len(degraded_turn().degrades) == 4


def test_a_torn_line_is_skipped_with_a_warning_and_a_wrong_record_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server killed mid-write leaves half a line (not JSON), at the end or, once the
    next server appended after it, in the middle: the records around it are read and the
    reader says what it skipped. A JSON line that is not a record is an error naming it."""
    path = tmp_path / "turns.jsonl"
    whole = full_turn().to_json_line()
    path.write_text(whole + "\n" + whole[: len(whole) // 2])
    with caplog.at_level("WARNING"):
        assert read_jsonl(path) == [full_turn()]
    assert "turns.jsonl:2: skipped a torn line" in caplog.text
    path.write_text(whole[: len(whole) // 2] + "\n" + whole + "\n")
    assert read_jsonl(path) == [full_turn()]
    path.write_text(whole + "\n" + '{"call_id": "CA1"}\n')
    with pytest.raises(ValueError, match=r"turns\.jsonl:2: "):
        read_jsonl(path)


def test_json_line_rejects_other_versions_and_bad_fields() -> None:
    data = json.loads(full_turn().to_json_line())
    with pytest.raises(ValueError, match="schema_version 99"):
        TurnRecord.from_json_line(json.dumps({**data, "schema_version": 99}))
    with pytest.raises(ValueError, match="invalid turn record"):
        TurnRecord.from_json_line(json.dumps({**data, "effort": "maximum"}))
    with pytest.raises(ValueError, match="not JSON"):
        TurnRecord.from_json_line("{")
