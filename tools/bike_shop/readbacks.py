"""How the agent reads a booking, a cancellation or a reservation back before making it.

The same templates write the training data's read-backs (voice_agent/brain/lines.py) and
lay out the engine's (engine/readback.py), so the words the model learned are the words
the engine places, and every value spoken is one the caller said.
"""

from __future__ import annotations

import functools

from engine.readback import SayTemplate, Spoken
from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.schemas import MAX_QUANTITY
from tools.bike_shop.timewords import parse_slot
from voice_agent.speech.say import say_count, say_digits, say_time

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


def _things(n: int, names: dict[str, str], product_id: str) -> str:
    """The product as said after its count: "city inner tubes" (2), "d lock" (1)."""
    return say_count(n, names[product_id]).split(" ", 1)[1]


def reserve_wordings() -> tuple[SayTemplate, ...]:
    """The read-back of a reservation, "Two city inner tubes for Ana, shall I put them
    aside?": its opening word is the count, so one wording per count (a quantity it
    fixes), and for one, per article ("A d lock ...", "An ..."), each speaking the
    products whose name takes it; then "Item one one two for Ana, shall I put it aside?"
    for a product asked for by its number."""
    names = {p.product_id: p.name for p in PRODUCTS}
    wordings: list[SayTemplate] = []
    for n in range(1, MAX_QUANTITY + 1):
        said = {pid: say_count(n, name) for pid, name in names.items()}
        for opening in sorted({s.split(" ", 1)[0] for s in said.values()}):
            ids = tuple(pid for pid, s in said.items() if s.split(" ", 1)[0] == opening)
            things = Spoken("product_id", functools.partial(_things, n, names), values=ids)
            them = "it" if n == 1 else "them"
            wordings.append(SayTemplate(
                "reserve_product",
                (f"{opening.capitalize()} ", things, " for ", Spoken("name"),
                 f", shall I put {them} aside?"),
                fixed=(("quantity", str(n)),),
            ))  # fmt: skip
    wordings.append(SayTemplate(
        "reserve_product",
        ("Item ", Spoken("product_id", say_digits, values=tuple(names)), " for ",
         Spoken("name"), ", shall I put it aside?"),
        fixed=(("quantity", "1"),),
    ))  # fmt: skip
    return tuple(wordings)


CONFIRM_RESERVE = reserve_wordings()


def confirm_reserve(product_id: str, quantity: int, name: str, *, by_number: bool = False) -> str:
    """The reservation read-back, in the wording for its count; "Item ..." when the caller
    asked for the product by its number (any number: the training data also reads back
    numbers the shop does not have, which the tool then refuses). Raises ValueError when
    no wording fits."""
    args = {"product_id": product_id, "quantity": str(quantity), "name": name}
    for template in CONFIRM_RESERVE:
        item = template.pieces[0] == "Item "
        if item == by_number and (item or template.fits(args)):
            return template.render(args)
    raise ValueError(f"no reservation read-back for {quantity} of product {product_id!r}")


READBACKS = (CONFIRM_BOOKING, CONFIRM_CANCEL, *CONFIRM_RESERVE)
