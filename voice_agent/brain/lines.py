"""What the scripted agent says besides tool results: short, speakable, number-free
except for values the caller said or a tool returned (prompts/system.md)."""

from __future__ import annotations

from tools.bike_shop import readbacks
from tools.bike_shop.readbacks import CONFIRM_BOOKING, CONFIRM_CANCEL

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


def confirm_reserve(quantity: int, product_id: str, name: str) -> str:
    return readbacks.confirm_reserve(product_id, quantity, name)


def confirm_item(item: str, name: str) -> str:
    return readbacks.confirm_reserve(item, 1, name, by_number=True)
