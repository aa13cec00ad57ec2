"""Stray words: a training-only augmentation against unseen phrasings.

The held-out split asks for things in words the model never saw ("sure thing", "any
chance you stock ..."), and a small model trained from scratch takes an unfamiliar word
for a different request. `StrayWords` puts one or two words the training calls never use
(drawn from the English word list in `engine/lexicon/`) at the start, the end or after a
comma of the latest caller line, while the gold answer stays the same: the model learns
to act on the words it knows and let the others pass.

The stray words are chosen by a rule that looks only at training data (dictionary words
absent from every training caller line), so no held-out template or value shapes them.
Words inside a line are never split, so a name, an order number or a product phrase the
answer copies stays whole.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.names import common_words
from voice_agent.brain.dialogues import Example
from voice_agent.brain.format import CallerTurn

MIN_LETTERS, MAX_LETTERS = 3, 8
"""Stray words are plain lower-case words of this length (rare long words are unlike
what a caller says)."""
TWO_WORDS_SHARE = 0.3
_WORD = re.compile(r"[a-z']+")


@dataclass(frozen=True, slots=True)
class StrayWords:
    words: tuple[str, ...]
    """The pool to draw from (sorted, so a seed gives the same draws)."""

    @classmethod
    def unseen_in(cls, lines: Iterable[str]) -> StrayWords:
        """Dictionary words that occur in none of `lines` (the training caller lines)."""
        seen = {w for line in lines for w in _WORD.findall(line.lower())}
        pool = sorted(
            w
            for w in common_words()
            if MIN_LETTERS <= len(w) <= MAX_LETTERS and w.isalpha() and w.isascii()
            and w.islower() and w not in seen
        )  # fmt: skip
        if not pool:
            raise ValueError("no dictionary word is left once the training lines' are removed")
        return cls(tuple(pool))

    def apply(self, example: Example, rng: random.Random) -> Example:
        """`example` with stray words in its latest caller line (unchanged without one)."""
        at = next(
            (i for i in range(len(example.history) - 1, -1, -1)
             if isinstance(example.history[i], CallerTurn)),
            None,
        )  # fmt: skip
        if at is None:
            return example
        line = example.history[at]
        assert isinstance(line, CallerTurn)
        count = 2 if rng.random() < TWO_WORDS_SHARE else 1
        text = stray_line(line.text, [rng.choice(self.words) for _ in range(count)], rng)
        history = (*example.history[:at], CallerTurn(text), *example.history[at + 1 :])
        return replace(example, history=history)


def stray_line(text: str, strays: list[str], rng: random.Random) -> str:
    """`text` with `strays` put together at one word boundary: the start, the end, or
    after a comma. A sentence-cased line keeps its capital and final mark."""
    words = text.split()
    if not words:
        return " ".join(strays)
    mark = words[-1][-1] if words[-1][-1] in ".?!" else ""
    if mark:
        words[-1] = words[-1][:-1]
    cased = words[0][:1].isupper()
    gaps = [0, len(words)] + [i + 1 for i, w in enumerate(words[:-1]) if w.endswith(",")]
    gap = rng.choice(gaps)
    if gap == 0 and cased:
        if not _keeps_capital(words[0]):
            words[0] = words[0][:1].lower() + words[0][1:]
        strays = [strays[0].capitalize(), *strays[1:]]
    words[gap:gap] = strays
    return " ".join(words) + mark


def _keeps_capital(word: str) -> bool:
    """A first word keeps its capital when it stops being first if it is "I" or "I'd", a
    weekday, or no dictionary word (a name); other words were capitalized for being
    first."""
    core = word.strip(",.?!")
    lower = core.lower()
    return core == "I" or core.startswith("I'") or lower in _PROPER or lower not in common_words()


_PROPER = frozenset({"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"})
