"""Numbers the caller means: how many, and which of a tool result's labelled numbers.

Two narrowings of a grounded number slot's choices, both "the latest caller line that
says any wins" (a caller's correction counts):

* `counts_said`: a quantity said in words or digits ("a couple of the d lock", "two of
  them", "just the one", "3 please"); a bare "a" is not a count.
* `labelled_said`: a tool result lists numbers with labels ("[107 winter tyre; 105 road
  tyre]"); the numbers whose label the caller names ("one of the winter tyre").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

COUNT_WORDS = {
    "one": 1, "single": 1, "two": 2, "couple": 2, "pair": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
}  # fmt: skip
COUNT = re.compile(
    r"(?<![\d:.,])(?<!\d )\b(?:(?P<digit>[1-9])|(?P<word>" + "|".join(COUNT_WORDS) + r"))\b"
    r"(?!\d|[:.,]\d| \d| ?(?:am|pm|a\.m|p\.m|o'clock|thirty|fifteen|forty)\b)",
    re.IGNORECASE,
)
"""A count: a lone digit or a number word, not part of a longer number, a number read out
digit by digit, or a time ("at 2", "half past one" name times, so "at"/"past" too)."""
TIME_BEFORE = re.compile(r"\b(?:at|past|to|around|about|till|until|by)\s+$", re.IGNORECASE)
LABELLED = re.compile(r"\[([^\[\]<]*)\]")
LABEL = re.compile(r"^\s*(\d+)\s+(.+?)\s*$")


def counts_said(lines: Iterable[str], most: int) -> list[int] | None:
    """The counts from 1 to `most` that the latest caller line saying any says."""
    for line in reversed(list(lines)):
        found = []
        for m in COUNT.finditer(line):
            if TIME_BEFORE.search(line, 0, m.start()):
                continue
            n = int(m["digit"]) if m["digit"] else COUNT_WORDS[m["word"].lower()]
            if 1 <= n <= most and n not in found:
                found.append(n)
        if found:
            return found
    return None


def labels(results: Iterable[str]) -> dict[str, str]:
    """Number → label over tool results' bracketed lists ("[107 winter tyre; ...]"); a
    later result's label wins."""
    out: dict[str, str] = {}
    for text in results:
        for group in LABELLED.findall(text):
            for item in group.split(";"):
                m = LABEL.match(item)
                if m:
                    out[m[1]] = m[2].lower()
    return out


def labelled_said(lines: Iterable[str], labelled: dict[str, str]) -> list[str] | None:
    """The numbers whose whole label the latest caller line naming any names."""
    patterns = {n: said_as_words(label) for n, label in labelled.items()}
    for line in reversed(list(lines)):
        named = [n for n, p in patterns.items() if p.search(line)]
        if named:
            return named
    return None


def said_as_words(value: str) -> re.Pattern[str]:
    """`value` as whole words, case-insensitive, its words joined by a hyphen, spaces or
    nothing ("tune-up" matches "Tune up", "tuneup" and "TUNE-UP")."""
    words = [re.escape(w) for w in re.split(r"[-\s]+", value.strip()) if w]
    return re.compile(r"\b" + r"[-\s]*".join(words) + r"\b", re.IGNORECASE)
