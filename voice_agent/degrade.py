"""The degrade policy: what to give up when a turn is running out of time.

Pure decisions over numbers (milliseconds left, queue depth); `TurnTracker` feeds them
from its clock and records each degrade in the turn record. The rules:

- Engine plan: the engine gets `available_ms` (its deadline minus now). Keep the asked
  effort when its expected cost fits; else step down (medium -> low -> instant) to the
  highest that fits (`LOWER_EFFORT`). When not even `instant` fits, cap
  `max_steps_per_block` in proportion to the time there is, at least 1 step
  (`FEWER_STEPS`): every block is then committed after that many refinements, so the
  engine's own deadline logic has an answer on time.
- Transcript: wait for the final transcript until the ASR deadline (the tracker also
  keeps `min_engine_ms + expected_tts_ms` of the turn for what follows); past it, use the
  latest partial when there is one (`USE_PARTIAL_TRANSCRIPT`), else keep waiting.
- Filler: when no reply audio has gone out and the projected first audio is after the
  turn's deadline (or the deadline has passed), play a pre-synthesized filler phrase
  ("one moment please") once per turn (`PLAY_FILLER`).
- Admission: with step-level batching every request in flight slows each shared step, and
  a queued request also waits its turn. With at most `low_effort_queue_depth` requests
  ahead, a new turn runs at the effort it asks for; above that it starts at `low` at most;
  above `instant_queue_depth`, at `instant` (no reasoning tokens). Turns never wait for
  admission: doing less beats being late on the phone.

The expected costs are defaults for the shipped small model on a 2-core CPU; calibrate
them from `scripts/bench_pipeline.py` for another model or machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from voice_agent.turn_record import DegradeAction, EffortLevel

DEFAULT_MAX_STEPS_PER_BLOCK = 16
"""The engine schedule's own cap (`engine.schedule.Schedule.max_steps_per_block`)."""


class TranscriptChoice(Enum):
    FINAL = "final"
    PARTIAL = "partial"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """How the engine should run this request."""

    effort: EffortLevel
    max_steps_per_block: int | None
    """None: the schedule's own."""
    deadline_s: float
    """On the tracker's clock; pass it as the engine request's deadline."""


@dataclass(frozen=True, slots=True)
class EngineDecision:
    effort: EffortLevel
    max_steps_per_block: int | None
    actions: tuple[tuple[DegradeAction, str], ...]
    """Each degrade taken, with the numbers behind it."""


@dataclass(frozen=True, slots=True)
class DegradePolicy:
    """Thresholds of the rules in the module docstring (ms, requests)."""

    instant_engine_ms: float = 120.0
    """Expected engine time of a reply at `instant` effort."""
    low_engine_ms: float = 250.0
    medium_engine_ms: float = 400.0
    max_steps_per_block: int = DEFAULT_MAX_STEPS_PER_BLOCK
    min_engine_ms: float = 120.0
    """Engine time kept in the turn when deciding how long to wait for the final."""
    expected_tts_ms: float = 150.0
    """Expected time from the first sentence to its first audio."""
    low_effort_queue_depth: int = 2
    instant_queue_depth: int = 4

    def __post_init__(self) -> None:
        if not 0 < self.instant_engine_ms <= self.low_engine_ms <= self.medium_engine_ms:
            raise ValueError("expected engine costs must be positive and rise with effort")
        if self.max_steps_per_block < 1:
            raise ValueError("max_steps_per_block must be positive")
        if not 0 <= self.low_effort_queue_depth <= self.instant_queue_depth:
            raise ValueError("queue depth thresholds must be ordered: low <= instant")

    def engine_cost_ms(self, effort: EffortLevel) -> float:
        return {
            EffortLevel.INSTANT: self.instant_engine_ms,
            EffortLevel.LOW: self.low_engine_ms,
            EffortLevel.MEDIUM: self.medium_engine_ms,
        }[effort]

    def engine(self, available_ms: float, requested: EffortLevel) -> EngineDecision:
        """The effort and step cap that fit `available_ms` of engine time."""
        fitting = [
            e
            for e in EffortLevel
            if e.rank <= requested.rank and self.engine_cost_ms(e) <= available_ms
        ]
        if fitting:
            effort = fitting[-1]
            if effort is requested:
                return EngineDecision(effort, None, ())
            detail = (
                f"{requested.value} -> {effort.value}: {available_ms:.0f} ms left, "
                f"{requested.value} expects {self.engine_cost_ms(requested):.0f} ms"
            )
            return EngineDecision(effort, None, ((DegradeAction.LOWER_EFFORT, detail),))
        actions = []
        if requested is not EffortLevel.INSTANT:
            detail = f"{requested.value} -> instant: {available_ms:.0f} ms left"
            actions.append((DegradeAction.LOWER_EFFORT, detail))
        share = max(available_ms, 0.0) / self.instant_engine_ms
        steps = max(1, int(self.max_steps_per_block * share))
        detail = (
            f"max_steps_per_block {self.max_steps_per_block} -> {steps}: "
            f"{available_ms:.0f} ms left, instant expects {self.instant_engine_ms:.0f} ms"
        )
        actions.append((DegradeAction.FEWER_STEPS, detail))
        return EngineDecision(EffortLevel.INSTANT, steps, tuple(actions))

    def transcript(
        self, now_s: float, wait_until_s: float, final_ready: bool, have_partial: bool
    ) -> TranscriptChoice:
        """Use the final when it is there; past `wait_until_s`, the partial if any."""
        if final_ready:
            return TranscriptChoice.FINAL
        if now_s >= wait_until_s and have_partial:
            return TranscriptChoice.PARTIAL
        return TranscriptChoice.WAIT

    def filler(self, now_s: float, first_audio_expected_s: float, deadline_s: float) -> bool:
        """Whether first audio expected at `first_audio_expected_s` would be late."""
        return now_s >= deadline_s or first_audio_expected_s > deadline_s

    def admission(self, queue_depth: int, requested: EffortLevel) -> EffortLevel:
        """The effort a new turn starts at with `queue_depth` requests ahead of it."""
        if queue_depth > self.instant_queue_depth:
            return EffortLevel.INSTANT
        if queue_depth > self.low_effort_queue_depth and requested.rank > EffortLevel.LOW.rank:
            return EffortLevel.LOW
        return requested
