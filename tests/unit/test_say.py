"""Numbers, times, prices and days as a person says them."""

from __future__ import annotations

from datetime import date, time

import pytest

from voice_agent.speech.say import (
    number_words,
    ordinal_words,
    say_count,
    say_day,
    say_digits,
    say_hour_span,
    say_list,
    say_on_day,
    say_price,
    say_time,
)

MONDAY = date(2025, 6, 2)


@pytest.mark.parametrize(
    ("n", "words"),
    [(0, "zero"), (13, "thirteen"), (40, "forty"), (99, "ninety-nine"), (105, "one hundred five"),
     (1299, "one thousand two hundred ninety-nine"), (20000, "twenty thousand")],
)  # fmt: skip
def test_number_words(n: int, words: str) -> None:
    assert number_words(n) == words


def test_number_words_range() -> None:
    with pytest.raises(ValueError, match="cannot say"):
        number_words(-1)


@pytest.mark.parametrize(
    ("n", "words"),
    [(1, "first"), (2, "second"), (3, "third"), (4, "fourth"), (12, "twelfth"),
     (20, "twentieth"), (21, "twenty-first"), (23, "twenty-third"), (30, "thirtieth")],
)  # fmt: skip
def test_ordinals(n: int, words: str) -> None:
    assert ordinal_words(n) == words


@pytest.mark.parametrize(
    ("cents", "words"),
    [(1250, "twelve dollars fifty"), (1200, "twelve dollars"), (100, "one dollar"),
     (99, "ninety-nine cents"), (1, "one cent"), (599, "five dollars ninety-nine"),
     (6500, "sixty-five dollars")],
)  # fmt: skip
def test_prices(cents: int, words: str) -> None:
    assert say_price(cents) == words


@pytest.mark.parametrize(
    ("t", "words"),
    [(time(14, 30), "half past two"), (time(14), "two o'clock"), (time(12), "noon"),
     (time(12, 30), "half past twelve"), (time(9, 15), "quarter past nine"),
     (time(17, 45), "quarter to six"), (time(14, 20), "two twenty"), (time(14, 5), "two oh five")],
)  # fmt: skip
def test_times(t: time, words: str) -> None:
    assert say_time(t) == words


def test_hour_span_and_digits() -> None:
    assert say_hour_span(time(9), time(18)) == "from nine to six"
    assert say_hour_span(time(9, 30), time(12)) == "from half past nine to noon"
    assert say_digits("40213") == "four zero two one three"
    assert say_digits("1007") == "one zero zero seven"


def test_days_relative_to_today() -> None:
    assert say_day(MONDAY, MONDAY) == "today"
    assert say_day(date(2025, 6, 3), MONDAY) == "tomorrow"
    assert say_day(date(2025, 6, 1), MONDAY) == "yesterday"
    assert say_day(date(2025, 6, 6), MONDAY) == "friday"
    assert say_day(date(2025, 6, 9), MONDAY) == "monday the ninth"
    assert say_day(date(2025, 5, 30), MONDAY) == "friday the thirtieth"
    assert say_on_day(date(2025, 6, 6), MONDAY) == "on friday"
    assert say_on_day(date(2025, 6, 3), MONDAY) == "tomorrow"


def test_lists_and_counts() -> None:
    assert say_list([]) == ""
    assert say_list(["a"]) == "a"
    assert say_list(["a", "b", "c"], "or") == "a, b or c"
    assert say_count(1, "front light") == "a front light"
    assert say_count(1, "inner tube") == "an inner tube"
    assert say_count(2, "front light") == "two front lights"
    assert say_count(3, "brake pads") == "three brake pads"
