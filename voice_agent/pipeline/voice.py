"""The agent's voice on one call: what it is saying, and what the caller heard of it.

`AgentVoice` queues the agent's current line on the paced player, either a fixed phrase
from the cache or a reply streamed through sentence-by-sentence synthesis, and keeps a
`SpokenPiece` per queued utterance so that, on barge-in, `clear()` can say which words
the caller heard. A filler ("one moment please") plays outside the line: it is never
part of the dialogue history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import cast

from voice_agent.clock import Clock
from voice_agent.events import Pcm16
from voice_agent.latency import TurnTracker
from voice_agent.pipeline.heard import SpokenPiece, heard_text
from voice_agent.speech import PhraseCache, SpeechChunk, SynthesisGate, Synthesizer, speak_chunks
from voice_agent.transports.player import AudioPlayer, PlayerClosed, Utterance
from voice_agent.turn_record import Mark

PhraseAudio = Callable[[str, int], Awaitable[Pcm16]]
"""(text, rate in Hz) -> the fixed phrase's audio (`Pipeline.phrase`)."""
HANG_UP_GRACE_S = 2.0
"""After a closing line's audio should have played, how long to wait for its mark."""
_MS_PER_S = 1000.0


class AgentVoice:
    """Speaks for one call through its player. Use from the call's event loop."""

    def __init__(
        self,
        player: AudioPlayer,
        synth: Synthesizer,
        cache: PhraseCache,
        phrase: PhraseAudio,
        clock: Clock,
        gate: SynthesisGate | None = None,
    ) -> None:
        """`cache` holds the fixed phrases at the player's wire rate; `clock` is the
        turn trackers' clock; `gate`, shared by the calls, orders their syntheses."""
        self._gate = gate
        self.player = player
        self._clock = clock
        self._synth = synth
        self._cache = cache
        self._phrase = phrase
        self.line: list[SpokenPiece] = []
        """The current line's queued pieces, in order."""

    @property
    def speaking(self) -> bool:
        """Audio is queued or playing (until the caller's side confirms it played)."""
        return self.player.speaking

    @property
    def first(self) -> Utterance | None:
        """The current line's first utterance."""
        return self.line[0].utterance if self.line else None

    def new_line(self) -> None:
        self.line = []

    async def say(self, text: str) -> None:
        """Make the fixed phrase `text` the current line (cached audio when it is one)."""
        rate = self.player.wire_rate_hz
        audio = await self._phrase(text, rate)
        with contextlib.suppress(PlayerClosed):
            self.line = [SpokenPiece(self.player.play(audio, rate), 0, text)]

    async def speak(self, text: AsyncIterator[str], tracker: TurnTracker) -> None:
        """Add streamed reply text to the line: synthesized sentence by sentence, each
        piece queued as soon as it is ready. A reply that starts with a whole fixed
        phrase (the repeat request, a tool's apology) plays that from the cache.
        Cancelling stops synthesis (see `voice_agent.speech.stream`)."""
        rate = self.player.wire_rate_hz
        pieces = aiter(text)
        first = await anext(pieces, None)
        if first is None:
            return
        tracker.mark(Mark.TTS_START)  # the first text handed on toward the synthesizer
        cached = self._cache.get(first.strip())
        if cached is None:
            rest: AsyncIterator[str] = _prepend(first, pieces)
        else:
            tracker.mark(Mark.FIRST_TTS_AUDIO)
            self.line.append(SpokenPiece(self.player.play(cached, rate), 0, first.strip()))
            rest = pieces
        offset = len(self.line)
        chunks = cast(  # an async generator: closing it stops the synthesis thread
            AsyncGenerator[SpeechChunk, None],
            speak_chunks(rest, self._synth, rate, gate=self._gate),
        )
        try:
            async for chunk in chunks:
                tracker.mark(Mark.FIRST_TTS_AUDIO)
                utterance = self.player.play(chunk.samples, chunk.sample_rate_hz)
                index = offset + chunk.sentence_index
                self.line.append(SpokenPiece(utterance, index, chunk.sentence))
        finally:
            await chunks.aclose()

    async def filler(self, text: str, tracker: TurnTracker) -> Utterance | None:
        """At the turn's deadline, play `text` if the reply's text has not started yet
        and the tracker's policy expects the first audio late (the tracker records the
        degrade). Once the synthesizer has the reply's first words the reply is a
        sentence away; a filler queued ahead of it would only delay it."""
        await self._clock.sleep_until(tracker.turn_deadline_s)
        if tracker.marked_s(Mark.TTS_START) is not None or not tracker.should_play_filler():
            return None
        rate = self.player.wire_rate_hz
        audio = await self._phrase(text, rate)
        if tracker.marked_s(Mark.FIRST_TTS_AUDIO) is not None:
            return None
        with contextlib.suppress(PlayerClosed):
            return self.player.play(audio, rate)
        return None

    async def clear(self) -> str:
        """Barge-in: drop all queued audio (`clear` on the wire); returns the words of
        the current line the caller heard, and starts a new line."""
        await self.player.clear()
        heard = heard_text(self.line)
        self.line = []
        return heard

    async def played_out(self) -> None:
        """Wait until the caller has heard the current line (bounded by its length)."""
        pending = [p.utterance.heard for p in self.line if not p.utterance.heard.done()]
        if pending:
            total_s = sum(p.utterance.duration_ms for p in self.line) / _MS_PER_S
            await asyncio.wait(pending, timeout=total_s + HANG_UP_GRACE_S)


async def _prepend(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    yield first
    async for piece in rest:
        yield piece
