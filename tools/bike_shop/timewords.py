"""Day and time words a caller says, resolved against the shop's clock. Pure functions.

Days: "today", "tomorrow", "the day after tomorrow", a weekday ("friday": the next
Friday on or after today), "this friday" (the same), "next friday" (the first Friday
strictly after today: on a Friday it means a week later), "friday next week" (the Friday
of the next calendar week, Monday to Sunday: on a Monday eleven days away, on a Sunday
five; also "friday of next week", "next week on friday"). A leading "on" is ignored.

Times: "15:30", "3:30 pm", "3 pm", "3pm", "noon", "midday", "half past three",
"quarter past three", "quarter to four", "three o'clock", "three thirty", "3". A bare hour
without am/pm takes its shop-hours reading: 7–11 in the morning, 12 noon, 1–6 in the
afternoon or evening (`AFTERNOON_HOURS`).

Every function raises ValueError naming the words it could not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta

from tools.bike_shop.catalogue import WEEKDAYS

Now = Callable[[], datetime]
"""The shop's wall clock: a naive local datetime (injected, so tests fix the day)."""

DAYS_PER_WEEK = 7
HOURS_PER_HALF_DAY = 12
MINUTES_PER_HOUR = 60
NOON = time(12)
AFTERNOON_HOURS = range(1, 7)
"""Bare hours read as pm ("see you at three" is 15:00 in a shop that closes at six)."""

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
MINUTE_WORDS = {"oh five": 5, "ten": 10, "fifteen": 15, "twenty": 20, "thirty": 30,
                "forty": 40, "forty five": 45, "fifty": 50}  # fmt: skip
MERIDIEM_SUFFIXES = {
    " am": "am", " a.m.": "am", " in the morning": "am",
    " pm": "pm", " p.m.": "pm", " in the afternoon": "pm", " in the evening": "pm",
}  # fmt: skip
FRACTIONS = {"quarter past": 15, "half past": 30, "quarter to": -15}

_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$")


def next_week_words(weekday: str) -> str:
    """A regex of the ways to say `weekday` of next week: "friday next week", "friday, next
    week", "friday of next week", "next week on friday" (normalized words, no anchors)."""
    return rf"{weekday},? (?:of )?next week|next week,? on {weekday}"


def _normalize(words: str) -> str:
    return " ".join(words.lower().replace("-", " ").replace("’", "'").split())


def resolve_day(words: str, today: date) -> date:
    """The date a day word means when said on `today`. Raises ValueError."""
    text = _normalize(words)
    text = text.removeprefix("on ")
    if text == "today":
        return today
    if text == "tomorrow":
        return today + timedelta(days=1)
    if text in ("the day after tomorrow", "day after tomorrow"):
        return today + timedelta(days=2)
    for index, weekday in enumerate(WEEKDAYS):
        if re.fullmatch(next_week_words(weekday), text):
            monday_next_week = today + timedelta(days=DAYS_PER_WEEK - today.weekday())
            return monday_next_week + timedelta(days=index)
    strictly_after = text.startswith("next ")
    text = text.removeprefix("next ").removeprefix("this ")
    if text not in WEEKDAYS:
        raise ValueError(f"unknown day {words!r}: say today, tomorrow or a weekday")
    ahead = (WEEKDAYS.index(text) - today.weekday()) % DAYS_PER_WEEK
    if strictly_after and ahead == 0:
        ahead = DAYS_PER_WEEK
    return today + timedelta(days=ahead)


def _hour_word(word: str) -> int:
    if word.isdigit():
        return int(word)
    if word in NUMBER_WORDS:
        return NUMBER_WORDS[word]
    raise ValueError(f"not an hour: {word!r}")


def _shop_hour(hour: int) -> int:
    """A bare 1–12 hour in its shop-hours reading (24 h)."""
    return hour + HOURS_PER_HALF_DAY if hour in AFTERNOON_HOURS else hour


def _with_meridiem(hour: int, meridiem: str | None) -> int:
    if meridiem is None:
        return _shop_hour(hour) if hour <= HOURS_PER_HALF_DAY else hour
    if not 1 <= hour <= HOURS_PER_HALF_DAY:
        raise ValueError(f"{hour} {meridiem} is not a time")
    pm = meridiem.startswith("p")
    return hour % HOURS_PER_HALF_DAY + (HOURS_PER_HALF_DAY if pm else 0)


def parse_time(words: str) -> time:
    """The wall-clock time spoken as `words`. Raises ValueError."""
    text = _normalize(words).removeprefix("at ").removesuffix(" o'clock")
    text = text.removesuffix(" oclock")
    if text in ("noon", "midday", "twelve noon"):
        return NOON
    meridiem = None
    for suffix, half in MERIDIEM_SUFFIXES.items():
        if text.endswith(suffix):
            meridiem, text = half, text.removesuffix(suffix)
            break
    try:
        match = _CLOCK.match(text)
        if match:
            hour_text, minute_text, glued = match.groups()
            minute = int(minute_text or 0)
            hour = _with_meridiem(int(hour_text), meridiem or glued)
            return time(hour, minute)
        for fraction, offset in FRACTIONS.items():
            if text.startswith(fraction + " "):
                hour = _with_meridiem(_hour_word(text.removeprefix(fraction + " ")), meridiem)
                minutes = hour * MINUTES_PER_HOUR + offset
                return time(minutes // MINUTES_PER_HOUR, minutes % MINUTES_PER_HOUR)
        head, _, tail = text.partition(" ")
        hour = _with_meridiem(_hour_word(head), meridiem)
        return time(hour, MINUTE_WORDS[tail] if tail else 0)
    except (KeyError, ValueError):
        raise ValueError(f"unknown time {words!r}: say e.g. 'half past three' or '15:30'") from None


def slot_text(t: time) -> str:
    """The "HH:MM" text a booking call carries for `t`."""
    return f"{t.hour:02d}:{t.minute:02d}"


def parse_slot(text: str) -> time:
    """Inverse of `slot_text`. Raises ValueError for anything but "HH:MM"."""
    if not re.fullmatch(r"\d{2}:\d{2}", text):
        raise ValueError(f"not an HH:MM time: {text!r}")
    return time(int(text[:2]), int(text[3:]))
