"""Caller lines as the phone recognizer heard them, for training the brain on its real input.

`scripts/make_heard_lines.py` speaks caller lines of the training calls with synthetic
voices, sends them through the phone path and Whisper, and writes a JSONL file of
{"said", "heard", "voice"}. `HeardLines.apply` puts the heard line in place of the
said one in a training example. Where the recognizer lost a word the gold call needs (a
product, a name, an order number's digits, a day or a service the caller named), no
model could make that call from what it reads; the example's gold action then becomes the
agent's repeat request, with the reasoning the simulator gives a garbled line, so the
brain learns to ask rather than guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from enum import Enum
from pathlib import Path

from voice_agent.brain.dialogues import Example, Thought
from voice_agent.dialogue.format import AgentCall, AgentSay, CallerTurn
from voice_agent.dialogue.phrases import phrases

REPEAT_THOUGHT = Thought("didn't catch it", "The line is garbled; ask them to repeat.")
"""The simulator's reasoning for a garbled caller line (voice_agent/brain/scenarios.py)."""

LOOPING = 2
"""A heard line more than this many times as long as the said one (plus 40 characters) is
the recognizer looping on a phrase ("we will have to move. we will have to move. ..."),
not a hearing of the line; it is not used."""


@dataclass(frozen=True, slots=True)
class HeardLine:
    said: str
    heard: str
    voice: str


def read_heard(path: Path) -> list[HeardLine]:
    """The lines of a heard-lines JSONL file. Raises ValueError naming the file and line
    of the first malformed entry, FileNotFoundError when there is no file."""
    return list(_read(path))


def _read(path: Path) -> Iterator[HeardLine]:
    with path.open(encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) for k in ("said", "heard", "voice")
            ):
                raise ValueError(f'{path}:{number}: want {{"said", "heard", "voice"}} strings')
            yield HeardLine(entry["said"], entry["heard"], entry["voice"])


@dataclass(frozen=True, slots=True)
class HeardLines:
    """Said line → what the recognizer heard."""

    heard: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> HeardLines:
        return cls({line.said: line.heard for line in read_heard(path)})

    def covers(self, step: Example) -> bool:
        """True when `step`'s latest turn is a caller line this file has heard as words
        (the recognizer heard nothing in some: the agent never reads an empty line) and not
        as a loop (`LOOPING`)."""
        last = step.history[-1] if step.history else None
        if not isinstance(last, CallerTurn):
            return False
        heard = self.heard.get(last.text, "").strip()
        return bool(heard) and len(heard) <= LOOPING * len(last.text) + 40

    def apply(self, step: Example) -> Example | None:
        """`step` with its latest caller line as heard (unchanged when not covered). Its
        gold action becomes the repeat request when the heard line lost a value the gold
        call takes from the said one; None (no example) when the heard line holds that
        value only misspelt ("tires" for "tyres"): neither copying the misspelling nor
        asking again would be right to learn."""
        if not self.covers(step):
            return step
        said = step.history[-1]
        assert isinstance(said, CallerTurn)
        heard = self.heard[said.text]
        out = replace(step, history=(*step.history[:-1], CallerTurn(heard)))
        if not isinstance(step.action, AgentCall):
            return out
        kept = verdict(step.action, said.text, heard)
        if kept is Kept.BLURRED:
            return None
        if kept is Kept.LOST:
            out = replace(
                out,
                action=AgentSay(phrases().say_again),
                reasoning=REPEAT_THOUGHT.at(step.effort),
            )
        return out


class Kept(Enum):
    """What the recognizer kept of the values a call takes from the caller's line."""

    ALL = "all"
    BLURRED = "blurred"
    """Every lost word has a near spelling in the heard line."""
    LOST = "lost"


def verdict(call: AgentCall, said: str, heard: str) -> Kept:
    """Whether the arguments of `call` that `said` states (as words, or as digits in
    order) are all in `heard`, only misspelt there, or lost."""
    said_words, heard_words = _words(said), _words(heard)
    said_digits, heard_digits = _digits(said), _digits(heard)
    out = Kept.ALL
    for value in call.arguments.values():
        if not isinstance(value, str) or not value.strip():
            continue
        digits = _digits(value)
        if digits and digits == re.sub(r"[\s:]", "", value):
            if digits in said_digits and digits not in heard_digits:
                return Kept.LOST
            continue
        words = _words(value).strip()
        if not words or f" {words} " not in said_words or f" {words} " in heard_words:
            continue
        heard_set = heard_words.split()
        for word in words.split():
            if word not in heard_set and not any(
                SequenceMatcher(None, word, h).ratio() >= NEAR for h in heard_set
            ):
                return Kept.LOST
        out = Kept.BLURRED
    return out


NEAR = 0.75
"""Spelling similarity (difflib ratio) at which a heard word counts as the said one misspelt."""


def _words(text: str) -> str:
    """Lower-case words with single spaces and a space at either end, for phrase lookup;
    hyphens split words (Whisper writes "tune up" as often as "tune-up")."""
    words = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()
    return " " + " ".join(words) + " "


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)
