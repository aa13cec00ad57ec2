"""Shop-counter dialogues: order status, product search → reserve, reserving an item by
number, opening hours.

Agent rules: look an order up as soon as its number is said (no read-back: nothing is
written); search with the caller's own words; offer to hold an in-stock hit; reserve
only after the read-back and a yes, with the id copied from the result's brackets.
"""

from __future__ import annotations

from datetime import timedelta

from tools.bike_shop.catalogue import PRODUCTS, OrderState
from tools.bike_shop.results import OrderInfo, Reservation, SearchResult, ToolError, ToolErrorKind
from tools.bike_shop.schemas import MAX_QUANTITY
from voice_agent.brain import callers, lexicon, lines
from voice_agent.brain.dialogues import Intent, Sim, Thought
from voice_agent.brain.phrasing import surface
from voice_agent.brain.workshop_calls import pick_day
from voice_agent.dialogue.phrases import phrases

ORDER_ITEMS = ("a road tyre", "two inner tubes", "a light set", "a city helmet",
               "a floor pump", "brake pads", "a d lock", "a bike chain", "a winter tyre",
               "a multi tool")  # fmt: skip
ETA_DAYS = (-6, 9)
QUANTITY_WEIGHTS = {1: 0.6, 2: 0.3, 3: 0.1}

LOOK_UP = Thought("look up the order", "The caller gave an order number; look it up.")
TELL = Thought("tell them", "Pass on what the tool said and offer more help.")
REFUSED = Thought("say the problem", "The tool said no; tell the caller and see what they want.")
READ_BACK = Thought("read it back", "Product, quantity and name known; confirm first.")
OFFER_HOLD = Thought("offer to hold one", "Say what we have and offer to put one aside.")
RESERVE = Thought("reserve it", "The caller said yes; reserve with the id from the result.")


def _misread(s: Sim, number: str) -> str:
    """`number` with one digit misheard (a different digit); the first digit is kept, so
    the split's order-number pattern holds."""
    i = s.rng.randrange(1, len(number))
    digit = s.rng.choice([d for d in lexicon.DIGITS if d != number[i]])
    return number[:i] + digit + number[i + 1 :]


def order(s: Sim) -> None:
    s.begin(Intent.ORDER)
    number = lexicon.order_number(s.rng, s.split)
    eta = s.today + timedelta(days=s.rng.randint(*ETA_DAYS))
    with s.ctx.db.write() as conn:  # the shop's online orders, set up for this call
        conn.execute("INSERT OR IGNORE INTO orders VALUES (?, ?, ?, ?)",
                     (number, s.rng.choice(ORDER_ITEMS), s.rng.choice(list(OrderState)).value,
                      eta.isoformat()))  # fmt: skip
    twist = s.rng.choice(("none", "none", "none", "misheard", "twice"))
    readings = {"none": [number], "misheard": [_misread(s, number), number]}.get(
        twist, [_misread(s, number), _misread(s, number)]
    )
    form = lexicon.order_form(s.rng, s.split, readings[0])
    if s.rng.random() < 0.5:
        s.say_caller(callers.ORDER[("order",)], edges=True, order=form)
    else:
        s.say_caller(callers.ORDER[()], edges=True)
        s.say(lines.ASK_ORDER, Thought("need the number", "To look up an order I need its number."))
        s.say_caller(callers.GIVE_ORDER, order=form)
    for i, reading in enumerate(readings):
        found = s.call("order_status", LOOK_UP, order_number=reading)
        if isinstance(found, OrderInfo):
            s.say(f"{found.say} {phrases().anything_else}", TELL)
            return
        if i == len(readings) - 1:  # not found twice: a person takes over
            s.call("transfer_to_human", Thought("hand over", "Still not found; a colleague can "
                                                "help."), reason="could not help")  # fmt: skip
            s.ended = True
            return
        assert isinstance(found, ToolError)
        s.say(found.message, REFUSED)
        s.say_caller(
            callers.REREAD_ORDER, order=lexicon.order_form(s.rng, s.split, readings[i + 1])
        )


def search(s: Sim, name: str | None = None, *, opening: bool = True) -> None:
    """Search with the caller's words; then maybe reserve a hit (asking the name if
    `name` is None)."""
    if opening:
        s.begin(Intent.SEARCH)
    if s.rng.random() < 0.12:
        phrase, pid = s.pick(lexicon.UNSTOCKED_THINGS), None
    else:
        pid = s.rng.choice(list(lexicon.PRODUCT_PHRASES))
        phrase = lexicon.PRODUCT_PHRASES[pid].pick(s.rng, s.split)
    s.say_caller(callers.SEARCH, edges=opening, product=phrase)
    query = surface(s.casing, phrase)  # the caller's words, as transcribed
    found = s.call("search_products", Thought("search it", "The caller asks for a product; "
                                              "search with their words."), query=query)  # fmt: skip
    if isinstance(found, ToolError):
        s.say(f"{found.message} {phrases().anything_else}", REFUSED)
        return
    assert isinstance(found, SearchResult)
    stocked = [h for h in found.products if h.in_stock]
    if not stocked:
        s.say(f"{found.say} {phrases().anything_else}", TELL)
        return
    s.say(f"{found.say} {lines.OFFER_HOLD}", OFFER_HOLD)
    if s.rng.random() < 0.3:
        s.say_caller(callers.RESERVE_NO)
        s.say(phrases().anything_else, Thought("offer more help", "No reservation; ask if "
                                               "there's anything else."))  # fmt: skip
        return
    hit = s.rng.choice(stocked)
    quantity = s.rng.choices(list(QUANTITY_WEIGHTS), weights=list(QUANTITY_WEIGHTS.values()))[0]
    qty = lexicon.QUANTITY_FORMS[quantity].pick(s.rng, s.split)
    if hit is stocked[0] and s.rng.random() < 0.5:
        s.say_caller(callers.RESERVE_YES, qty=qty)
    else:
        s.say_caller(callers.RESERVE_YES, qty=qty, pname=hit.name)
    if s.rng.random() < 0.25:  # other customers take stock before the reservation
        _take_stock(s, hit.product_id, s.rng.randrange(quantity))
    reserve(s, hit.product_id, hit.name, quantity, name)


def _take_stock(s: Sim, product_id: str, leave: int) -> None:
    """Other customers reserve `product_id` until `leave` units are left."""
    stock = _stock(s, product_id)
    while stock > leave:
        quantity = min(MAX_QUANTITY, stock - leave)
        s.run("reserve_product", product_id=product_id, quantity=quantity, name=f"walk in {stock}")
        stock -= quantity


def _stock(s: Sim, product_id: str) -> int:
    with s.ctx.db.read() as conn:
        row = conn.execute("SELECT stock FROM products WHERE product_id = ?", (product_id,))
        found = row.fetchone()
    return int(found["stock"]) if found else 0


def reserve(s: Sim, product_id: str, product: str, quantity: int, name: str | None) -> None:
    """Ask the name if unknown, read back, reserve; handle a refusal."""
    if name is None:
        name = s.name(lexicon.person_name(s.rng, s.split))
        s.say(lines.ASK_NAME, Thought("need a name", "To hold it I need the caller's name."))
        s.say_caller(callers.GIVE_NAME, name=name)
    for _ in range(MAX_QUANTITY):
        if product:
            s.say(lines.confirm_reserve(quantity, product_id, name), READ_BACK)
        else:
            s.say(lines.confirm_item(product_id, name), READ_BACK)
        s.say_caller(callers.YES)
        done = s.call("reserve_product", RESERVE, product_id=product_id, quantity=quantity,
                      name=name)  # fmt: skip
        if isinstance(done, Reservation):
            s.say(f"{done.say} {phrases().anything_else}", TELL)
            return
        assert isinstance(done, ToolError)
        if done.kind is ToolErrorKind.NO_SUCH_PRODUCT:
            s.say(done.message, REFUSED)
            search(s, name, opening=False)
            return
        s.say(done.message, REFUSED)
        left = _stock(s, product_id)
        if done.alternatives and (s.rng.random() < 0.6 or not left):
            product_id = s.rng.choice(done.alternatives)
            product = next(p.name for p in PRODUCTS if p.product_id == product_id)
            s.say_caller(callers.ALTERNATIVE_YES, pname=product,
                         qty=lexicon.QUANTITY_FORMS[quantity].pick(s.rng, s.split))  # fmt: skip
        elif left:
            quantity = left
            s.say_caller(callers.FEWER, qty=lexicon.QUANTITY_FORMS.get(
                left, lexicon.QUANTITY_FORMS[1]).pick(s.rng, s.split))  # fmt: skip
        else:
            s.say_caller(callers.NEVER_MIND)
            s.say(phrases().anything_else, TELL)
            return


def reserve_by_id(s: Sim) -> None:
    """The caller reads an item number (from a flyer): maybe a real id, maybe not."""
    s.begin(Intent.RESERVE_BY_ID)
    if s.rng.random() < 0.5:
        item = s.pick(lexicon.MISSING_ITEM_IDS)
    else:
        item = s.rng.choice(list(lexicon.PRODUCT_PHRASES))
    said = item if s.rng.random() < 0.5 else " ".join(item)
    s.say_caller(callers.RESERVE_BY_ID, edges=True, item=said)
    reserve(s, item, "", 1, None)


def hours(s: Sim) -> None:
    s.begin(Intent.HOURS)
    day = pick_day(s)
    s.say_caller(callers.HOURS, edges=True, day=lexicon.day_form(s.rng, s.split, day))
    found = s.call("opening_hours", Thought("look up hours", "They ask about opening hours; "
                                            "check that day."), day=day)  # fmt: skip
    text = found.message if isinstance(found, ToolError) else found.say
    s.say(f"{text} {phrases().anything_else}", TELL)
