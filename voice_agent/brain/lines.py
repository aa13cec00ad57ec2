"""What the scripted agent says besides tool results: short, speakable, number-free
except for values the caller said or a tool returned (prompts/system.md)."""

from __future__ import annotations

from tools.bike_shop.speakable import say_count, say_digits, say_time
from tools.bike_shop.timewords import parse_slot

ASK_SERVICE = "Sure, what does the bike need?"
ASK_DAY = "Sure, what day suits you?"
WHICH_TIME = "Which time suits you?"
ASK_NAME = "And what name is it under?"
ASK_ORDER = "Sure, what's the order number?"
ASK_BOOKING_NAME = "Sure, what name is the booking under?"
ASK_BOOKING_DAY = "Which day is the booking for?"
OFFER_HOLD = "Shall I put it aside for you?"
OTHER_TIME = "What other time would suit you?"
HI_BACK = "Hi! How can I help?"
WELL = "I'm well, thanks! How can I help?"
WELCOME = "You're welcome."
RELATIVE_DAYS = ("today", "tomorrow")


def on_day(day: str) -> str:
    """A `schemas.Day` value as the agent says it: "tomorrow", "on friday", "next friday"."""
    return day if day in RELATIVE_DAYS or day.startswith("next ") else f"on {day}"


def confirm_booking(service: str, day: str, time: str, name: str) -> str:
    return (
        f"So a {service} {on_day(day)} at {say_time(parse_slot(time))} for {name}. "
        "Shall I book that?"
    )


def confirm_cancel(day: str, name: str) -> str:
    return f"Cancel your booking {on_day(day)} for {name}, is that right?"


def confirm_reserve(quantity: int, product: str, name: str) -> str:
    things = say_count(quantity, product)
    return f"{things[0].upper()}{things[1:]} for {name}, shall I put {_them(quantity)} aside?"


def confirm_item(item: str, name: str) -> str:
    return f"Item {say_digits(item)} for {name}, shall I put it aside?"


def _them(quantity: int) -> str:
    return "it" if quantity == 1 else "them"
