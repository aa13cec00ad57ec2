"""Hearing one call: audio in; speech boundaries, barge-in and transcripts out.

`Listener` wires the pieces for one call: resampling to 16 kHz, the Silero VAD, the turn
detector, the streaming policy (`TurnAudio`) and decodes on the shared `AsrWorker`.
`feed` resamples and runs the VAD off the event loop, on the process's hearing threads
(about 12 ms of CPU per second of audio per call on this CPU: 8 calls would otherwise
take a tenth of the loop), then does the bookkeeping on the loop; decodes run as tasks on
the worker thread, and every event comes out of the listener's async iterator in order:
`SpeechStarted`, any `BargeIn` and `PartialTranscript`s, a `PausedTranscript` whenever
the speculative final decoded at a pause is ready while the turn is still open,
`SpeechEnded`, then the turn's `FinalTranscript` (or `TranscriptionFailed`).

With the semantic end-of-turn rule (`TurnConfig.end_of_turn = "semantic"`) the listener
asks the shared end-of-turn model (`voice_agent.hearing.endpoint`) about each pause and
hands the answer to the turn detector; without a model every answer is "unknown" and the
fixed silence applies. A pause the model calls complete is still judged unfinished when
its words end mid-sentence (`endpoint.sounds_unfinished`, `TurnConfig.check_words`): the
speculative final of that pause when it is ready within `words_wait_ms` of the model's
answer, else the turn's latest partial transcript if it reaches the pause. Waiting for
the speculative final costs the answer little: that decode is the turn's final
transcript, which the agent needs before it can answer anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from voice_agent.audio import StreamResampler
from voice_agent.events import Pcm16
from voice_agent.hearing.asr import ASR_RATE_HZ, AsrOverloadedError, AudioF32, Decoded
from voice_agent.hearing.endpoint import WINDOW_S, EndOfTurnModel, sounds_unfinished
from voice_agent.hearing.events import (
    FinalTranscript,
    HearingEvent,
    PartialTranscript,
    PausedTranscript,
    SpeechEnded,
    SpeechStarted,
    TranscriptionFailed,
    TurnEvent,
)
from voice_agent.hearing.streaming import StreamingConfig, TurnAudio
from voice_agent.hearing.turns import AskEndOfTurn, TurnConfig, TurnDetector
from voice_agent.hearing.vad import SileroVad, VadFrame, check_rate
from voice_agent.pools import named_pool


class Transcriber(Protocol):
    """What the listener needs from the recognizer (`AsrWorker` in production)."""

    async def transcribe(self, audio: AudioF32, *, partial: bool = False) -> Decoded | None:
        """A partial may be dropped (None) when busy; a final raises AsrOverloadedError."""
        ...


class _Final:
    """A final decode in flight: which turn and speech end it was for, its audio bounds."""

    def __init__(self, turn: int, speech_end_ms: int, start_ms: int, end_ms: int) -> None:
        self.turn, self.speech_end_ms = turn, speech_end_ms
        self.start_ms, self.end_ms = start_ms, end_ms
        self.task: asyncio.Task[Decoded | None] | None = None


HEARING_THREADS = 2
"""Threads resampling and running the VAD for every call of the process."""


class Listener:
    """Hears one call's inbound audio. Use from one event loop; not thread-safe."""

    def __init__(
        self,
        transcriber: Transcriber,
        sample_rate_hz: int,
        turn_config: TurnConfig | None = None,
        streaming_config: StreamingConfig | None = None,
        vad: SileroVad | None = None,
        end_of_turn: EndOfTurnModel | None = None,
    ) -> None:
        """Raises ValueError when `sample_rate_hz` is below 8000 Hz or not an integer."""
        self._vad = vad or SileroVad(ASR_RATE_HZ)
        if self._vad.sample_rate_hz != ASR_RATE_HZ:
            raise ValueError(f"the listener's VAD must read {ASR_RATE_HZ} Hz audio")
        self._vad.reset()
        check_rate(sample_rate_hz)
        self._resampler = StreamResampler(sample_rate_hz, ASR_RATE_HZ)
        self._transcriber = transcriber
        self._end_of_turn = end_of_turn
        self._questions: set[asyncio.Task[None]] = set()
        self._turns = TurnDetector(turn_config)
        self._audio = TurnAudio(streaming_config)
        self._config = streaming_config or StreamingConfig()
        self._queue: asyncio.Queue[HearingEvent | None] = asyncio.Queue()
        self._turn = 0
        self._partial: asyncio.Task[None] | None = None
        self._partial_allowed_ms = 0  # stream time before which no new partial starts
        self._partial_text: tuple[int, int, str] | None = None  # latest: (turn, end_ms, text)
        self._speculation: _Final | None = None
        self._finals: list[asyncio.Task[None]] = []
        self._decodes: set[asyncio.Task[Decoded | None]] = set()
        self._closed = False

    def set_agent_speaking(self, speaking: bool) -> None:
        """Tell the listener whether the caller hears the agent now (for barge-in)."""
        self._turns.set_agent_speaking(speaking)

    async def feed(self, samples: Pcm16) -> None:
        """Feed the next chunk of caller audio at the call's rate (any length); await each
        chunk before the next (one call's audio is analysed in order).

        Raises TypeError/ValueError on samples that are not mono int16, RuntimeError after
        `close`. A chunk still being analysed when the listener closes is dropped.
        """
        if self._closed:
            raise RuntimeError("the listener is closed")
        loop = asyncio.get_running_loop()
        pool = named_pool("hearing", HEARING_THREADS)
        audio, frames = await loop.run_in_executor(pool, self._analyse, samples)
        if self._closed:
            return
        self._audio.push(audio)
        for frame in frames:
            if self._turns.in_speech and frame.probability >= self._turns.config.silence_threshold:
                self._audio.note_voiced(frame.end_ms - frame.start_ms)
            for event in self._turns.feed(frame.probability, frame.start_ms, frame.end_ms):
                if isinstance(event, AskEndOfTurn):
                    self._ask_end_of_turn(event)
                else:
                    self._on_turn_event(event)
        if self._turns.in_speech:
            self._schedule_decodes()

    def _analyse(self, samples: Pcm16) -> tuple[Pcm16, list[VadFrame]]:
        """On a hearing thread: the chunk at 16 kHz and its VAD frames."""
        audio = self._resampler.process(samples)
        return audio, list(self._vad.process(audio))

    async def close(self) -> None:
        """End of the call's audio: closes an open turn, waits for its final, then ends
        the event iterator."""
        if self._closed:
            return
        self._closed = True
        for event in self._turns.finish():
            self._on_turn_event(event)
        if self._partial is not None:
            self._partial.cancel()
        for question in self._questions:
            question.cancel()
        await asyncio.gather(*self._finals, return_exceptions=True)
        for task in self._decodes:  # speculations that were never adopted
            task.cancel()
        self._queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[HearingEvent]:
        while (event := await self._queue.get()) is not None:
            yield event

    # ---------------------------------------------------------------- internals

    def _ask_end_of_turn(self, ask: AskEndOfTurn) -> None:
        if self._end_of_turn is None:
            for event in self._turns.verdict(ask.speech_end_ms, None):
                self._on_turn_event(event)
            return
        audio = self._audio.turn_so_far(WINDOW_S * 1000)
        question = asyncio.ensure_future(self._answer(self._end_of_turn, ask, audio))
        self._questions.add(question)
        question.add_done_callback(self._questions.discard)

    async def _answer(self, model: EndOfTurnModel, ask: AskEndOfTurn, audio: AudioF32) -> None:
        probability = await model.complete_probability(audio)
        config = self._turns.config
        complete = probability is not None and probability >= config.complete_threshold
        if complete and config.check_words and await self._pause_unfinished(ask.speech_end_ms):
            probability = 0.0  # the words overrule the audio: unfinished
        if not self._closed:  # a stale answer (the caller went on) is ignored by verdict
            for event in self._turns.verdict(ask.speech_end_ms, probability):
                self._on_turn_event(event)

    async def _pause_unfinished(self, speech_end_ms: int) -> bool:
        """Whether the words heard up to this pause end mid-sentence: the pause's
        speculative final if it is ready in time, else the latest partial of the turn
        (False when there are no words)."""
        turn, text = self._turn, None
        guess = self._speculation
        if guess is not None and guess.speech_end_ms == speech_end_ms and guess.task is not None:
            wait_s = self._turns.config.words_wait_ms / 1000
            await asyncio.wait({guess.task}, timeout=wait_s)  # never raises for the guess
            task = guess.task
            if task.done() and not task.cancelled() and task.exception() is None:
                decoded = task.result()
                text = decoded.text if decoded is not None else None
        if text is None and self._partial_text is not None:
            partial_turn, partial_end_ms, partial = self._partial_text
            if partial_turn == turn and partial_end_ms >= speech_end_ms:
                text = partial  # a partial of this turn that reaches the pause
        return text is not None and sounds_unfinished(text)

    def _on_turn_event(self, event: TurnEvent) -> None:
        if isinstance(event, SpeechStarted):
            self._turn += 1
            self._speculation = None
            self._audio.begin_turn(event.start_ms)
            self._audio.note_voiced(event.detected_ms - event.start_ms)
        self._queue.put_nowait(event)
        if isinstance(event, SpeechEnded):
            self._finals = [task for task in self._finals if not task.done()]
            self._finals.append(self._finish_turn(event))
            self._audio.end_turn()

    def _schedule_decodes(self) -> None:
        silence_ms = self._turns.trailing_silence_ms
        speech_end_ms = self._turns.last_voiced_end_ms
        if self._speculation is not None and self._speculation.speech_end_ms != speech_end_ms:
            # The caller went on after a pause: that guess is useless. Cancelling frees
            # its queue slot if it has not started (a running decode cannot be stopped),
            # so pauses in a long turn do not pile decodes up ahead of the real final.
            assert self._speculation.task is not None
            self._speculation.task.cancel()
            self._speculation = None
        if silence_ms >= self._config.tail_pad_ms:
            if self._speculation is None:
                guess = self._speculation = self._start_final(speech_end_ms)
                assert guess.task is not None
                guess.task.add_done_callback(lambda _: self._on_guess(guess))
        elif (
            self._audio.partial_due()
            and (self._partial is None or self._partial.done())
            and self._audio.end_ms >= self._partial_allowed_ms
        ):
            start_ms, end_ms, audio = self._audio.take_partial()
            self._partial = asyncio.ensure_future(
                self._run_partial(self._turn, start_ms, end_ms, audio)
            )

    def _start_final(self, speech_end_ms: int) -> _Final:
        start_ms, end_ms, audio = self._audio.final_audio(speech_end_ms)
        final = _Final(self._turn, speech_end_ms, start_ms, end_ms)
        final.task = asyncio.ensure_future(self._decode_final(audio))
        self._decodes.add(final.task)
        final.task.add_done_callback(self._decodes.discard)
        return final

    def _on_guess(self, guess: _Final) -> None:
        """A speculative final finished: while the turn is still open at that same
        pause, tell the session (`PausedTranscript`) so it may start working early."""
        assert guess.task is not None
        if guess is not self._speculation or guess.task.cancelled() or self._closed:
            return
        if guess.task.exception() is not None:
            return  # the same decode is adopted as the final, which reports the failure
        decoded = guess.task.result()
        if decoded is not None and decoded.text.strip():
            self._queue.put_nowait(PausedTranscript(decoded.text, guess.start_ms, guess.end_ms))

    async def _decode_final(self, audio: AudioF32) -> Decoded | None:
        try:
            return await self._transcriber.transcribe(audio)
        except AsrOverloadedError:
            return None  # reported as TranscriptionFailed if this decode was the final

    async def _run_partial(self, turn: int, start_ms: int, end_ms: int, audio: AudioF32) -> None:
        decoded = await self._transcriber.transcribe(audio, partial=True)
        if decoded is not None:
            # Leave the worker idle at least as long as the partial took (a duty cycle
            # of 1 - idle_ratio): a final should rarely queue behind a partial.
            idle_ms = decoded.compute_ms * self._config.partial_idle_ratio
            self._partial_allowed_ms = self._audio.end_ms + int(idle_ms)
        if decoded is not None and decoded.text and turn == self._turn and self._turns.in_speech:
            self._partial_text = (turn, end_ms, decoded.text)
            self._queue.put_nowait(PartialTranscript(decoded.text, start_ms, end_ms))

    def _finish_turn(self, ended: SpeechEnded) -> asyncio.Task[None]:
        """Start (or adopt the speculative) final decode now, while the turn's audio is
        still held; the returned task reports it."""
        final, self._speculation = self._speculation, None
        if final is None or (final.turn, final.speech_end_ms) != (self._turn, ended.end_ms):
            final = self._start_final(ended.end_ms)
        assert final.task is not None
        self._decodes.discard(final.task)  # adopted: awaited, never cancelled by close
        return asyncio.ensure_future(self._report_final(final))

    async def _report_final(self, final: _Final) -> None:
        assert final.task is not None
        decoded = await final.task
        if decoded is None:
            reason = "the speech recognizer is overloaded (its queue is full)"
            self._queue.put_nowait(TranscriptionFailed(final.start_ms, final.end_ms, reason))
        else:
            text, compute_ms = decoded.text, decoded.compute_ms
            self._queue.put_nowait(FinalTranscript(text, final.start_ms, final.end_ms, compute_ms))
