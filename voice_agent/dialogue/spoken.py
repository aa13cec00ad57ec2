"""Numbers read out digit by digit, written as digits: what the model and grounding read.

A caller reads an order number as "four oh two one three" or "double four, one five"; a
recognizer writes that down in words about as often as in digits. The model and the
call grammar's grounding copy digits ("each digit must occur in the prompt"), so the
agent rewrites a run of at least `MIN_RUN` spoken digits as digits before the line goes
into the dialogue: "four oh two one three" → "4 0 2 1 3". Shorter runs ("one of those",
"two tubes") and numbers said as quantities ("forty thousand") are left alone.

    spoken_digits("it's four oh two, one three")   # -> "it's 4 0 2 1 3"
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


def spoken_digits(text: str) -> str:
    """`text` with every run of `MIN_RUN` or more spoken digits (words, "double X", bare
    digits between them) written as digits separated by spaces."""

    def rewrite(match: re.Match[str]) -> str:
        digits = _digits(match.group(0))
        words = sum(1 for d in re.findall(r"[a-z]+", match.group(0).lower()) if d in DIGIT_WORDS)
        if len(digits) < MIN_RUN or words == 0:
            return match.group(0)
        return " ".join(digits)

    return _RUN.sub(rewrite, text)
