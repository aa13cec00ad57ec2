"""How the agent reads a booking or a cancellation back before making it.

The same templates write the training data's read-backs (voice_agent/brain/lines.py) and
lay out the engine's (engine/readback.py), so the words the model learned are the words
the engine places, and every value spoken is one the caller said.
"""

from __future__ import annotations

from engine.readback import SayTemplate, Spoken
from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.schemas import MAX_QUANTITY
from tools.bike_shop.timewords import parse_slot
from voice_agent.speech.say import number_words, say_digits, say_time

RELATIVE_DAYS = ("today", "tomorrow")


def on_day(day: str) -> str:
    """A `schemas.Day` value as the agent says it: "tomorrow", "on friday", "next friday",
    "on friday next week"."""
    return day if day in RELATIVE_DAYS or day.startswith("next ") else f"on {day}"


def at_time(slot: str) -> str:
    """A `schemas.SlotTime` ("09:30") as said: "half past nine"."""
    return say_time(parse_slot(slot))


CONFIRM_BOOKING = SayTemplate(
    "book_service",
    ("So a ", Spoken("service"), " ", Spoken("day", on_day), " at ", Spoken("time", at_time),
     " for ", Spoken("name"), ". Shall I book that?"),
)  # fmt: skip
CONFIRM_CANCEL = SayTemplate(
    "cancel_booking",
    ("Cancel your booking ", Spoken("day", on_day), " for ", Spoken("name"),
     ", is that right?"),
)  # fmt: skip
PRODUCT_NAMES = {p.product_id: p.name for p in PRODUCTS}


def the_product(product_id: str) -> str:
    """A product id as said: "the city inner tube" ("item one two three" when unknown)."""
    name = PRODUCT_NAMES.get(product_id)
    return f"the {name}" if name else f"item {say_digits(product_id)}"


def how_many(quantity: str) -> str:
    """A quantity as said after the product: nothing for one (the agent never says a
    number the caller did not), ", two of them," for more."""
    count = int(quantity)
    return "," if count == 1 else f", {number_words(count)} of them,"


CONFIRM_RESERVE = SayTemplate(
    "reserve_product",
    ("So that's ", Spoken("product_id", the_product, tuple(PRODUCT_NAMES)),
     Spoken("quantity", how_many, tuple(str(n) for n in range(1, MAX_QUANTITY + 1))),
     " for ", Spoken("name"), ". Shall I put that aside?"),
)  # fmt: skip
READBACKS = (CONFIRM_BOOKING, CONFIRM_CANCEL, CONFIRM_RESERVE)
