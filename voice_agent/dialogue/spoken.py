"""Numbers read out digit by digit, written as digits: what the model and grounding read.

A caller reads an order number as "four oh two one three" or "double four, one five"; a
recognizer writes that down in words about as often as in digits. The model and the
call grammar's grounding copy digits ("each digit must occur in the prompt"), so the
agent rewrites a run of at least `MIN_RUN` spoken digits as digits before the line goes
into the dialogue: "four oh two one three" → "4 0 2 1 3". A number said whole in the
thousands ("fifty five thousand and ten", "forty thousand eight hundred seventy seven")
is an order number too (no caller of a bike shop wants thousands of anything): its digits
are written the same way. Shorter runs ("one of those", "two tubes") and smaller numbers
said whole ("twenty five") are left alone.

    spoken_digits("it's four oh two, one three")   # -> "it's 4 0 2 1 3"
    spoken_digits("order fifty five thousand and ten")   # -> "order 5 5 0 1 0"
"""

from __future__ import annotations

import re

DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
MIN_RUN = 3
"""Spoken digits in a row before they count as a number read out (an order number has
at least four; three allows a product id)."""

_DIGIT = r"(?:zero|oh|o|one|two|three|four|five|six|seven|eight|nine|\d)"
_ITEM = rf"(?:(?:double|triple) {_DIGIT}|{_DIGIT})"
_SEP = r"[ ,.-]+"
_RUN = re.compile(rf"\b{_ITEM}(?:{_SEP}{_ITEM})+\b", re.IGNORECASE)


def _digits(run: str) -> list[str]:
    out: list[str] = []
    words = re.findall(r"[a-z]+|\d", run.lower())
    repeat = 1
    for word in words:
        if word in ("double", "triple"):
            repeat = 2 if word == "double" else 3
            continue
        out += [DIGIT_WORDS.get(word, word)] * repeat
        repeat = 1
    return out


SMALL = {
    w: i for i, w in enumerate((
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen",
    ))
}  # fmt: skip
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
        "eighty": 80, "ninety": 90}  # fmt: skip
_WORD_NUMBER = "|".join([*SMALL, *TENS, "hundred", "thousand"])
_WHOLE = re.compile(
    rf"\b(?:{_WORD_NUMBER})(?:(?:[ -]|,? and |, )(?:{_WORD_NUMBER}))*\b", re.IGNORECASE
)


def whole_number(words: str) -> int | None:
    """The value of a number said whole ("fifty five thousand and ten" → 55010), or None
    when the words are not one number ("five six": digits read out, not a number)."""
    total, group, last = 0, 0, ""
    for word in re.findall(r"[a-z]+", words.lower()):
        if word == "and":
            continue
        if word == "thousand":
            if total or not group:
                return None
            total, group, last = group * 1000, 0, "thousand"
        elif word == "hundred":
            if not 0 < group < 10:
                return None
            group, last = group * 100, "hundred"
        elif word in TENS:
            if group % 100:
                return None
            group, last = group + TENS[word], "tens"
        else:
            small = SMALL[word]
            after_tens = last == "tens" and group % 10 == 0 and small < 10  # "forty two"
            if not (after_tens or group % 100 == 0):
                return None
            group, last = group + small, "small"
    return total + group


def _whole_digits(match: re.Match[str]) -> str:
    value = whole_number(match.group(0))
    if value is None or value < 1000 or "thousand" not in match.group(0).lower():
        return match.group(0)
    trail = match.group(0)[len(match.group(0).rstrip(" ,")) :]
    return " ".join(str(value)) + trail


def spoken_digits(text: str) -> str:
    """`text` with every run of `MIN_RUN` or more spoken digits (words, "double X", bare
    digits between them) written as digits separated by spaces."""

    def rewrite(match: re.Match[str]) -> str:
        digits = _digits(match.group(0))
        words = sum(1 for d in re.findall(r"[a-z]+", match.group(0).lower()) if d in DIGIT_WORDS)
        if len(digits) < MIN_RUN or words == 0:
            return match.group(0)
        return " ".join(digits)

    return _RUN.sub(rewrite, _WHOLE.sub(_whole_digits, text))
