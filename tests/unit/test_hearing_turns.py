"""Turn detector on scripted speech probabilities: pure, no model, no sleeping."""

from __future__ import annotations

import pytest

from voice_agent.hearing.events import BargeIn, SpeechEnded, SpeechStarted
from voice_agent.hearing.turns import TurnConfig, TurnDetector

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
