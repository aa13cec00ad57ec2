"""Caller lines and calls written independently of the simulator (`data/callers/`).

Authors who never read the simulator wrote them from the shop's facts and the label
format alone (`data/callers/FACTS.md`, `data/callers/LABELS.md`). This module reads and
checks them; `scripts/check_callers.py` runs the check and `scripts/eval_brain.py` scores
the brain on the frozen test split.

Two record kinds, one JSON object per line:

* `LineCase`: one caller line (`after`: the agent's line before it, or None for the first
  words of a call), its act and the argument values it states;
* `CallCase`: a whole call as the caller's lines, with the writes it must end with, the
  lookups it must make and how it ends.

Every call happens on `CALL_DAY` (a Tuesday) at `CALL_TIME`: day words resolve against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from enum import Enum
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from tools.bike_shop.catalogue import OPENING_HOURS, PRODUCTS, SERVICES, WEEKDAYS
from tools.bike_shop.schemas import ARGUMENT_MODELS, Day, SlotTime, TransferReason
from tools.bike_shop.timewords import parse_slot, resolve_day

CALL_DAY = date(2026, 12, 8)
"""A Tuesday: "today" in every independent call."""
CALL_TIME = time(11, 0)
CALL_NOW = datetime.combine(CALL_DAY, CALL_TIME)


class Act(Enum):
    BOOK = "book"
    AVAILABILITY = "availability"
    CANCEL = "cancel"
    ORDER = "order"
    SEARCH = "search"
    RESERVE = "reserve"
    HOURS = "hours"
    TRANSFER = "transfer"
    END = "end"
    INFO = "info"
    OUT_OF_SCOPE = "out_of_scope"
    CHITCHAT = "chitchat"
    UNCLEAR = "unclear"
    YES = "yes"
    NO = "no"
    GIVE_INFO = "give_info"
    CORRECTION = "correction"


ACT_TOOL: dict[Act, str | None] = {
    Act.BOOK: "book_service",
    Act.AVAILABILITY: "check_availability",
    Act.CANCEL: "cancel_booking",
    Act.ORDER: "order_status",
    Act.SEARCH: "search_products",
    Act.RESERVE: "reserve_product",
    Act.HOURS: "opening_hours",
    Act.TRANSFER: "transfer_to_human",
    Act.END: "end_call",
}
"""The tool an act leads to; acts not listed lead to no tool of their own."""

WRITES = frozenset({"book_service", "cancel_booking", "reserve_product"})
LOOKUPS = frozenset({"check_availability", "order_status", "search_products", "opening_hours"})
IRREVERSIBLE = frozenset({"end_call", "transfer_to_human", "cancel_booking"})
ENDINGS = frozenset({"end_call", "transfer_to_human"})

_SERVICES = {s.name for s in SERVICES}
_PRODUCT_IDS = {p.product_id for p in PRODUCTS}
_DAYS = set(get_args(Day))
_TIMES = set(get_args(SlotTime))
_REASONS = set(get_args(TransferReason))
_ALL_FIELDS = {f for m in ARGUMENT_MODELS.values() for f in m.model_fields}


class CaseError(ValueError):
    """A record that breaks the label format; the message names file, line and field."""


@dataclass(frozen=True, slots=True)
class LineCase:
    id: str
    after: str | None
    line: str
    act: Act
    args: Mapping[str, Any]
    products: tuple[str, ...] = ()
    reason: str | None = None
    fact: str | None = None

    @property
    def tool(self) -> str | None:
        return ACT_TOOL.get(self.act)


@dataclass(frozen=True, slots=True)
class ToolUse:
    tool: str
    args: Mapping[str, Any]
    products: tuple[str, ...] = ()
    """For a search lookup: the catalogue ids that fit (instead of the query text)."""


@dataclass(frozen=True, slots=True)
class CallCase:
    id: str
    goal: str
    turns: tuple[str, ...]
    bookings: tuple[Mapping[str, str], ...]
    """Bookings the caller already holds (name, service, day, time)."""
    writes: tuple[ToolUse, ...]
    lookups: tuple[ToolUse, ...]
    end: str | None


def day_date(day: str) -> date:
    """The date a label's day word means in an independent call."""
    return resolve_day(day, CALL_DAY)


def _check_value(field: str, value: Any) -> str | None:
    """Why `value` is not a valid label value for `field`, or None."""
    if field == "service" and value not in _SERVICES:
        return f"service {value!r} is not one of {sorted(_SERVICES)}"
    if field == "day" and value not in _DAYS:
        return f"day {value!r} is not one of the day words"
    if field == "time" and value not in _TIMES:
        return f"time {value!r} is not a half-hour HH:MM slot"
    if field == "name" and (
        not isinstance(value, str) or value != value.lower() or not value.strip()
    ):
        return f"name {value!r} must be the caller's name in lower case"
    if field == "order_number" and not (
        isinstance(value, str) and value.isdigit() and 4 <= len(value) <= 6
    ):
        return f"order_number {value!r} must be 4 to 6 digits as a string"
    if field == "product_id" and value not in _PRODUCT_IDS:
        return f"product_id {value!r} is not in the catalogue"
    if field == "quantity" and not (isinstance(value, int) and 1 <= value <= 9):
        return f"quantity {value!r} must be an integer 1 to 9"
    if field == "reason" and value not in _REASONS:
        return f"reason {value!r} is not one of {sorted(_REASONS)}"
    if field not in _ALL_FIELDS:
        return f"unknown argument {field!r}"
    return None


def _open_at(day: str, slot: str) -> bool:
    hours = OPENING_HOURS[WEEKDAYS[day_date(day).weekday()]]
    return hours is not None and hours[0] <= parse_slot(slot) < hours[1]


def _check_args(args: Mapping[str, Any], tool: str | None) -> None:
    if not isinstance(args, dict):
        raise CaseError("args must be an object")
    fields = set(ARGUMENT_MODELS[tool].model_fields) if tool else _ALL_FIELDS
    for field, value in args.items():
        if field not in fields:
            raise CaseError(f"argument {field!r} does not belong to {tool or 'any tool'}")
        why = _check_value(field, value)
        if why:
            raise CaseError(why)
    if "day" in args and "time" in args and not _open_at(args["day"], args["time"]):
        raise CaseError(f"the shop is closed on {args['day']} at {args['time']}")


def _str(data: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CaseError(f"{key!r} must be a non-empty string")
    return value


def _products(data: Mapping[str, Any]) -> tuple[str, ...]:
    products = data.get("products", [])
    if not isinstance(products, list) or any(p not in _PRODUCT_IDS for p in products):
        raise CaseError(f"products {products!r} must be a list of catalogue ids")
    return tuple(products)


def parse_line(data: Mapping[str, Any]) -> LineCase:
    """One single-line record. Raises CaseError."""
    try:
        act = Act(data.get("act"))
    except ValueError:
        raise CaseError(f"act {data.get('act')!r} is not one of {[a.value for a in Act]}") from None
    args = data.get("args", {})
    _check_args(args, ACT_TOOL.get(act))
    reason = data.get("reason")
    if act is Act.TRANSFER and reason is None:
        reason = args.get("reason")
    if reason is not None and reason not in _REASONS:
        raise CaseError(f"reason {reason!r} is not one of {sorted(_REASONS)}")
    products = _products(data)
    if act is Act.SEARCH and not products:
        raise CaseError("a search needs 'products': the catalogue ids that fit")
    return LineCase(
        id=str(_str(data, "id")),
        after=_str(data, "after", optional=True),
        line=str(_str(data, "line")),
        act=act,
        args=dict(args),
        products=products,
        reason=reason,
        fact=_str(data, "fact", optional=True),
    )


def _use(data: Any, allowed: frozenset[str], full: bool) -> ToolUse:
    if not isinstance(data, dict) or data.get("tool") not in allowed:
        raise CaseError(f"{data!r}: tool must be one of {sorted(allowed)}")
    tool, args = data["tool"], data.get("args", {})
    if tool == "search_products":
        return ToolUse(tool, {}, _products(data) or _products(args))
    _check_args(args, tool)
    if full:
        try:
            ARGUMENT_MODELS[tool].model_validate(args)
        except ValidationError as exc:
            raise CaseError(f"{tool} args {args!r}: {exc.errors()[0]['msg']}") from None
    return ToolUse(tool, dict(args))


def parse_call(data: Mapping[str, Any]) -> CallCase:
    """One whole-call record. Raises CaseError."""
    turns = data.get("turns")
    if (
        not isinstance(turns, list)
        or not turns
        or not all(isinstance(t, str) and t.strip() for t in turns)
    ):
        raise CaseError("turns must be a non-empty list of caller lines")
    setup = data.get("setup") or {}
    bookings = setup.get("bookings", []) if isinstance(setup, dict) else None
    if not isinstance(bookings, list):
        raise CaseError("setup must be null or {'bookings': [...]}")
    for booking in bookings:
        _use({"tool": "book_service", "args": booking}, frozenset({"book_service"}), full=True)
    expect = data.get("expect")
    if not isinstance(expect, dict):
        raise CaseError("expect must be an object")
    end = expect.get("end")
    if end is not None and end not in ENDINGS:
        raise CaseError(f"expect.end {end!r} must be null, 'end_call' or 'transfer_to_human'")
    return CallCase(
        id=str(_str(data, "id")),
        goal=str(_str(data, "goal")),
        turns=tuple(turns),
        bookings=tuple(bookings),
        writes=tuple(_use(w, WRITES, full=True) for w in expect.get("writes", [])),
        lookups=tuple(_use(u, LOOKUPS, full=False) for u in expect.get("lookups", [])),
        end=end,
    )


@dataclass(frozen=True, slots=True)
class Cases:
    lines: tuple[LineCase, ...]
    calls: tuple[CallCase, ...]


def read_cases(paths: list[Path]) -> Cases:
    """Every record of `paths` (JSONL). Raises CaseError naming file:line for the first bad
    record, including a duplicate id; a blank line is skipped."""
    lines: list[LineCase] = []
    calls: list[CallCase] = []
    seen: dict[str, str] = {}
    for path in paths:
        for number, text in _numbered(path):
            where = f"{path}:{number}"
            try:
                data = json.loads(text)
                if not isinstance(data, dict):
                    raise CaseError("a record must be a JSON object")
                case: LineCase | CallCase
                case = parse_call(data) if "turns" in data else parse_line(data)
            except (json.JSONDecodeError, CaseError, KeyError, TypeError, ValueError) as exc:
                raise CaseError(f"{where}: {exc}") from None
            if case.id in seen:
                raise CaseError(f"{where}: id {case.id!r} already used at {seen[case.id]}")
            seen[case.id] = where
            (calls if isinstance(case, CallCase) else lines).append(case)  # type: ignore[arg-type]
    return Cases(tuple(lines), tuple(calls))


def _numbered(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"{path}: cannot read: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line


_GIVE = {
    frozenset({"service"}): "give svc",
    frozenset({"day"}): "give day",
    frozenset({"time"}): "give time",
    frozenset({"name"}): "give name",
    frozenset({"day", "time"}): "give day time",
    frozenset({"time", "name"}): "give time name",
    frozenset({"order_number"}): "give order",
}
_CHANGE = {
    frozenset({"time"}): "change time",
    frozenset({"day"}): "change day",
    frozenset({"name"}): "name wrong",
    frozenset({"order_number"}): "reread order",
}
_PLAIN = {
    Act.BOOK: "book",
    Act.AVAILABILITY: "book",
    Act.CANCEL: "cancel",
    Act.ORDER: "order",
    Act.HOURS: "hours",
    Act.END: "done",
    Act.OUT_OF_SCOPE: "off topic",
    Act.CHITCHAT: "greeting only",
    Act.UNCLEAR: "garbled",
    Act.YES: "yes",
    Act.SEARCH: "search",
}


def hint_label(case: LineCase) -> str | None:
    """The caller-hint act (voice_agent/dialogue/hints.py's labels, the simulator's frame
    pools) that `case`'s line shows, or None when the simulator has no such act (a
    question about a price, a bare "no")."""
    if case.act in _PLAIN:
        return _PLAIN[case.act]
    if case.act is Act.TRANSFER:
        return f"transfer {case.reason or 'caller asked'}"
    if case.act is Act.RESERVE:
        return "reserve yes" if case.after is not None else "search"
    if case.act is Act.GIVE_INFO:
        return _GIVE.get(frozenset(case.args))
    if case.act is Act.CORRECTION:
        return _CHANGE.get(frozenset(case.args))
    return None
