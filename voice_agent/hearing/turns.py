"""Turn detection: speech probabilities per frame in, speech boundaries and barge-in out.

Sans-I/O and clock-free: the caller feeds one probability per VAD frame together with the
frame's place on the stream's clock, and gets back the events that frame decides. A frame
counts as voiced with hysteresis: `speech_threshold` to enter speech, only
`silence_threshold` to stay in it, so a word's quieter tail does not flicker the state.

- A turn starts once `min_speech_ms` of voiced frames have been heard, so a click or a
  cough is not a turn; unvoiced dips shorter than `onset_gap_ms` do not reset that count
  (a soft first word often dips below the threshold). `SpeechStarted.start_ms` is
  back-dated to the first voiced frame.
- A turn ends after `end_of_turn_silence_ms` of unvoiced frames; `SpeechEnded.end_ms` is
  the end of the last voiced frame.
- While the agent speaks (`set_agent_speaking(True)`), speech that has accumulated
  `barge_in_ms` of frames at or above `barge_in_threshold` raises one `BargeIn` per turn.
  Shorter speech ("mhm", "ok") ends as a `SpeechEnded` with `during_agent_speech=True`
  and `barged_in=False`: a backchannel, not an interruption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voice_agent.hearing.events import BargeIn, SpeechEnded, SpeechStarted, TurnEvent


@dataclass(frozen=True, slots=True)
class TurnConfig:
    """Thresholds are speech probabilities in [0, 1]; durations are milliseconds."""

    speech_threshold: float = 0.5
    silence_threshold: float = 0.35
    min_speech_ms: int = 200
    onset_gap_ms: int = 96
    end_of_turn_silence_ms: int = 400
    barge_in_ms: int = 500
    barge_in_threshold: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.silence_threshold <= self.speech_threshold < 1.0:
            raise ValueError(
                "need 0 < silence_threshold <= speech_threshold < 1, got "
                f"{self.silence_threshold} and {self.speech_threshold}"
            )
        if not 0.0 < self.barge_in_threshold < 1.0:
            raise ValueError(f"barge_in_threshold must be in (0, 1), got {self.barge_in_threshold}")
        for name in ("min_speech_ms", "onset_gap_ms", "end_of_turn_silence_ms", "barge_in_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


class TurnDetector:
    """Decides turn boundaries for one call's inbound audio. Not thread-safe."""

    def __init__(self, config: TurnConfig | None = None) -> None:
        self._config = config or TurnConfig()
        self._agent_speaking = False
        self._last_end_ms: int | None = None
        # Candidate (before SpeechStarted) and turn (after it) state.
        self._candidate_start_ms: int | None = None
        self._candidate_voiced_ms = 0
        self._candidate_barge_ms = 0  # of it, frames loud enough to count for barge-in
        self._candidate_gap_ms = 0  # unvoiced time since the candidate's last voiced frame
        self._in_speech = False
        self._start_ms = 0
        self._last_voiced_end_ms = 0
        self._barge_voiced_ms = 0
        self._during_agent_speech = False
        self._barged_in = False

    @property
    def config(self) -> TurnConfig:
        return self._config

    @property
    def in_speech(self) -> bool:
        """True between a `SpeechStarted` and its `SpeechEnded`."""
        return self._in_speech

    @property
    def trailing_silence_ms(self) -> int:
        """In a turn: time since the last voiced frame ended (0 while voiced); else 0."""
        if not self._in_speech or self._last_end_ms is None:
            return 0
        return self._last_end_ms - self._last_voiced_end_ms

    @property
    def last_voiced_end_ms(self) -> int:
        """In a turn: where its speech currently ends (the last voiced frame's end)."""
        return self._last_voiced_end_ms

    @property
    def agent_speaking(self) -> bool:
        return self._agent_speaking

    def set_agent_speaking(self, speaking: bool) -> None:
        """Tell the detector whether the caller is hearing the agent right now."""
        self._agent_speaking = speaking
        if speaking and self._in_speech:
            self._during_agent_speech = True

    def feed(self, probability: float, start_ms: int, end_ms: int) -> list[TurnEvent]:
        """Consume one frame's speech probability; returns the events it decides (0-2).

        Frames must be contiguous or later than the previous one. Raises ValueError on a
        probability outside [0, 1] (or NaN) or on a frame that ends before it starts or
        goes back in time; the detector's state is then unchanged.
        """
        self._check_frame(probability, start_ms, end_ms)
        self._last_end_ms = end_ms
        cfg = self._config
        duration_ms = end_ms - start_ms
        if not self._in_speech:
            return self._feed_candidate(probability, start_ms, end_ms, duration_ms)
        events: list[TurnEvent] = []
        if probability >= cfg.silence_threshold:
            self._last_voiced_end_ms = end_ms
            if self._agent_speaking and probability >= cfg.barge_in_threshold:
                self._barge_voiced_ms += duration_ms
                if not self._barged_in and self._barge_voiced_ms >= cfg.barge_in_ms:
                    self._barged_in = True
                    events.append(BargeIn(start_ms=self._start_ms, detected_ms=end_ms))
        elif end_ms - self._last_voiced_end_ms >= cfg.end_of_turn_silence_ms:
            events.append(self._end_turn(detected_ms=end_ms))
        return events

    def finish(self) -> list[TurnEvent]:
        """End of the stream (hang-up): closes an open turn at the last frame's end."""
        self._candidate_start_ms = None
        if not self._in_speech or self._last_end_ms is None:
            return []
        return [self._end_turn(detected_ms=self._last_end_ms)]

    # ---------------------------------------------------------------- internals

    def _feed_candidate(
        self, probability: float, start_ms: int, end_ms: int, duration_ms: int
    ) -> list[TurnEvent]:
        cfg = self._config
        if self._candidate_start_ms is None:
            if probability < cfg.speech_threshold:
                return []
            self._candidate_start_ms, self._candidate_voiced_ms = start_ms, 0
            self._candidate_barge_ms = 0
        elif probability < cfg.silence_threshold:
            self._candidate_gap_ms += duration_ms
            if self._candidate_gap_ms >= cfg.onset_gap_ms:
                self._candidate_start_ms = None  # too short to be a turn: a click, a cough
            return []
        self._candidate_gap_ms = 0
        self._candidate_voiced_ms += duration_ms
        if probability >= cfg.barge_in_threshold:
            self._candidate_barge_ms += duration_ms
        if self._candidate_voiced_ms < cfg.min_speech_ms:
            return []
        self._in_speech = True
        self._start_ms, self._candidate_start_ms = self._candidate_start_ms, None
        self._last_voiced_end_ms = end_ms
        self._during_agent_speech = self._agent_speaking
        self._barged_in = False
        self._barge_voiced_ms = self._candidate_barge_ms if self._agent_speaking else 0
        events: list[TurnEvent] = [SpeechStarted(start_ms=self._start_ms, detected_ms=end_ms)]
        if self._agent_speaking and self._barge_voiced_ms >= cfg.barge_in_ms:
            self._barged_in = True
            events.append(BargeIn(start_ms=self._start_ms, detected_ms=end_ms))
        return events

    def _end_turn(self, detected_ms: int) -> SpeechEnded:
        self._in_speech = False
        return SpeechEnded(
            start_ms=self._start_ms,
            end_ms=self._last_voiced_end_ms,
            detected_ms=detected_ms,
            during_agent_speech=self._during_agent_speech,
            barged_in=self._barged_in,
        )

    def _check_frame(self, probability: float, start_ms: int, end_ms: int) -> None:
        if math.isnan(probability) or not 0.0 <= probability <= 1.0:
            raise ValueError(f"speech probability must be in [0, 1], got {probability}")
        if end_ms <= start_ms:
            raise ValueError(f"a frame must end after it starts, got {start_ms}..{end_ms} ms")
        if self._last_end_ms is not None and start_ms < self._last_end_ms:
            raise ValueError(
                f"frames must not go back in time: frame starts at {start_ms} ms, "
                f"the previous one ended at {self._last_end_ms} ms"
            )
