"""Streaming speech: reply text in, phone-ready audio out, sentence by sentence.

`speak` reads the reply's text chunks as the engine writes them, cuts them into sentences,
and synthesizes each sentence in a worker thread as soon as it is complete, so the first
sentence is playing while later text is still arriving and the event loop never blocks on
the synthesizer. Audio comes out resampled to the transport's rate in pieces that are
whole 20 ms frames. Each sentence is resampled whole in the worker thread (`resample` is
~13x faster than `StreamResampler` on a 2 s sentence: ~30 ms off the first audio); the
synthesizer starts and ends sentences in silence, so the seams are inaudible.

Cancellation (barge-in): closing the iterator (`aclose()`, or cancelling the task that
iterates it) cancels the text reader and the synthesis loop and shuts the worker thread
down. A sentence already inside the synthesizer cannot be interrupted; it finishes in
the background (a sentence takes well under a second) and its audio is dropped, then the
thread exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from voice_agent.audio import FRAME_MS, Framer, resample, samples_per_frame
from voice_agent.events import Pcm16
from voice_agent.speech.gate import SynthesisGate
from voice_agent.speech.sentences import SentenceSplitter, is_speakable, speakable
from voice_agent.speech.tts import Synthesizer

DEFAULT_CHUNK_MS = 200
"""Longest piece `speak` yields: ten 20 ms frames."""
LEADING_SILENCE_THRESHOLD = 300
"""|sample| under which the synthesizer's lead-in counts as silence (Piper pads ~55 ms)."""
WORKER_THREAD_PREFIX = "tts-worker"

_END: Final = object()


@dataclass(frozen=True, slots=True)
class SpeechChunk:
    """A piece of synthesized reply audio and the sentence it belongs to."""

    samples: Pcm16
    """A whole number of 20 ms frames at `sample_rate_hz` (the last piece is padded)."""
    sample_rate_hz: int
    sentence_index: int
    """0-based; pieces of one sentence share it. A 20 ms frame that straddles two
    sentences belongs to the later one."""
    sentence: str
    """The sentence as written (before `speakable`), for the dialogue history."""


async def speak(
    text_chunks: AsyncIterator[str],
    synth: Synthesizer,
    out_rate_hz: int,
    *,
    chunk_ms: int = DEFAULT_CHUNK_MS,
) -> AsyncIterator[Pcm16]:
    """Speak streaming text: yields PCM16 at `out_rate_hz` in whole 20 ms frames.

    See `speak_chunks` for the contract; this drops the sentence bookkeeping.
    """
    async for chunk in speak_chunks(text_chunks, synth, out_rate_hz, chunk_ms=chunk_ms):
        yield chunk.samples


async def speak_chunks(
    text_chunks: AsyncIterator[str],
    synth: Synthesizer,
    out_rate_hz: int,
    *,
    chunk_ms: int = DEFAULT_CHUNK_MS,
    splitter: SentenceSplitter | None = None,
    normalize: Callable[[str], str] = speakable,
    trim_leading_silence: bool = True,
    gate: SynthesisGate | None = None,
) -> AsyncIterator[SpeechChunk]:
    """Synthesize `text_chunks` sentence by sentence; yields audio as each is ready.

    Each piece holds at most `chunk_ms` (a positive multiple of 20) of audio. With
    `trim_leading_silence`, the synthesizer's silent lead-in before the first sentence
    is cut, so the first frame sent is speech. An exception from `text_chunks` or the
    synthesizer is raised from the iteration (after the audio before it). Close the
    iterator to stop early; see the module docstring for what is cleaned up. A `gate`
    shared by the process's calls orders their syntheses (first sentences first).
    """
    frame = samples_per_frame(out_rate_hz, FRAME_MS)
    if chunk_ms <= 0 or chunk_ms % FRAME_MS:
        raise ValueError(f"chunk_ms must be a positive multiple of {FRAME_MS}, got {chunk_ms}")
    max_samples = frame * (chunk_ms // FRAME_MS)
    splitter = splitter or SentenceSplitter()
    sentences: asyncio.Queue[str | BaseException | object] = asyncio.Queue()
    audio: asyncio.Queue[SpeechChunk | BaseException | object] = asyncio.Queue()
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=WORKER_THREAD_PREFIX)

    async def read_text() -> None:
        try:
            async for text in text_chunks:
                for sentence in splitter.feed(text):
                    sentences.put_nowait(sentence)
            for sentence in splitter.flush():
                sentences.put_nowait(sentence)
        except Exception as exc:  # the sentences before it are still spoken
            sentences.put_nowait(exc)
        else:
            sentences.put_nowait(_END)

    def render(sentence: str, trim: bool, first: bool) -> Pcm16:  # in the worker thread
        with gate.hold(first) if gate is not None else contextlib.nullcontext():
            samples = synth.synthesize(normalize(sentence))
        if trim:
            samples = _trim_leading_silence(samples)
        return resample(samples, synth.sample_rate_hz, out_rate_hz)

    async def synthesize() -> None:
        loop = asyncio.get_running_loop()
        framer = Framer(frame)
        index, started, spoken = 0, False, ""
        while isinstance(sentence := await sentences.get(), str):
            if not is_speakable(sentence):
                continue
            spoken = sentence
            trim = trim_leading_silence and not started
            samples = await loop.run_in_executor(executor, render, sentence, trim, index == 0)
            started = started or len(samples) > 0
            frames = framer.push(samples)
            _put_pieces(audio, frames, max_samples, index, sentence, out_rate_hz)
            index += 1
        last = framer.flush(pad=True)
        if last is not None:
            _put_pieces(audio, [last], max_samples, max(index - 1, 0), spoken, out_rate_hz)
        audio.put_nowait(sentence)  # _END or the reader's exception

    async def synthesize_or_fail() -> None:
        try:
            await synthesize()
        except Exception as exc:
            audio.put_nowait(exc)

    tasks = [asyncio.create_task(read_text()), asyncio.create_task(synthesize_or_fail())]
    try:
        while (item := await audio.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, SpeechChunk)
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        executor.shutdown(wait=False, cancel_futures=True)


def _put_pieces(
    audio: asyncio.Queue[SpeechChunk | BaseException | object],
    frames: list[Pcm16],
    max_samples: int,
    index: int,
    sentence: str,
    rate_hz: int,
) -> None:
    if not frames:
        return
    samples = np.concatenate(frames)
    for start in range(0, len(samples), max_samples):
        piece = samples[start : start + max_samples]
        audio.put_nowait(SpeechChunk(piece, rate_hz, index, sentence))


def _trim_leading_silence(samples: Pcm16) -> Pcm16:
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > LEADING_SILENCE_THRESHOLD)
    return samples[loud[0] :] if len(loud) else samples[:0]
