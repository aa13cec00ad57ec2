"""What the shop's tools return: frozen results with a speakable line, or a `ToolError`
(`tools.core`, with `Handoff` and `CallAction`, which every pack shares).

Every result carries `say`, a short sentence the agent can speak as is (numbers, times
and prices in words). `to_dict` gives the JSON-ready form fed back to the model as a
tool-result turn. A tool that cannot do what was asked raises `ToolError`: a kind the
agent can branch on, a speakable message, and alternatives (times, dates, product ids)
to offer instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tools.bike_shop.catalogue import OrderState
from tools.core import CallAction as CallAction
from tools.core import CallRefusal as CallRefusal
from tools.core import Handoff as Handoff
from tools.core import ToolError as ToolError


class ToolErrorKind(Enum):
    """The shop's refusals (`tools.core.CallRefusal` holds the ones every pack has)."""

    NO_SUCH_ORDER = "no_such_order"
    NO_SUCH_BOOKING = "no_such_booking"
    NO_SUCH_PRODUCT = "no_such_product"
    NO_MATCH = "no_match"
    """A product search found nothing."""
    FULLY_BOOKED = "fully_booked"
    """The service's capacity that day is used up."""
    SLOT_TAKEN = "slot_taken"
    """That start time is taken; other times that day are free."""
    OUT_OF_STOCK = "out_of_stock"
    CLOSED_THAT_DAY = "closed_that_day"
    INVALID_TIME = "invalid_time"
    """Outside opening hours, or the service would run past closing."""
    IN_THE_PAST = "in_the_past"
    LIMIT_REACHED = "limit_reached"
    """The caller already holds as many bookings or reservations as one caller may."""


@dataclass(frozen=True, slots=True)
class Availability:
    day: str
    """ISO date."""
    service: str
    times: tuple[str, ...]
    """Free "HH:MM" start times, earliest first."""
    say: str


@dataclass(frozen=True, slots=True)
class Booking:
    booking_id: int
    name: str
    day: str
    time: str
    service: str
    duration_min: int
    price_cents: int
    already_booked: bool
    """True when an identical booking existed (a retried call): nothing new was written."""
    say: str


@dataclass(frozen=True, slots=True)
class Cancellation:
    name: str
    day: str
    services: tuple[str, ...]
    already_cancelled: bool
    """True when the bookings had been cancelled before (a retried call)."""
    say: str


@dataclass(frozen=True, slots=True)
class OrderInfo:
    order_number: str
    item: str
    state: OrderState
    eta: str
    """ISO date of (expected) arrival."""
    say: str


@dataclass(frozen=True, slots=True)
class ProductHit:
    product_id: str
    name: str
    price_cents: int
    in_stock: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    products: tuple[ProductHit, ...]
    """Best match first; in-stock before out-of-stock at equal relevance."""
    say: str


@dataclass(frozen=True, slots=True)
class Reservation:
    reference: str
    """Digits the caller quotes at pickup."""
    product_id: str
    product_name: str
    quantity: int
    total_cents: int
    name: str
    hold_until: str
    """ISO date; the goods go back on the shelf after it."""
    already_reserved: bool
    """True when an identical reservation was made today (a retried call)."""
    say: str


@dataclass(frozen=True, slots=True)
class Hours:
    day: str
    opens: str | None
    """ "HH:MM", None when closed all day."""
    closes: str | None
    say: str


ToolResult = (
    Availability | Booking | Cancellation | OrderInfo | SearchResult | Reservation | Hours | Handoff
)


def to_dict(result: ToolResult) -> dict[str, Any]:
    """The JSON-ready form of a result (enums as their values)."""
    plain: dict[str, Any] = _plain(dataclasses.asdict(result))
    return plain


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
