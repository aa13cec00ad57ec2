"""Turn detector on scripted speech probabilities: pure, no model, no sleeping."""

from __future__ import annotations

from dataclasses import replace

import pytest

from voice_agent.hearing.endpoint import sounds_unfinished
from voice_agent.hearing.events import BargeIn, SpeechEnded, SpeechStarted
from voice_agent.hearing.turns import AskEndOfTurn, TurnConfig, TurnDetector

FRAME_MS = 32
CFG = TurnConfig(
    speech_threshold=0.5,
    silence_threshold=0.35,
    min_speech_ms=96,  # three frames
    onset_gap_ms=96,
    end_of_turn_silence_ms=320,  # ten frames
    barge_in_ms=320,
    barge_in_threshold=0.5,
)


def run(
    probabilities: list[float], detector: TurnDetector | None = None, start_frame: int = 0
) -> list[object]:
    detector = detector or TurnDetector(CFG)
    events: list[object] = []
    for i, p in enumerate(probabilities, start_frame):
        events += detector.feed(p, i * FRAME_MS, (i + 1) * FRAME_MS)
    return events


def test_a_turn_starts_back_dated_and_ends_after_the_silence() -> None:
    events = run([0.0] * 5 + [0.9] * 20 + [0.0] * 12)
    assert events == [
        SpeechStarted(start_ms=5 * FRAME_MS, detected_ms=8 * FRAME_MS),
        SpeechEnded(start_ms=5 * FRAME_MS, end_ms=25 * FRAME_MS, detected_ms=35 * FRAME_MS),
    ]
    assert events[1].end_of_turn_delay_ms == 320  # type: ignore[attr-defined]


def test_a_click_shorter_than_min_speech_is_not_a_turn() -> None:
    assert run([0.0, 0.95, 0.95, 0.0, 0.0, 0.0, 0.0] * 10) == []


def test_a_short_dip_in_a_soft_onset_does_not_delay_the_start() -> None:
    # Two voiced frames, a 64 ms dip (< onset_gap_ms), then steady speech: the turn
    # starts at the first voiced frame, not after the dip.
    events = run([0.0] * 4 + [0.7, 0.7, 0.2, 0.2] + [0.9] * 10 + [0.0] * 12)
    assert events[0] == SpeechStarted(start_ms=4 * FRAME_MS, detected_ms=9 * FRAME_MS)


def test_hysteresis_keeps_a_quieter_word_tail_in_the_turn() -> None:
    # 0.4 would not start speech but keeps it going; a pause shorter than the end-of-turn
    # silence does not split the turn.
    probs = [0.9] * 5 + [0.4] * 10 + [0.1] * 9 + [0.9] * 5 + [0.0] * 10
    events = run(probs)
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    assert events[1].end_ms == 29 * FRAME_MS  # type: ignore[attr-defined]


def test_below_speech_threshold_never_starts_a_turn() -> None:
    assert run([0.45] * 50) == []


def test_two_turns_separated_by_a_long_silence() -> None:
    events = run(([0.9] * 6 + [0.0] * 12) * 2)
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded] * 2
    assert events[2].start_ms == 18 * FRAME_MS  # type: ignore[attr-defined]


def test_barge_in_when_the_caller_talks_over_the_agent() -> None:
    detector = TurnDetector(CFG)
    detector.set_agent_speaking(True)
    events = run([0.9] * 15 + [0.0] * 10, detector)
    assert events[0] == SpeechStarted(start_ms=0, detected_ms=3 * FRAME_MS)
    assert events[1] == BargeIn(start_ms=0, detected_ms=10 * FRAME_MS)  # 320 ms of speech
    assert events[2] == SpeechEnded(0, 15 * FRAME_MS, 25 * FRAME_MS, True, True)
    assert len(events) == 3  # one barge-in per turn


def test_a_backchannel_over_the_agent_does_not_interrupt() -> None:
    detector = TurnDetector(CFG)
    detector.set_agent_speaking(True)
    events = run([0.9] * 6 + [0.0] * 12, detector)  # "mhm": 192 ms < barge_in_ms
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    ended = events[1]
    assert isinstance(ended, SpeechEnded)
    assert ended.during_agent_speech and not ended.barged_in


def test_no_barge_in_while_the_agent_is_silent() -> None:
    events = run([0.9] * 30 + [0.0] * 10)
    assert not any(isinstance(e, BargeIn) for e in events)
    assert not events[-1].during_agent_speech  # type: ignore[attr-defined]


def test_barge_in_counts_only_loud_enough_frames() -> None:
    detector = TurnDetector(TurnConfig(**{**_fields(CFG), "barge_in_threshold": 0.8}))
    detector.set_agent_speaking(True)
    events = run([0.7] * 30 + [0.0] * 10, detector)  # speech, but never above 0.8
    assert not any(isinstance(e, BargeIn) for e in events)


def test_finish_closes_an_open_turn_at_the_last_frame() -> None:
    detector = TurnDetector(CFG)
    run([0.9] * 8, detector)
    assert detector.in_speech
    assert detector.finish() == [SpeechEnded(0, 8 * FRAME_MS, 8 * FRAME_MS)]
    assert detector.finish() == []


def test_trailing_silence_and_last_voiced_end() -> None:
    detector = TurnDetector(CFG)
    run([0.9] * 5 + [0.1] * 3, detector)
    assert detector.last_voiced_end_ms == 5 * FRAME_MS
    assert detector.trailing_silence_ms == 3 * FRAME_MS


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_bad_probabilities_are_rejected(p: float) -> None:
    with pytest.raises(ValueError, match="probability"):
        TurnDetector(CFG).feed(p, 0, 32)


def test_frames_must_not_go_back_in_time() -> None:
    detector = TurnDetector(CFG)
    detector.feed(0.9, 64, 96)
    with pytest.raises(ValueError, match="back in time"):
        detector.feed(0.9, 32, 64)
    with pytest.raises(ValueError, match="end after"):
        detector.feed(0.9, 96, 96)


@pytest.mark.parametrize(
    "changes",
    [
        {"silence_threshold": 0.6},  # above the speech threshold
        {"speech_threshold": 1.0},
        {"end_of_turn_silence_ms": 0},
        {"barge_in_threshold": 0.0},
    ],
)
def test_bad_configs_are_rejected(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        TurnConfig(**{**_fields(CFG), **changes})


def _fields(config: TurnConfig) -> dict[str, float]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


# ---------------------------------------------------------------- semantic end of turn

SEM = TurnConfig(
    speech_threshold=0.5,
    silence_threshold=0.35,
    min_speech_ms=96,
    onset_gap_ms=96,
    end_of_turn_silence_ms=320,  # ten frames: the fallback when the model cannot answer
    end_of_turn="semantic",
    ask_silence_ms=64,  # two frames
    complete_silence_ms=160,  # five frames
    incomplete_silence_ms=960,  # thirty frames
)


def speak_then_pause(detector: TurnDetector, pause_frames: int) -> list[object]:
    """Ten voiced frames from frame 0, then `pause_frames` silent ones."""
    return run([0.9] * 10 + [0.0] * pause_frames, detector)


def test_semantic_asks_once_per_pause_and_a_finished_turn_ends_after_the_short_silence() -> None:
    detector = TurnDetector(SEM)
    events = speak_then_pause(detector, 3)
    asks = [e for e in events if isinstance(e, AskEndOfTurn)]
    assert asks == [AskEndOfTurn(speech_end_ms=10 * FRAME_MS, detected_ms=12 * FRAME_MS)]
    assert detector.verdict(10 * FRAME_MS, 0.9) == []  # 96 ms of silence so far
    events = run([0.0, 0.0], detector, start_frame=13)
    assert events == [SpeechEnded(start_ms=0, end_ms=10 * FRAME_MS, detected_ms=15 * FRAME_MS)]


def test_semantic_answer_arriving_late_ends_the_turn_at_once() -> None:
    detector = TurnDetector(SEM)
    speak_then_pause(detector, 8)  # 256 ms of silence before the model answers
    assert detector.verdict(10 * FRAME_MS, 0.8) == [
        SpeechEnded(start_ms=0, end_ms=10 * FRAME_MS, detected_ms=18 * FRAME_MS)
    ]


def test_semantic_unfinished_turn_waits_for_the_long_silence() -> None:
    detector = TurnDetector(SEM)
    speak_then_pause(detector, 3)
    assert detector.verdict(10 * FRAME_MS, 0.1) == []
    events = run([0.0] * 26, detector, start_frame=13)  # up to 928 ms of silence
    assert not any(isinstance(e, SpeechEnded) for e in events)
    assert run([0.0], detector, start_frame=39) == [
        SpeechEnded(start_ms=0, end_ms=10 * FRAME_MS, detected_ms=40 * FRAME_MS)
    ]


def test_semantic_without_an_answer_waits_for_the_long_silence_and_none_falls_back() -> None:
    unanswered = TurnDetector(SEM)
    events = speak_then_pause(unanswered, 29)
    assert not any(isinstance(e, SpeechEnded) for e in events)
    assert isinstance(run([0.0], unanswered, start_frame=39)[0], SpeechEnded)
    failed = TurnDetector(SEM)
    speak_then_pause(failed, 3)
    assert failed.verdict(10 * FRAME_MS, None) == []
    events = run([0.0] * 7, failed, start_frame=13)  # 320 ms: the fixed rule's silence
    assert events == [SpeechEnded(start_ms=0, end_ms=10 * FRAME_MS, detected_ms=20 * FRAME_MS)]


def test_semantic_answer_for_a_pause_the_caller_broke_is_ignored() -> None:
    detector = TurnDetector(SEM)
    speak_then_pause(detector, 3)
    run([0.9] * 5, detector, start_frame=13)  # the caller goes on
    assert detector.verdict(10 * FRAME_MS, 0.99) == []
    events = run([0.0] * 6, detector, start_frame=18)
    # A new pause: a new question, and the stale "finished" did not end the turn.
    assert [type(e) for e in events] == [AskEndOfTurn]
    with pytest.raises(ValueError, match="probability"):
        detector.verdict(18 * FRAME_MS, 1.5)


def test_silence_rule_never_asks() -> None:
    events = run([0.9] * 10 + [0.0] * 12)
    assert not any(isinstance(e, AskEndOfTurn) for e in events)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"end_of_turn": "smart"}, "end_of_turn"),
        ({"complete_threshold": 1.0}, "complete_threshold"),
        ({"complete_silence_ms": 2000}, "complete_silence_ms"),
        ({"ask_silence_ms": 0, "complete_silence_ms": 0, "incomplete_silence_ms": 0}, "positive"),
    ],
)
def test_semantic_settings_are_checked(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TurnConfig(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "unfinished"),
    [
        ("My name is", True),
        ("I'd like to book a tune-up, um", True),
        ("Could you look at my", True),
        ("I was wondering if...", True),
        ("Can I come in on the", True),
        ("My name is Priya Nair.", False),
        ("Thank you.", False),
        ("Yes, I do.", False),
        ("I think so.", False),
        ("", False),
    ],
)
def test_words_that_leave_a_sentence_unfinished(text: str, unfinished: bool) -> None:
    assert sounds_unfinished(text) is unfinished


def test_semantic_asks_again_after_an_unfinished_answer_and_ends_when_finished() -> None:
    detector = TurnDetector(replace(SEM, reask_ms=192))  # six frames
    speak_then_pause(detector, 3)  # asked at 64 ms of silence, now 96 ms
    assert detector.verdict(10 * FRAME_MS, 0.2) == []
    events = run([0.0] * 6, detector, start_frame=13)  # up to 288 ms of silence
    assert events == [AskEndOfTurn(speech_end_ms=10 * FRAME_MS, detected_ms=18 * FRAME_MS)]
    assert detector.verdict(10 * FRAME_MS, 0.9) == [
        SpeechEnded(start_ms=0, end_ms=10 * FRAME_MS, detected_ms=19 * FRAME_MS)
    ]


def test_a_turn_that_runs_past_the_longest_is_ended_and_the_speech_goes_on_as_a_new_one() -> None:
    """Music or a monologue: the turn is ended at `max_turn_ms`, so its final stays
    short; the caller's continued speech is the next turn."""
    cfg = replace(CFG, max_turn_ms=100 * FRAME_MS)
    events = run([0.9] * 250 + [0.0] * 12, TurnDetector(cfg))
    kinds = [type(e) for e in events]
    assert kinds == [SpeechStarted, SpeechEnded] * 3
    first_end = events[1]
    assert isinstance(first_end, SpeechEnded)
    assert first_end.start_ms == 0 and first_end.end_ms == first_end.detected_ms == 100 * FRAME_MS
    assert all(e.end_ms - e.start_ms <= 100 * FRAME_MS for e in events[1::2])  # type: ignore[attr-defined]
    unlimited = run([0.9] * 250 + [0.0] * 12, TurnDetector(replace(CFG, max_turn_ms=0)))
    assert [type(e) for e in unlimited] == [SpeechStarted, SpeechEnded]
    with pytest.raises(ValueError, match="max_turn_ms"):
        TurnConfig(max_turn_ms=-1)
