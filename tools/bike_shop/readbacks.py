"""How the agent reads a booking or a cancellation back before making it.

The same templates write the training data's read-backs (voice_agent/brain/lines.py) and
lay out the engine's (engine/readback.py), so the words the model learned are the words
the engine places, and every value spoken is one the caller said.
"""

from __future__ import annotations

from engine.readback import SayTemplate, Spoken
from tools.bike_shop.timewords import parse_slot
from voice_agent.speech.say import say_time

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
READBACKS = (CONFIRM_BOOKING, CONFIRM_CANCEL)
