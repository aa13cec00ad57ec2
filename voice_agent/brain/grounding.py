"""Facts spoken by the agent must come from the conversation: a check for invented numbers.

`facts(text)` pulls out what a listener would take as facts: integers (digits or words:
"sixty-five", "2"), digit strings (order numbers and references, "4 0 2 1 3" or
"four zero two one three") and clock times ("half past two", "2:30 pm", "noon").
`ungrounded(speech, sources)` lists the facts of `speech` that no source mentions, where
sources are the caller's lines and the tool results so far. A bare hour in a source
("at 3", "around three") also grounds that hour on the clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from voice_agent.speech.say import number_words, ordinal_words

MAX_DAY_OF_MONTH = 31
MAX_WORD_NUMBER = 99
HOURS_ON_CLOCK = 12
HALF_HOUR, QUARTER = 30, 15
MINUTES_PER_HOUR = 60
MIN_DIGIT_STRING = 3
"""A spoken run of at least this many single digits is a digit string (an order number)."""

WORD_VALUES = {number_words(n): n for n in range(MAX_WORD_NUMBER + 1)}
WORD_VALUES |= {w.replace("-", " "): n for w, n in WORD_VALUES.items()}
WORD_VALUES |= {"oh": 0, "couple": 2, "hundred": 100, "thousand": 1000}
ORDINALS = {ordinal_words(n): n for n in range(MAX_DAY_OF_MONTH, 0, -1)}
"""Longest first, so "twenty-first" is read before "first"."""
DIGIT_WORDS = {number_words(n): str(n) for n in range(10)} | {"oh": "0"}
_MERIDIEM = r"(?:\s*(?:am|pm|a\.m\.|p\.m\.))?"
_HOUR = r"(\d{1,2}|" + "|".join(number_words(n) for n in range(1, 13)) + ")"
_TIME_PATTERNS = (
    (re.compile(r"\b(\d{1,2})[:.](\d{2})" + _MERIDIEM), "clock"),
    (re.compile(r"\bhalf past " + _HOUR + r"\b"), "half"),
    (re.compile(r"\bquarter past " + _HOUR + r"\b"), "quarter past"),
    (re.compile(r"\bquarter to " + _HOUR + r"\b"), "quarter to"),
    (re.compile(r"\bhalf " + _HOUR + r"\b"), "half"),
    (re.compile(r"\b" + _HOUR + r" thirty\b"), "half"),
    (re.compile(r"\b" + _HOUR + r"(?: o'clock|\s*(?:am|pm|a\.m\.|p\.m\.))"), "hour"),
    (re.compile(r"\b(noon|midday)\b"), "noon"),
)
_NUMBER_RUN = re.compile(
    r"\b(?:(?:" + "|".join(sorted(map(re.escape, WORD_VALUES), key=len, reverse=True))
    + r")\b[\s-]*)+"
)  # fmt: skip
_DIGIT_GROUPS = re.compile(r"\d+(?:[\s,-]+\d+)*")


@dataclass(frozen=True, slots=True)
class Facts:
    numbers: frozenset[int] = field(default_factory=frozenset)
    digit_strings: frozenset[str] = field(default_factory=frozenset)
    times: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    """(hour on a 12-hour clock, minute)."""


def _hour(word: str) -> int:
    value = int(word) if word.isdigit() else WORD_VALUES[word]
    return (value - 1) % HOURS_ON_CLOCK + 1


def _times(text: str) -> tuple[set[tuple[int, int]], str]:
    """Clock times in `text`, and `text` with them blanked out."""
    found: set[tuple[int, int]] = set()
    for pattern, kind in _TIME_PATTERNS:
        for m in pattern.finditer(text):
            if kind == "clock":
                found.add((_hour(m.group(1)), int(m.group(2))))
            elif kind == "noon":
                found.add((HOURS_ON_CLOCK, 0))
            else:
                hour = _hour(m.group(1))
                minute = {"half": HALF_HOUR, "quarter past": QUARTER, "hour": 0}.get(kind)
                if minute is None:  # quarter to: the hour before, at :45
                    hour, minute = (hour - 2) % HOURS_ON_CLOCK + 1, MINUTES_PER_HOUR - QUARTER
                found.add((hour, minute))
        text = pattern.sub(" ", text)
    return found, text


def _word_run(run: list[str]) -> tuple[set[int], set[str]]:
    """A run of number words: a digit string when all are single digits (≥ 3), else the
    integers it says ("one thousand two hundred ninety-nine" → 1299)."""
    if len(run) >= MIN_DIGIT_STRING and all(w in DIGIT_WORDS for w in run):
        return set(), {"".join(DIGIT_WORDS[w] for w in run)}
    numbers: set[int] = set()
    total = current = 0
    started = False
    for word in run:
        value = WORD_VALUES[word]
        if value == WORD_VALUES["hundred"]:
            current = max(current, 1) * value
        elif value == WORD_VALUES["thousand"]:
            total, current = total + max(current, 1) * value, 0
        else:
            if started and not _extends(current, value):
                numbers.add(total + current)
                total, current = 0, 0
            current += value
        started = True
    numbers.add(total + current)
    return numbers, set()


def _extends(current: int, value: int) -> bool:
    """Whether `value` continues the number `current` ("sixty" + "five", "two hundred" +
    "ninety") rather than starting a new one ("two" "two")."""
    hundred = WORD_VALUES["hundred"]
    if current == 0:
        return True
    if current % hundred == 0:
        return value < hundred
    return current % 10 == 0 and value < 10


def facts(text: str) -> Facts:
    """The numbers, digit strings and clock times `text` states."""
    text = text.lower().replace("’", "'")
    times, text = _times(text)
    numbers: set[int] = set()
    strings: set[str] = set()
    for word, value in ORDINALS.items():
        if re.search(rf"\b{word}\b", text):
            numbers.add(value)
            text = re.sub(rf"\b{word}\b", " ", text)
    for m in _DIGIT_GROUPS.finditer(text):
        groups = re.findall(r"\d+", m.group(0))
        numbers.update(int(g) for g in groups)
        for i in range(len(groups)):
            for j in range(i + 1, len(groups) + 1):
                strings.add("".join(groups[i:j]))
    for m in _NUMBER_RUN.finditer(text):
        run = [w for w in re.split(r"[\s-]+", m.group(0).strip()) if w]
        more_numbers, more_strings = _word_run(run)
        numbers |= more_numbers
        strings |= more_strings
    return Facts(frozenset(numbers), frozenset(strings), frozenset(times))


def ungrounded(speech: str, sources: Iterable[str], fixed_phrases: Iterable[str] = ()) -> list[str]:
    """Facts in `speech` that no source states, described for a report (empty: all
    grounded). Fixed phrases (no facts by contract) are removed from `speech` first."""
    for phrase in fixed_phrases:
        speech = speech.replace(phrase, " ")
    said = facts(speech)
    known = [facts(s) for s in sources]
    numbers = set().union(*(k.numbers for k in known))
    strings = set().union(*(k.digit_strings for k in known))
    times = set().union(*(k.times for k in known))
    times |= {(n, 0) for n in numbers if 1 <= n <= HOURS_ON_CLOCK}
    missing = [f"number {n}" for n in sorted(said.numbers - numbers - {int(s) for s in strings})]
    missing += [f"digits {s}" for s in sorted(said.digit_strings - strings)]
    missing += [f"time {h}:{m:02d}" for h, m in sorted(said.times - times)]
    return missing
