"""Stray words (voice_agent/brain/augment.py) on real simulated training calls: only the
latest caller line changes, its own words stay whole and in order, the strays are
dictionary words no training line uses, the gold answer is untouched, and casing holds."""

from __future__ import annotations

import random
import re

import pytest

from engine.names import common_words
from scripts.train_brain import with_strays
from voice_agent.brain.augment import StrayWords, stray_line
from voice_agent.brain.dialogues import Example, generate
from voice_agent.brain.format import CallerTurn
from voice_agent.brain.phrasing import Split


@pytest.fixture(scope="module")
def steps() -> list[Example]:
    return [ex for d in generate(seed=9, count=40, split=Split.TRAIN) for ex in d.examples]


def _lines(steps: list[Example]) -> list[str]:
    return [t.text for s in steps for t in s.history if isinstance(t, CallerTurn)]


def _latest(step: Example) -> int:
    return max(i for i, t in enumerate(step.history) if isinstance(t, CallerTurn))


def test_the_pool_holds_only_dictionary_words_the_training_lines_never_use(
    steps: list[Example],
) -> None:
    lines = _lines(steps)
    pool = StrayWords.unseen_in(lines)
    seen = {w for line in lines for w in re.findall(r"[a-z']+", line.lower())}
    assert len(pool.words) > 10_000
    assert not seen & set(pool.words)
    assert set(pool.words) <= common_words()
    assert {"yes", "book", "tomorrow", "cancel"} & seen and not {"yes", "cancel"} & set(pool.words)


def test_only_the_latest_caller_line_changes_and_keeps_its_words_whole(
    steps: list[Example],
) -> None:
    pool = StrayWords.unseen_in(_lines(steps))
    rng = random.Random(3)
    changed = 0
    for step in steps:
        if not any(isinstance(t, CallerTurn) for t in step.history):
            assert pool.apply(step, rng) == step
            continue
        out = pool.apply(step, rng)
        at = _latest(step)
        assert out.action == step.action and out.reasoning == step.reasoning
        assert out.history[:at] == step.history[:at]
        assert out.history[at + 1 :] == step.history[at + 1 :]
        before, after = step.history[at].text.split(), out.history[at].text.split()  # type: ignore[union-attr]
        added = len(after) - len(before)
        assert added in (1, 2)
        # the strays sit together at one gap: removing them gives the line back
        gap = next(
            (i for i in range(len(after)) if after[i:i + added]
             and all(w.strip(".?!").lower() in pool.words for w in after[i:i + added])
             and _same(after[:i] + after[i + added:], before)),
            None,
        )  # fmt: skip
        assert gap is not None, (before, after)
        changed += 1
    assert changed > 100


def _same(got: list[str], want: list[str]) -> bool:
    """Equal up to the final mark moving past the strays and the first word's capital."""
    norm = lambda ws: " ".join(ws).rstrip(".?!").lower()  # noqa: E731
    return norm(got) == norm(want)


def test_casing_and_final_mark_survive() -> None:
    rng = random.Random(0)
    for _ in range(30):
        out = stray_line("Sure, I'd like a tune-up on Friday.", ["wombat"], rng)
        assert out[0].isupper() and out.endswith(".") and "Friday" in out and "I'd" in out
        plain = stray_line("sure thing", ["wombat", "crisp"], rng)
        assert plain in ("wombat crisp sure thing", "sure thing wombat crisp")
    starts = {stray_line("Yes, book it.", ["wombat"], random.Random(s)) for s in range(40)}
    assert starts == {"Wombat yes, book it.", "Yes, wombat book it.", "Yes, book it wombat."}
    # a name that opens the line keeps its capital (it is no dictionary word)
    named = {stray_line("Malik here, yes.", ["wombat"], random.Random(s)) for s in range(40)}
    assert "Wombat Malik here, yes." in named
    assert stray_line("", ["wombat"], rng) == "wombat"


def test_the_trainer_applies_strays_to_the_share_it_is_given(steps: list[Example]) -> None:
    assert with_strays(steps, 0.0, 5) is steps
    once, again = with_strays(steps, 0.5, 5), with_strays(steps, 0.5, 5)
    assert once == again  # deterministic per seed
    moved = sum(a != b for a, b in zip(once, steps, strict=True))
    eligible = sum(any(isinstance(t, CallerTurn) for t in s.history) for s in steps)
    assert 0.35 * eligible < moved < 0.65 * eligible
    every = with_strays(steps, 1.0, 5)
    assert sum(a != b for a, b in zip(every, steps, strict=True)) == eligible
