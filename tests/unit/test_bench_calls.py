"""The benchmark's bookkeeping: scripted caller audio, joining what callers heard with
the server's turn records, and the summary figures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scripts.calls import (
    SCRIPTS,
    CallResult,
    join_turns,
    percentiles,
    script_audio,
    scripts_for,
    summarize,
)
from voice_agent.events import Pcm16
from voice_agent.simulator import CallSummary
from voice_agent.turn_record import (
    Budgets,
    DegradeAction,
    DegradeCause,
    DegradeRecord,
    Stage,
    TurnRecord,
)


class _Tone:
    """A stand-in voice: one second of tone per line (counts its calls)."""

    sample_rate_hz = 1000

    def __init__(self) -> None:
        self.calls = 0

    def synthesize(self, text: str) -> Pcm16:
        self.calls += 1
        return np.full(1000, 1000, np.int16)


def _record(call: str, turn: int, sent_ms: float, filler: bool = False) -> TurnRecord:
    degrades = ()
    if filler:
        degrades = (DegradeRecord(Stage.TTS_FIRST_AUDIO, DegradeCause.TURN_BUDGET,
                                  DegradeAction.PLAY_FILLER, 0.0),)  # fmt: skip
    return TurnRecord(call, turn, Budgets.default(), end_of_turn_at_ms=400.0,
                      first_audio_sent_at_ms=sent_ms, degrades=degrades,
                      preempted=not filler)  # fmt: skip


def _summary(call: str, heard: list[int | None]) -> CallSummary:
    return CallSummary(turns=len(heard), first_reply_ms=heard, call_sid=call)


def test_script_audio_lays_the_lines_between_gaps_and_synthesizes_each_line_once() -> None:
    voice = _Tone()
    cache: dict[str, Pcm16] = {}
    audio, rate = script_audio(("a", "b", "a"), voice, cache, first_gap_s=2.0, gap_s=1.0)
    assert rate == 1000
    assert len(audio) == 2000 + 1000 + 1000 + 1000 + 1000 + 1000 + 300
    assert voice.calls == 2  # "a" came from the cache the second time
    assert not audio[:2000].any() and audio[2000:3000].all() and not audio[3000:4000].any()


def test_scripts_go_round_robin() -> None:
    picked = scripts_for(len(SCRIPTS) + 2, offset=1)
    assert picked[0] == SCRIPTS[1] and picked[-1] == SCRIPTS[(len(SCRIPTS) + 2) % len(SCRIPTS)]


def test_turns_join_their_records_by_call_and_number() -> None:
    results = [
        CallResult(("x", "y"), _summary("CA1", [700, None])),
        CallResult(("x",), None, "OSError: refused"),
        CallResult(("z",), _summary("CA2", [900])),
    ]
    records = [_record("CA1", 1, 650.0), _record("CA2", 1, 850.0, filler=True),
               _record("CA3", 1, 1.0)]  # fmt: skip
    turns = join_turns(results, records)
    assert [(t.call_id, t.turn, t.heard_ms) for t in turns] == [
        ("CA1", 1, 700), ("CA1", 2, None), ("CA2", 1, 900)
    ]  # fmt: skip
    assert turns[0].record is records[0] and turns[1].record is None
    figures = summarize(turns, results)
    assert figures["voice_to_voice_ms"] == {"p50": 800.0, "p95": 890.0, "n": 2}
    turn_stage = figures["stages_ms"]["turn"]  # type: ignore[index]
    assert turn_stage == {"p50": 750.0, "p95": 840.0, "n": 2}
    assert figures["stages_ms"]["end_of_turn"]["n"] == 2  # type: ignore[index]
    assert figures["stages_ms"]["engine"]["n"] == 0  # type: ignore[index]
    assert figures["turns"] == 3 and figures["turns_unanswered"] == 1
    assert figures["turns_without_record"] == 1 and figures["fillers"] == 1
    assert figures["preempted_turns"] == 1
    assert figures["calls"] == 3 and figures["calls_failed"] == 1
    assert figures["errors"] == ["OSError: refused"]


def test_percentiles_of_nothing_are_none() -> None:
    assert percentiles([]) == {"p50": None, "p95": None, "n": 0}
    assert percentiles([5.0]) == {"p50": 5.0, "p95": 5.0, "n": 1}


def test_the_answer_is_heard_after_a_filler_and_split_turns_count_as_false_cutoffs() -> None:
    results = [CallResult(("x", "y"), _summary("CA1", [700, 900]))]
    plain = replace(_record("CA1", 1, 650.0), answer_audio_sent_at_ms=650.0)
    filled = replace(_record("CA1", 2, 800.0, filler=True), answer_audio_sent_at_ms=1900.0)
    split = _record("CA1", 3, 500.0)  # the server answered a turn the caller never ended
    records = [plain, filled, split]
    figures = summarize(join_turns(results, records), results, records)
    # First sound heard at 700 and 900 ms; the second turn's answer 1,100 ms after its filler.
    assert figures["voice_to_voice_ms"] == {"p50": 800.0, "p95": 890.0, "n": 2}
    assert figures["voice_to_voice_answer_ms"] == {"p50": 1350.0, "p95": 1935.0, "n": 2}
    assert figures["false_cutoffs"] == 0.5  # 3 answered turns for 2 spoken
    assert summarize(join_turns(results, records), results)["false_cutoffs"] is None
