"""Training on what the recognizer heard (voice_agent/brain/heard.py,
scripts/make_heard_lines.py, scripts/train_brain.py --heard) on real simulated calls: the
heard line replaces only the latest caller line; a call keeps its gold action while the
heard line still holds its values, becomes the repeat request when a value is lost, and is
left out when a value is only misspelt; a real voice through the phone path and Whisper
writes the file, resumably; bad files and the evaluation's voices are refused clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.make_heard_lines import pick_lines
from scripts.train_brain import heard_copies
from voice_agent.brain.dialogues import Example
from voice_agent.brain.heard import REPEAT_THOUGHT, HeardLines, Kept, read_heard, verdict
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate
from voice_agent.dialogue.format import AgentCall, AgentSay, CallerTurn
from voice_agent.dialogue.phrases import phrases

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def steps() -> list[Example]:
    return [ex for d in generate(seed=9, count=60, split=Split.TRAIN) for ex in d.examples]


def _last_caller(steps: list[Example], tool: str) -> Example:
    return next(
        s
        for s in steps
        if isinstance(s.action, AgentCall)
        and s.action.tool == tool
        and isinstance(s.history[-1], CallerTurn)
        and any(str(v).lower() in s.history[-1].text.lower() for v in s.action.arguments.values())
    )


def _said(step: Example) -> str:
    last = step.history[-1]
    assert isinstance(last, CallerTurn)
    return last.text


def test_a_call_keeps_its_gold_while_heard_holds_the_values_else_asks_again(
    steps: list[Example],
) -> None:
    search = _last_caller(steps, "search_products")
    query = search.action.arguments["query"]  # type: ignore[union-attr]
    said = _said(search)
    kept_line = said.upper().replace(",", "")  # Whisper's casing and commas differ
    misspelt = said.replace(query, query[:-1] + "x" if len(query) > 4 else query + "s")
    lost_line = "hello something you sell thanks"
    lines = HeardLines({said: kept_line})
    kept = lines.apply(search)
    assert kept is not None
    assert kept.history[:-1] == search.history[:-1]
    assert kept.history[-1] == CallerTurn(kept_line)
    assert (kept.action, kept.reasoning) == (search.action, search.reasoning)

    asked = HeardLines({said: lost_line}).apply(search)
    assert asked is not None and asked.history[-1] == CallerTurn(lost_line)
    assert asked.action == AgentSay(phrases().say_again)
    assert asked.reasoning == REPEAT_THOUGHT.at(search.effort)
    if len(query) > 4:
        assert HeardLines({said: misspelt}).apply(search) is None


def test_digits_count_in_order_whatever_the_recognizer_writes_between_them() -> None:
    call = AgentCall("order_status", {"order_number": "978836"})
    assert verdict(call, "it should be 9 7 8 8 3 6", "It should be 978.836.") is Kept.ALL
    assert verdict(call, "it should be 9 7 8 8 3 6", "It should be 8,000, 30.") is Kept.LOST
    # a value the latest line does not state (said earlier in the call) is not checked
    booking = AgentCall("book_service", {"name": "Rosa Patel", "day": "sunday"})
    assert verdict(booking, "yes please", "Make sure you think.") is Kept.ALL
    assert verdict(booking, "sunday please", "someday please") is Kept.LOST
    tyres = AgentCall("search_products", {"query": "trail tyres"})
    assert verdict(tyres, "any trail tyres", "Any trail tires?") is Kept.BLURRED


def test_replies_keep_their_gold_and_uncovered_steps_are_untouched(
    steps: list[Example],
) -> None:
    reply = next(
        s for s in steps if isinstance(s.action, AgentSay) and isinstance(s.history[-1], CallerTurn)
    )
    lines = HeardLines({_said(reply): "something else entirely"})
    heard = lines.apply(reply)
    assert heard is not None and heard.action == reply.action
    assert heard.history[-1] == CallerTurn("something else entirely")
    other = next(s for s in steps if s.history and not lines.covers(s))
    assert lines.apply(other) is other
    silent = HeardLines({_said(reply): "  "})  # the recognizer heard nothing
    assert not silent.covers(reply) and silent.apply(reply) is reply
    looping = HeardLines({_said(reply): "morning " * (len(_said(reply)) // 2 + 10)})
    assert not looping.covers(reply) and looping.apply(reply) is reply


def test_heard_copies_add_to_the_originals_and_tally_what_changed(
    steps: list[Example], tmp_path: Path
) -> None:
    search = _last_caller(steps, "search_products")
    path = tmp_path / "heard.jsonl"
    rows = [{"said": _said(search), "heard": "oh nothing at all", "voice": "flite:kal"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    copies, tally = heard_copies(steps, path)
    covered = [s for s in steps if s.history and s.history[-1] == search.history[-1]]
    assert len(copies) == len(covered) >= 1
    assert tally["copies"] == len(copies)
    assert tally["repeat_requests"] == sum(isinstance(s.action, AgentCall) for s in covered)
    assert all(c.history[-1] == CallerTurn("oh nothing at all") for c in copies)


def test_bad_heard_files_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "heard.jsonl"
    path.write_text('{"said": "a", "heard": "b", "voice": "c"}\n{"said": "a"\n')
    with pytest.raises(ValueError, match=r"heard\.jsonl:2: not JSON"):
        read_heard(path)
    path.write_text('{"said": "a", "heard": 3, "voice": "c"}\n')
    with pytest.raises(ValueError, match=r"heard\.jsonl:1: want"):
        read_heard(path)
    with pytest.raises(FileNotFoundError):
        read_heard(tmp_path / "missing.jsonl")


def test_training_refuses_a_heard_file_that_is_broken_or_covers_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    other = tmp_path / "other.jsonl"
    other.write_text('{"said": "no such line", "heard": "x", "voice": "flite:kal"}\n')
    for path, message in ((bad, "bad.jsonl:1: not JSON"), (other, "holds no caller line")):
        run = subprocess.run(
            [sys.executable, "scripts/train_brain.py", "--out", str(tmp_path / "run"),
             "--dialogues", "2", "--heard", str(path)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 2 and message in run.stderr, run.stderr
        assert not (tmp_path / "run" / "train_state.pt").exists()


def test_picked_lines_are_distinct_latest_caller_lines_mostly_before_calls(
    steps: list[Example],
) -> None:
    picked = pick_lines(steps, 40, 0.7, seed=5)
    assert picked == pick_lines(steps, 40, 0.7, seed=5)
    assert len(picked) == len(set(picked)) == 40
    before_call = {
        _said(s) for s in steps if s.history and isinstance(s.history[-1], CallerTurn)
        and isinstance(s.action, AgentCall)
    }  # fmt: skip
    assert sum(line in before_call for line in picked) == 28


def test_a_real_voice_writes_heard_lines_and_a_rerun_only_adds_the_missing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "heard.jsonl"

    def make(lines: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "scripts/make_heard_lines.py", "--out", str(out), "--seed", "9",
             "--dialogues", "3", "--lines", str(lines), "--voices", "flite:kal"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    first = make(2)
    assert first.returncode == 0, first.stderr
    rows = read_heard(out)
    assert len(rows) == 2 and {r.voice for r in rows} == {"flite:kal"}
    assert all(r.heard.strip() for r in rows)  # Whisper heard something of each line
    second = make(3)
    assert second.returncode == 0, second.stderr
    again = read_heard(out)
    assert again[:2] == rows and len(again) == 3 and len({r.said for r in again}) == 3


def test_the_evaluation_voices_are_refused_for_training_lines(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "scripts/make_heard_lines.py", "--out", str(tmp_path / "h.jsonl"),
         "--seed", "9", "--dialogues", "3", "--voices", "flite:kal,piper:joe"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2 and "piper:joe" in run.stderr
    assert not (tmp_path / "h.jsonl").exists()


def test_training_refuses_the_dev_and_test_caller_splits(tmp_path: Path) -> None:
    for split in ("dev", "test"):
        [held] = sorted((ROOT / "data" / "callers" / split).glob("*.jsonl"))
        run = subprocess.run(
            [sys.executable, "scripts/train_brain.py", "--out", str(tmp_path / "run"),
             "--dialogues", "2", "--callers", str(held)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 2 and "never trained on" in run.stderr, run.stderr
        assert not (tmp_path / "run").exists()
