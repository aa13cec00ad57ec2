"""Report figures on a recorded pipeline run (tests/fixtures/reports, see its README)
checked against a direct computation from the raw JSON lines; the Markdown, HTML and
PNG files of a report."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from voice_agent.reports import stats
from voice_agent.reports.document import Table, build
from voice_agent.reports.html import figure_id
from voice_agent.reports.report import write_report
from voice_agent.reports.runs import Run, load_runs
from voice_agent.reports.stats import Segment
from voice_agent.turn_record import Stage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
RUN = FIXTURES / "tiny-en.jsonl"
OTHER = FIXTURES / "base.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BUDGET_KEYS = {Stage.END_OF_TURN: "end_of_turn_ms", Stage.ASR_FINAL: "asr_final_ms",
               Stage.ENGINE: "engine_ms", Stage.TTS_FIRST_AUDIO: "tts_first_audio_ms",
               Stage.TURN: "turn_ms"}  # fmt: skip


def raw_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run() -> Run:
    [run] = load_runs([RUN])
    return run


def test_the_fixture_is_a_real_run_with_concurrent_calls(run: Run) -> None:
    assert len(run.records) >= 10 and run.calls >= 3
    assert (
        len({r.concurrent_calls for r in run.records}) >= 2 and run.records[0].concurrent_calls == 1
    )
    assert all(r.engine is not None and r.engine.forwards > 0 for r in run.records)


def test_stage_percentiles_and_violations_match_a_direct_computation(run: Run) -> None:
    lines = raw_lines(RUN)
    table = {s.stage: s for s in stats.stage_stats(run.records)}
    for stage in Stage:
        values = np.array(
            [d for line in lines if (d := line["durations_ms"][stage.value]) is not None]
        )  # type: ignore[index]
        s = table[stage].summary
        if values.size == 0:
            assert s is None
            continue
        assert s is not None and s.n == values.size
        assert (s.p50, s.p95, s.p99) == pytest.approx(tuple(np.percentile(values, [50, 95, 99])))
        assert s.max == pytest.approx(values.max()) and s.mean == pytest.approx(values.mean())
        if stage in BUDGET_KEYS:
            budget = lines[0]["budgets"][BUDGET_KEYS[stage]]  # type: ignore[index]
            assert table[stage].budget_ms == budget
            assert table[stage].over_budget == int((values > budget).sum())
    by_stage = stats.violations(run.records)
    assert by_stage[Stage.TURN] == table[Stage.TURN].over_budget


def test_degrades_engine_and_tools_match_a_direct_computation(run: Run) -> None:
    lines = raw_lines(RUN)
    degrades = [(d["stage"], d["cause"], d["action"]) for line in lines
                for d in line["degrades"]]  # type: ignore[attr-defined]  # fmt: skip
    counted = {
        (s.value, c.value, a.value): k for (s, c, a), k in stats.degrades(run.records).items()
    }
    assert counted == {key: degrades.count(key) for key in set(degrades)}
    engine = stats.engine_summary(run.records)
    forwards = sum(line["engine"]["forwards"] for line in lines)  # type: ignore[index]
    decided = sum(line["engine"]["decided_tokens"] for line in lines)  # type: ignore[index]
    assert engine.decided_per_forward == pytest.approx(decided / forwards)
    assert engine.forwards is not None
    assert engine.forwards.p50 == pytest.approx(
        np.percentile([line["engine"]["forwards"] for line in lines], 50)  # type: ignore[index]
    )
    calls = [c for line in lines for c in line["tool_calls"]]  # type: ignore[attr-defined]
    tools = stats.tool_stats(run.records)
    assert sum(t.durations.n for t in tools if t.durations) == sum(
        c["ended_at_ms"] is not None for c in calls
    )


def test_each_turn_breaks_down_into_segments_adding_up_to_voice_to_voice(run: Run) -> None:
    for record in run.records:
        path = stats.critical_path(record)
        assert all(took >= 0 for _, took in path)
        v2v = record.duration_ms(Stage.TURN)
        if v2v is not None:
            assert sum(took for _, took in path) == pytest.approx(v2v)
    with_tools = [r for r in run.records if r.tool_calls and r.tts_start_at_ms is not None]
    for record in with_tools:
        assert Segment.TOOLS in dict(stats.critical_path(record))


def test_latency_by_concurrency_groups_turns_by_calls_in_progress(run: Run) -> None:
    lines = raw_lines(RUN)
    levels = stats.by_concurrency(run.records)
    for n, summary in levels.items():
        values = [line["durations_ms"]["turn"] for line in lines  # type: ignore[index]
                  if line["concurrent_calls"] == n and line["durations_ms"]["turn"] is not None]  # type: ignore[index]  # fmt: skip
        assert summary.n == len(values)
        assert summary.p50 == pytest.approx(np.median(values))


def test_the_document_shows_the_computed_figures_and_compares_runs(run: Run) -> None:
    runs = load_runs([RUN, OTHER], ["tiny.en", "base"])
    blocks = build(runs, [])
    tables = [b for b in blocks if isinstance(b, Table)]
    v2v = next(t for t in tables if t.headers[0] == "run" and "within budget" in t.headers)
    turn = stats.Summary.of(stats.durations(run.records, Stage.TURN))
    assert turn is not None
    assert v2v.rows[0][:4] == ("tiny.en", str(turn.n), f"{turn.p50:.0f}", f"{turn.p95:.0f}")
    comparison = next(t for t in tables if "base p95 vs tiny.en" in t.headers)
    other = stats.Summary.of(stats.durations(runs[1].records, Stage.TURN))
    assert other is not None
    row = next(r for r in comparison.rows if r[0] == "turn")
    assert row[-1] == f"{other.p95 / turn.p95:.2f}×"


def test_a_report_is_written_as_markdown_html_and_pngs(tmp_path: Path) -> None:
    files = write_report(load_runs([RUN, OTHER], ["tiny.en", "base"]), tmp_path / "report")
    assert [p.name for p in files.figures] == ["waterfall.png", "distributions.png",
                                               "concurrency.png"]  # fmt: skip
    for png in files.figures:
        assert png.read_bytes().startswith(PNG_MAGIC)
    md = files.markdown.read_text()
    assert "## Comparison" in md and "![" in md and "(waterfall.png)" in md
    page = files.html.read_text()
    assert "http://" not in page and "https://" not in page  # self-contained
    for png in files.figures:
        found = re.search(rf'id="{figure_id(png.name)}"[^>]*src="data:image/png;base64,([^"]+)"',
                          page)  # fmt: skip
        assert found is not None, png.name
        assert base64.b64decode(found.group(1)) == png.read_bytes()


def test_labels_with_math_markup_are_drawn_as_text(tmp_path: Path) -> None:
    """A run or call named like matplotlib math ("$x^{2$", unbalanced) once crashed the
    report; labels are plain text."""
    files = write_report(load_runs([RUN], ["$x^{2$ run"]), tmp_path / "report")
    assert all(png.read_bytes().startswith(PNG_MAGIC) for png in files.figures)
    assert "$x^{2$ run" in files.markdown.read_text()


def test_the_worst_turns_show_what_was_said_when_the_records_carry_it(run: Run) -> None:
    worst = stats.worst_turns(run.records, 1)[0]
    plain = next(t for t in build([run], []) if isinstance(t, Table) and "degrades" in t.headers)
    assert "agent said" not in plain.headers  # records without text: no empty columns
    said = "A " + "very " * 40 + "long | answer."
    texts = [replace(r, heard_text="when do you open", said_text=said) if r is worst else r
             for r in run.records]  # fmt: skip
    table = next(t for t in build([replace(run, records=tuple(texts))], [])
                 if isinstance(t, Table) and "degrades" in t.headers)  # fmt: skip
    assert table.headers[-2:] == ("caller heard as", "agent said")
    first = table.rows[0]
    assert first[0] == f"{worst.call_id[-8:]} #{worst.turn}"
    assert first[-2] == "“when do you open”"
    assert first[-1].endswith("…”") and len(first[-1]) <= 125
    assert all(row[-1] == "–" for row in table.rows[1:])
