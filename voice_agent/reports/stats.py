"""Latency statistics over turn records (pure: records in, numbers out).

Percentiles are numpy's default (linear interpolation between closest ranks). A stage
that did not happen in a turn (its marks missing) is left out of that stage's figures,
never counted as zero.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from voice_agent.turn_record import (
    DegradeAction,
    DegradeCause,
    Mark,
    Stage,
    ToolOutcome,
    TurnRecord,
)

PERCENTILES = (50, 95, 99)
BUDGETED = (Stage.END_OF_TURN, Stage.ASR_FINAL, Stage.ENGINE, Stage.TTS_FIRST_AUDIO, Stage.TURN)
"""Stages with a budget of their own, in turn order (`TURN` is voice to voice)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """A distribution of durations in ms."""

    n: int
    p50: float
    p95: float
    p99: float
    mean: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary | None:
        """None for no values."""
        a = np.asarray(list(values), dtype=float)
        if a.size == 0:
            return None
        p50, p95, p99 = np.percentile(a, PERCENTILES)
        return cls(int(a.size), float(p50), float(p95), float(p99), float(a.mean()),
                   float(a.max()))  # fmt: skip


@dataclass(frozen=True, slots=True)
class StageStats:
    stage: Stage
    summary: Summary | None
    budget_ms: int | None
    """The budget of the run's first record (budgets are per process)."""
    over_budget: int
    """Turns whose duration of this stage exceeded their own record's budget."""

    @property
    def share_over(self) -> float:
        n = self.summary.n if self.summary else 0
        return self.over_budget / n if n else 0.0


@dataclass(frozen=True, slots=True)
class EngineSummary:
    turns: int
    """Turns with engine figures."""
    requests: int
    forwards: Summary | None
    """Forwards per turn."""
    decided_per_forward: float | None
    """Model-decided tokens over all forwards (the honest tokens-per-forward)."""
    emitted_per_forward: float | None
    """All emitted tokens (schema scaffold included) over all forwards."""
    deadline_forced: int
    """Turns where some request committed early to meet its deadline."""


@dataclass(frozen=True, slots=True)
class ToolStats:
    name: str
    durations: Summary | None
    outcomes: dict[ToolOutcome, int]


class Segment(Enum):
    """A span on the path from the end of the caller's speech to the first reply frame.
    The segments of a turn follow each other and add up to its voice-to-voice time."""

    ENDPOINT = "end of turn"  # end of speech -> end-of-turn decision
    ASR = "ASR final"  # -> final transcript
    PREP = "agent prep"  # -> first engine request submitted
    ENGINE = "engine"  # -> first sentence handed to TTS (tool time taken out)
    TOOLS = "tools"  # tool calls before the first sentence
    TTS = "TTS first audio"  # -> first synthesized audio
    SEND = "send"  # -> first frame sent


_PATH: tuple[tuple[Mark, Segment], ...] = (
    (Mark.END_OF_TURN, Segment.ENDPOINT),
    (Mark.FINAL_TRANSCRIPT, Segment.ASR),
    (Mark.ENGINE_START, Segment.PREP),
    (Mark.TTS_START, Segment.ENGINE),
    (Mark.FIRST_TTS_AUDIO, Segment.TTS),
    (Mark.FIRST_AUDIO_SENT, Segment.SEND),
)


def durations(records: Iterable[TurnRecord], stage: Stage) -> list[float]:
    """The stage's durations in ms, turns without it left out."""
    return [d for r in records if (d := r.duration_ms(stage)) is not None]


def stage_stats(records: Sequence[TurnRecord], stages: Iterable[Stage] = Stage) -> list[StageStats]:
    budget = records[0].budgets if records else None
    out = []
    for stage in stages:
        over = sum(stage in r.over_budget() for r in records)
        budget_ms = budget.for_stage(stage) if budget else None
        out.append(StageStats(stage, Summary.of(durations(records, stage)), budget_ms, over))
    return out


def violations(records: Iterable[TurnRecord]) -> collections.Counter[Stage]:
    """Turns over budget, by stage."""
    return collections.Counter(s for r in records for s in r.over_budget())


def degrades(
    records: Iterable[TurnRecord],
) -> collections.Counter[tuple[Stage, DegradeCause, DegradeAction]]:
    """Degrades taken, by (stage, cause, action)."""
    return collections.Counter((d.stage, d.cause, d.action) for r in records for d in r.degrades)


def worst_turns(records: Iterable[TurnRecord], k: int) -> list[TurnRecord]:
    """The `k` turns with the longest voice-to-voice time, longest first."""
    timed = [r for r in records if r.duration_ms(Stage.TURN) is not None]
    return sorted(timed, key=lambda r: -(r.duration_ms(Stage.TURN) or 0.0))[:k]


def critical_path(record: TurnRecord) -> list[tuple[Segment, float]]:
    """The turn as consecutive segments (ms) up to its last mark on the path (the first
    frame sent, when it went out). A missing mark's span joins the next segment; a mark
    that came after the first frame sent (a filler went out first) is cut there."""
    end = record.first_audio_sent_at_ms
    out: list[tuple[Segment, float]] = []
    previous = 0.0
    for mark, segment in _PATH:
        at = record.at_ms(mark)
        if at is None:
            continue
        at = max(previous, at if end is None else min(at, end))
        out.append((segment, at - previous))
        previous = at
    return _split_tools(record, out)


def _split_tools(
    record: TurnRecord, path: list[tuple[Segment, float]]
) -> list[tuple[Segment, float]]:
    """Move the tool time inside the engine segment into its own segment."""
    start, end = record.engine_start_at_ms, record.tts_start_at_ms
    if start is None or end is None or not record.tool_calls:
        return path
    inside = 0.0
    for call in record.tool_calls:
        if call.ended_at_ms is not None:
            inside += max(0.0, min(call.ended_at_ms, end) - max(call.started_at_ms, start))
    out = []
    for segment, ms in path:
        if segment is Segment.ENGINE and inside > 0:
            tools = min(inside, ms)
            out += [(Segment.ENGINE, ms - tools), (Segment.TOOLS, tools)]
        else:
            out.append((segment, ms))
    return out


def engine_summary(records: Iterable[TurnRecord]) -> EngineSummary:
    figures = [r.engine for r in records if r.engine is not None]
    forwards = sum(f.forwards for f in figures)
    return EngineSummary(
        turns=len(figures),
        requests=sum(f.requests for f in figures),
        forwards=Summary.of(f.forwards for f in figures),
        decided_per_forward=sum(f.decided_tokens for f in figures) / forwards if forwards else None,
        emitted_per_forward=sum(f.emitted_tokens for f in figures) / forwards if forwards else None,
        deadline_forced=sum(f.deadline_forced for f in figures),
    )


def tool_stats(records: Iterable[TurnRecord]) -> list[ToolStats]:
    """Per tool name (sorted): durations of finished calls and outcomes."""
    calls: dict[str, list[float]] = collections.defaultdict(list)
    outcomes: dict[str, collections.Counter[ToolOutcome]] = collections.defaultdict(
        collections.Counter
    )
    for r in records:
        for c in r.tool_calls:
            if c.duration_ms is not None:
                calls[c.name].append(c.duration_ms)
            if c.outcome is not None:
                outcomes[c.name][c.outcome] += 1
            else:
                calls.setdefault(c.name, [])
    return [
        ToolStats(name, Summary.of(calls[name]), dict(outcomes[name])) for name in sorted(calls)
    ]


def by_concurrency(records: Iterable[TurnRecord]) -> dict[int, Summary]:
    """Voice-to-voice time by the number of calls in progress when the turn began
    (turns without the count left out)."""
    groups: dict[int, list[float]] = collections.defaultdict(list)
    for r in records:
        took = r.duration_ms(Stage.TURN)
        if r.concurrent_calls is not None and took is not None:
            groups[r.concurrent_calls].append(took)
    return {n: s for n, values in sorted(groups.items()) if (s := Summary.of(values))}
