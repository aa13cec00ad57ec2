"""Incremental sentence splitting and speakable normalization (pure text)."""

from __future__ import annotations

import pytest

from voice_agent.speech.say import number_words, say_digits, say_price
from voice_agent.speech.sentences import SentenceSplitter, is_speakable, speakable

REPLY = (
    "Sure, Dr. Patel can look at it. The service costs $12.50 and takes 2.5 hours! "
    "We open at 9 a.m. Tomorrow works? J. Smith booked the 2:30 slot, e.g. the last one. "
    "No. 5 is free... See you then."
)
SENTENCES = [
    "Sure, Dr. Patel can look at it.",
    "The service costs $12.50 and takes 2.5 hours!",
    "We open at 9 a.m.",
    "Tomorrow works?",
    "J. Smith booked the 2:30 slot, e.g. the last one.",
    "No. 5 is free...",
    "See you then.",
]


def split_all(chunks: list[str], splitter: SentenceSplitter | None = None) -> list[str]:
    splitter = splitter or SentenceSplitter()
    out = [s for chunk in chunks for s in splitter.feed(chunk)]
    return out + splitter.flush()


def test_whole_text_splits_into_sentences() -> None:
    assert split_all([REPLY]) == SENTENCES


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16])
def test_any_chunking_gives_the_same_sentences(size: int) -> None:
    chunks = [REPLY[i : i + size] for i in range(0, len(REPLY), size)]
    assert split_all(chunks) == SENTENCES


def test_a_sentence_comes_out_as_soon_as_it_is_complete() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("Sure, I can book that.") == []  # "." could still be "that.com"
    assert splitter.feed(" It costs") == ["Sure, I can book that."]
    assert splitter.feed(" ten dollars! ") == ["It costs ten dollars!"]  # ! needs no lookahead
    assert splitter.feed("Anything else") == []
    assert splitter.pending == "Anything else"
    assert splitter.flush() == ["Anything else"]
    assert splitter.flush() == []


def test_decimals_and_times_are_not_cut() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("That is $12.") == []
    assert splitter.feed("50 at 2:") == []
    assert splitter.feed("30. Thanks") == ["That is $12.50 at 2:30."]


def test_titles_and_initials_never_end_a_sentence() -> None:
    assert split_all(["Ask Mr. Brown or Dr. Lee. Or J. R. Tolkien."]) == [
        "Ask Mr. Brown or Dr. Lee.",
        "Or J. R. Tolkien.",
    ]


def test_abbreviations_wait_for_the_next_word() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("Come at 9 a.m. ") == []  # the next word decides
    assert splitter.feed("tomorrow") == []  # lower case: the same sentence goes on
    assert splitter.feed(" or later. ") == ["Come at 9 a.m. tomorrow or later."]
    assert split_all(["Bring tools etc. We fix it."]) == ["Bring tools etc.", "We fix it."]


def test_line_breaks_end_sentences() -> None:
    assert split_all(["Booked\nAnything else"]) == ["Booked", "Anything else"]


def test_long_sentences_are_cut_at_a_clause_break() -> None:
    splitter = SentenceSplitter(max_chars=40, first_max_chars=40)
    text = "We have the red one, the blue one, the green one and the yellow one in stock"
    first = splitter.feed(text)
    assert first == ["We have the red one, the blue one,"]
    assert all(len(s) <= 40 for s in first)
    assert " ".join(first + splitter.feed(".") + splitter.flush()) == text + "."


LONG_FIRST = (
    "Your bike is booked in for a full service on Friday at half past two, and it should "
    "be ready by five, or six at the latest. Anything else?"
)


@pytest.mark.parametrize("size", [1, 5, 13, len(LONG_FIRST)])
def test_a_long_first_sentence_is_cut_early_whatever_the_chunking(size: int) -> None:
    # Over the first-sentence limit (60) with no break within it: cut at the first break
    # after it; later sentences only at 160.
    chunks = [LONG_FIRST[i : i + size] for i in range(0, len(LONG_FIRST), size)]
    assert split_all(chunks, SentenceSplitter(first_max_chars=60)) == [
        "Your bike is booked in for a full service on Friday at half past two,",
        "and it should be ready by five, or six at the latest.",
        "Anything else?",
    ]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SentenceSplitter(max_chars=0)
    with pytest.raises(ValueError):
        SentenceSplitter(first_max_chars=0)


def test_is_speakable() -> None:
    assert is_speakable("OK.")
    assert is_speakable("42")
    assert not is_speakable("...")
    assert not is_speakable(" - ")


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("It costs $12.50.", f"It costs {say_price(1250)}."),
        ("It costs $1,299.", f"It costs {say_price(129_900)}."),
        ("Only $0.99 each", f"Only {say_price(99)} each"),
        ("Open 9:00 to 17:30.", "Open nine o'clock to half past five."),
        ("At 14:15 or 12:00", "At quarter past two or noon"),
        ("At 2:30 pm or 10am.", "At two thirty p m or ten a m."),
        ("Come at 9 a.m.", "Come at nine a m."),
        ("Your order number is 40213.", f"Your order number is {say_digits('40213')}."),
        ("Order #512 shipped", f"Order {say_digits('512')} shipped"),
        ("Booking 77 is set", f"Booking {say_digits('77')} is set"),
        ("Ticket #88", f"Ticket number {say_digits('88')}"),
        ("On the 21st or 3rd", "On the twenty-first or third"),
        ("That is 2.5 miles", "That is two point five miles"),
        ("Save 10% now", "Save ten percent now"),
        ("We sold 1,299 bikes", f"We sold {number_words(1299)} bikes"),
        ("We have 12 in stock", "We have twelve in stock"),
        ("Call 5551234", f"Call {say_digits('5551234')}"),
        ("Spokes & chains", "Spokes and chains"),
        ("No numbers here.", "No numbers here."),
    ],
)
def test_speakable(text: str, spoken: str) -> None:
    assert speakable(text) == spoken
