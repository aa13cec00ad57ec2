"""Caller-line machinery: split pools, template filling, and ASR-style surface noise.

A caller line is a template (`"i'd like {svc} {day}"`) picked from a `Pool` for the split,
noised word by word outside its slots (fillers, misrecognitions, dropped or doubled
words), then filled with slot surfaces and given a casing style: plain lower case without
punctuation, or Whisper's sentence case with commas and a final period or question mark.
Slot values are never noised, so a name or an order number in a call is copied verbatim.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class Split(Enum):
    TRAIN = "train"
    HELDOUT = "heldout"


@dataclass(frozen=True, slots=True)
class Pool:
    """Alternatives for one slot of variety; `heldout` ones appear only in the held-out
    split. That split draws only from `heldout` (when it has any), or from both parts when
    `mixed` (for surface forms where an all-unseen held-out set would be too narrow)."""

    train: tuple[str, ...]
    heldout: tuple[str, ...] = ()
    mixed: bool = False

    def options(self, split: Split) -> tuple[str, ...]:
        if split is Split.TRAIN or not self.heldout:
            return self.train
        return self.train + self.heldout if self.mixed else self.heldout

    def pick(self, rng: random.Random, split: Split) -> str:
        return rng.choice(self.options(split))


def pool(train: str, heldout: str = "", *, mixed: bool = False) -> Pool:
    """A pool from `|`-separated alternatives (readable data tables)."""
    return Pool(tuple(_alts(train)), tuple(_alts(heldout)), mixed)


def _alts(text: str) -> list[str]:
    return [a.strip() for a in text.split("|") if a.strip()] if text else []


class Casing(Enum):
    LOWER = "lower"
    """Lower case, no punctuation (a plain ASR)."""
    WHISPER = "whisper"
    """Sentence case, names and weekdays capitalized, commas and a final mark."""


FILLERS = ("um", "uh", "like", "you know", "so", "yeah", "er", "hmm", "okay so", "i mean")
LEADING_FILLERS = ("um", "uh", "so", "yeah", "okay", "right", "hi", "er")
MISHEARD = {
    "brakes": "breaks", "brake": "break", "there": "their", "your": "you're", "want to": "wanna",
    "going to": "gonna", "you": "ya", "i'd": "i", "i'm": "im", "it's": "its", "tyre": "tire",
    "check": "chek", "could": "cood", "would": "wood", "the": "a", "get": "got",
    "please": "pleas", "thanks": "thank", "booking": "book in", "looking": "lookin",
}  # fmt: skip
"""Plausible recognition errors, applied only outside slots."""
NOISE = {"filler": 0.3, "lead": 0.3, "misheard": 0.06, "drop": 0.04, "double": 0.015}
"""Per-line chance of a filler, a leading filler; per-word chance of the rest."""
DROPPABLE = frozenset({"the", "a", "to", "for", "my", "is", "it", "on"})
CASING_WEIGHTS = {Casing.LOWER: 0.4, Casing.WHISPER: 0.6}
QUESTION_STARTS = ("do ", "can ", "could ", "are ", "is ", "what", "when", "where", "have ",
                   "would ", "how ", "any ", "will ")  # fmt: skip
CAPITALIZED = frozenset(
    {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
)
_SLOT = re.compile(r"\{(\w+)\}")
_PERIOD = re.compile(r"(?<!\d)\.|\.(?!\d)")
"""A period that is not a decimal point ("2.30" keeps its point)."""
_LEAD = re.compile(r"^(?:(?:um|uh|so|yeah|okay|right|hi|hello|er|hey),?\s+)+")


def slots(template: str) -> set[str]:
    """The `{slot}` names in `template`."""
    return set(_SLOT.findall(template))


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace `{slot}`s; raises KeyError naming a slot without a value."""
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def noisy(rng: random.Random, template: str) -> str:
    """`template` with ASR-like noise on its words; `{slot}`s are left intact."""
    words = template.split()
    out: list[str] = []
    for word in words:
        if "{" in word:
            out.append(word)
            continue
        roll = rng.random()
        if roll < NOISE["drop"]:
            if word not in DROPPABLE:
                out.append(word)
            continue
        roll -= NOISE["drop"]
        if roll < NOISE["double"]:
            out.append(word)
        elif roll - NOISE["double"] < NOISE["misheard"] and word in MISHEARD:
            word = MISHEARD[word]
        out.append(word)
    if rng.random() < NOISE["filler"] and len(out) > 1:
        out.insert(rng.randrange(1, len(out)), rng.choice(FILLERS) + ",")
    if rng.random() < NOISE["lead"]:
        out.insert(0, rng.choice(LEADING_FILLERS) + ",")
    return " ".join(out)


def cased(casing: Casing, text: str) -> str:
    """Apply a casing style to a filled line (written lower case with commas)."""
    text = " ".join(text.split())
    if casing is Casing.LOWER:
        return _PERIOD.sub("", text.replace(",", "").replace("?", "")).lower()
    words = [w.capitalize() if w.strip(",.?") in CAPITALIZED else w for w in text.split()]
    words = ["I" + w[1:] if w == "i" or w.startswith("i'") else w for w in words]
    text = " ".join(words)
    text = text[0].upper() + text[1:]
    if text[-1] not in ".?!":
        core = _LEAD.sub("", text.lower())
        mark = "?" if core.startswith(QUESTION_STARTS) else "."
        text = text.rstrip(",") + mark
    return text


def caller_line(
    rng: random.Random, template: str, values: Mapping[str, str], casing: Casing
) -> str:
    """A full caller line: noise, slot filling, casing. Slot values must already be in
    the casing's surface form (see `surface`)."""
    return cased(casing, fill(noisy(rng, template), values)) if template else ""


def surface(casing: Casing, value: str, *, proper: bool = False) -> str:
    """How the ASR writes a slot value: names title-cased and weekdays capitalized under
    Whisper casing, everything lower case otherwise."""
    if casing is Casing.LOWER:
        return value.lower()
    if proper:
        return " ".join(w.capitalize() for w in value.split())
    return " ".join(w.capitalize() if w in CAPITALIZED else w for w in value.split())


def pick_casing(rng: random.Random) -> Casing:
    return rng.choices(list(CASING_WEIGHTS), weights=list(CASING_WEIGHTS.values()))[0]
