"""Argument models of the bike shop's tools; their JSON schemas lay out the engine's calls.

The engine's `CallGrammar` (engine/constraints.py) places keys and punctuation and only
denoises values, so every field here is written to be decodable under its constraints:

* closed sets are `Literal`s (one joint choice among the values): service types, day
  words, half-hour start times, transfer reasons; day words and services are also
  `grounded` (`_heard()`): when the conversation names one or more of the values, the
  choice is among those (a caller's "Friday" is never decoded as "tomorrow"; a service
  also by its head words, `SERVICE_SAID_AS`: "puncture" names a flat repair; "friday of
  next week" names friday next week, `DAY_SAID_AS`), else among
  all (the caller may have used a synonym); a booking's start time
  too, said as "half past nine", "9.30" or "at 2" (`_time_said_as`);
* numbers read out by the caller (order numbers) and ids copied from a tool result
  (product ids) are digit strings, `grounded`: each digit must occur in the prompt;
* names and free-text queries are `str` with `min_length=1`, a token budget
  (`max_tokens`) and `grounded`, so they are copied from the conversation, never invented;
  names are also `distinct`: never a phrase with a number or a day, time or service word,
  and `person_name`: chosen among the caller's phrases that look like a name (engine/names.py);
  a query is `asked_for`: chosen among what the caller's latest request asks for;
* a quantity is a small `int` (an unquoted digit slot as wide as its maximum), `counted`:
  chosen among the counts the caller said ("a couple of", "two of them") when any;
  a product id is `labelled`: the id whose name in the search result the caller named;
* every field is required: the grammar lays out required fields only, so an optional
  field could never be filled by the model.

Day words are resolved against the shop's clock by `tools.bike_shop.timewords`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from tools.bike_shop.catalogue import WEEKDAYS
from tools.bike_shop.timewords import NUMBER_WORDS, next_week_words

Service = Literal[
    "tune-up",
    "flat repair",
    "brake check",
    "chain replacement",
    "wheel true",
    "gear adjustment",
    "e-bike check",
]
"""Workshop services; durations and daily capacity live in `catalogue.SERVICES`."""

SERVICE_SAID_AS: dict[str, str] = {
    "tune-up": r"\b(?:tune|service[ds]?|servicing)\b",
    "flat repair": r"\b(?:flats?|punctures?|punctured)\b",
    "brake check": r"\bbrakes?\b",
    "chain replacement": r"\bchain\b",
    "wheel true": r"\b(?:wheels?|buckled)\b",
    "gear adjustment": r"\b(?:gears?|shifting|shifter)\b",
    "e-bike check": r"\b(?:e-?bikes?|electric bikes?)\b",
}
"""Each service's head words, for a caller who names it without its own name ("a
check on my brakes", "my puncture mended"). A line naming two ("a puncture in my back
wheel") leaves both for the model to choose between."""

Day = Literal[
    "today", "tomorrow",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "next monday", "next tuesday", "next wednesday", "next thursday", "next friday",
    "next saturday", "next sunday",
    "monday next week", "tuesday next week", "wednesday next week", "thursday next week",
    "friday next week", "saturday next week", "sunday next week",
]  # fmt: skip
"""Day words as a caller says them; `timewords.resolve_day` turns them into dates. "next
friday" is the first Friday after today; "friday next week" is the Friday of next
calendar week: on a Monday they are four days and eleven days away."""

DAY_SAID_AS: dict[str, str] = {f"{d} next week": rf"\b(?:{next_week_words(d)})\b" for d in WEEKDAYS}
"""Other ways to say a "... next week" day ("friday of next week", "next week on friday"),
so its grounding never falls back to the bare weekday inside them."""

SlotTime = Literal[
    "09:00", "09:30", "10:00", "10:30", "11:00", "11:30", "12:00", "12:30", "13:00",
    "13:30", "14:00", "14:30", "15:00", "15:30", "16:00", "16:30", "17:00", "17:30",
    "18:00", "18:30",
]  # fmt: skip
"""Service start times: the half hours from the earliest opening to the last half hour
before the latest closing (`catalogue.OPENING_HOURS`); a given day may allow fewer."""

TransferReason = Literal[
    "caller asked",
    "complaint",
    "warranty claim",
    "refund",
    "out of scope",
    "could not help",
]
"""Why the call goes to a person: a closed set, so the reason is never invented."""

ORDER_NUMBER_DIGITS = (4, 6)
"""Shortest and longest order number, in digits."""
PRODUCT_ID_DIGITS = 3
MAX_QUANTITY = 9
"""Most units one call may reserve; one digit, so the quantity slot is one token wide."""
NAME_TOKENS = 14
"""Token budget of a name slot: a first and last name in a small BPE vocabulary."""
QUERY_TOKENS = 8


def _grounded(
    max_tokens: int, distinct: bool = False, person_name: bool = False, asked_for: bool = False
) -> Any:
    extra: dict[str, Any] = {"max_tokens": max_tokens, "grounded": True, "distinct": distinct,
                             "person_name": person_name, "asked_for": asked_for}  # fmt: skip
    return Field(min_length=1, json_schema_extra=extra)


def _heard(said_as: dict[str, str] | None = None) -> Any:
    """A closed set whose value the caller names: chosen among the values said, if any.
    `said_as`: value → regex of other ways to say it."""
    extra: dict[str, Any] = {"grounded": True}
    if said_as:
        extra["said_as"] = said_as
    return Field(json_schema_extra=extra)


_HOUR_WORDS = {hour: word for word, hour in NUMBER_WORDS.items()}
_NOT_AFTER_DIGITS = r"(?<![\d:.,])(?<!\d )"
"""Not inside a longer number or digits read out one by one ("item 1 8 8")."""
_NOT_BEFORE_DIGITS = r"(?!\d|[:.,]\d| \d)"


def _time_said_as(slot: str) -> str:
    """How a caller says the start time `slot` ("HH:MM"): "9:30", "9.30", "09:30",
    "half past nine", "half nine" (British), "nine thirty"; a whole hour also bare ("at 2",
    "three sharp", "10 am"). Every slot's 12-hour reading is unique within shop hours, so a
    bare "2" can only be 14:00. A bare "one" is too common a word ("one of those") to count;
    "one o'clock", "1 pm", "at one" and "make it one" do."""
    hour24, minute = (int(part) for part in slot.split(":"))
    hour12 = hour24 % 12 or 12
    word = _HOUR_WORDS[hour12]
    digits = {str(hour12), str(hour24), f"{hour24:02d}"}
    numbers = "|".join(sorted(digits, key=len, reverse=True))
    if minute == 30:
        forms = [
            rf"{_NOT_AFTER_DIGITS}(?:{numbers})[:. ]30{_NOT_BEFORE_DIGITS}",
            rf"\bhalf past {word}\b",
            rf"\bhalf {word}\b",  # British: "half nine" is 9:30
            rf"\b{word}[- ]thirty\b",
        ]
    else:
        bare_word = rf"\b{word}\b(?![- ](?:thirty|fifteen|forty|twenty|fifty))"
        if word == "one":
            bare_word = (
                r"(?:\bone(?= o'?clock| ?[ap]\.?m\b)"
                r"|(?<=\bmake it )one\b|(?<=\bat )one\b(?! (?:of|point|time|go)\b))"
            )
        forms = [
            rf"{_NOT_AFTER_DIGITS}(?:{numbers})(?:[:.]00)?{_NOT_BEFORE_DIGITS}(?! ?30\b)",
            rf"(?<!past )(?<!half ){bare_word}",
        ]
        if hour24 == 12:
            forms.append(r"\b(?:noon|midday)\b")
    return "|".join(forms)


def _digits(least: int, most: int, labelled: bool = False) -> Any:
    """Digits copied from the conversation; `labelled`: picked by the label a tool result
    gives the number when the caller names it ("[107 winter tyre]")."""
    extra: dict[str, Any] = {"grounded": True, "labelled": labelled}
    return Field(pattern=r"^\d+$", min_length=least, max_length=most, json_schema_extra=extra)


class ToolArgs(BaseModel):
    """Base of every argument model: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckAvailability(ToolArgs):
    """Free start times for a service on a day."""

    day: Day = _heard(DAY_SAID_AS)
    service: Service = _heard(SERVICE_SAID_AS)


class BookService(ToolArgs):
    """Book a workshop service; a retried identical booking is not duplicated."""

    name: str = _grounded(NAME_TOKENS, distinct=True, person_name=True)
    day: Day = _heard(DAY_SAID_AS)
    time: SlotTime = _heard({t: _time_said_as(t) for t in get_args(SlotTime)})
    service: Service = _heard(SERVICE_SAID_AS)


class CancelBooking(ToolArgs):
    """Cancel the caller's bookings on a day."""

    name: str = _grounded(NAME_TOKENS, distinct=True, person_name=True)
    day: Day = _heard(DAY_SAID_AS)


class OrderStatus(ToolArgs):
    """Look up an online order by the number the caller reads out digit by digit."""

    order_number: str = _digits(*ORDER_NUMBER_DIGITS)


class SearchProducts(ToolArgs):
    """Search the catalogue with the caller's own words."""

    query: str = _grounded(QUERY_TOKENS, asked_for=True)


class ReserveProduct(ToolArgs):
    """Put a product aside for pickup; `product_id` is copied from a search result."""

    product_id: str = _digits(PRODUCT_ID_DIGITS, PRODUCT_ID_DIGITS, labelled=True)
    quantity: int = Field(ge=1, le=MAX_QUANTITY, json_schema_extra={"counted": True})
    name: str = _grounded(NAME_TOKENS, distinct=True, person_name=True)


class OpeningHours(ToolArgs):
    """Opening hours on a day."""

    day: Day = _heard(DAY_SAID_AS)


class TransferToHuman(ToolArgs):
    """Hand the call to a person."""

    reason: TransferReason


class EndCall(ToolArgs):
    """Hang up politely; no arguments (the call reads `"arguments": {}`)."""


ARGUMENT_MODELS: dict[str, type[BaseModel]] = {
    "check_availability": CheckAvailability,
    "book_service": BookService,
    "cancel_booking": CancelBooking,
    "order_status": OrderStatus,
    "search_products": SearchProducts,
    "reserve_product": ReserveProduct,
    "opening_hours": OpeningHours,
    "transfer_to_human": TransferToHuman,
    "end_call": EndCall,
}
"""Tool name → argument model; `CallGrammar(tok, ARGUMENT_MODELS)` lays out the calls."""
