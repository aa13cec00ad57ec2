"""Fixed phrases, synthesized once at start so they play instantly.

The agent says some things word for word (`prompts/phrases.toml`: the greeting, "one
moment please", the repeat request). `PhraseCache.warm` synthesizes the phrases it is
given (the pipeline passes those) at start; `get`
then returns the audio without touching the synthesizer. Entries are keyed by the text,
the synthesizer's voice and the output rate, so one cache may serve several voices and
transports.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

import numpy as np

from voice_agent.audio import FRAME_MS, resample, samples_per_frame
from voice_agent.events import Pcm16
from voice_agent.speech.sentences import speakable
from voice_agent.speech.tts import Synthesizer

PhraseKey = tuple[str, str, int]
"""(text, voice, sample rate in Hz)."""


class PhraseCache:
    """Synthesized phrases at the transport's rate, padded to whole 20 ms frames.

    Safe to share between calls and threads; the arrays it returns are read-only.
    """

    def __init__(self, synth: Synthesizer, out_rate_hz: int) -> None:
        self._synth = synth
        self._out_rate_hz = out_rate_hz
        self._frame = samples_per_frame(out_rate_hz, FRAME_MS)
        self._audio: dict[PhraseKey, Pcm16] = {}
        self._lock = threading.Lock()

    @property
    def out_rate_hz(self) -> int:
        return self._out_rate_hz

    def key(self, text: str) -> PhraseKey:
        return (text, self._synth.voice, self._out_rate_hz)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.key(text) in self._audio

    def __len__(self) -> int:
        return len(self._audio)

    def get(self, text: str) -> Pcm16 | None:
        """The cached audio for `text`, or None when it was never synthesized."""
        return self._audio.get(self.key(text))

    def synthesize(self, text: str) -> Pcm16:
        """The audio for `text`, synthesized now (blocking) unless cached."""
        key = self.key(text)
        cached = self._audio.get(key)
        if cached is not None:
            return cached
        samples = resample(self._synth.synthesize(speakable(text)), self._synth.sample_rate_hz,
                           self._out_rate_hz)  # fmt: skip
        samples = np.pad(samples, (0, -len(samples) % self._frame))
        samples.setflags(write=False)
        with self._lock:
            return self._audio.setdefault(key, samples)

    def warm(self, texts: Iterable[str]) -> None:
        """Synthesize `texts` now (blocks)."""
        for text in texts:
            self.synthesize(text)

    async def warm_async(self, texts: Iterable[str]) -> None:
        """`warm` in a worker thread, for use at server start."""
        await asyncio.to_thread(self.warm, list(texts))
