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
from datetime import datetime
from typing import Any, get_args

from tools.bike_shop import schemas, store, workshop
from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.db import ShopContext, ShopDb
from tools.bike_shop.readbacks import READBACKS
from tools.bike_shop.results import SearchResult, ToolErrorKind, ToolResult
from tools.bike_shop.shop import open_shop
from tools.core import CallAction, Handoff, ToolError, ToolPack, ToolSpec

DB_TIMEOUT_S = 2.0
"""A database tool that has not answered by then is apologised for."""
INSTANT_TIMEOUT_S = 0.5


def transfer_to_human(args: schemas.TransferToHuman, ctx: ShopContext) -> Handoff:
    """The agent transfers the call after saying `say`."""
    return Handoff(
        CallAction.TRANSFER, args.reason, "Let me put you through to a colleague, one moment."
    )


def end_call(args: schemas.EndCall, ctx: ShopContext) -> Handoff:
    """The agent hangs up after saying `say`."""
    return Handoff(CallAction.HANG_UP, "", "Thanks for calling, have a good day!")


TOOLS: dict[str, ToolSpec[Any, ShopContext]] = {
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
    """Validate `arguments` for tool `name` and run it (`PACK.call`). Raises ToolError
    only: an unknown tool or invalid arguments are `CallRefusal`s."""
    result: ToolResult = PACK.call(name, arguments, ctx)
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
"""Irreversible tools and the caller acts (caller-hint labels, voice_agent/dialogue/hints.py)
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
GOODBYE_SAID = (
    r"\b(?:bye|goodbye|cheers|ta|thanks|thank you|thank u|take care|see (?:you|ya)|later|"
    r"that'?s (?:all|it|everything|me done)|that'?ll be all|nothing else|no more questions|"
    r"covers it|all (?:good|set|done)|i'?m (?:good|fine|done|sorted)|sorted|have a (?:good|nice)|"
    r"never ?mind|forget it|got(?:ta| to) (?:go|run)|have to go|call back|hang up|cya|ciao|"
    r"adios|merci|tschüss|tchau|dziekuje|dzięki|obrigad[oa]|gracias|danke)\b"
    r"|^\W*(?:no|nope|nah|no no)\W*$"
)
"""A goodbye in the caller's words, which `end_call` needs besides a line read as one: a
line the hint reader takes for a goodbye ("hmm, no, I think I'll leave it for now" after
an offer to hold a lock) is answered, not hung up on (a dev line). A bare "no" (to
"anything else?") is one."""
HELD_BACK = (
    r"\b(?:don'?t|do not|dont|actually,? no|wait,? no|hang on|hold on|never ?mind|"
    r"changed? my mind|leave it|forget it|not anymore|no longer)\b"
)
"""Words by which a caller holds a write back whatever else the line says ("hmm, actually
no, don't cancel it" was read as a yes and cancelled, a dev call). In no line labelled a
yes to a read-back in the training and dev splits; in 19 labelled otherwise."""
PERSON_SAID = (
    r"\b(?:someone|somebody|anyone|anybody|person|people|human|manager|staff|colleague|"
    r"mechanic|owner|operator|agent|talk to|speak to|speak with|talk with|put me through|"
    r"real one)\b"
)
"""A person asked for, which a transfer from a line's closing words needs: a last clause
the hint reader takes for a complaint ("it's started clipping the frame when I ride",
a train call transferred) does not count."""
TRANSFER_SAID = (
    PERSON_SAID + r"|\b(?:complain\w*|refund\w*|money back|warrant\w*|guarantee\w*|rude|"
    r"unacceptable|ridiculous|joke|disgrace\w*|furious|not (?:happy|impressed|good enough)|"
    r"charged|overcharg\w*|scratch\w*|damag\w*|broke|broken|snapped|faulty|defective|"
    r"return\w*|exchange|swap\w*|sort (?:it|this) out|compensat\w*)\b"
)
"""A transfer needs, besides a line read as one, a person asked for or a complaint, refund
or warranty in the caller's words: a symptom the hint reader took for a complaint ("my
e-bike motor's making a horrible grinding noise", a train call) is answered, not handed
over. 80 of the 81 train and dev lines labelled a transfer have such words."""
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


PRODUCT_NAMES = {p.product_id: p.name for p in PRODUCTS}


def result_notes(outcome: object) -> str:
    """What the model reads after a result's line: the product ids a reserve call may
    copy (a search's hits in stock, an out-of-stock refusal's alternatives), with their
    names, as `[107 winter tyre; 108 ...]`."""
    pairs: list[tuple[str, str]] = []
    if isinstance(outcome, ToolError) and outcome.kind is ToolErrorKind.OUT_OF_STOCK:
        pairs = [(pid, PRODUCT_NAMES.get(pid, "")) for pid in outcome.alternatives]
    elif isinstance(outcome, SearchResult):
        pairs = [(h.product_id, h.name) for h in outcome.products if h.in_stock]
    return " [" + "; ".join(f"{pid} {name}" for pid, name in pairs) + "]" if pairs else ""


@dataclass(frozen=True, slots=True)
class ShopState:
    """The shop's database in one process (`tools.core.PackState`)."""

    db: ShopDb
    now: Callable[[], datetime]

    def context(self) -> ShopContext:
        return ShopContext(self.db, self.now)

    def writable(self) -> bool:
        return self.db.writable()

    def close(self) -> None:
        self.db.close()


def open_state(where: str, now: Callable[[], datetime]) -> ShopState:
    """Open the shop at `where` (a SQLite path or a `postgresql://` URL), created and
    seeded relative to `now()`'s date when new."""
    return ShopState(open_shop(where, now().date()), now)


PACK: ToolPack[ShopContext] = ToolPack(
    name="bike_shop",
    tools=TOOLS,
    result_types=tuple(t for t in get_args(ToolResult) if t is not Handoff),
    open=open_state,
    readbacks=READBACKS,
    consent=CONSENT,
    closing=frozenset({"end_call", "transfer_to_human"}),
    said={"end_call": GOODBYE_SAID, "transfer_to_human": TRANSFER_SAID},
    closing_said={"transfer_to_human": PERSON_SAID},
    held_back=dict.fromkeys(("book_service", "cancel_booking", "reserve_product"), HELD_BACK),
    notes=result_notes,
)
"""The bike shop as a tool pack (`[tools] pack = "bike_shop"`, the default)."""
