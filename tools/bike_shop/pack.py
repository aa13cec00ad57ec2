"""The bike shop tool pack: name → (argument model, implementation, description, timeout).

The agent calls `call_tool(name, arguments, ctx)` with the arguments the engine decoded;
it returns a result (see `results`) or raises `ToolError` — never anything else for bad
input, so a tool call always becomes something the agent can say. Implementations are
synchronous and touch SQLite: run them off the event loop (`asyncio.to_thread`) under
`spec.timeout_s`, and turn a timeout into an apology.

    ctx = ShopContext(open_shop(path, today=date.today()), now=datetime.now)
    hits = call_tool("search_products", {"query": "front light"}, ctx)
    call_tool("reserve_product", {"product_id": hits.products[0].product_id, ...}, ctx)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from tools.bike_shop import schemas, store, workshop
from tools.bike_shop.db import ShopContext
from tools.bike_shop.results import CallAction, Handoff, ToolError, ToolErrorKind, ToolResult
from voice_agent.speech.say import say_list

A = TypeVar("A", bound=BaseModel)

DB_TIMEOUT_S = 2.0
"""A database tool that has not answered by then is apologised for."""
INSTANT_TIMEOUT_S = 0.5


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[A]):
    name: str
    args_model: type[A]
    run: Callable[[A, ShopContext], ToolResult]
    description: str
    """One line for the system prompt."""
    timeout_s: float


def transfer_to_human(args: schemas.TransferToHuman, ctx: ShopContext) -> Handoff:
    """The agent transfers the call after saying `say`."""
    return Handoff(
        CallAction.TRANSFER, args.reason, "Let me put you through to a colleague, one moment."
    )


def end_call(args: schemas.EndCall, ctx: ShopContext) -> Handoff:
    """The agent hangs up after saying `say`."""
    return Handoff(CallAction.HANG_UP, "", "Thanks for calling, have a good day!")


TOOLS: dict[str, ToolSpec[Any]] = {
    spec.name: spec
    for spec in (
        ToolSpec("check_availability", schemas.CheckAvailability, workshop.check_availability,
                 "free start times for a workshop service on a day", DB_TIMEOUT_S),
        ToolSpec("book_service", schemas.BookService, workshop.book_service,
                 "book a workshop service for the caller at a time", DB_TIMEOUT_S),
        ToolSpec("cancel_booking", schemas.CancelBooking, workshop.cancel_booking,
                 "cancel the caller's bookings on a day", DB_TIMEOUT_S),
        ToolSpec("order_status", schemas.OrderStatus, store.order_status,
                 "status of an online order by its number", DB_TIMEOUT_S),
        ToolSpec("search_products", schemas.SearchProducts, store.search_products,
                 "search the shop's products; gives product ids, prices and stock", DB_TIMEOUT_S),
        ToolSpec("reserve_product", schemas.ReserveProduct, store.reserve_product,
                 "put a product (id from a search) aside for pickup", DB_TIMEOUT_S),
        ToolSpec("opening_hours", schemas.OpeningHours, workshop.opening_hours,
                 "the shop's opening hours on a day", DB_TIMEOUT_S),
        ToolSpec("transfer_to_human", schemas.TransferToHuman, transfer_to_human,
                 "hand the call to a person", INSTANT_TIMEOUT_S),
        ToolSpec("end_call", schemas.EndCall, end_call,
                 "say goodbye and hang up", INSTANT_TIMEOUT_S),
    )
}  # fmt: skip
"""The registry; its argument models are `schemas.ARGUMENT_MODELS`."""


def call_tool(name: str, arguments: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
    """Validate `arguments` for tool `name` and run it. Raises ToolError only: an unknown
    tool or invalid arguments become UNKNOWN_TOOL / INVALID_ARGUMENTS."""
    spec = TOOLS.get(name)
    if spec is None:
        raise ToolError(ToolErrorKind.UNKNOWN_TOOL, "Sorry, I can't do that over the phone.")
    try:
        args = spec.args_model.model_validate(dict(arguments))
    except ValidationError as exc:
        keys = dict.fromkeys(str(e["loc"][0]).replace("_", " ") for e in exc.errors() if e["loc"])
        what = f"the {say_list(list(keys))}" if keys else "that"
        raise ToolError(
            ToolErrorKind.INVALID_ARGUMENTS, f"Sorry, I didn't catch {what}. Could you repeat it?"
        ) from None
    result: ToolResult = spec.run(args, ctx)
    return result


TRANSFER_ACTS = frozenset(
    {"transfer caller asked", "transfer complaint", "transfer refund", "transfer warranty claim",
     "transfer out of scope", "off topic"}
)  # fmt: skip
IRREVERSIBLE_CONSENT: dict[str, frozenset[str]] = {
    "end_call": frozenset({"done", "hang up", "thanks", "never mind"}),
    "transfer_to_human": TRANSFER_ACTS,
    "cancel_booking": frozenset({"yes"}),
}
"""Irreversible tools and the caller acts (caller-hint labels, voice_agent/brain/hints.py)
that ask for them: `end_call` only after a goodbye, a transfer only after a request for a
person (or a line the shop cannot help with), a cancellation only after a yes to its
read-back."""
LOOKUP_CONSENT: dict[str, frozenset[str]] = {
    "search_products": frozenset(
        {"search", "reserve yes", "reserve by id", "reserve no", "fewer", "alternative yes"}
    ),
    "opening_hours": frozenset({"hours"}),
    "order_status": frozenset({"order", "give order", "reread order"}),
}
"""Lookups that answer one kind of request: a product search only when the caller asks
about products, opening hours only when asked about them, an order only about an order
(a booking request must not turn into a product search)."""
WRITE_CONSENT: dict[str, frozenset[str]] = {
    "book_service": frozenset({"yes", "alternative yes"}),
    "reserve_product": frozenset({"yes", "alternative yes"}),
}
"""Writes wait for a yes to their read-back (prompts/system.md rule 4)."""
CONSENT = {**IRREVERSIBLE_CONSENT, **WRITE_CONSENT}
"""What the agent's consent rule checks in the pipeline (`Agent(consent=...)`): a call of
one of these tools after a caller line of another act is not run, and the model answers
again without the tool. LOOKUP_CONSENT is not in it: on the dev split it raised exact
actions 0.645 -> 0.67 but wrong writes in calls 7 -> 12 (scripts/eval_callers.py)."""
