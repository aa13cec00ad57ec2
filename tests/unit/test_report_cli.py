"""`voice-agent report` from the command line, and the live view's rolling summary
(pure: payloads in, text out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voice_agent.cli import EXIT_FAILED, EXIT_USAGE, main
from voice_agent.reports.live import RollingSummary
from voice_agent.telemetry import topics
from voice_agent.turn_record import Stage, read_jsonl

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "tiny-en.jsonl"


def test_report_writes_its_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(RUN), "--out", str(tmp_path / "r")]) == 0
    assert {p.name for p in (tmp_path / "r").iterdir()} == {
        "report.md", "report.html", "waterfall.png", "distributions.png", "concurrency.png",
    }  # fmt: skip
    assert "1 run(s), 15 turns" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["report"], EXIT_USAGE),
        (["report", str(RUN), "--mqtt", "mqtt://127.0.0.1"], EXIT_USAGE),
        (["report", "--mqtt", "http://127.0.0.1"], EXIT_USAGE),
        (["report", "--mqtt", "mqtt://127.0.0.1", "--window", "0"], EXIT_USAGE),
        (["report", str(RUN), str(RUN)], EXIT_USAGE),  # two runs with one label
        (["report", str(RUN), "--label", "a", "--label", "b"], EXIT_USAGE),
        (["report", "no-such-run.jsonl"], EXIT_FAILED),
    ],
)
def test_report_refuses_bad_arguments_with_a_message(
    argv: list[str], code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == code
    assert "voice-agent report:" in capsys.readouterr().err


def test_rolling_summary_keeps_the_last_turns_and_counts_all() -> None:
    records = read_jsonl(RUN)
    summary = RollingSummary(window=4)
    for record in records:
        assert summary.add_payload(topics.turn_completed("n1", record, 1.0).payload) == record
    assert summary.add_payload(b"not json") is None
    assert summary.add_payload(topics.call_started("n1", "CA1", 1.0, 1).payload) is None
    assert summary.recent == tuple(records[-4:]) and summary.bad_messages == 2
    assert summary.turns_seen == len(records)
    assert summary.violations == sum(Stage.TURN in r.over_budget() for r in records)
    text = summary.render()
    assert f"{len(records)} turns from {len({r.call_id for r in records})} calls" in text
    v2v = sorted(r.duration_ms(Stage.TURN) or 0 for r in records[-4:])
    assert f"{max(v2v):.0f}" in next(line for line in text.splitlines()
                                     if line.startswith("voice to voice"))  # fmt: skip
    with pytest.raises(ValueError):
        RollingSummary(window=0)


def test_rolling_summary_shows_each_node_of_a_fleet() -> None:
    records = read_jsonl(RUN)
    summary = RollingSummary(window=50)
    for k, record in enumerate(records):
        node = "worker-1" if k % 3 else "worker-2"
        summary.add_payload(topics.turn_completed(node, record, 1.0).payload)
    assert summary.nodes == ["worker-1", "worker-2"]
    text = summary.render()
    assert "nodes (2):" in text
    lines = {
        line.split()[0]: line.split() for line in text.splitlines() if line.startswith("worker-")
    }
    mine = [r for k, r in enumerate(records) if not k % 3]
    assert lines["worker-2"][2] == str(len(mine))  # turns
    assert lines["worker-2"][1] == str(len({r.call_id for r in mine}))  # calls
    assert int(lines["worker-1"][2]) == len(records) - len(mine)
