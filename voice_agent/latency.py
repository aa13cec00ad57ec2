"""The per-turn latency tracker: timestamps, deadlines handed into stages, degrades.

One `TurnTracker` per caller turn, owned by the session. Its origin is the end of the
caller's speech; the turn's budget runs from there to the first reply frame sent. Stages
mark what happened (`mark`, `tool_call`); before a stage starts, the session asks for its
deadline (`deadline_for`) and passes it in (the engine decodes within its deadline). When
time runs short the tracker consults the `DegradePolicy` (`admit`, `plan_engine`,
`choose_transcript`, `should_play_filler`) and records every degrade it takes. `record()`
gives the frozen `TurnRecord`, serialized one JSON line per turn.

Deadline rule: a stage's deadline is the earlier of (its start + its own budget) and the
turn's deadline (origin + `turn_ms`). Its start is its recorded start mark, or now when
not yet marked; so as the turn consumes its budget, later stages get less.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from voice_agent.clock import Clock
from voice_agent.degrade import DegradePolicy, EngineDecision, EnginePlan, TranscriptChoice
from voice_agent.turn_record import (
    STAGE_WINDOWS,
    Budgets,
    DegradeAction,
    DegradeCause,
    DegradeRecord,
    EffortLevel,
    EngineRecord,
    Mark,
    Stage,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)

__all__ = [
    "Budgets",
    "DegradeAction",
    "DegradeCause",
    "DegradePolicy",
    "EffortLevel",
    "EnginePlan",
    "Mark",
    "Stage",
    "ToolOutcome",
    "TranscriptChoice",
    "TurnRecord",
    "TurnTracker",
]

_MS_PER_S = 1000.0
_KEEP_LAST = frozenset({Mark.ENGINE_DONE})
"""Marks a later call moves; all others keep their first time."""

ToolCallHook = Callable[[str, int, ToolCallRecord], None]
"""Told (call id, turn, the finished call) as each tool call ends; must not block."""


class TurnTracker:
    """Times one turn against its budgets and decides how to degrade. Not thread-safe:
    use it from the event loop."""

    def __init__(
        self,
        clock: Clock,
        budgets: Budgets,
        policy: DegradePolicy | None = None,
        *,
        call_id: str = "",
        turn: int = 0,
        speech_ended_s: float | None = None,
        wall_time_unix_s: float | None = None,
        concurrent_calls: int | None = None,
        on_tool_call: ToolCallHook | None = None,
    ) -> None:
        """`speech_ended_s`: when the caller stopped speaking, on `clock` (the turn
        detector learns it after the fact); default now. `concurrent_calls` (calls in
        progress, this one included) goes into the record; `on_tool_call` is told each
        finished tool call (telemetry)."""
        self._clock = clock
        self._budgets = budgets
        self._policy = policy or DegradePolicy()
        self._call_id = call_id
        self._turn = turn
        self._origin_s = clock.now() if speech_ended_s is None else speech_ended_s
        self._wall_time_unix_s = wall_time_unix_s
        self._marks: dict[Mark, float] = {}
        self._tools: list[ToolCallRecord] = []
        self._degrades: list[DegradeRecord] = []
        self._effort: EffortLevel | None = None
        self._max_steps: int | None = None
        self._queue_depth: int | None = None
        self._filler_played = False
        self._engine: EngineRecord | None = None
        self._concurrent_calls = concurrent_calls
        self._preempted: bool | None = None
        self._on_tool_call = on_tool_call

    # ------------------------------------------------------------ time and marks

    @property
    def origin_s(self) -> float:
        """End of the caller's speech, on the clock."""
        return self._origin_s

    @property
    def turn_deadline_s(self) -> float:
        return self._origin_s + self._budgets.turn_ms / _MS_PER_S

    @property
    def policy(self) -> DegradePolicy:
        return self._policy

    def elapsed_ms(self) -> float:
        return self._ms(self._clock.now())

    def remaining_ms(self) -> float:
        """What is left of the turn's budget (negative once overrun)."""
        return (self.turn_deadline_s - self._clock.now()) * _MS_PER_S

    def mark(self, mark: Mark, at_s: float | None = None) -> None:
        """Timestamp `mark` now (or at `at_s` on the clock). Repeats are ignored, except
        `ENGINE_DONE`, which moves to the latest engine request's end."""
        if mark in self._marks and mark not in _KEEP_LAST:
            return
        self._marks[mark] = self._clock.now() if at_s is None else at_s

    def marked_s(self, mark: Mark) -> float | None:
        return self._marks.get(mark)

    def deadline_for(self, stage: Stage) -> float:
        """The stage's deadline on the clock (see the module docstring)."""
        budget_ms = self._budgets.for_stage(stage)
        if budget_ms is None:
            return self.turn_deadline_s
        start_s = self._stage_start_s(stage)
        return min(start_s + budget_ms / _MS_PER_S, self.turn_deadline_s)

    def _stage_start_s(self, stage: Stage) -> float:
        start_mark = STAGE_WINDOWS[stage][0] if stage in STAGE_WINDOWS else None
        if start_mark is None:
            return self._origin_s if stage in (Stage.END_OF_TURN, Stage.TURN) else self._now()
        return self._marks.get(start_mark, self._now())

    def _binding_cause(self, stage: Stage) -> DegradeCause:
        budget_ms = self._budgets.for_stage(stage)
        if budget_ms is None:
            return DegradeCause.TURN_BUDGET
        stage_end_s = self._stage_start_s(stage) + budget_ms / _MS_PER_S
        return (
            DegradeCause.TURN_BUDGET
            if self.turn_deadline_s < stage_end_s
            else DegradeCause.STAGE_BUDGET
        )

    # ------------------------------------------------------------ tool calls

    def start_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> int:
        """Record a tool call starting now, with the validated `arguments` it runs with
        (JSON values; copied); returns its handle for `end_tool`."""
        args = None if arguments is None else dict(arguments)
        self._tools.append(ToolCallRecord(name, self.elapsed_ms(), arguments=args))
        return len(self._tools) - 1

    def end_tool(self, handle: int, outcome: ToolOutcome, refusal: str | None = None) -> None:
        """End the call `handle` now. `refusal`: the refusal's kind when the tool answered
        by refusing (`outcome` `REFUSED`). Raises ValueError when it already ended."""
        call = self._tools[handle]
        if call.ended_at_ms is not None:
            raise ValueError(f"tool call {handle} ({call.name}) already ended")
        ended = replace(call, ended_at_ms=self.elapsed_ms(), outcome=outcome, refusal=refusal)
        self._tools[handle] = ended
        if self._on_tool_call is not None:
            self._on_tool_call(self._call_id, self._turn, ended)

    @contextlib.contextmanager
    def tool_call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Iterator[None]:
        """Time the block as a call of tool `name` with `arguments`: `OK` when it
        completes, `TIMEOUT` on TimeoutError, `RAN_CANCELLED` on cancellation, `FAILED` on
        any other exception (which is re-raised)."""
        handle = self.start_tool(name, arguments)
        try:
            yield
        except TimeoutError:
            self.end_tool(handle, ToolOutcome.TIMEOUT)
            raise
        except asyncio.CancelledError:
            self.end_tool(handle, ToolOutcome.RAN_CANCELLED)
            raise
        except Exception:
            self.end_tool(handle, ToolOutcome.FAILED)
            raise
        self.end_tool(handle, ToolOutcome.OK)

    # ------------------------------------------------------------ engine figures

    def note_preempted(self, preempted: bool = True) -> None:
        """Whether the first answer came from a draft decoded at the caller's pause."""
        self._preempted = preempted

    def engine_figures(self, figures: EngineRecord) -> None:
        """The turn's engine requests so far, as the agent counted them: what
        `TurnRecord.engine` holds."""
        self._engine = figures

    # ------------------------------------------------------------ degrades

    def record_degrade(
        self, stage: Stage, cause: DegradeCause, action: DegradeAction, detail: str = ""
    ) -> None:
        self._degrades.append(DegradeRecord(stage, cause, action, self.elapsed_ms(), detail))

    def admit(self, queue_depth: int, requested: EffortLevel = EffortLevel.LOW) -> EffortLevel:
        """The effort this turn starts at, given the engine's queue depth now; a lowered
        effort is recorded as a `QUEUE_DEPTH` degrade. `plan_engine` starts from it."""
        effort = self._policy.admission(queue_depth, requested)
        self._queue_depth = queue_depth
        self._effort = effort
        if effort is not requested:
            detail = f"{requested.value} -> {effort.value}: {queue_depth} requests queued"
            self.record_degrade(
                Stage.ENGINE, DegradeCause.QUEUE_DEPTH, DegradeAction.LOWER_EFFORT, detail
            )
        return effort

    def plan_engine(self, requested: EffortLevel | None = None) -> EnginePlan:
        """Effort, step cap and deadline for the next engine request, from the time left
        until the engine's deadline. `requested` defaults to the admitted effort (else
        `LOW`). Degrades are recorded; the record keeps the latest effort and step cap."""
        requested = requested or self._effort or EffortLevel.LOW
        deadline_s = self.deadline_for(Stage.ENGINE)
        available_ms = (deadline_s - self._now()) * _MS_PER_S
        decision: EngineDecision = self._policy.engine(available_ms, requested)
        cause = self._binding_cause(Stage.ENGINE)
        for action, detail in decision.actions:
            self.record_degrade(Stage.ENGINE, cause, action, detail)
        self._effort = decision.effort
        self._max_steps = decision.max_steps_per_block
        return EnginePlan(decision.effort, decision.max_steps_per_block, deadline_s)

    def transcript_deadline_s(self) -> float:
        """Wait for the final transcript until then: the ASR stage's deadline, or earlier
        when the rest of the turn needs the time (`min_engine_ms + expected_tts_ms`)."""
        reserve_s = (self._policy.min_engine_ms + self._policy.expected_tts_ms) / _MS_PER_S
        return min(self.deadline_for(Stage.ASR_FINAL), self.turn_deadline_s - reserve_s)

    def choose_transcript(self, final_ready: bool, have_partial: bool) -> TranscriptChoice:
        """Final, partial (recorded as a degrade) or keep waiting; call again when the
        final arrives or at `transcript_deadline_s()`."""
        wait_until_s = self.transcript_deadline_s()
        choice = self._policy.transcript(self._now(), wait_until_s, final_ready, have_partial)
        if choice is TranscriptChoice.PARTIAL:
            cause = (
                DegradeCause.STAGE_BUDGET
                if wait_until_s >= self.deadline_for(Stage.ASR_FINAL)
                else DegradeCause.TURN_BUDGET
            )
            detail = (
                f"no final at {self.elapsed_ms():.0f} ms; "
                f"waited until {self._ms(wait_until_s):.0f} ms"
            )
            self.record_degrade(
                Stage.ASR_FINAL, cause, DegradeAction.USE_PARTIAL_TRANSCRIPT, detail
            )
        return choice

    def expected_first_audio_s(self, expected_wait_ms: float | None = None) -> float:
        """When the first reply audio can be expected: now + `expected_wait_ms` (e.g. a
        slow tool's timeout) + what the engine still needs at the planned effort + the
        synthesizer's expected first-audio time."""
        now_s = self._now()
        engine_ms = 0.0
        if Mark.ENGINE_FIRST_BLOCK not in self._marks:
            cost_ms = self._policy.engine_cost_ms(self._effort or EffortLevel.LOW)
            started_s = self._marks.get(Mark.ENGINE_START, now_s)
            engine_ms = max(0.0, cost_ms - (now_s - started_s) * _MS_PER_S)
        if Mark.FIRST_TTS_AUDIO in self._marks:
            engine_ms, tts_ms = 0.0, 0.0
        else:
            tts_ms = self._policy.expected_tts_ms
        wait_ms = (expected_wait_ms or 0.0) + engine_ms + tts_ms
        return now_s + wait_ms / _MS_PER_S

    def should_play_filler(self, expected_wait_ms: float | None = None) -> bool:
        """True (once per turn, recorded) when no reply audio has been sent and the first
        audio would come after the turn's deadline: play a pre-synthesized filler now.
        Ask when a slow step starts (with its `expected_wait_ms`) and at the deadline."""
        if self._filler_played or Mark.FIRST_AUDIO_SENT in self._marks:
            return False
        expected_s = self.expected_first_audio_s(expected_wait_ms)
        if not self._policy.filler(self._now(), expected_s, self.turn_deadline_s):
            return False
        self._filler_played = True
        detail = (
            f"first audio expected at {self._ms(expected_s):.0f} ms, "
            f"turn budget {self._budgets.turn_ms} ms"
        )
        self.record_degrade(Stage.TURN, DegradeCause.TURN_BUDGET, DegradeAction.PLAY_FILLER, detail)
        return True

    # ------------------------------------------------------------ the record

    def record(self) -> TurnRecord:
        """A snapshot of the turn so far (call at its end for the final record)."""
        at = {mark: self._ms(t) for mark, t in self._marks.items()}
        return TurnRecord(
            call_id=self._call_id,
            turn=self._turn,
            budgets=self._budgets,
            end_of_turn_at_ms=at.get(Mark.END_OF_TURN),
            final_transcript_at_ms=at.get(Mark.FINAL_TRANSCRIPT),
            engine_start_at_ms=at.get(Mark.ENGINE_START),
            engine_first_block_at_ms=at.get(Mark.ENGINE_FIRST_BLOCK),
            engine_done_at_ms=at.get(Mark.ENGINE_DONE),
            tts_start_at_ms=at.get(Mark.TTS_START),
            first_tts_audio_at_ms=at.get(Mark.FIRST_TTS_AUDIO),
            first_audio_sent_at_ms=at.get(Mark.FIRST_AUDIO_SENT),
            answer_audio_sent_at_ms=at.get(Mark.ANSWER_AUDIO_SENT),
            tool_calls=tuple(self._tools),
            degrades=tuple(self._degrades),
            effort=self._effort,
            max_steps_per_block=self._max_steps,
            queue_depth=self._queue_depth,
            wall_time_unix_s=self._wall_time_unix_s,
            engine=self._engine,
            concurrent_calls=self._concurrent_calls,
            preempted=self._preempted,
        )

    def _now(self) -> float:
        return self._clock.now()

    def _ms(self, t_s: float) -> float:
        return (t_s - self._origin_s) * _MS_PER_S
