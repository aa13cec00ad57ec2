"""What hearing reports: speech boundaries, interruptions and transcripts.

All times are milliseconds on the audio stream's own clock: sample 0 of the call's inbound
audio is 0 ms, so times do not depend on when the process got round to reading the audio.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The caller started speaking at `start_ms`; decided at `detected_ms` (>= start_ms),
    once the speech had lasted the minimum speech length."""

    start_ms: int
    detected_ms: int


@dataclass(frozen=True, slots=True)
class SpeechEnded:
    """The caller's turn is over: speech from `start_ms` to `end_ms` (the end of the last
    voiced frame), decided at `detected_ms` after the end-of-turn silence.

    `during_agent_speech` says the agent was talking while this speech began; when it is
    true and `barged_in` is false the speech was a backchannel ("mhm", "ok") that did not
    interrupt, and the session decides whether it deserves a reply.
    """

    start_ms: int
    end_ms: int
    detected_ms: int
    during_agent_speech: bool = False
    barged_in: bool = False

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms

    @property
    def end_of_turn_delay_ms(self) -> int:
        """How long after the caller stopped the turn end was decided."""
        return self.detected_ms - self.end_ms


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The caller talked over the agent long enough to interrupt: speech from `start_ms`,
    decided at `detected_ms`. The session must stop playback (send `clear`) and cancel
    the reply in progress."""

    start_ms: int
    detected_ms: int


@dataclass(frozen=True, slots=True)
class PartialTranscript:
    """A provisional transcript of the turn so far (audio from `start_ms` to `end_ms`);
    later partials and the final replace it."""

    text: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class PausedTranscript:
    """The caller paused: the transcript of the turn up to the pause (audio from
    `start_ms` to `end_ms`, the speech ending at `end_ms`), decoded before the end of
    the turn is certain. If the turn ends at this pause, its `FinalTranscript` is this
    same decode; if the caller goes on, it is superseded. For preemptive work only."""

    text: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class FinalTranscript:
    """The transcript of a whole turn (audio from `start_ms` to `end_ms`).

    `compute_ms` is the recognizer's own time for this decode (wall clock, for budgets).
    """

    text: str
    start_ms: int
    end_ms: int
    compute_ms: float


@dataclass(frozen=True, slots=True)
class TranscriptionFailed:
    """The turn from `start_ms` to `end_ms` could not be transcribed (`reason` says why,
    e.g. the recognizer was overloaded); the session should ask the caller to repeat."""

    start_ms: int
    end_ms: int
    reason: str


TurnEvent = SpeechStarted | SpeechEnded | BargeIn
HearingEvent = (
    TurnEvent | PartialTranscript | PausedTranscript | FinalTranscript | TranscriptionFailed
)
