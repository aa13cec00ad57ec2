"""Day and time words against a fixed date: a Monday, a Sunday, and the clock edge cases."""

from __future__ import annotations

from datetime import date, time

import pytest

from tools.bike_shop.timewords import parse_slot, parse_time, resolve_day, slot_text

MONDAY = date(2025, 6, 2)
SUNDAY = date(2025, 6, 8)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("today", MONDAY),
        ("Today", MONDAY),
        ("tomorrow", date(2025, 6, 3)),
        ("the day after tomorrow", date(2025, 6, 4)),
        ("friday", date(2025, 6, 6)),
        ("on Friday", date(2025, 6, 6)),
        ("this friday", date(2025, 6, 6)),
        ("next friday", date(2025, 6, 6)),
        ("monday", MONDAY),  # a weekday on that weekday is today
        ("next monday", date(2025, 6, 9)),  # "next" is strictly after today
        ("sunday", SUNDAY),
    ],
)
def test_day_words_on_a_monday(words: str, expected: date) -> None:
    assert resolve_day(words, MONDAY) == expected


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("today", SUNDAY),
        ("tomorrow", date(2025, 6, 9)),
        ("monday", date(2025, 6, 9)),
        ("saturday", date(2025, 6, 14)),
        ("next sunday", date(2025, 6, 15)),
        ("sunday", SUNDAY),
    ],
)
def test_day_words_on_a_sunday_cross_the_week(words: str, expected: date) -> None:
    assert resolve_day(words, SUNDAY) == expected


@pytest.mark.parametrize(
    ("words", "today", "expected"),
    [
        ("friday next week", MONDAY, date(2025, 6, 13)),  # not "next friday", the 6th
        ("Friday, next week", MONDAY, date(2025, 6, 13)),
        ("on friday of next week", MONDAY, date(2025, 6, 13)),
        ("next week on friday", MONDAY, date(2025, 6, 13)),
        ("monday next week", MONDAY, date(2025, 6, 9)),
        ("monday next week", SUNDAY, date(2025, 6, 9)),  # weeks run Monday to Sunday
        ("sunday next week", SUNDAY, date(2025, 6, 15)),
        ("wednesday next week", date(2025, 6, 6), date(2025, 6, 11)),  # from a Friday
    ],
)
def test_a_weekday_next_week_is_in_the_next_calendar_week(
    words: str, today: date, expected: date
) -> None:
    assert resolve_day(words, today) == expected
    assert expected.isocalendar().week == today.isocalendar().week + 1


def test_tomorrow_crosses_month_and_year() -> None:
    assert resolve_day("tomorrow", date(2025, 12, 31)) == date(2026, 1, 1)


@pytest.mark.parametrize(
    "words",
    ["someday", "next week", "fri", "", "yesterday", "friday next month", "next week friday on"],
)
def test_unknown_day_words_raise(words: str) -> None:
    with pytest.raises(ValueError, match="unknown day"):
        resolve_day(words, MONDAY)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("15:30", time(15, 30)),
        ("09:00", time(9)),
        ("half past three", time(15, 30)),
        ("Half-past 10", time(10, 30)),
        ("quarter past nine", time(9, 15)),
        ("quarter to four", time(15, 45)),
        ("quarter to twelve", time(11, 45)),
        ("3 pm", time(15)),
        ("3pm", time(15)),
        ("3:30 p.m.", time(15, 30)),
        ("10 am", time(10)),
        ("10 in the morning", time(10)),
        ("noon", time(12)),
        ("midday", time(12)),
        ("12 pm", time(12)),
        ("three o'clock", time(15)),
        ("at eleven", time(11)),
        ("three thirty", time(15, 30)),
        ("two oh five", time(14, 5)),
        ("3", time(15)),  # bare hours take the shop-hours reading
        ("9", time(9)),
        ("six", time(18)),
        ("seven", time(7)),
    ],
)
def test_time_words(words: str, expected: time) -> None:
    assert parse_time(words) == expected


@pytest.mark.parametrize("words", ["banana", "25:00", "half past banana", "13 pm", "10:75", ""])
def test_unknown_time_words_raise(words: str) -> None:
    with pytest.raises(ValueError, match="unknown time"):
        parse_time(words)


def test_slot_text_round_trips() -> None:
    assert slot_text(time(9, 30)) == "09:30"
    assert parse_slot("09:30") == time(9, 30)
    with pytest.raises(ValueError, match="HH:MM"):
        parse_slot("9:30")
