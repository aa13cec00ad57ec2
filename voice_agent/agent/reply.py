"""What one agent turn produced: the line to speak, what the session must do, and why.

`AgentReply` is the agent's answer to one caller turn. `kind` tells the session what to
do after speaking `text` (hand the call over, hang up, or just wait for the caller);
`tool_calls` and `engine` say what the turn cost; `degrades` say where the agent gave up
on the model's own answer and why (a fixed phrase instead of a guess).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from voice_agent.turn_record import EngineRecord as EngineRecord
from voice_agent.turn_record import ToolOutcome as ToolOutcome


class ReplyKind(Enum):
    SAY = "say"
    """The model's own speech."""
    ASK_AGAIN = "ask_again"
    """The fixed "say again" phrase: the answer was unparseable or the model unsure."""
    TRANSFER = "transfer"
    """Speak `text`, then transfer the call to a person."""
    HANG_UP = "hang_up"
    """Speak `text`, then end the call."""
    FALLBACK = "fallback"
    """A fixed or tool-written line instead of the model's speech: a tool failed or timed
    out, the tool-step cap was reached, or the model repeated a call."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    turn: int
    """The agent's turn counter (one per `respond`)."""
    generation: int
    """Which engine request of the turn asked for the call (0-based)."""
    tool: str
    arguments: dict[str, object]
    outcome: ToolOutcome
    duration_ms: float
    """From submitting the call to its outcome (0 when it did not run)."""
    error: str = ""
    """The refusal kind, or the exception's type and message."""


class DegradeKind(Enum):
    UNPARSEABLE = "unparseable"
    LOW_CONFIDENCE = "low_confidence"
    DECODED_AGAIN = "decoded_again"
    """The first answer was unsure or unparseable and was decoded again, one token per step."""
    TOOL_TIMEOUT = "tool_timeout"
    TOOL_FAILED = "tool_failed"
    TOOL_STEP_CAP = "tool_step_cap"
    DUPLICATE_CALL = "duplicate_call"
    CALLER_TEXT_CUT = "caller_text_cut"
    """The caller's turn alone overflowed the prompt; only its end was kept."""
    RELAY_FLOOR = "relay_floor"
    """The answer after a tool's result got `AgentConfig.relay_floor_s` past the engine's
    deadline, at instant effort."""
    NOT_ASKED = "not_asked"
    """The model called an irreversible tool the caller's words did not ask for (the
    agent's consent rule); it was not run and the model answered again without it."""
    NOT_READ_BACK = "not_read_back"
    """The model called a write whose read-back the caller had not just heard and
    accepted; the read-back of its call was spoken instead, and nothing ran."""
    READ_BACK_VALUES = "read_back_values"
    """The model's write after the caller's yes differed from the read-back the caller
    said yes to; it ran with the read-back's values."""
    STREAM_MISMATCH = "stream_mismatch"
    """Speech had been streamed before the answer turned out unusable; the streamed part
    stands as the reply (it may already be playing)."""


@dataclass(frozen=True, slots=True)
class AgentDegrade:
    kind: DegradeKind
    detail: str = ""


@dataclass(frozen=True, slots=True)
class AgentReply:
    text: str
    """What to speak, in full (what the `on_text` hook received, concatenated)."""
    kind: ReplyKind
    turn: int
    tool_calls: tuple[ToolCallRecord, ...] = ()
    engine: EngineRecord = field(default_factory=EngineRecord)
    """The turn's engine requests together: the figures its turn record carries."""
    degrades: tuple[AgentDegrade, ...] = ()
    reasoning: str | None = None
    """The model's `<think>` text of the final answer (never spoken)."""
    preempted: bool = False
    """The first answer was a `Draft` decoded before the end of the turn was certain."""

    @property
    def ends_call(self) -> bool:
        """The session hands the call over or hangs up after speaking `text`."""
        return self.kind in (ReplyKind.TRANSFER, ReplyKind.HANG_UP)
