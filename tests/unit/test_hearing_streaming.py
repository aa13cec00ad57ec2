"""Streaming policy and the listener's orchestration, with a scripted VAD and a fake
recognizer: which audio is decoded when, and in which order events come out."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from voice_agent.hearing.asr import AsrOverloadedError, Decoded
from voice_agent.hearing.events import (
    FinalTranscript,
    PartialTranscript,
    PausedTranscript,
    SpeechEnded,
    SpeechStarted,
    TranscriptionFailed,
)
from voice_agent.hearing.listener import Listener
from voice_agent.hearing.streaming import StreamingConfig, TurnAudio
from voice_agent.hearing.turns import TurnConfig
from voice_agent.hearing.vad import VadFrame

RATE = 16000
FRAME_MS = 32
FRAME = RATE * FRAME_MS // 1000
TURNS = TurnConfig(min_speech_ms=96, end_of_turn_silence_ms=320)


def ramp(ms: int, start_ms: int = 0) -> np.ndarray:
    """Audio whose sample value encodes its own time in ms (so slices are checkable)."""
    t = np.arange(start_ms * 16, (start_ms + ms) * 16) // 16
    return t.astype(np.int16)


class ScriptedVad:
    """Stands in for SileroVad: one probability per 32 ms frame, from a script."""

    sample_rate_hz = RATE

    def __init__(self, probabilities: list[float]) -> None:
        self._probabilities = probabilities
        self._pending = 0
        self._done = 0

    def reset(self) -> None:
        pass

    def process(self, samples: np.ndarray) -> list[VadFrame]:
        self._pending += len(samples)
        frames = []
        while self._pending >= FRAME:
            self._pending -= FRAME
            p = self._probabilities[self._done] if self._done < len(self._probabilities) else 0.0
            frames.append(VadFrame(p, self._done * FRAME_MS, (self._done + 1) * FRAME_MS))
            self._done += 1
        return frames


class FakeRecognizer:
    """Answers instantly; records each decode as (partial, first ms, last ms)."""

    def __init__(self, fail_finals: bool = False) -> None:
        self.calls: list[tuple[bool, int, int]] = []
        self._fail_finals = fail_finals

    async def transcribe(self, audio: np.ndarray, *, partial: bool = False) -> Decoded | None:
        pcm = np.rint(audio * 32768).astype(int)
        self.calls.append((partial, int(pcm[0]), int(pcm[-1])))
        await asyncio.sleep(0)
        if self._fail_finals and not partial:
            raise AsrOverloadedError("full")
        return Decoded(f"{'partial' if partial else 'final'} {len(audio) // 16} ms", 1.0)


async def hear(
    probabilities: list[float], recognizer: FakeRecognizer, config: StreamingConfig
) -> list[object]:
    listener = Listener(recognizer, RATE, TURNS, config, vad=ScriptedVad(probabilities))  # type: ignore[arg-type]
    audio = ramp(len(probabilities) * FRAME_MS)
    for k in range(0, len(audio), 320):  # 20 ms chunks, like a phone call
        await listener.feed(audio[k : k + 320])
        await asyncio.sleep(0)  # let decode tasks run between chunks
    await listener.close()
    return [event async for event in listener]


CONFIG = StreamingConfig(
    partial_interval_ms=320, pre_roll_ms=64, tail_pad_ms=64, partial_idle_ratio=0.0
)


async def test_events_come_in_order_and_the_final_covers_the_whole_turn() -> None:
    recognizer = FakeRecognizer()
    events = await hear([0.0] * 10 + [0.9] * 40 + [0.0] * 15, recognizer, CONFIG)
    kinds = [type(e) for e in events]
    assert kinds[0] is SpeechStarted
    assert kinds[-3:] == [PausedTranscript, SpeechEnded, FinalTranscript]
    assert set(kinds[1:-3]) == {PartialTranscript}
    final, paused = events[-1], events[-3]
    assert isinstance(final, FinalTranscript) and isinstance(paused, PausedTranscript)
    # Speech 320..1600 ms, with 64 ms of pre-roll and tail pad.
    assert (final.start_ms, final.end_ms) == (256, 1664)
    # Told at the pause, before the end of the turn: the same decode as the final.
    assert (paused.text, paused.start_ms, paused.end_ms) == (final.text, 256, 1664)
    finals = [c for c in recognizer.calls if not c[0]]
    assert finals == [(False, 256, 1663)]  # exactly one final decode: the speculative one


async def test_partials_come_every_interval_of_new_speech() -> None:
    recognizer = FakeRecognizer()
    await hear([0.9] * 50 + [0.0] * 15, recognizer, CONFIG)
    partials = [c for c in recognizer.calls if c[0]]
    # 1600 ms of speech, a partial per 320 ms of it; each starts at the turn's start.
    assert 4 <= len(partials) <= 5
    assert all(first == 0 for _, first, _ in partials)
    ends = [last for _, _, last in partials]
    assert ends == sorted(ends) and ends[-1] > 1200


async def test_a_pause_starts_a_speculative_final_that_is_dropped_when_speech_resumes() -> None:
    recognizer = FakeRecognizer()
    probs = [0.9] * 20 + [0.0] * 5 + [0.9] * 20 + [0.0] * 15  # a 160 ms pause mid-turn
    events = await hear(probs, recognizer, CONFIG)
    finals = [c for c in recognizer.calls if not c[0]]
    assert len(finals) == 2  # the speculation at the pause, then the real one
    assert finals[0][2] < 20 * FRAME_MS + 64  # stopped at the pause
    final = events[-1]
    assert isinstance(final, FinalTranscript) and final.end_ms == 45 * FRAME_MS + 64
    assert sum(isinstance(e, FinalTranscript) for e in events) == 1
    # Each pause was told as it came; the first one's words are not the final's.
    paused = [e for e in events if isinstance(e, PausedTranscript)]
    assert [p.end_ms for p in paused] == [20 * FRAME_MS + 64, final.end_ms]
    assert paused[0].text != final.text


class SlowRecognizer(FakeRecognizer):
    """Finals wait until released; counts how many wait at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = self.most_waiting = 0

    async def transcribe(self, audio: np.ndarray, *, partial: bool = False) -> Decoded | None:
        if partial:
            return None  # busy
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            await self.release.wait()
        finally:
            self.waiting -= 1
        return Decoded("final", 1.0)


async def test_pauses_in_a_long_turn_do_not_pile_up_speculative_finals() -> None:
    recognizer = SlowRecognizer()
    probs = ([0.9] * 10 + [0.0] * 5) * 6 + [0.0] * 15  # five 160 ms pauses, then the end
    listener = Listener(recognizer, RATE, TURNS, CONFIG, vad=ScriptedVad(probs))  # type: ignore[arg-type]
    audio = ramp(len(probs) * FRAME_MS)
    for k in range(0, len(audio), 320):
        await listener.feed(audio[k : k + 320])
        await asyncio.sleep(0)
    assert recognizer.most_waiting == 1  # each stale guess was cancelled
    recognizer.release.set()
    await listener.close()
    finals = [e async for e in listener if isinstance(e, FinalTranscript)]
    assert [f.text for f in finals] == ["final"]


async def test_an_overloaded_recognizer_gives_transcription_failed() -> None:
    events = await hear([0.9] * 20 + [0.0] * 15, FakeRecognizer(fail_finals=True), CONFIG)
    assert isinstance(events[-1], TranscriptionFailed)
    assert "overloaded" in events[-1].reason


async def test_silence_gives_no_events_and_no_decodes() -> None:
    recognizer = FakeRecognizer()
    assert await hear([0.0] * 100, recognizer, CONFIG) == []
    assert recognizer.calls == []


async def test_hang_up_mid_turn_still_gives_the_final() -> None:
    events = await hear([0.9] * 30, FakeRecognizer(), CONFIG)
    assert [type(e) for e in events][-2:] == [SpeechEnded, FinalTranscript]


async def test_empty_chunks_change_nothing() -> None:
    recognizer = FakeRecognizer()
    listener = Listener(recognizer, RATE, TURNS, CONFIG, vad=ScriptedVad([0.9] * 100))  # type: ignore[arg-type]
    for _ in range(10):
        await listener.feed(np.zeros(0, np.int16))
    await listener.close()
    assert [event async for event in listener] == [] and recognizer.calls == []


async def test_other_input_rates_are_resampled_onto_the_same_clock() -> None:
    probs = [0.0] * 10 + [0.9] * 20 + [0.0] * 15
    listener = Listener(FakeRecognizer(), 44100, TURNS, CONFIG, vad=ScriptedVad(probs))  # type: ignore[arg-type]
    audio = np.zeros(44100 * len(probs) * FRAME_MS // 1000 + 441, np.int16)
    for k in range(0, len(audio), 882):
        await listener.feed(audio[k : k + 882])
        await asyncio.sleep(0)
    await listener.close()
    events = [event async for event in listener]
    started, ended = events[0], next(e for e in events if isinstance(e, SpeechEnded))
    assert isinstance(started, SpeechStarted) and started.start_ms == 10 * FRAME_MS
    assert ended.end_ms == 30 * FRAME_MS


async def test_feed_after_close_is_an_error() -> None:
    listener = Listener(FakeRecognizer(), RATE, TURNS, CONFIG, vad=ScriptedVad([]))  # type: ignore[arg-type]
    await listener.close()
    with pytest.raises(RuntimeError, match="closed"):
        await listener.feed(np.zeros(160, np.int16))


def test_listener_rejects_a_rate_below_8k() -> None:
    with pytest.raises(ValueError, match="at least 8000 Hz"):
        Listener(FakeRecognizer(), 4000, vad=ScriptedVad([]))  # type: ignore[arg-type]


# ---------------------------------------------------------------- TurnAudio alone


def test_turn_audio_keeps_pre_roll_and_cuts_the_final_at_the_tail_pad() -> None:
    audio = TurnAudio(StreamingConfig(pre_roll_ms=100, tail_pad_ms=50, history_ms=500))
    audio.push(ramp(3000))
    audio.begin_turn(2800)  # only the last 500 ms were kept; 2700 is inside them
    audio.push(ramp(1000, 3000))
    start_ms, end_ms, samples = audio.final_audio(3500)
    assert (start_ms, end_ms) == (2700, 3550)
    pcm = np.rint(samples * 32768).astype(int)
    assert (pcm[0], pcm[-1]) == (2700, 3549)


def test_turn_audio_partial_window_is_bounded_to_the_most_recent_audio() -> None:
    audio = TurnAudio(StreamingConfig(max_window_ms=1000, partial_interval_ms=100))
    audio.begin_turn(0)
    audio.push(ramp(5000))
    audio.note_voiced(100)
    assert audio.partial_due()
    start_ms, end_ms, _ = audio.take_partial()
    assert (start_ms, end_ms) == (4000, 5000)
    assert not audio.partial_due()  # the new-speech count was reset


def test_between_turns_only_the_history_is_kept() -> None:
    audio = TurnAudio(StreamingConfig(history_ms=200))
    audio.push(ramp(10_000))
    audio.begin_turn(0)  # earlier than anything kept: starts at the oldest sample
    start_ms, _, _ = audio.final_audio(10_000)
    assert start_ms == 9800


def test_final_audio_needs_a_turn() -> None:
    with pytest.raises(RuntimeError, match="no turn"):
        TurnAudio().final_audio(100)


class SlowVad(ScriptedVad):
    """A VAD that takes 100 ms a chunk (a loaded CPU), on whichever thread runs it."""

    def __init__(self, probabilities: list[float]) -> None:
        super().__init__(probabilities)
        self.threads: set[str] = set()

    def process(self, samples: np.ndarray) -> list[VadFrame]:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.1)
        return super().process(samples)


async def test_the_vad_runs_off_the_event_loop_which_stays_responsive() -> None:
    """Another call's work on the loop keeps its pace while this call's VAD is slow."""
    vad = SlowVad([0.9] * 20 + [0.0] * 15)
    listener = Listener(FakeRecognizer(), RATE, TURNS, CONFIG, vad=vad)  # type: ignore[arg-type]
    gaps: list[float] = []

    async def other_call() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(other_call())
    audio = ramp(35 * FRAME_MS)
    for k in range(0, len(audio), 1024):  # two VAD frames a chunk
        await listener.feed(audio[k : k + 1024])
    ticker.cancel()
    await listener.close()
    events = [event async for event in listener]
    assert [type(e) for e in events][:1] == [SpeechStarted] and SpeechEnded in map(type, events)
    assert vad.threads and all(name.startswith("hearing") for name in vad.threads)
    assert len(gaps) > 50 and max(gaps) < 0.05  # the VAD's 100 ms never blocked the loop
