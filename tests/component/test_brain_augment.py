"""Stray words (voice_agent/brain/augment.py) on real simulated calls: the pool holds no
word any line of either split uses nor one that changes a request; only the latest
caller line changes, at its start, its end or after a comma, its own words whole; the
gold answer is untouched; casing and the final mark hold."""

from __future__ import annotations

import random
import re

import pytest

from scripts.train_brain import with_strays
from voice_agent.brain.augment import MEANINGFUL, StrayWords, stray_line
from voice_agent.brain.dialogues import Example
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate
from voice_agent.dialogue.format import CallerTurn
from voice_agent.grounding.names import common_words

_WORDS = re.compile(r"[a-z']+")


@pytest.fixture(scope="module")
def steps() -> list[Example]:
    return [ex for d in generate(seed=9, count=40, split=Split.TRAIN) for ex in d.examples]


@pytest.fixture(scope="module")
def pool(steps: list[Example]) -> StrayWords:
    return StrayWords.unseen_in(steps)


def _words(steps: list[Example]) -> set[str]:
    return {w for s in steps for w in _WORDS.findall((s.prompt() + s.answer().full_text).lower())}


def test_the_pool_holds_no_word_either_split_says_nor_a_meaningful_one(
    steps: list[Example], pool: StrayWords
) -> None:
    heldout = [ex for d in generate(seed=9, count=60, split=Split.HELDOUT) for ex in d.examples]
    words = set(pool.words)
    assert len(words) > 10_000 and words <= common_words()
    assert not _words(steps) & words
    assert not _words(heldout) & words  # held-out phrasings never appear as strays
    assert not MEANINGFUL & words
    assert {"nothing", "absolutely", "stock", "twenty", "grace"}.isdisjoint(words)


def test_only_the_latest_caller_line_changes_at_a_start_end_or_comma(
    steps: list[Example], pool: StrayWords
) -> None:
    rng, words, changed = random.Random(3), set(pool.words), 0
    for step in steps:
        out = pool.apply(step, rng)
        callers = [i for i, t in enumerate(step.history) if isinstance(t, CallerTurn)]
        if not callers:
            assert out == step
            continue
        at = callers[-1]
        assert out.action == step.action and out.reasoning == step.reasoning
        assert out.history[:at] == step.history[:at]
        assert out.history[at + 1 :] == step.history[at + 1 :]
        before = step.history[at].text.rstrip(".?!").split()  # type: ignore[union-attr]
        after = out.history[at].text.rstrip(".?!").split()  # type: ignore[union-attr]
        added = len(after) - len(before)
        assert added in (1, 2)
        gaps = [g for g in range(len(after) - added + 1)
                if {w.lower() for w in after[g:g + added]} <= words
                and _recased(after[:g] + after[g + added:], g) == _recased(before, g)]  # fmt: skip
        assert gaps, (before, after)
        g = gaps[0]
        assert g in (0, len(before)) or before[g - 1].endswith(","), (before, after)
        changed += 1
    assert changed > 100


def _recased(words: list[str], gap: int) -> list[str]:
    """`words` as they read once strays go in at `gap`: the first word may lose the capital
    it had for opening the line (which words keep it: test_casing_and_final_mark_survive)."""
    return words if gap or not words else [words[0].lower(), *words[1:]]


def test_casing_and_final_mark_survive() -> None:
    def every(text: str, strays: list[str]) -> set[str]:
        return {stray_line(text, strays, random.Random(s)) for s in range(40)}

    assert every("Yes, book it.", ["wombat"]) == {
        "Wombat yes, book it.", "Yes, wombat book it.", "Yes, book it wombat."
    }  # fmt: skip
    assert every("sure thing", ["wombat", "crisp"]) == {
        "wombat crisp sure thing", "sure thing wombat crisp"
    }  # fmt: skip
    # a name, a weekday or "I" keeps its capital; "That's" had it for opening the line
    assert "Wombat Grace Scott." in every("Grace Scott.", ["wombat"])
    assert "Wombat Friday works." in every("Friday works.", ["wombat"])
    assert "Wombat I'd like that." in every("I'd like that.", ["wombat"])
    assert "Wombat that's right." in every("That's right.", ["wombat"])
    # Whisper's lines end in a mark even when they open with a digit
    assert "Wombat 10 works." in every("10 works.", ["wombat"])
    assert every("Really?!", ["wombat"]) == {"Wombat really?!", "Really wombat?!"}
    assert every("?", ["wombat"]) == {"wombat?"}
    assert stray_line("", ["wombat"], random.Random(0)) == "wombat"


def test_the_trainer_applies_strays_to_the_share_it_is_given(steps: list[Example]) -> None:
    assert with_strays(steps, 0.0, 5) is steps
    once, again = with_strays(steps, 0.5, 5), with_strays(steps, 0.5, 5)
    assert once == again  # deterministic per seed
    moved = sum(a != b for a, b in zip(once, steps, strict=True))
    eligible = sum(any(isinstance(t, CallerTurn) for t in s.history) for s in steps)
    assert 0.35 * eligible < moved < 0.65 * eligible
    every = with_strays(steps, 1.0, 5)
    assert sum(a != b for a, b in zip(every, steps, strict=True)) == eligible
