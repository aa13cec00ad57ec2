"""Digits read out in words become digits (voice_agent/dialogue/spoken.py), so the model and
the grammar's grounding can copy an order number a caller read out or a recognizer wrote
in words, or said whole in the thousands; counts and times said in words stay as they
are."""

from __future__ import annotations

import pytest

from voice_agent.dialogue.spoken import spoken_digits


@pytest.mark.parametrize(
    ("said", "written"),
    [
        ("the number is four oh two one three", "the number is 4 0 2 1 3"),
        ("number four, one, five, zero, two, cheers", "number 4 1 5 0 2, cheers"),
        ("double four one five", "4 4 1 5"),
        ("it's 4 oh 2 1 3", "it's 4 0 2 1 3"),
        ("Order Three Nine One Two Zero", "Order 3 9 1 2 0"),
        # an order number said whole, in the thousands
        ("has order fifty five thousand and ten shipped yet?", "has order 5 5 0 1 0 shipped yet?"),
        ("order forty thousand eight hundred and seventy-seven, please", "order 4 0 8 7 7, please"),
        ("forty thousand eight hundred", "4 0 8 0 0"),
    ],
)
def test_a_number_read_out_becomes_digits(said: str, written: str) -> None:
    assert spoken_digits(said) == written


@pytest.mark.parametrize(
    "line",
    ["can I have one of those, two tubes", "at one o'clock", "order 40213", "two or three days",
     "twenty five dollars", "a thousand thanks", "five six hundred", "oh no"],
)  # fmt: skip
def test_counts_times_and_digits_already_written_stay(line: str) -> None:
    assert spoken_digits(line) == line
