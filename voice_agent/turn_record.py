"""The typed record of one turn's timing, and its JSON-lines form.

Times are milliseconds after the end of the caller's speech (the turn's origin), read
from one monotonic clock by `voice_agent.latency.TurnTracker`. Durations are derived
from the timestamps, never stored apart from them.

JSON lines: a turn is one line of JSON (`to_json_line`, no newline inside), appended to
a file per process (`pipeline.records.RecordWriter`). The line holds every field of
`TurnRecord` (enums as their string values, tuples as lists) and `durations_ms`, the
derived durations written for readers that do not load this module; `from_json_line`
ignores it. `schema_version` says which layout a line has; a reader refuses other
versions rather than misread them.

Tool calls carry the arguments the tool was run with (validated, JSON values), so a
reader can tell an identical retry from a second request (scripts/load_test.py checks
bookings this way). They include what the caller said (names): the records are as
private as the call itself.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from voice_agent.config import BudgetSettings

_log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
"""Layout of `TurnRecord` lines; bump on any change a reader of old lines would misread.
2 added `engine`, `concurrent_calls` and `preempted`; 3 added the tool calls' `arguments`
and `refusal`, 4 `answer_audio_sent_at_ms`, 5 `heard_text` and `said_text` (all optional:
older lines read as the current version with them None); 6 gives tool calls the agent's
outcomes (`ToolOutcome`: `refused`, `failed`, `ran_cancelled`, ...; an older line's
`error` reads as `failed`, `cancelled` as `ran_cancelled`, and `ok` with a refusal as
`refused`) and the engine figures their latency and lowest confidence (the agent's own
figures: one vocabulary)."""
READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5, SCHEMA_VERSION})
OLD_OUTCOMES = {"error": "failed", "cancelled": "ran_cancelled"}
"""Tool-call outcomes of lines before version 6, as they read now."""
DERIVED_KEY = "durations_ms"


class Mark(Enum):
    """A moment of the turn the tracker timestamps."""

    END_OF_TURN = "end_of_turn"
    """The turn detector decided the caller has finished."""
    FINAL_TRANSCRIPT = "final_transcript"
    ENGINE_START = "engine_start"
    """The first engine request of the turn was submitted."""
    ENGINE_FIRST_BLOCK = "engine_first_block"
    ENGINE_DONE = "engine_done"
    """The last engine request of the turn finished (later marks replace earlier ones)."""
    TTS_START = "tts_start"
    """The first sentence was handed to the synthesizer."""
    FIRST_TTS_AUDIO = "first_tts_audio"
    FIRST_AUDIO_SENT = "first_audio_sent"
    """The first reply frame (speech or filler) went to the transport."""
    ANSWER_AUDIO_SENT = "answer_audio_sent"
    """The first frame of the answer itself (not a filler) went to the transport."""


class Stage(Enum):
    """A budgeted span of the turn (`TOOL` and `SEND` have no budget of their own)."""

    END_OF_TURN = "end_of_turn"  # end of speech -> end-of-turn decision
    ASR_FINAL = "asr_final"  # end-of-turn decision -> final transcript
    ENGINE = "engine"  # first engine start -> last engine done (tool calls inside)
    TOOL = "tool"  # each tool call; the sum is reported
    TTS_FIRST_AUDIO = "tts_first_audio"  # first sentence to TTS -> its first audio
    SEND = "send"  # first TTS audio -> first frame sent
    TURN = "turn"  # end of speech -> first frame sent (voice to voice)


STAGE_WINDOWS: dict[Stage, tuple[Mark | None, Mark]] = {
    Stage.END_OF_TURN: (None, Mark.END_OF_TURN),
    Stage.ASR_FINAL: (Mark.END_OF_TURN, Mark.FINAL_TRANSCRIPT),
    Stage.ENGINE: (Mark.ENGINE_START, Mark.ENGINE_DONE),
    Stage.TTS_FIRST_AUDIO: (Mark.TTS_START, Mark.FIRST_TTS_AUDIO),
    Stage.SEND: (Mark.FIRST_TTS_AUDIO, Mark.FIRST_AUDIO_SENT),
    Stage.TURN: (None, Mark.FIRST_AUDIO_SENT),
}
"""(start, end) marks of each windowed stage; None is the turn's origin (0 ms)."""


class EffortLevel(Enum):
    """Engine effort, ordered least first; values match `engine.schedule.Effort`."""

    INSTANT = "instant"
    LOW = "low"
    MEDIUM = "medium"

    @property
    def rank(self) -> int:
        return list(EffortLevel).index(self)


class ToolOutcome(Enum):
    """How a tool call the agent asked for ended: one vocabulary for the agent's replies
    (`voice_agent.agent.ToolCallRecord`) and the turn records."""

    OK = "ok"
    REFUSED = "refused"
    """The tool raised `ToolError` (no such order, slot taken, ...): fed back to the model.
    It answered in time; `refusal` says which refusal."""
    TIMEOUT = "timeout"
    """Not done within its timeout; it may still finish in its thread (a write whose
    caller gave up never commits: `tools.core.WriteGate`)."""
    FAILED = "failed"
    """An unexpected exception (a bug or a broken database), logged."""
    NOT_RUN_CANCELLED = "not_run_cancelled"
    """The turn was cancelled (barge-in) before the tool started: it never ran."""
    RAN_CANCELLED = "ran_cancelled"
    """The turn was cancelled while the tool ran: it finished, its result was kept in
    the history but not spoken."""
    DUPLICATE = "duplicate"
    """The same call (tool and arguments) already ran this turn: not run again."""


class DegradeCause(Enum):
    STAGE_BUDGET = "stage_budget"
    """The stage's own budget would be overrun."""
    TURN_BUDGET = "turn_budget"
    """What is left of the turn's budget is the tighter limit."""
    QUEUE_DEPTH = "queue_depth"
    """The engine's queue was too deep at admission."""


class DegradeAction(Enum):
    LOWER_EFFORT = "lower_effort"
    FEWER_STEPS = "fewer_steps"
    """`max_steps_per_block` lowered: blocks commit sooner, with less refinement."""
    USE_PARTIAL_TRANSCRIPT = "use_partial_transcript"
    PLAY_FILLER = "play_filler"


@dataclass(frozen=True, slots=True)
class Budgets:
    """Latency budgets in milliseconds, as configured in `[budgets]`
    (`voice_agent.config.BudgetSettings`, which holds the defaults)."""

    turn_ms: int
    end_of_turn_ms: int
    asr_final_ms: int
    engine_ms: int
    tts_first_audio_ms: int

    @classmethod
    def default(cls) -> Budgets:
        return cls.from_settings(BudgetSettings())

    @classmethod
    def from_settings(cls, settings: BudgetSettings) -> Budgets:
        return cls(
            turn_ms=settings.turn_ms,
            end_of_turn_ms=settings.end_of_turn_ms,
            asr_final_ms=settings.asr_final_ms,
            engine_ms=settings.engine_ms,
            tts_first_audio_ms=settings.tts_first_audio_ms,
        )

    def for_stage(self, stage: Stage) -> int | None:
        """The stage's own budget; None for stages bounded only by the turn's."""
        return {
            Stage.END_OF_TURN: self.end_of_turn_ms,
            Stage.ASR_FINAL: self.asr_final_ms,
            Stage.ENGINE: self.engine_ms,
            Stage.TTS_FIRST_AUDIO: self.tts_first_audio_ms,
            Stage.TURN: self.turn_ms,
        }.get(stage)


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    name: str
    started_at_ms: float
    ended_at_ms: float | None = None
    """None while it runs."""
    outcome: ToolOutcome | None = None
    arguments: dict[str, Any] | None = field(default=None, hash=False)
    """The validated arguments the tool was run with (JSON values); None when not known
    (a line before version 3, or a caller of the tracker that did not say)."""
    refusal: str | None = None
    """The refusal's kind (`ToolError`, e.g. "slot_taken") when the tool answered by
    refusing (`outcome` `REFUSED`). None: it did not refuse, or the line predates version
    3 (then `arguments` is None too)."""

    @property
    def duration_ms(self) -> float | None:
        return None if self.ended_at_ms is None else self.ended_at_ms - self.started_at_ms


@dataclass(frozen=True, slots=True)
class DegradeRecord:
    """One decision to do less so the turn stays on time."""

    stage: Stage
    cause: DegradeCause
    action: DegradeAction
    at_ms: float
    detail: str = ""
    """Human-readable numbers behind the decision, e.g. "medium -> low: 180 ms left"."""


@dataclass(frozen=True, slots=True)
class EngineRecord:
    """The turn's engine requests together (tool loops make several)."""

    requests: int = 0
    forwards: int = 0
    """Model forward passes, summed over the requests."""
    emitted_tokens: int = 0
    """Answer tokens returned, scaffold tokens placed by the schema included."""
    decided_tokens: int = 0
    """Tokens the model itself committed (scaffold and post-EOS fill excluded)."""
    deadline_forced: bool = False
    """Some request committed its remaining masks early to meet its deadline."""
    latency_ms: float = 0.0
    """(6) The requests' latencies (submit to result) summed; 0 in older lines."""
    min_confidence: float = 1.0
    """(6) The lowest confidence the model committed in any request (1 in older lines)."""

    @property
    def tokens_per_forward(self) -> float | None:
        """Model-decided tokens per forward (the honest figure); None without forwards."""
        return self.decided_tokens / self.forwards if self.forwards else None

    @property
    def emitted_per_forward(self) -> float | None:
        """All emitted tokens per forward (flattered by free scaffold tokens)."""
        return self.emitted_tokens / self.forwards if self.forwards else None

    def add(
        self,
        forwards: int,
        emitted_tokens: int,
        decided_tokens: int,
        deadline_forced: bool,
        latency_ms: float = 0.0,
        min_confidence: float = 1.0,
    ) -> EngineRecord:
        """These figures plus one more request's."""
        return EngineRecord(
            self.requests + 1,
            self.forwards + forwards,
            self.emitted_tokens + emitted_tokens,
            self.decided_tokens + decided_tokens,
            self.deadline_forced or deadline_forced,
            self.latency_ms + latency_ms,
            min(self.min_confidence, min_confidence),
        )


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """Everything timed in one turn; times in ms after the end of the caller's speech."""

    call_id: str
    turn: int
    budgets: Budgets
    end_of_turn_at_ms: float | None = None
    final_transcript_at_ms: float | None = None
    engine_start_at_ms: float | None = None
    engine_first_block_at_ms: float | None = None
    engine_done_at_ms: float | None = None
    tts_start_at_ms: float | None = None
    first_tts_audio_at_ms: float | None = None
    first_audio_sent_at_ms: float | None = None
    answer_audio_sent_at_ms: float | None = None
    tool_calls: tuple[ToolCallRecord, ...] = ()
    degrades: tuple[DegradeRecord, ...] = ()
    effort: EffortLevel | None = None
    """The engine effort the turn ran at (after admission and degrades)."""
    max_steps_per_block: int | None = None
    """Set when a degrade capped the engine's steps; None = the schedule's own."""
    queue_depth: int | None = None
    """Engine requests queued ahead of this turn at admission."""
    wall_time_unix_s: float | None = None
    """When the turn began, for reports; not used for any duration."""
    engine: EngineRecord | None = None
    """Engine figures of the turn; None when no engine request finished."""
    concurrent_calls: int | None = None
    """Calls in progress in the process when the turn began, this one included."""
    preempted: bool | None = None
    """True when the turn's first answer was a draft decoded while the caller paused,
    before the end of the turn (the engine stage then lasts only what the draft still
    needed)."""
    heard_text: str | None = None
    """What the caller was heard to say (the final transcript); only with `[pipeline]
    record_text`, which is off by default: it is personal data."""
    said_text: str | None = None
    """What the agent said in the turn; only with `[pipeline] record_text`."""
    schema_version: int = field(default=SCHEMA_VERSION)

    def at_ms(self, mark: Mark | None) -> float | None:
        """The mark's time; None (the origin) is 0."""
        return 0.0 if mark is None else getattr(self, f"{mark.value}_at_ms")

    def duration_ms(self, stage: Stage) -> float | None:
        """The stage's duration, None when it did not (yet) happen. `TOOL`: total of the
        finished tool calls."""
        if stage is Stage.TOOL:
            done = [c.duration_ms for c in self.tool_calls if c.duration_ms is not None]
            return sum(done) if done else None
        start_mark, end_mark = STAGE_WINDOWS[stage]
        start, end = self.at_ms(start_mark), self.at_ms(end_mark)
        return None if start is None or end is None else end - start

    def durations_ms(self) -> dict[str, float | None]:
        """Every stage's duration, and `engine_first_block` (engine start to first block)."""
        durations = {stage.value: self.duration_ms(stage) for stage in Stage}
        start, first = self.engine_start_at_ms, self.engine_first_block_at_ms
        durations["engine_first_block"] = None if start is None or first is None else first - start
        return durations

    def over_budget(self) -> list[Stage]:
        """Stages whose duration exceeded their own budget."""
        return [
            stage
            for stage in Stage
            if (budget := self.budgets.for_stage(stage)) is not None
            and (took := self.duration_ms(stage)) is not None
            and took > budget
        ]

    def to_json_line(self) -> str:
        """One line of JSON (no newline): the fields and the derived `durations_ms`."""
        return json.dumps(self.to_json_data(), separators=(",", ":"))

    def to_json_data(self) -> dict[str, Any]:
        """The record as JSON-ready data (what `to_json_line` writes)."""
        data: dict[str, Any] = _ADAPTER.dump_python(self, mode="json")
        data[DERIVED_KEY] = self.durations_ms()
        return data

    @classmethod
    def from_json_line(cls, line: str) -> TurnRecord:
        """Parse a `to_json_line` line. Raises ValueError for bad JSON, an unreadable
        schema version, or fields that do not validate."""
        try:
            data: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"turn record is not JSON: {exc}") from None
        return cls.from_json_data(data)

    @classmethod
    def from_json_data(cls, data: Any) -> TurnRecord:
        """Parse `to_json_data` output (older versions' data is read as the current one).
        Raises ValueError as `from_json_line`."""
        if not isinstance(data, dict):
            raise ValueError("turn record must be a JSON object")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"turn record schema_version {version!r}; expected {SCHEMA_VERSION}")
        if version != SCHEMA_VERSION and isinstance(data.get("tool_calls"), list):
            data = {**data, "tool_calls": [_old_call(c) for c in data["tool_calls"]]}
        data = {**data, "schema_version": SCHEMA_VERSION}
        data.pop(DERIVED_KEY, None)
        try:
            return _ADAPTER.validate_python(data)
        except ValidationError as exc:
            raise ValueError(f"invalid turn record: {exc}") from None


_ADAPTER: TypeAdapter[TurnRecord] = TypeAdapter(TurnRecord)


def _old_call(call: Any) -> Any:
    """A tool call of a line before version 6 with its outcome as version 6 says it."""
    if not isinstance(call, dict):
        return call
    outcome = call.get("outcome")
    outcome = OLD_OUTCOMES.get(outcome, outcome) if isinstance(outcome, str) else outcome
    if outcome == "ok" and call.get("refusal") is not None:
        outcome = "refused"
    return {**call, "outcome": outcome}


RECORDS_MODE = 0o600
"""Turn records can hold what callers said: readable by the server's user only."""


def read_jsonl(path: Path) -> list[TurnRecord]:
    """Every record in `path`, skipping blank lines. A line that is not JSON at all is a
    write cut short (the server was killed mid-line; the next writer starts a new line
    after it): it is skipped with a warning naming it. A JSON line that is not a valid
    record raises ValueError naming the line."""
    text = path.read_text(encoding="utf-8", errors="replace")
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            _log.warning("%s:%d: skipped a torn line (%s)", path, number, exc)
            continue
        try:
            records.append(TurnRecord.from_json_line(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    return records
