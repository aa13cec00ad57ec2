"""The soak's bookings check: every booking the agent confirmed is in the shop file exactly
once, judged from the turn records' `book_service` calls and their arguments.

`book_service` is idempotent: an identical retry returns the booking it already made
and adds no row. So the bookings to expect are the distinct argument sets of the calls
that ran OK (not the number of calls), keyed as the shop keys a booking: the name
casefolded (`tools.bike_shop.db.name_key`), the day word resolved to a date on the day
the call ran (the server's shop clock is local wall time, like the load test's), the
slot time and the service. Rows are never deleted (a cancelled one stays), so every new
row counts; the load test's scripts never cancel.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from tools.bike_shop.db import POSTGRES_SCHEMES, name_key
from tools.bike_shop.timewords import resolve_day
from voice_agent.turn_record import ToolCallRecord, ToolOutcome, TurnRecord

BOOK_SERVICE = "book_service"
_MS_PER_S = 1000.0
_MISSING_SHOWN = 10
"""How many missing bookings the result names (the count is always whole)."""


@dataclass(frozen=True, slots=True, order=True)
class BookingKey:
    """What makes two bookings the same one (the shop's `one_active_booking` index)."""

    name_key: str
    day: str
    """ISO date."""
    start: str
    """"HH:MM"."""
    service: str

    def describe(self) -> str:
        return f"{self.name_key} {self.day} {self.start} {self.service}"


def call_key(call: ToolCallRecord, wall_time_unix_s: float | None) -> BookingKey | None:
    """The booking a `book_service` call asked for; None when its record cannot say
    (no arguments, as in lines before version 3, no wall time, or arguments that do not
    resolve). `wall_time_unix_s`: when its turn began."""
    args: dict[str, Any] | None = call.arguments
    if args is None or wall_time_unix_s is None:
        return None
    ran_on = date.fromtimestamp(wall_time_unix_s + call.started_at_ms / _MS_PER_S)
    try:
        day = resolve_day(str(args["day"]), ran_on)
        return BookingKey(name_key(str(args["name"])), day.isoformat(), str(args["time"]),
                          str(args["service"]))  # fmt: skip
    except (KeyError, ValueError):
        return None


BOOKING_ROWS = "SELECT name_key, day, start, service FROM bookings ORDER BY booking_id"


def new_booking_rows(shop: Path | str, seeded: int) -> list[BookingKey]:
    """The bookings rows after the first `seeded` (those the run added), in order, from
    a SQLite file or a `postgresql://` URL. Read as they are (not through `open_shop`,
    which would repair the schema of a shop under examination)."""
    if isinstance(shop, str) and shop.startswith(POSTGRES_SCHEMES):
        import psycopg

        with psycopg.connect(shop) as pg:
            rows: list[Any] = pg.execute(BOOKING_ROWS).fetchall()
    else:
        with sqlite3.connect(shop) as conn:
            rows = conn.execute(BOOKING_ROWS).fetchall()
    return [BookingKey(*row) for row in rows[seeded:]]


def bookings_check(shop: Path | str, records: list[TurnRecord], seeded: int) -> dict[str, object]:
    """New booking rows in `shop` (after the `seeded` ones) against the `book_service`
    calls in `records`. `each_confirmed_booking_once` is True when every distinct booking
    an OK call confirmed (refusals excluded) has exactly one row, no row is there twice,
    and every row comes from some `book_service` call (one that timed out may still have
    booked); None when some call's record cannot say what it asked for (records before
    version 3 have no arguments): then the check is not made rather than guessed."""
    ok_calls = refused = unknown = 0
    confirmed: set[BookingKey] = set()
    asked: set[BookingKey] = set()
    for record in records:
        for call in record.tool_calls:
            if call.name != BOOK_SERVICE:
                continue
            ok = call.outcome is ToolOutcome.OK
            ok_calls += ok or call.outcome is ToolOutcome.REFUSED  # answered in time
            key = call_key(call, record.wall_time_unix_s)
            if key is None:
                unknown += 1
            elif call.outcome is ToolOutcome.REFUSED:
                refused += 1
            else:
                asked.add(key)
                if ok:
                    confirmed.add(key)
    rows = Counter(new_booking_rows(shop, seeded))
    missing = sorted(confirmed - set(rows))
    duplicates = sum(n - 1 for n in rows.values())
    unexplained = sum(n for key, n in rows.items() if key not in asked)
    once = not missing and duplicates == 0 and unexplained == 0
    result: dict[str, object] = {
        "book_service_ok": ok_calls,
        "ok_calls": ok_calls,
        "refused_calls": refused,
        "distinct_bookings": len(confirmed),
        "new_bookings": rows.total(),
        "duplicate_bookings": duplicates,
        "unexplained_bookings": unexplained,
        "missing": len(missing),
        "missing_bookings": [key.describe() for key in missing[:_MISSING_SHOWN]],
        "calls_without_arguments": unknown,
        "each_confirmed_booking_once": None if unknown else once,
    }
    if unknown:
        result["note"] = (
            f"{unknown} book_service call(s) recorded without arguments (turn records "
            "before version 3): which bookings they made is unknown, so the check is not made"
        )
    return result
