"""The report as a list of blocks (headings, text, tables, figures), built from runs.

One document, two renderings (`markdown`, `html`): the numbers are computed once, here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from voice_agent.reports import stats
from voice_agent.reports.runs import Run
from voice_agent.turn_record import Stage

WORST_TURNS = 5


@dataclass(frozen=True, slots=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    """File name of the PNG (`plots.FIGURES`)."""
    caption: str


Block = Heading | Paragraph | Table | Figure


def ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def build(runs: Sequence[Run], figures: Sequence[Figure]) -> list[Block]:
    blocks: list[Block] = [Heading("Latency budget report", 1), _runs_table(runs)]
    blocks += [Heading("Voice to voice"), _voice_to_voice(runs)]
    if len(runs) > 1:
        blocks += [Heading("Comparison"), _comparison(runs)]
    if figures:
        blocks += [Heading("Figures"), *figures]
    for run in runs:
        title = f" — {run.label}" if len(runs) > 1 else ""
        blocks += [Heading(f"Stages against budgets{title}"), _stage_table(run)]
        early = sum((d := r.duration_ms(Stage.SEND)) is not None and d < 0 for r in run.records)
        if early:
            blocks.append(Paragraph(f"send is negative in {early} turns: a filler went out "
                                    "before the reply's first synthesized audio."))  # fmt: skip
        blocks += [Heading(f"Budget violations and degrades{title}", 3)]
        blocks += _violations(run)
        blocks += [Heading(f"Engine and tools{title}", 3), _engine(run)]
        if tools := _tools(run):
            blocks.append(tools)
        blocks += [Heading(f"Worst turns{title}", 3), _worst(run)]
    return blocks


def _runs_table(runs: Sequence[Run]) -> Table:
    rows = []
    for run in runs:
        walls = [r.wall_time_unix_s for r in run.records if r.wall_time_unix_s is not None]
        when = (
            dt.datetime.fromtimestamp(min(walls), dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            if walls
            else "–"
        )
        budgets = run.records[0].budgets
        rows.append((run.label, str(run.path or "–"), str(len(run.records)), str(run.calls),
                     when, f"{budgets.turn_ms} ms"))  # fmt: skip
    return Table(("run", "records", "turns", "calls", "started", "turn budget"), tuple(rows))


def _voice_to_voice(runs: Sequence[Run]) -> Table:
    rows = []
    for run in runs:
        [s] = stats.stage_stats(run.records, [Stage.TURN])
        summary = s.summary
        if summary is None:
            rows.append((run.label, "0", "–", "–", "–", "–", "–"))
            continue
        within = pct(1 - s.share_over)
        rows.append((run.label, str(summary.n), ms(summary.p50), ms(summary.p95),
                     ms(summary.p99), ms(summary.max), within))  # fmt: skip
    return Table(("run", "turns", "p50 ms", "p95 ms", "p99 ms", "max ms", "within budget"),
                 tuple(rows))  # fmt: skip


def _comparison(runs: Sequence[Run]) -> Table:
    """p50/p95 per budgeted stage per run; later runs also show their p95 against the
    first run's."""
    base = {s.stage: s.summary for s in stats.stage_stats(runs[0].records, stats.BUDGETED)}
    headers = ["stage", *(f"{r.label} p50/p95" for r in runs)]
    headers += [f"{r.label} p95 vs {runs[0].label}" for r in runs[1:]]
    rows = []
    for stage in stats.BUDGETED:
        cells = [stage.value]
        summaries = [stats.Summary.of(stats.durations(r.records, stage)) for r in runs]
        cells += [f"{ms(s.p50)} / {ms(s.p95)}" if s else "–" for s in summaries]
        b = base[stage]
        for s in summaries[1:]:
            cells.append(f"{s.p95 / b.p95:.2f}×" if s and b and b.p95 else "–")
        rows.append(tuple(cells))
    return Table(tuple(headers), tuple(rows))


def _stage_table(run: Run) -> Table:
    rows = []
    for s in stats.stage_stats(run.records):
        summary = s.summary
        over = f"{s.over_budget} ({pct(s.share_over)})" if s.budget_ms is not None else "–"
        if summary is None:
            rows.append((s.stage.value, "0", "–", "–", "–", "–", ms(s.budget_ms), over))
            continue
        rows.append((s.stage.value, str(summary.n), ms(summary.p50), ms(summary.p95),
                     ms(summary.p99), ms(summary.max), ms(s.budget_ms), over))  # fmt: skip
    return Table(("stage", "n", "p50 ms", "p95 ms", "p99 ms", "max ms", "budget ms", "over budget"),
                 tuple(rows))  # fmt: skip


def _violations(run: Run) -> list[Block]:
    out: list[Block] = []
    over = stats.violations(run.records)
    n = len(run.records)
    if over:
        rows = tuple((s.value, str(k), pct(k / n)) for s, k in over.most_common())
        out.append(Table(("stage over its budget", "turns", "of all turns"), rows))
    else:
        out.append(Paragraph("No stage exceeded its budget."))
    taken = stats.degrades(run.records)
    if taken:
        degrade_rows = tuple((cause.value, action.value, stage.value, str(k))
                             for (stage, cause, action), k in taken.most_common())  # fmt: skip
        out.append(Table(("cause", "degrade", "stage", "times"), degrade_rows))
    else:
        out.append(Paragraph("No degrades taken."))
    return out


def _engine(run: Run) -> Table:
    e = stats.engine_summary(run.records)
    forwards = e.forwards
    tpf = f"{e.decided_per_forward:.2f}" if e.decided_per_forward is not None else "–"
    epf = f"{e.emitted_per_forward:.2f}" if e.emitted_per_forward is not None else "–"
    row = (str(e.turns), str(e.requests), ms(forwards.p50) if forwards else "–",
           ms(forwards.p95) if forwards else "–", tpf, epf, str(e.deadline_forced))  # fmt: skip
    return Table(("turns", "engine requests", "forwards p50", "forwards p95",
                  "decided tokens/forward", "emitted tokens/forward", "deadline-forced turns"),
                 (row,))  # fmt: skip


def _tools(run: Run) -> Table | None:
    tools = stats.tool_stats(run.records)
    if not tools:
        return None
    rows = []
    for t in tools:
        ordered = sorted(t.outcomes.items(), key=lambda item: item[0].value)
        outcomes = ", ".join(f"{o.value} {k}" for o, k in ordered)
        d = t.durations
        rows.append((t.name, str(d.n if d else 0), ms(d.p50 if d else None),
                     ms(d.p95 if d else None), outcomes or "–"))  # fmt: skip
    return Table(("tool", "calls", "p50 ms", "p95 ms", "outcomes"), tuple(rows))


def _worst(run: Run) -> Table:
    """The slowest turns; with what was said in them when the records carry it
    (`[pipeline] record_text`)."""
    worst = stats.worst_turns(run.records, WORST_TURNS)
    texts = any(r.heard_text is not None or r.said_text is not None for r in worst)
    rows = []
    for r in worst:
        path = " + ".join(f"{seg.value} {took:.0f}" for seg, took in stats.critical_path(r)
                          if took >= 1)  # fmt: skip
        degraded = ", ".join(sorted({d.action.value for d in r.degrades})) or "–"
        over = ", ".join(s.value for s in r.over_budget()) or "–"
        row: tuple[str, ...] = (f"{r.call_id[-8:]} #{r.turn}", ms(r.duration_ms(Stage.TURN)),
                                path, over, degraded)  # fmt: skip
        if texts:
            row += (_quoted(r.heard_text), _quoted(r.said_text))
        rows.append(row)
    header: tuple[str, ...] = (
        "call #turn",
        "voice to voice ms",
        "breakdown (ms)",
        "over budget",
        "degrades",
    )
    if texts:
        header += ("caller heard as", "agent said")
    return Table(header, tuple(rows))


QUOTE_CHARS = 120
"""How much of a turn's text the worst-turns table shows."""


def _quoted(text: str | None) -> str:
    if text is None:
        return "–"
    flat = " ".join(text.split())
    return f"“{flat[:QUOTE_CHARS]}{'…' if len(flat) > QUOTE_CHARS else ''}”"
