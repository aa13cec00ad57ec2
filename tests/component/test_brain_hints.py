"""Caller hints (voice_agent/dialogue/hints.py) with the real sentence encoder: the /1 bank
holds training frames only, the /2 bank adds the independent training lines (never a dev
or test line); held-out phrasings the from-scratch model misread land on the right
act; `skip_own` gives the nearest *other* frame; only the latest caller line carries a
hint; a model card decides whether prompts get hints."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from torch import Tensor

from engine.checkpoint import ModelCard, load, save
from engine.config import preset
from engine.model import DiffusionLM
from engine.schedule import Effort
from engine.tokenizer import TextTokenizer
from tests.unit.test_agent import MONDAY_10AM, ScriptedEngine, run, say
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK
from tools.bike_shop.shop import open_shop
from voice_agent.agent import Agent
from voice_agent.brain import callers
from voice_agent.brain.hint_bank import build_bank, frames, independent_lines, with_sample_values
from voice_agent.brain.independent import read_cases
from voice_agent.brain.phrasing import Pool, Split
from voice_agent.dialogue.format import AgentSay, CallerTurn, render_prompt
from voice_agent.dialogue.hints import (
    HINTS_V1,
    HINTS_VERSION,
    SCHEMES,
    CallerHints,
    bank_path,
    for_card,
    read_bank,
)

BRAIN = Path(__file__).resolve().parents[2] / "engine/checkpoints/brain-dlm"


DATA = Path(__file__).resolve().parents[2] / "data/callers"


@pytest.fixture(scope="module")
def hints() -> CallerHints:
    return CallerHints.load(HINTS_V1)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


def _heldout_frames() -> set[str]:
    out: set[str] = set()
    for value in vars(callers).values():
        pools = value.values() if isinstance(value, dict) else [value]
        out |= {t for p in pools if isinstance(p, Pool) for t in p.heldout}
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_committed_banks_are_what_the_training_data_builds(scheme: str) -> None:
    """A running agent reads data/hints/; after a change to the training lines, run
    `python -m voice_agent.brain.hint_bank` (this fails until then)."""
    assert read_bank(bank_path(scheme)) == build_bank(scheme)


def test_a_bad_bank_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"python -m voice_agent\.brain\.hint_bank"):
        read_bank(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "yes please", "act": "yes"}\n{"text": "torn', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a bank row"):
        read_bank(bad)
    bad.write_text('{"text": "", "act": "yes"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: text and act must be non-empty"):
        read_bank(bad)
    bad.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        read_bank(bad)


def test_the_bank_holds_training_frames_only() -> None:
    bank = frames()
    heldout = _heldout_frames()
    assert len(bank) > 300 and heldout
    texts = {text for text, _ in bank}
    assert not {with_sample_values(frame) for frame in heldout} & texts
    assert "yes please" in texts and "sure thing" not in texts
    assert {"yes", "done", "search", "hours", "transfer complaint"} <= {lab for _, lab in bank}


@pytest.mark.parametrize(
    ("line", "act"),
    [
        ("Uh, sure thing.", "yes"),
        ("Nothing else, thanks.", "done"),
        ("hi any chance you stock rim brake pads cheers", "search"),
        ("Good afternoon, are a headlight something you sell?", "search"),
        ("what are the opening times this friday please", "hours"),
        ("okay i have a complaint about my service", "transfer complaint"),
    ],
)
def test_held_out_phrasings_get_the_act_they_mean(hints: CallerHints, line: str, act: str) -> None:
    assert hints.hint(line) == act


def test_skip_own_gives_the_nearest_other_frame(hints: CallerHints) -> None:
    bank = frames()
    text, label = next((t, lab) for t, lab in bank if t == "yes please")
    assert hints.hint(text) == label
    scores = (hints.embed([text]) @ hints.embed([t for t, _ in bank]).T)[0]
    second = int(scores.topk(2).indices[1])
    assert hints.hint(text, skip_own=True) == bank[second][1]
    assert hints.hints([text, "do you sell bike lights"], skip_own=True)[0] == bank[second][1]


def test_only_the_latest_caller_line_carries_a_hint(hints: CallerHints) -> None:
    turns = [
        CallerTurn("do you sell mudguards", hint="stale"),
        AgentSay("Shall I put it aside for you?"),
        CallerTurn("sure thing"),
    ]
    marked = hints.annotate(turns)
    assert marked[0] == CallerTurn("do you sell mudguards") and marked[1] == turns[1]
    assert marked[2] == CallerTurn("sure thing", hint="yes")
    prompt = render_prompt(marked, Effort.LOW)
    assert "<caller> do you sell mudguards<agent>" in prompt
    assert prompt.endswith("<caller> sure thing ~ yes<agent>")
    assert hints.annotate([AgentSay("hi")]) == (AgentSay("hi"),)


def test_the_model_card_says_whether_prompts_get_hints(tmp_path: Path, hints: CallerHints) -> None:
    tok = TextTokenizer.train(["<caller> sure thing ~ yes<agent>"] * 4, vocab_size=300)
    model = DiffusionLM(preset("tiny", tok.vocab_size, block_size=16, max_seq_len=64))
    save(tmp_path, model, tok, ModelCard(model.config, "diffusion", prompt_hints=HINTS_VERSION))
    assert load(tmp_path).card.prompt_hints == HINTS_VERSION
    assert for_card(HINTS_V1) is hints
    assert for_card(HINTS_VERSION) is CallerHints.load(HINTS_VERSION) is not hints
    assert for_card("") is None
    with pytest.raises(ValueError, match="caller hints 'other/2'"):
        for_card("other/2")


def test_the_agent_shows_the_hint_to_the_model_and_keeps_its_history_plain(
    hints: CallerHints, shop: ShopContext
) -> None:
    tok = TextTokenizer.load(BRAIN / "tokenizer.json")
    engine = ScriptedEngine(tok, say(tok, "Which one?"), say(tok, "Sure."), say(tok, "Bye."))
    agent = Agent(engine, tok, PACK, shop, hints=hints)
    agent.greet()
    run(agent.respond("any chance you stock rim brake pads"))
    run(agent.respond("uh sure thing"))
    assert engine.prompt(0).endswith("<caller> any chance you stock rim brake pads ~ search<agent>")
    assert "<caller> any chance you stock rim brake pads<agent>" in engine.prompt(1)
    assert engine.prompt(1).endswith("<caller> uh sure thing ~ yes<agent>")
    assert all(t.hint == "" for t in agent.turns if isinstance(t, CallerTurn))
    # a draft decoded with hints still fits the turn it was drafted for
    draft = run(agent.draft("nothing else, thanks"))
    assert engine.prompt(2).endswith("<caller> nothing else, thanks ~ done<agent>")
    reply = run(agent.respond("nothing else thanks", draft=draft))
    assert reply.preempted and len(engine.requests) == 3


def test_the_agent_runs_the_encoder_off_the_event_loop(
    hints: CallerHints, shop: ShopContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    embed = hints.embed

    def recording_embed(texts: Sequence[str]) -> Tensor:
        threads.append(threading.get_ident())
        return embed(texts)

    monkeypatch.setattr(hints, "embed", recording_embed)
    tok = TextTokenizer.load(BRAIN / "tokenizer.json")
    engine = ScriptedEngine(tok, say(tok, "Sure."), say(tok, "Bye."))
    agent = Agent(engine, tok, PACK, shop, hints=hints)
    agent.greet()
    run(agent.draft("do you lot fix wobbly wheels on a sunday"))
    run(agent.respond("is there any way i could speak to the owner"))
    assert engine.prompt(1).endswith("<caller> is there any way i could speak to the owner ~ "
                                     f"{hints.hint('is there any way i could speak to the owner')}<agent>")  # fmt: skip
    assert len(threads) == 2 and threading.get_ident() not in threads


def test_the_hint_cache_is_bounded_and_keeps_recent_lines(
    hints: CallerHints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("voice_agent.dialogue.hints.CACHE_LINES", 3)
    lines = [
        "sure thing",
        "any chance you stock rim brake pads",
        "what are the opening times",
        "ok bye",
    ]
    assert [hints.hint(t) for t in lines][:3] == ["yes", "search", "hours"]
    calls: list[list[str]] = []
    embed = hints.embed
    monkeypatch.setattr(hints, "embed", lambda texts: calls.append(list(texts)) or embed(texts))
    hints.hints(lines[1:])  # the three most recent: all cached
    hints.hint(lines[0])  # pushed out by the bound: encoded again
    assert calls == [[lines[0]]]


def test_training_hints_are_the_nearest_other_frame_or_for_a_share_the_own() -> None:
    from scripts.train_brain import steps_of, with_hints

    hints = CallerHints.load(HINTS_VERSION)  # training writes the current scheme

    steps = steps_of(9, 6, Split.TRAIN)
    latest = [next(t for t in reversed(s.history) if isinstance(t, CallerTurn)) for s in steps]
    for share, skip in ((0.0, True), (1.0, False)):
        marked = with_hints(steps, share, seed=3)
        got = [next(t for t in reversed(s.history) if isinstance(t, CallerTurn)) for s in marked]
        assert [t.text for t in got] == [t.text for t in latest]
        assert [t.hint for t in got] == hints.hints([t.text for t in latest], skip_own=skip)
        older = [t for s, g in zip(marked, got, strict=True) for t in s.history if t is not g]
        assert all(t.hint == "" for t in older if isinstance(t, CallerTurn))
    mixed = with_hints(steps, 0.5, seed=3)
    assert sum(a.history != b.history for a, b in zip(mixed, with_hints(steps), strict=True)) > 0


def test_the_second_bank_adds_independent_training_lines_and_no_dev_or_test_line() -> None:
    lines = independent_lines()
    assert len(lines) > 1000
    texts = {text for text, _ in lines}
    for split in ("dev", "test"):
        held = read_cases(sorted((DATA / split).glob("*.jsonl")))
        assert not texts & {c.line for c in held.lines}
        assert not texts & {t for c in held.calls for t in c.turns}
    assert {lab for _, lab in lines} <= {lab for _, lab in frames()}


@pytest.mark.parametrize(
    ("line", "act"),
    [
        ("my chain keeps clunking between the cogs could someone look at it", "book"),
        ("yeah nah that's me sorted, ta", "done"),
        ("put me through to somebody who can sort out my refund", "transfer refund"),
    ],
)
def test_natural_phrasings_find_natural_neighbours(line: str, act: str) -> None:
    assert CallerHints.load(HINTS_VERSION).hint(line) == act
