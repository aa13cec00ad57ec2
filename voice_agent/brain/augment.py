"""Stray words: a training-only augmentation against unseen phrasings.

The held-out split asks for things in words the model never saw ("sure thing", "any
chance you stock ..."), and a small model trained from scratch takes an unfamiliar word
for a different request. `StrayWords` puts one or two words the training calls never use
(drawn from the English word list in `engine/lexicon/`) at the start, the end or after a
comma of the latest caller line, while the gold answer stays the same: the model learns
to act on the words it knows and let the others pass.

The pool is the English word list less every word the simulator could say or write
(`simulator_words`: every word in the files of the simulator, the tools and the prompts,
both splits' tables among them, the numbers spelled out, and every word of the training
examples) and less words that change what a caller asks for (`MEANINGFUL`). So no stray
word is one a held-out line uses, and none is one whose meaning the model should not
learn to ignore. Words inside a line are never split, so a name, an order number or a
product phrase the answer copies stays whole.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from voice_agent.brain import lexicon
from voice_agent.brain.dialogues import Example
from voice_agent.brain.phrasing import CAPITALIZED
from voice_agent.dialogue.format import CallerTurn, last_caller
from voice_agent.grounding.names import common_words
from voice_agent.speech import say

MIN_LETTERS, MAX_LETTERS = 3, 8
"""Stray words are plain lower-case words of this length (rare long words are unlike
what a caller says)."""
TWO_WORDS_SHARE = 0.3
ROOT = Path(__file__).resolve().parents[2]
SIMULATOR_SOURCES = ("voice_agent/brain", "tools/bike_shop", "prompts")
"""Where every word the simulator, the tools and the prompts can write is spelled out:
`simulator_words` reads the files under them (code too: a few hundred identifiers more
out of the pool cost nothing)."""
_MEANINGFUL = (
    "no not nope nah never nothing none stop wait undo wrong mistake change changed instead "
    "cancel scrap forget drop remove return refund complaint problem broken lost stolen "
    "earlier later sooner tonight midnight noon morning afternoon evening night week weekend "
    "month year day days hour hours minute minutes half quarter past before after until "
    "first second third last next this that other another same more less fewer extra both "
    "buy sell order book hold reserve keep collect pick deliver delivery open close closed "
    "price cost cheap help human person manager someone speak talk call phone bye goodbye "
    "yes yeah yep sure okay fine right correct agree thanks thank please sorry pardon "
    "repeat again what when where which who why how"
)
MEANINGFUL = frozenset(_MEANINGFUL.split())
"""Words that would change what a caller means; never stray words."""
_WORD = re.compile(r"[a-z']+")
_MARKS = ".?!"


def simulator_words(examples: Iterable[Example] = ()) -> set[str]:
    """Every lower-case word in the simulator's, the tools' and the prompts' files (both
    splits' tables, tool messages, the system prompt), the numbers up to a thousand spelled
    out, and every word of `examples` (prompts and answers)."""
    words: set[str] = set()
    for folder in SIMULATOR_SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".txt", ".md", ".json", ".toml"):
                words.update(_WORD.findall(path.read_text(encoding="utf-8").lower()))
    for n in range(1001):
        words.update(say.number_words(n).split())
    for n in range(1, 32):
        words.update(say.ordinal_words(n).split())
    for ex in examples:
        words.update(_WORD.findall((ex.prompt() + ex.answer().full_text).lower()))
    return words


@dataclass(frozen=True, slots=True)
class StrayWords:
    words: tuple[str, ...]
    """The pool to draw from (sorted, so a seed gives the same draws)."""

    @classmethod
    def unseen_in(cls, examples: Iterable[Example]) -> StrayWords:
        """Dictionary words the simulator never uses (nor `examples`), less `MEANINGFUL`."""
        used = simulator_words(examples) | MEANINGFUL
        pool = sorted(
            w
            for w in common_words()
            if MIN_LETTERS <= len(w) <= MAX_LETTERS and w.isalpha() and w.isascii()
            and w.islower() and w not in used
        )  # fmt: skip
        if not pool:
            raise ValueError("no dictionary word is left once the simulator's are removed")
        return cls(tuple(pool))

    def apply(self, example: Example, rng: random.Random) -> Example:
        """`example` with stray words in its latest caller line (unchanged without one)."""
        history = example.history
        at = last_caller(history)
        if at < 0:
            return example
        line = history[at]
        assert isinstance(line, CallerTurn)
        count = 2 if rng.random() < TWO_WORDS_SHARE else 1
        text = stray_line(line.text, [rng.choice(self.words) for _ in range(count)], rng)
        return replace(example, history=(*history[:at], CallerTurn(text), *history[at + 1 :]))


def stray_line(text: str, strays: list[str], rng: random.Random) -> str:
    """`text` with `strays` put together at one word boundary: the start, the end, or
    after a comma. A sentence-cased line (Whisper's, which always ends in a mark) keeps
    its capital and its final mark; a first word keeps its own capital when it is "I", a
    weekday or a name."""
    core = text.rstrip(_MARKS + " ")
    mark = text[len(core) :].strip()
    words = core.split()
    if not words:
        return " ".join(strays) + mark
    gaps = [0, len(words)] + [i + 1 for i, w in enumerate(words[:-1]) if w.endswith(",")]
    gap = rng.choice(gaps)
    if gap == 0 and mark:
        if not _keeps_capital(words[0]):
            words[0] = words[0][:1].lower() + words[0][1:]
        strays = [strays[0].capitalize(), *strays[1:]]
    words[gap:gap] = strays
    return " ".join(words) + mark


def _keeps_capital(word: str) -> bool:
    core = word.strip(_MARKS + ",")
    return core == "I" or core.startswith("I'") or core.lower() in _PROPER


_PROPER = frozenset(
    [*CAPITALIZED, *lexicon.FIRST_NAMES.train, *lexicon.FIRST_NAMES.heldout,
     *lexicon.LAST_NAMES.train, *lexicon.LAST_NAMES.heldout]
)  # fmt: skip
"""Words whose capital is their own (a caller's name may open a line: "Grace Park.")."""
