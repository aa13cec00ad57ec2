"""What the scripted agent says besides tool results: short, speakable, number-free
except for values the caller said or a tool returned (prompts/system.md)."""

from __future__ import annotations

from tools.bike_shop.readbacks import CONFIRM_BOOKING, CONFIRM_CANCEL
from voice_agent.speech.say import say_count, say_digits

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


def confirm_booking(service: str, day: str, time: str, name: str) -> str:
    return CONFIRM_BOOKING.render({"service": service, "day": day, "time": time, "name": name})


def confirm_cancel(day: str, name: str) -> str:
    return CONFIRM_CANCEL.render({"day": day, "name": name})


def confirm_reserve(quantity: int, product: str, name: str) -> str:
    things = say_count(quantity, product)
    return f"{things[0].upper()}{things[1:]} for {name}, shall I put {_them(quantity)} aside?"


def confirm_item(item: str, name: str) -> str:
    return f"Item {say_digits(item)} for {name}, shall I put it aside?"


def _them(quantity: int) -> str:
    return "it" if quantity == 1 else "them"
