"""scripts/eval_callers.py on a few training cases: the real brain, hints and tools, the
figures' keys and each call's transcript (never the dev or frozen test split here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.eval_callers import main
from voice_agent.brain.independent import read_cases

pytestmark = pytest.mark.timeout(240)

CASES = Path(__file__).resolve().parents[2] / "data" / "callers" / "train" / "author-d.jsonl"


def test_two_cases_of_each_kind_are_scored_and_the_calls_transcribed(tmp_path: Path) -> None:
    out, transcripts = tmp_path / "figures.json", tmp_path / "calls.jsonl"
    argv = ["--json", str(out), "--files", str(CASES), "--limit", "2", "--threads", "1",
            "--transcripts", str(transcripts)]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(out.read_text())
    assert figures["text"]["lines"] == 2 and figures["text"]["calls"] == 2
    assert 0.0 <= figures["text"]["exact_action"] <= 1.0
    assert figures["latency_ms"]["p50"] > 0
    rows = [json.loads(line) for line in transcripts.read_text().splitlines()]
    calls = read_cases([CASES]).calls[:2]
    assert [r["id"] for r in rows] == [c.id for c in calls]
    for row, call in zip(rows, calls, strict=True):
        assert row["turns"][0].startswith("<agent><say> Hi")  # the greeting
        heard = [t for t in row["turns"] if t.startswith("<caller>")]
        assert heard and len(heard) <= len(call.turns)  # a hand-off ends a call early
        assert all(" ~ " in t for t in heard)  # each line with the hint it was given
        assert row["failures"] == figures["text"]["call_failures"].get(call.id, [])
        said = {repr(line) for line in call.turns}
        assert all(d.split(": ", 1)[0] in said for d in row["degrades"])  # which line


def test_a_bad_confidence_bar_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--json", str(tmp_path / "f.json"), "--files", str(CASES),
              "--min-confidence", "2"])  # fmt: skip
    assert exc.value.code == 2
