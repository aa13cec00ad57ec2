"""Streaming recognition policy: which audio to decode, and when, during one call.

Sans-I/O: `TurnAudio` keeps the call's recent 16 kHz audio and the current turn's bounds
and answers "is a decode due now, and of what audio". `voice_agent.hearing.listener`
runs the decodes on the ASR worker.

Whisper encodes a fixed 30 s window whatever the audio length, so on a CPU every decode
costs about the same, and the final is what the caller waits for. Two decodes matter:

- partials, every `partial_interval_ms` of new speech while the caller talks (skipped
  when the worker is busy), give the agent early text;
- a speculative final starts as soon as the caller has been quiet for `tail_pad_ms`,
  on the whole turn's audio. If the silence lasts until the turn
  ends, that decode *is* the final, already under way during the end-of-turn wait; if the
  caller goes on, it is discarded. The final is therefore always a one-shot decode of
  the whole turn, exactly as accurate as transcribing the utterance in one piece.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voice_agent.audio import pcm16_to_float32
from voice_agent.events import Pcm16
from voice_agent.hearing.asr import ASR_RATE_HZ, AudioF32

_SAMPLES_PER_MS = ASR_RATE_HZ // 1000


@dataclass(frozen=True, slots=True)
class StreamingConfig:
    """Durations in milliseconds of stream time."""

    partial_interval_ms: int = 500
    """New speech between two partial decodes."""
    partial_idle_ratio: float = 1.0
    """After a partial that took T ms, wait at least ratio * T ms of stream time before
    the next: on a slow CPU partials then hold the worker at most half the time."""
    pre_roll_ms: int = 250
    """Audio kept before a turn's detected start (the VAD fires a little late)."""
    tail_pad_ms: int = 64
    """Audio decoded after a turn's last voiced frame (soft word endings); also the
    silence after which the final starts speculatively (two VAD frames)."""
    max_window_ms: int = 9_000
    """Longest audio a partial decodes (its most recent part): inside the partial
    decoder's 10 s encoder window."""
    max_turn_ms: int = 120_000
    """Longest turn kept for the final; older audio of a longer turn is dropped."""
    history_ms: int = 2_000
    """Audio kept between turns: enough for the pre-roll of a turn detected late."""

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value < 0 or (value == 0 and name == "partial_interval_ms"):
                raise ValueError(f"{name} must not be negative (interval: positive), got {value}")


class TurnAudio:
    """The call's 16 kHz audio since shortly before the current turn (or the last
    `history_ms` between turns), indexed by stream time."""

    def __init__(self, config: StreamingConfig | None = None) -> None:
        self._config = config or StreamingConfig()
        self._buffer: Pcm16 = np.zeros(0, np.int16)
        self._buffer_start = 0  # absolute sample index of _buffer[0]
        self._turn_start: int | None = None  # absolute sample index, None between turns
        self._partial_voiced_ms = 0

    @property
    def end_ms(self) -> int:
        """Stream time just past the newest sample."""
        return (self._buffer_start + len(self._buffer)) // _SAMPLES_PER_MS

    @property
    def in_turn(self) -> bool:
        return self._turn_start is not None

    def push(self, samples: Pcm16) -> None:
        """Append the next 16 kHz samples; trims audio no decode can need any more."""
        self._buffer = np.concatenate((self._buffer, samples))
        end = self._buffer_start + len(self._buffer)
        keep_ms = self._config.max_turn_ms if self.in_turn else self._config.history_ms
        self._trim(end - keep_ms * _SAMPLES_PER_MS)

    def begin_turn(self, start_ms: int) -> None:
        """A turn started at `start_ms`: keep its audio, with pre-roll, until `end_turn`."""
        start = (start_ms - self._config.pre_roll_ms) * _SAMPLES_PER_MS
        self._turn_start = max(self._buffer_start, start)
        self._partial_voiced_ms = 0

    def end_turn(self) -> None:
        """The turn is over; between turns only the pre-roll is kept."""
        self._turn_start = None
        self.push(np.zeros(0, np.int16))

    def note_voiced(self, duration_ms: int) -> None:
        """Count speech heard since the last partial."""
        self._partial_voiced_ms += duration_ms

    def partial_due(self) -> bool:
        """Whether enough new speech has come since the last partial (or the start)."""
        return self.in_turn and self._partial_voiced_ms >= self._config.partial_interval_ms

    def take_partial(self) -> tuple[int, int, AudioF32]:
        """Audio for a partial: the turn so far, at most `max_window_ms` of it, as
        (start_ms, end_ms, samples); resets the new-speech count."""
        self._partial_voiced_ms = 0
        end = self._buffer_start + len(self._buffer)
        start = max(self._turn_start_sample(), end - self._config.max_window_ms * _SAMPLES_PER_MS)
        return self._slice(start, end)

    def turn_so_far(self, max_ms: int) -> AudioF32:
        """The current turn's audio up to the newest sample (its last `max_ms` at most)."""
        end = self._buffer_start + len(self._buffer)
        start = max(self._turn_start_sample(), end - max_ms * _SAMPLES_PER_MS)
        return self._slice(start, end)[2]

    def final_audio(self, speech_end_ms: int) -> tuple[int, int, AudioF32]:
        """Audio for the final: the whole turn up to `speech_end_ms` + `tail_pad_ms`."""
        end = (speech_end_ms + self._config.tail_pad_ms) * _SAMPLES_PER_MS
        end = min(end, self._buffer_start + len(self._buffer))
        return self._slice(self._turn_start_sample(), end)

    def _turn_start_sample(self) -> int:
        if self._turn_start is None:
            raise RuntimeError("no turn in progress: call begin_turn first")
        return max(self._turn_start, self._buffer_start)

    def _slice(self, start: int, end: int) -> tuple[int, int, AudioF32]:
        part = self._buffer[start - self._buffer_start : max(start, end) - self._buffer_start]
        return start // _SAMPLES_PER_MS, end // _SAMPLES_PER_MS, pcm16_to_float32(part)

    def _trim(self, keep_from: int) -> None:
        drop = min(max(0, keep_from - self._buffer_start), len(self._buffer))
        if drop:
            self._buffer = self._buffer[drop:]
            self._buffer_start += drop
