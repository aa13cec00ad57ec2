"""Turn detection: speech probabilities per frame in, speech boundaries and barge-in out.

Sans-I/O and clock-free: the caller feeds one probability per VAD frame together with the
frame's place on the stream's clock, and gets back the events that frame decides. A frame
counts as voiced with hysteresis: `speech_threshold` to enter speech, only
`silence_threshold` to stay in it, so a word's quieter tail does not flicker the state.

- A turn starts once `min_speech_ms` of voiced frames have been heard, so a click or a
  cough is not a turn; unvoiced dips shorter than `onset_gap_ms` do not reset that count
  (a soft first word often dips below the threshold). `SpeechStarted.start_ms` is
  back-dated to the first voiced frame.
- A turn ends after `end_of_turn_silence_ms` of unvoiced frames (the fixed rule,
  `end_of_turn="silence"`); `SpeechEnded.end_ms` is the end of the last voiced frame.
- With `end_of_turn="semantic"` a pause of `ask_silence_ms` raises one `AskEndOfTurn`:
  the listener asks the end-of-turn model (`voice_agent.hearing.endpoint`) whether the
  audio so far sounds finished and hands the answer back with `verdict`. A pause judged
  complete ends the turn after `complete_silence_ms`; one judged unfinished is asked about
  again every `reask_ms` of further silence (more silence makes a finished sentence sound
  finished), and one never judged complete ends after `incomplete_silence_ms` ("my name
  is ... Priya Nair" stays one turn);
  when the model could not answer (None), after `end_of_turn_silence_ms` as in the fixed
  rule. Speech resuming discards the pause's question and answer.
- A turn that reaches `max_turn_ms` (a monologue, music on the line) is ended there;
  speech that goes on becomes the next turn.
- While the agent speaks (`set_agent_speaking(True)`), speech that has accumulated
  `barge_in_ms` of frames at or above `barge_in_threshold` raises one `BargeIn` per turn.
  Shorter speech ("mhm", "ok") ends as a `SpeechEnded` with `during_agent_speech=True`
  and `barged_in=False`: a backchannel, not an interruption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

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
    end_of_turn: Literal["silence", "semantic"] = "silence"
    ask_silence_ms: int = 64
    complete_silence_ms: int = 160
    incomplete_silence_ms: int = 1200
    reask_ms: int = 192
    complete_threshold: float = 0.5
    check_words: bool = True
    """Semantic rule: the listener also requires the pause's transcript not to end
    mid-sentence (`voice_agent.hearing.endpoint.sounds_unfinished`)."""
    words_wait_ms: int = 600
    """How long the words check waits for the pause's speculative final once the model
    has answered; past it, the turn's latest partial transcript is judged instead."""
    max_turn_ms: int = 30_000
    """A turn this long is ended where it is (a monologue, music on the line): its final
    then decodes at most this much audio and the caller's next words are a new turn. 0:
    no limit."""

    def __post_init__(self) -> None:
        if self.end_of_turn not in ("silence", "semantic"):
            raise ValueError(
                f"end_of_turn must be 'silence' or 'semantic', got {self.end_of_turn!r}"
            )
        if not 0.0 < self.complete_threshold < 1.0:
            raise ValueError(f"complete_threshold must be in (0, 1), got {self.complete_threshold}")
        if not self.ask_silence_ms <= self.complete_silence_ms <= self.incomplete_silence_ms:
            raise ValueError(
                "need ask_silence_ms <= complete_silence_ms <= incomplete_silence_ms, got "
                f"{self.ask_silence_ms}, {self.complete_silence_ms}, {self.incomplete_silence_ms}"
            )
        if not 0.0 < self.silence_threshold <= self.speech_threshold < 1.0:
            raise ValueError(
                "need 0 < silence_threshold <= speech_threshold < 1, got "
                f"{self.silence_threshold} and {self.speech_threshold}"
            )
        if not 0.0 < self.barge_in_threshold < 1.0:
            raise ValueError(f"barge_in_threshold must be in (0, 1), got {self.barge_in_threshold}")
        positive = ("min_speech_ms", "onset_gap_ms", "end_of_turn_silence_ms", "barge_in_ms",
                    "ask_silence_ms", "reask_ms")  # fmt: skip
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.words_wait_ms < 0:
            raise ValueError(f"words_wait_ms must not be negative, got {self.words_wait_ms}")
        if self.max_turn_ms < 0:
            raise ValueError(f"max_turn_ms must not be negative, got {self.max_turn_ms}")


@dataclass(frozen=True, slots=True)
class AskEndOfTurn:
    """Semantic rule: the caller has paused since `speech_end_ms`; answer with
    `TurnDetector.verdict(speech_end_ms, probability)`. Not a hearing event: the listener
    consumes it."""

    speech_end_ms: int
    detected_ms: int


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
        # Semantic rule, for the current pause: when to ask next, whether a question is
        # out, and the model's answer (None: none yet).
        self._next_ask_ms = self._config.ask_silence_ms
        self._waiting = False
        self._answer: Literal["complete", "incomplete", "unknown"] | None = None

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

    def feed(
        self, probability: float, start_ms: int, end_ms: int
    ) -> list[TurnEvent | AskEndOfTurn]:
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
        events: list[TurnEvent | AskEndOfTurn] = []
        if cfg.max_turn_ms and end_ms - self._start_ms >= cfg.max_turn_ms:
            if probability >= cfg.silence_threshold:
                self._last_voiced_end_ms = end_ms
            return [self._end_turn(detected_ms=end_ms)]
        if probability >= cfg.silence_threshold:
            self._last_voiced_end_ms = end_ms
            self._reset_pause()
            if self._agent_speaking and probability >= cfg.barge_in_threshold:
                self._barge_voiced_ms += duration_ms
                if not self._barged_in and self._barge_voiced_ms >= cfg.barge_in_ms:
                    self._barged_in = True
                    events.append(BargeIn(start_ms=self._start_ms, detected_ms=end_ms))
        else:
            silence_ms = end_ms - self._last_voiced_end_ms
            if (
                cfg.end_of_turn == "semantic"
                and not self._waiting
                and self._answer in (None, "incomplete")
                and self._next_ask_ms <= silence_ms < cfg.incomplete_silence_ms
            ):
                self._waiting = True
                self._next_ask_ms = silence_ms + cfg.reask_ms
                events.append(AskEndOfTurn(self._last_voiced_end_ms, detected_ms=end_ms))
            if silence_ms >= self._silence_limit_ms():
                events.append(self._end_turn(detected_ms=end_ms))
        return events

    def verdict(self, speech_end_ms: int, probability: float | None) -> list[TurnEvent]:
        """The end-of-turn model's answer for the pause since `speech_end_ms`: the
        probability that the caller has finished, or None when it could not answer.
        Returns the `SpeechEnded` it decides now (when the pause is already long enough),
        else nothing; a stale answer (the caller went on, or the turn ended) is ignored."""
        if not self._in_speech or speech_end_ms != self._last_voiced_end_ms or not self._waiting:
            return []
        self._waiting = False
        if probability is None:
            self._answer = "unknown"
        else:
            _check_probability("end-of-turn probability", probability)
            complete = probability >= self._config.complete_threshold
            self._answer = "complete" if complete else "incomplete"
        if self.trailing_silence_ms >= self._silence_limit_ms():
            assert self._last_end_ms is not None
            return [self._end_turn(detected_ms=self._last_end_ms)]
        return []

    def finish(self) -> list[TurnEvent]:
        """End of the stream (hang-up): closes an open turn at the last frame's end."""
        self._candidate_start_ms = None
        if not self._in_speech or self._last_end_ms is None:
            return []
        return [self._end_turn(detected_ms=self._last_end_ms)]

    # ---------------------------------------------------------------- internals

    def _feed_candidate(
        self, probability: float, start_ms: int, end_ms: int, duration_ms: int
    ) -> list[TurnEvent | AskEndOfTurn]:
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
        events: list[TurnEvent | AskEndOfTurn] = [
            SpeechStarted(start_ms=self._start_ms, detected_ms=end_ms)
        ]
        if self._agent_speaking and self._barge_voiced_ms >= cfg.barge_in_ms:
            self._barged_in = True
            events.append(BargeIn(start_ms=self._start_ms, detected_ms=end_ms))
        return events

    def _silence_limit_ms(self) -> int:
        cfg = self._config
        if cfg.end_of_turn == "silence" or self._answer == "unknown":
            return cfg.end_of_turn_silence_ms
        return cfg.complete_silence_ms if self._answer == "complete" else cfg.incomplete_silence_ms

    def _reset_pause(self) -> None:
        self._next_ask_ms, self._waiting, self._answer = self._config.ask_silence_ms, False, None

    def _end_turn(self, detected_ms: int) -> SpeechEnded:
        self._in_speech = False
        self._reset_pause()
        return SpeechEnded(
            start_ms=self._start_ms,
            end_ms=self._last_voiced_end_ms,
            detected_ms=detected_ms,
            during_agent_speech=self._during_agent_speech,
            barged_in=self._barged_in,
        )

    def _check_frame(self, probability: float, start_ms: int, end_ms: int) -> None:
        _check_probability("speech probability", probability)
        if end_ms <= start_ms:
            raise ValueError(f"a frame must end after it starts, got {start_ms}..{end_ms} ms")
        if self._last_end_ms is not None and start_ms < self._last_end_ms:
            raise ValueError(
                f"frames must not go back in time: frame starts at {start_ms} ms, "
                f"the previous one ended at {self._last_end_ms} ms"
            )


def _check_probability(what: str, probability: float) -> None:
    if math.isnan(probability) or not 0.0 <= probability <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], got {probability}")
