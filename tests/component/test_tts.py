"""Speech synthesis with the real engines (Piper's joe voice, espeak-ng), streaming
sentence by sentence, cancellation, the fixed-phrase cache and the fallback."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest

from voice_agent.audio import rms_dbfs
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import Pcm16
from voice_agent.speech.gate import SynthesisGate
from voice_agent.speech.phrases import PhraseCache
from voice_agent.speech.stream import WORKER_THREAD_PREFIX, SpeechChunk, speak, speak_chunks
from voice_agent.speech.tts import (
    CoquiSynthesizer,
    EspeakSynthesizer,
    HibariSynthesizer,
    PiperSynthesizer,
    Synthesizer,
    TtsUnavailable,
    default_synthesizer,
    parse_streamed_wav,
)

PHONE_HZ = 8000
FRAME = 160  # 20 ms at 8 kHz
SHORT = "One moment please."
SPEECH_DBFS = -35.0  # speech is far louder; silence reads -120
GATE_TIMEOUT_S = 20.0


class Counting:
    """A synthesizer wrapper that records what it was asked to say; calls after
    `block_after` wait on `release` (a long synthesis)."""

    def __init__(self, inner: Synthesizer, block_after: int | None = None) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.block_after = block_after
        self.release = threading.Event()
        self.blocked = threading.Event()

    @property
    def voice(self) -> str:
        return self.inner.voice

    @property
    def sample_rate_hz(self) -> int:
        return self.inner.sample_rate_hz

    def synthesize(self, text: str) -> Pcm16:
        self.texts.append(text)
        if self.block_after is not None and len(self.texts) > self.block_after:
            self.blocked.set()
            self.release.wait(GATE_TIMEOUT_S)
        return self.inner.synthesize(text)


class Tone:
    """A stand-in synthesizer: 100 ms of tone per word at 16 kHz, instantly."""

    voice = "tone:test"
    sample_rate_hz = 16000

    def synthesize(self, text: str) -> Pcm16:
        n = len(text.split()) * self.sample_rate_hz // 10
        return (8000 * np.sin(np.arange(n) * 0.2)).astype(np.int16)


@pytest.fixture(scope="module")
def piper() -> PiperSynthesizer:
    return PiperSynthesizer()


@pytest.fixture(scope="module")
def espeak() -> EspeakSynthesizer:
    return EspeakSynthesizer()


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(WORKER_THREAD_PREFIX)]


def wait_for_no_workers(timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker_threads() == []


def other_tasks() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def check_speech(samples: Pcm16, rate_hz: int, min_s: float, max_s: float) -> None:
    assert samples.dtype == np.int16 and samples.ndim == 1
    assert min_s < len(samples) / rate_hz < max_s
    assert rms_dbfs(samples) > SPEECH_DBFS


# ---------------------------------------------------------------- the engines


@pytest.mark.integration
def test_piper_joe_voice_speaks(piper: PiperSynthesizer) -> None:
    assert piper.voice == "piper:en_US-joe-medium"
    assert piper.sample_rate_hz == 22050
    check_speech(piper.synthesize(SHORT), piper.sample_rate_hz, 0.6, 3.0)
    assert len(piper.synthesize("  ")) == 0


@pytest.mark.integration
def test_espeak_speaks(espeak: EspeakSynthesizer) -> None:
    assert espeak.voice == "espeak:en-us"
    assert espeak.sample_rate_hz == 22050
    check_speech(espeak.synthesize(SHORT), espeak.sample_rate_hz, 0.6, 3.0)
    # On stdin, a leading dash is text, not an option.
    check_speech(espeak.synthesize("-v is not an option"), espeak.sample_rate_hz, 0.5, 4.0)


@pytest.mark.integration
def test_hibari_heart_voice_speaks_from_the_wheel_alone() -> None:
    hibari = HibariSynthesizer()
    assert hibari.voice == "hibari:heart" and hibari.sample_rate_hz == 24000
    check_speech(hibari.synthesize(SHORT), hibari.sample_rate_hz, 0.5, 3.0)
    assert len(hibari.synthesize(" ")) == 0


# ---------------------------------------------------------------- streaming


@pytest.mark.integration
async def test_first_sentence_is_heard_before_the_reply_is_written(
    piper: PiperSynthesizer,
) -> None:
    synth = Counting(piper)
    gate = asyncio.Event()
    fed_last = False

    async def reply() -> AsyncIterator[str]:
        nonlocal fed_last
        yield "Sure, I can book "
        yield "that for you. "
        await asyncio.wait_for(gate.wait(), GATE_TIMEOUT_S)  # a slow engine block
        fed_last = True
        yield "It costs $12.50."

    chunks: list[SpeechChunk] = []
    async for chunk in speak_chunks(reply(), synth, PHONE_HZ):
        if not chunks:
            assert not fed_last  # audio before the last text chunk existed
            # Piper's silent lead-in is trimmed: the first frame sent is speech.
            assert rms_dbfs(chunk.samples[:FRAME]) > SPEECH_DBFS - 15
            gate.set()
        chunks.append(chunk)
    assert fed_last
    assert synth.texts == ["Sure, I can book that for you.", "It costs twelve dollars fifty."]
    assert chunks[0].sentence == "Sure, I can book that for you."
    assert chunks[-1].sentence == "It costs $12.50."  # as written, for the history
    assert {c.sentence_index for c in chunks} == {0, 1}
    assert all(c.sample_rate_hz == PHONE_HZ for c in chunks)
    assert all(0 < len(c.samples) <= 10 * FRAME and len(c.samples) % FRAME == 0 for c in chunks)
    check_speech(np.concatenate([c.samples for c in chunks]), PHONE_HZ, 2.0, 8.0)
    assert other_tasks() == set()
    wait_for_no_workers()


async def test_speak_yields_whole_frames_at_the_transport_rate() -> None:
    async def reply() -> AsyncIterator[str]:
        yield "One two three. Four five"

    pieces = [p async for p in speak(reply(), Tone(), 24000, chunk_ms=100)]
    assert all(len(p) % 480 == 0 and 0 < len(p) <= 2400 for p in pieces)
    assert sum(len(p) for p in pieces) == pytest.approx(0.5 * 24000, abs=480)
    with pytest.raises(ValueError, match="multiple of 20"):
        async for _ in speak(reply(), Tone(), PHONE_HZ, chunk_ms=30):
            pass


async def test_closing_the_stream_stops_everything() -> None:
    synth = Counting(Tone(), block_after=1)  # the second sentence hangs in the synthesizer
    text_closed = asyncio.Event()

    async def reply() -> AsyncIterator[str]:
        try:
            for i in range(100):
                yield f"Sentence number {i}. "
                await asyncio.sleep(0)
        finally:
            text_closed.set()

    stream = speak_chunks(reply(), synth, PHONE_HZ)
    first = await anext(stream)
    assert first.sentence_index == 0
    assert await asyncio.to_thread(synth.blocked.wait, GATE_TIMEOUT_S)
    await asyncio.wait_for(stream.aclose(), 2.0)  # does not wait for the synthesizer
    assert text_closed.is_set()
    assert other_tasks() == set()
    synth.release.set()  # the sentence in flight finishes; its audio is dropped
    wait_for_no_workers()
    assert len(synth.texts) == 2


async def test_cancelling_the_consumer_stops_everything() -> None:
    synth = Counting(Tone(), block_after=1)
    heard: list[SpeechChunk] = []

    async def reply() -> AsyncIterator[str]:
        for i in range(100):
            yield f"Sentence number {i}. "

    async def play() -> None:
        async for chunk in speak_chunks(reply(), synth, PHONE_HZ):
            heard.append(chunk)

    task = asyncio.create_task(play())
    assert await asyncio.to_thread(synth.blocked.wait, GATE_TIMEOUT_S)
    task.cancel()  # barge-in
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2.0)
    assert other_tasks() == set()
    synth.release.set()
    wait_for_no_workers()
    assert len(synth.texts) == 2
    assert {c.sentence_index for c in heard} == {0}


async def test_a_failing_reply_raises_after_its_audio() -> None:
    async def reply() -> AsyncIterator[str]:
        yield "This part is fine. And"
        raise RuntimeError("engine failed")

    got: list[Pcm16] = []
    with pytest.raises(RuntimeError, match="engine failed"):
        async for piece in speak(reply(), Tone(), PHONE_HZ):
            got.append(piece)
    assert got  # the complete sentence was spoken first
    assert other_tasks() == set()
    wait_for_no_workers()


# ---------------------------------------------------------------- fixed phrases


@pytest.mark.integration
def test_fixed_phrases_are_synthesized_once(espeak: EspeakSynthesizer) -> None:
    synth = Counting(espeak)
    cache = PhraseCache(synth, PHONE_HZ)
    assert cache.get(phrases().one_moment) is None
    cache.warm(phrases().all())
    assert sorted(synth.texts) == sorted(phrases().all())
    assert len(cache) == len(phrases().all())
    for text in phrases().all():
        audio = cache.get(text)
        assert audio is not None and text in cache
        assert len(audio) % FRAME == 0 and not audio.flags.writeable
        check_speech(audio, PHONE_HZ, 0.5, 8.0)
    cache.warm(phrases().all())
    assert cache.get(phrases().say_again) is cache.get(phrases().say_again)
    assert len(synth.texts) == len(phrases().all())  # nothing synthesized again
    assert cache.key(SHORT) == (SHORT, "espeak:en-us", PHONE_HZ)
    assert PhraseCache(synth, 16000).get(phrases().one_moment) is None  # keyed by rate


async def test_phrases_warm_off_the_event_loop() -> None:
    synth = Counting(Tone())
    cache = PhraseCache(synth, PHONE_HZ)
    await cache.warm_async(["Hello there.", "Goodbye."])
    assert "Hello there." in cache and "Goodbye." in cache
    assert cache.synthesize("Hello there.") is cache.get("Hello there.")
    assert len(synth.texts) == 2


# ---------------------------------------------------------------- fallback and errors


@pytest.mark.integration
def test_espeak_is_the_fallback_when_piper_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "piper", None)  # import piper now raises ImportError
    with pytest.raises(TtsUnavailable, match="tts` extra"):
        PiperSynthesizer()
    with caplog.at_level(logging.INFO, logger="voice_agent.speech.tts"):
        synth = default_synthesizer()
    assert isinstance(synth, EspeakSynthesizer)
    assert "falling back to espeak-ng" in caplog.text
    assert "espeak:en-us" in caplog.text
    check_speech(synth.synthesize(SHORT), synth.sample_rate_hz, 0.6, 3.0)


def test_missing_espeak_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TtsUnavailable, match="install the Debian package `espeak-ng`"):
        EspeakSynthesizer(executable="espeak-ng-not-installed")
    monkeypatch.setitem(sys.modules, "piper", None)
    monkeypatch.setattr("shutil.which", lambda _: None)
    with pytest.raises(TtsUnavailable, match="no speech synthesizer available"):
        default_synthesizer()


def test_missing_piper_voice_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TtsUnavailable, match="not found"):
        PiperSynthesizer(model_path=tmp_path / "missing.onnx")


@pytest.fixture
def coqui_files(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    model, config = tmp_path / "model.pth", tmp_path / "config.json"
    model.write_bytes(b"")
    config.write_text("{}")
    yield model, config


def test_coqui_needs_its_package_and_a_local_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, coqui_files: tuple[Path, Path]
) -> None:
    with pytest.raises(TtsUnavailable, match="not found"):
        CoquiSynthesizer(tmp_path / "none.pth", tmp_path / "none.json")
    monkeypatch.setitem(sys.modules, "TTS", None)
    with pytest.raises(TtsUnavailable, match="pip install coqui-tts"):
        CoquiSynthesizer(*coqui_files)


def test_streamed_wav_parsing_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a WAV"):
        parse_streamed_wav(b"hello")
    header = b"RIFF\xff\xff\xff\x7fWAVE"
    with pytest.raises(ValueError, match="no data chunk"):
        parse_streamed_wav(header)


@pytest.mark.integration
def test_piper_syntheses_in_two_threads_overlap_and_both_speak(piper: PiperSynthesizer) -> None:
    text = "Your tune-up is booked for Thursday at half past two."
    alone = piper.synthesize(text)
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(piper.synthesize(text)))
               for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 2
    for samples in results:  # Piper draws its prosody noise at random: lengths vary a little
        assert samples.dtype == np.int16 and abs(len(samples) - len(alone)) < 0.25 * len(alone)
        assert np.abs(samples.astype(np.int32)).max() > 20000  # peak-normalized speech


async def test_speech_through_a_gate_is_the_same_speech(espeak: EspeakSynthesizer) -> None:
    gate = SynthesisGate(slots=1)

    async def words() -> AsyncIterator[str]:
        yield "Hello there. How can I help?"

    chunks = [c async for c in speak_chunks(words(), espeak, 8000, gate=gate)]
    assert {c.sentence_index for c in chunks} == {0, 1}
    assert gate.stats.held == 2
