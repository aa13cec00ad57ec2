"""Streaming text to speakable sentences: incremental splitting and normalization.

The engine writes a reply block by block. `SentenceSplitter.feed` takes each block's text
as it arrives and returns every sentence that is now certainly complete, so the first
sentence can be synthesized while the rest is still being decided. A full stop ends a
sentence only when whitespace follows it ("12.50", "2:30" and "e.g.x" stay whole) and the
word before it is not a title ("Dr. Smith") or an initial ("J. Smith"); after other
abbreviations ("p.m.", "etc.", "No.") it ends one only before a capital letter. `!`, `?`,
an ellipsis and a line break end a sentence at once. A sentence that grows past
`max_chars` (`first_max_chars` for the reply's first one, whose synthesis time the caller
waits through) is cut at its last clause break (", ", "; ", ": ") within the limit, else
at the first one after it. The cuts depend only on the text, never on how it was chunked.

`speakable` rewrites what a synthesizer would misread into words as a person says them on
the phone, with `voice_agent.speech.say`: "$12.50" → "twelve
dollars fifty", "14:30" → "half past two", "order 40213" → "order four zero two one
three", "21st" → "twenty-first", "2.5" → "two point five", "1,299" → "one thousand two
hundred ninety-nine".
"""

from __future__ import annotations

import re
from datetime import time

from voice_agent.speech.say import (
    CENTS_PER_DOLLAR,
    HOURS_PER_HALF_DAY,
    MAX_SPOKEN,
    number_words,
    ordinal_words,
    say_digits,
    say_price,
    say_time,
)

MAX_SENTENCE_CHARS = 160
"""A sentence longer than this is cut at a clause break."""
FIRST_SENTENCE_MAX_CHARS = 60
"""The same for the first sentence: Piper's joe voice takes ~40 ms + ~5 ms per character
on 2 busy cores (~210 ms for 30 characters, ~670 ms for 120), all before the first audio."""

_TITLES = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "mt", "ft", "vs"})
"""Never end a sentence: a name or a number always follows."""
_ABBREVIATIONS = frozenset({"a.m", "p.m", "am", "pm", "etc", "no", "approx", "e.g", "i.e", "inc"})
"""End a sentence only when a capital letter follows."""
_TERMINAL = re.compile(r"(\n+)|([.!?…]+)([\"'”’)\]]*)")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_CLAUSE_BREAK = re.compile(r"[,;:](?=\s)")
_SPEAKABLE_CHARS = re.compile(r"[A-Za-z0-9]")
_MIN_ORDINAL, _MAX_ORDINAL = 1, 99
_DIGITS_ALWAYS_SPELLED = 5
"""Bare digit runs this long or longer (phone, zip, reference numbers) are read digit by
digit; shorter ones as a number."""


class SentenceSplitter:
    """Cut streaming text into sentences. Feed chunks in order, then `flush` at the end."""

    def __init__(
        self, max_chars: int = MAX_SENTENCE_CHARS, first_max_chars: int = FIRST_SENTENCE_MAX_CHARS
    ) -> None:
        if max_chars < 1 or first_max_chars < 1:
            raise ValueError(f"limits must be positive, got {max_chars}, {first_max_chars}")
        self._max_chars = max_chars
        self._first_max_chars = first_max_chars
        self._emitted = False
        self._buffer = ""

    @property
    def pending(self) -> str:
        """Text fed but not yet returned as a sentence."""
        return self._buffer

    def feed(self, text: str) -> list[str]:
        """Append `text`; returns the sentences it completed (stripped, in order)."""
        self._buffer += text
        sentences = []
        while (cut := self._next_cut()) is not None:
            sentence, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:].lstrip()
            if sentence:
                sentences.append(sentence)
                self._emitted = True
        return sentences

    def flush(self) -> list[str]:
        """The text still held (the end of the reply), as at most one sentence. The
        splitter is empty afterwards."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []

    def _next_cut(self) -> int | None:
        end = self._sentence_end()
        limit = self._max_chars if self._emitted else self._first_max_chars
        span = len(self._buffer) if end is None else end
        if span > limit and (clause := self._clause_cut(limit, span)) is not None:
            return clause
        return end

    def _sentence_end(self) -> int | None:
        buffer = self._buffer
        for match in _TERMINAL.finditer(buffer):
            if match.group(1):  # a line break
                return match.end()
            end = match.end()
            if end == len(buffer) or not buffer[end].isspace():
                # "12." may become "12.50"; "e.g." may be followed by anything.
                if end == len(buffer):
                    break
                continue
            after = buffer[end:].lstrip()
            decision = _ends_sentence(buffer[: match.start()], match.group(2), after[:1])
            if decision is None:
                break  # wait for the next word
            if decision:
                return end
        return None

    def _clause_cut(self, limit: int, span: int) -> int | None:
        """The clause break to cut a `span`-character sentence at, if any."""
        breaks = [m.end() for m in _CLAUSE_BREAK.finditer(self._buffer, 0, span)]
        within = [b for b in breaks if b <= limit]
        if within:
            return within[-1]
        return breaks[0] if breaks else None


def _ends_sentence(before: str, punctuation: str, next_char: str) -> bool | None:
    """Whether `punctuation` (followed by whitespace, then `next_char`, "" when unknown
    yet) ends a sentence; None when only the next character can tell."""
    if punctuation != ".":
        return True
    match = _WORD_BEFORE.search(before)
    word = match.group(1).lower() if match else ""
    if word in _TITLES or (len(word) == 1 and word.isalpha() and word != "i"):
        return False
    if word in _ABBREVIATIONS:
        return next_char.isupper() if next_char else None
    return True


def is_speakable(sentence: str) -> bool:
    """Whether a synthesizer would say anything for `sentence` (not just punctuation)."""
    return bool(_SPEAKABLE_CHARS.search(sentence))


# ---------------------------------------------------------------- normalization

_SPEAKABLE = re.compile(
    r"""
    (?P<price>\$\s?(?P<dollars>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<cents>\d{2}))?(?![\d.]\d))
  | (?P<clock>\b(?P<hour>[01]?\d|2[0-3]):(?P<minute>[0-5]\d)\b
        (?:\s?(?P<meridiem>[ap])\.?m\b)?)
  | (?P<hour_only>\b(?P<bare_hour>1[0-2]|0?[1-9])\s?(?P<bare_meridiem>[ap])\.?m\b)
  | (?P<order>\b(?:order|reference|booking|confirmation)(?:\s+(?:number|no\.?))?
        (?:\s+is)?\s*\#?\s*)(?P<order_digits>\d+)\b
  | \#\s?(?P<hash_digits>\d+)\b
  | \b(?P<ordinal>\d{1,2})(?:st|nd|rd|th)\b
  | \b(?P<percent>\d+(?:\.\d+)?)\s?%
  | \b(?P<decimal>\d+\.\d+)\b
  | \b(?P<integer>\d{1,3}(?:,\d{3})+|\d+)\b
    """,
    re.VERBOSE | re.IGNORECASE,
)


def speakable(text: str) -> str:
    """`text` with prices, times, order numbers, ordinals and other numbers in words.

    A trailing "." of "a.m."/"p.m." is kept: it may also end the sentence."""
    return _SPEAKABLE.sub(_say, text).replace("&", " and ").replace("  ", " ")


def _say(m: re.Match[str]) -> str:
    if m.group("price"):
        cents = int(m.group("dollars").replace(",", "")) * CENTS_PER_DOLLAR
        return say_price(cents + int(m.group("cents") or 0))
    if m.group("clock"):
        return _say_clock(int(m.group("hour")), int(m.group("minute")), m.group("meridiem"))
    if m.group("hour_only"):
        return _say_clock(int(m.group("bare_hour")), 0, m.group("bare_meridiem"))
    if m.group("order_digits"):
        return (
            m.group("order").replace("#", "").rstrip() + " " + say_digits(m.group("order_digits"))
        )
    if m.group("hash_digits"):
        return "number " + say_digits(m.group("hash_digits"))
    if m.group("ordinal"):
        value = int(m.group("ordinal"))
        return ordinal_words(value) if _MIN_ORDINAL <= value <= _MAX_ORDINAL else m.group()
    if m.group("percent"):
        return _say_number(m.group("percent")) + " percent"
    if m.group("decimal"):
        return _say_number(m.group("decimal"))
    return _say_number(m.group("integer"))


def _say_clock(hour: int, minute: int, meridiem: str | None) -> str:
    if meridiem is None:
        return say_time(time(hour, minute))
    # "2:30 pm" is said as written ("two thirty p m"): the caller chose the style.
    hour_12 = (hour - 1) % HOURS_PER_HALF_DAY + 1
    spoken = number_words(hour_12)
    if minute:
        spoken += f" oh {number_words(minute)}" if minute < 10 else f" {number_words(minute)}"
    return f"{spoken} {meridiem.lower()} m"


def _say_number(written: str) -> str:
    whole, _, fraction = written.replace(",", "").partition(".")
    if len(whole) >= _DIGITS_ALWAYS_SPELLED and "," not in written:
        spoken = say_digits(whole)
    else:
        value = int(whole)
        spoken = number_words(value) if value <= MAX_SPOKEN else say_digits(whole)
    return f"{spoken} point {say_digits(fraction)}" if fraction else spoken
