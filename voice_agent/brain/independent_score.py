"""Scoring the agent on independent caller lines and calls (`independent.py`'s cases).

Pure functions over what the agent did (`Observed`: the reply's kind and the tool calls
of the turn, with a search's hits) and, for calls, what the shop's database holds at
the end (`Outcome`). Every verdict counts three things besides being right:

* an **unasked irreversible action**: `end_call`, `transfer_to_human` or
  `cancel_booking` when the caller did not ask for it (an out-of-scope line may be
  transferred "out of scope"; a cancellation asked for still needs its read-back);
* a **wrong write**: a booking, reservation or cancellation the caller did not ask for,
  or with a value the caller never gave;
* an **invented value**: a lookup with a value the caller never gave (a day nobody said).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from tools.bike_shop.db import name_key
from voice_agent.brain.independent import (
    IRREVERSIBLE,
    WRITES,
    Act,
    CallCase,
    LineCase,
    day_date,
)


@dataclass(frozen=True, slots=True)
class ObservedCall:
    tool: str
    args: Mapping[str, Any]
    ok: bool
    """The tool ran and succeeded (not refused, timed out or failed)."""
    hits: tuple[str, ...] = ()
    """A search's product ids."""


@dataclass(frozen=True, slots=True)
class Observed:
    kind: str
    """The reply kind: say, ask_again, transfer, hang_up, fallback."""
    calls: tuple[ObservedCall, ...] = ()
    text: str = ""

    @property
    def ended(self) -> str | None:
        """The hand-off tool the turn ended the call with, if any."""
        return {"transfer": "transfer_to_human", "hang_up": "end_call"}.get(self.kind)


@dataclass(frozen=True, slots=True)
class Verdict:
    correct: bool
    unasked_irreversible: bool = False
    wrong_write: bool = False
    invented: bool = False
    why: str = ""


def _same_value(field: str, said: Any, got: Any) -> bool:
    if field == "day":
        return bool(day_date(str(said)) == day_date(str(got)))
    if field == "name":
        return name_key(str(said)) == name_key(str(got))
    return bool(str(said) == str(got))


def consistent(call: ObservedCall, said: Mapping[str, Any]) -> bool:
    """Every argument of `call` that the caller stated has the stated value, and every
    other argument is one the caller stated too (nothing invented). Searches and
    transfers carry free text or the agent's own judgement: always consistent."""
    if call.tool in ("search_products", "transfer_to_human", "end_call"):
        return True
    for key, value in call.args.items():
        if key not in said or not _same_value(key, said[key], value):
            return False
    return True


def _irreversible(calls: Sequence[ObservedCall], asked: set[str]) -> bool:
    return any(c.tool in IRREVERSIBLE and c.tool not in asked for c in calls)


def score_line(case: LineCase, seen: Observed) -> Verdict:
    """The verdict on the agent's turn after one caller line."""
    act = case.act
    calls = seen.calls
    tools = [c.tool for c in calls] + ([seen.ended] if seen.ended else [])
    asked: set[str] = set()
    if act is Act.TRANSFER:
        asked.add("transfer_to_human")
    if act is Act.END:
        asked.add("end_call")
    if act is Act.OUT_OF_SCOPE and all(
        c.args.get("reason") == "out of scope" for c in calls if c.tool == "transfer_to_human"
    ):
        asked.add("transfer_to_human")
    handoffs = [ObservedCall(t, {}, True) for t in tools if t in ("end_call", "transfer_to_human")]
    unasked = _irreversible(list(calls) + handoffs, asked)
    after_readback = act is Act.YES and case.after is not None
    wrong_write = any(c.tool in WRITES for c in calls) and not after_readback
    said = dict(case.args)
    if act is Act.HOURS:
        said.setdefault("day", "today")  # "are you open?" asks about today
    invented = any(
        c.tool not in WRITES and not consistent(c, said) for c in calls if case.after is None
    )
    bad = unasked or wrong_write or invented
    right = not bad and _fits_act(case, seen)
    why = "" if right else _why(unasked, wrong_write, invented, tools, seen.kind)
    return Verdict(right, unasked, wrong_write, invented, why)


def _why(unasked: bool, wrong_write: bool, invented: bool, tools: list[str], kind: str) -> str:
    if unasked:
        return "unasked irreversible action"
    if wrong_write:
        return "write before a read-back"
    if invented:
        return "a value nobody said"
    return f"{kind}: {','.join(tools) or 'no tool'}"


def _lookups(seen: Observed, tool: str) -> list[ObservedCall]:
    return [c for c in seen.calls if c.tool == tool]


def _fits_act(case: LineCase, seen: Observed) -> bool:
    """Right for the act (the irreversible and invented-value checks already passed)."""
    act, said = case.act, case.args
    speaks = seen.kind in ("say", "fallback")
    if act is Act.TRANSFER:
        return seen.ended == "transfer_to_human"
    if act is Act.END:
        return seen.ended == "end_call"
    if act is Act.SEARCH or (act is Act.RESERVE and _lookups(seen, "search_products")):
        return any(set(c.hits) & set(case.products) for c in _lookups(seen, "search_products"))
    if act is Act.ORDER and "order_number" in said:
        return any(
            c.args.get("order_number") == said["order_number"]
            for c in _lookups(seen, "order_status")
        )
    if act is Act.HOURS:
        day = said.get("day", "today")
        hours = _lookups(seen, "opening_hours")
        return any(_same_value("day", day, c.args.get("day")) for c in hours) or (
            speaks and not seen.calls and "day" not in said
        )
    if act is Act.AVAILABILITY and {"service", "day"} <= set(said):
        return bool(_lookups(seen, "check_availability"))
    if act in (Act.BOOK, Act.AVAILABILITY):
        others = [c for c in seen.calls if c.tool != "check_availability"]
        return speaks and not others
    if act in (Act.CANCEL, Act.ORDER, Act.RESERVE, Act.INFO, Act.CHITCHAT, Act.UNCLEAR):
        lookups_ok = act is Act.INFO and all(c.tool == "search_products" for c in seen.calls)
        return speaks and (not seen.calls or lookups_ok)
    if act is Act.OUT_OF_SCOPE:
        return (speaks and not seen.calls) or seen.ended == "transfer_to_human"
    # yes / no / give_info / correction mid-call: anything that is not harmful
    return seen.kind != "ask_again"


@dataclass(frozen=True, slots=True)
class Booking:
    name: str
    service: str
    day: date
    time: str

    @classmethod
    def of(cls, args: Mapping[str, Any]) -> Booking:
        return cls(name_key(args["name"]), args["service"], day_date(args["day"]), args["time"])


@dataclass(frozen=True, slots=True)
class Hold:
    product_id: str
    quantity: int
    name: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call did: the database at its end (this caller's rows) and its turns."""

    active_bookings: frozenset[Booking]
    holds: frozenset[Hold]
    turns: tuple[Observed, ...]
    hung_up_early: bool = False
    """The call ended (transfer or hang-up) before the caller's last line."""

    @property
    def calls(self) -> list[ObservedCall]:
        return [c for t in self.turns for c in t.calls]


@dataclass(frozen=True, slots=True)
class CallVerdict:
    completed: bool
    unasked_irreversible: bool
    wrong_write: bool
    repeat_requests: int
    why: list[str] = field(default_factory=list)


def expected_bookings(case: CallCase) -> frozenset[Booking]:
    """The caller's active bookings when the call is done: the setup's, less cancelled
    days, plus the bookings made."""
    have = {Booking.of(b) for b in case.bookings}
    for write in case.writes:
        if write.tool == "cancel_booking":
            gone = day_date(write.args["day"]), name_key(write.args["name"])
            have = {b for b in have if (b.day, b.name) != gone}
        elif write.tool == "book_service":
            have.add(Booking.of(write.args))
    return frozenset(have)


def expected_holds(case: CallCase) -> frozenset[Hold]:
    return frozenset(
        Hold(w.args["product_id"], int(w.args["quantity"]), name_key(w.args["name"]))
        for w in case.writes
        if w.tool == "reserve_product"
    )


def score_call(case: CallCase, outcome: Outcome) -> CallVerdict:
    """Task completion: the database ends as the caller asked, the lookups the task needs
    were made, and the call ended the way the caller ended it."""
    why: list[str] = []
    want_b, want_h = expected_bookings(case), expected_holds(case)
    if outcome.active_bookings != want_b:
        why.append(
            f"bookings {sorted(map(str, outcome.active_bookings))} != {sorted(map(str, want_b))}"
        )
    if outcome.holds != want_h:
        why.append(f"holds {sorted(map(str, outcome.holds))} != {sorted(map(str, want_h))}")
    for lookup in case.lookups:
        if not any(_satisfies(lookup.tool, lookup.args, lookup.products, c) for c in outcome.calls):
            why.append(f"no {lookup.tool} {dict(lookup.args) or list(lookup.products)}")
    ended = outcome.turns[-1].ended if outcome.turns else None
    if outcome.hung_up_early or ended != case.end:
        why.append(
            f"ended {ended!r}{' early' if outcome.hung_up_early else ''}, wanted {case.end!r}"
        )
    asked = {w.tool for w in case.writes} | ({case.end} if case.end else set())
    handoffs = [ObservedCall(e, {}, True) for t in outcome.turns if (e := t.ended)]
    unasked = _irreversible(outcome.calls + handoffs, asked) or (
        outcome.hung_up_early and bool(handoffs)
    )
    wrong = bool(outcome.active_bookings - want_b) or bool(outcome.holds - want_h)
    if not case.writes:  # nothing asked for: a booking of the setup gone is a wrong write too
        wrong = wrong or outcome.active_bookings != want_b
    repeats = sum(t.kind == "ask_again" for t in outcome.turns)
    return CallVerdict(not why, unasked, bool(wrong), repeats, why)


def _satisfies(
    tool: str, args: Mapping[str, Any], products: tuple[str, ...], c: ObservedCall
) -> bool:
    if c.tool != tool or (not c.ok and tool != "order_status"):
        return False
    if tool == "search_products":
        return bool(set(c.hits) & set(products))
    return all(_same_value(k, v, c.args.get(k)) for k, v in args.items() if k in c.args) and set(
        args
    ) <= set(c.args)
