"""A second tool pack, a restaurant's booking line: proof that the agent, the pipeline
and the server take any pack (`[tools] pack = "tests.packs.restaurant"`).

Two tools over one SQLite file: `find_table` (free times for a party on a day) and
`book_table` (read back first, then written once: a retried identical booking is not
doubled, and a write whose caller gave up never commits, `tools.core.current_gate`).
Nothing under `voice_agent/` or `engine/` knows it exists.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.readback import SayTemplate, Spoken
from tools.core import ToolError, ToolPack, ToolSpec, WriteAbandoned, current_gate

Day = Literal["today", "tomorrow", "friday", "saturday", "sunday"]
Time = Literal["18:00", "18:30", "19:00", "19:30", "20:00"]
TABLES_PER_SLOT = 2
LARGEST_PARTY = 8
TIME_WORDS = {"18:00": "six", "18:30": "half past six", "19:00": "seven",
              "19:30": "half past seven", "20:00": "eight"}  # fmt: skip


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _heard(said_as: dict[str, str] | None = None) -> Any:
    extra: dict[str, Any] = {"grounded": True}
    if said_as:
        extra["said_as"] = said_as
    return Field(json_schema_extra=extra)


TIME_SAID_AS = {slot: rf"\b{words}\b" for slot, words in TIME_WORDS.items()}


class FindTable(Args):
    day: Day = _heard()
    party_size: int = Field(ge=1, le=9, json_schema_extra={"counted": True})


class BookTable(Args):
    name: str = Field(min_length=1, json_schema_extra={
        "max_tokens": 10, "grounded": True, "distinct": True, "person_name": True})  # fmt: skip
    day: Day = _heard()
    time: Time = _heard(TIME_SAID_AS)
    party_size: int = Field(ge=1, le=9, json_schema_extra={"counted": True})


class TableRefusal(Enum):
    PARTY_TOO_LARGE = "party_too_large"
    NO_TABLE = "no_table"


@dataclass(frozen=True, slots=True)
class FreeTimes:
    day: str
    times: tuple[str, ...]
    say: str


@dataclass(frozen=True, slots=True)
class TableBooking:
    booking_id: int
    name: str
    day: str
    time: str
    party_size: int
    say: str


@dataclass(frozen=True, slots=True)
class Guest:
    """The restaurant's tool context: its database and who is on the line."""

    db: RestaurantDb
    caller: str | None = None


class RestaurantDb:
    """The bookings table in one SQLite file, one connection under a lock."""

    def __init__(self, path: Path, now: Callable[[], datetime]) -> None:
        self.now = now
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS tables (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " day TEXT NOT NULL, time TEXT NOT NULL, party INTEGER NOT NULL, caller TEXT,"
            " UNIQUE (name, day, time))"
        )

    def taken(self, day: str, time: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM tables WHERE day = ? AND time = ?", (day, time)
            ).fetchone()
        return int(row[0])

    def book(self, name: str, day: str, time: str, party: int, caller: str | None) -> int:
        """The booking's id (an identical one's, when it exists). Raises WriteAbandoned
        when the tool's caller gave up before the commit."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT id FROM tables WHERE name = ? AND day = ? AND time = ?",
                    (name, day, time),
                ).fetchone()
                if row is None:
                    row = self._conn.execute(
                        "INSERT INTO tables (name, day, time, party, caller)"
                        " VALUES (?, ?, ?, ?, ?) RETURNING id",
                        (name, day, time, party, caller),
                    ).fetchone()
                gate = current_gate()
                if gate is not None and not gate.commit():
                    raise WriteAbandoned("the caller gave up before the booking committed")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return int(row[0])

    def rows(self) -> list[tuple[str, str, str, int]]:
        with self._lock:
            found = self._conn.execute("SELECT name, day, time, party FROM tables").fetchall()
        return [tuple(r) for r in found]

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass(frozen=True, slots=True)
class RestaurantState:
    db: RestaurantDb

    def context(self) -> Guest:
        return Guest(self.db)

    def writable(self) -> bool:
        return self.db.writable()

    def close(self) -> None:
        self.db.close()


def open_restaurant(where: str, now: Callable[[], datetime]) -> RestaurantState:
    path = Path(where)
    return RestaurantState(RestaurantDb(path.with_name(path.stem + "-restaurant.sqlite"), now))


def _party(size: int) -> None:
    if size > LARGEST_PARTY:
        raise ToolError(TableRefusal.PARTY_TOO_LARGE,
                        f"Sorry, our largest table seats {LARGEST_PARTY}.")  # fmt: skip


def find_table(args: FindTable, guest: Guest) -> FreeTimes:
    _party(args.party_size)
    free = tuple(t for t in TIME_WORDS if guest.db.taken(args.day, t) < TABLES_PER_SLOT)
    if not free:
        raise ToolError(TableRefusal.NO_TABLE, f"Sorry, we're full {args.day}.")
    said = ", ".join(TIME_WORDS[t] for t in free)
    return FreeTimes(args.day, free, f"For {args.party_size} {args.day} we have {said}.")


def book_table(args: BookTable, guest: Guest) -> TableBooking:
    _party(args.party_size)
    if guest.db.taken(args.day, args.time) >= TABLES_PER_SLOT:
        raise ToolError(TableRefusal.NO_TABLE, "Sorry, that time has just gone.")
    booking = guest.db.book(args.name, args.day, args.time, args.party_size, guest.caller)
    when = f"{args.day} at {TIME_WORDS[args.time]}"
    return TableBooking(booking, args.name, args.day, args.time, args.party_size,
                        f"Booked: a table for {args.party_size} {when}, {args.name}.")  # fmt: skip


CONFIRM_TABLE = SayTemplate(
    "book_table",
    ("A table ", Spoken("day"), " at ", Spoken("time", TIME_WORDS.__getitem__),
     " for ", Spoken("name"), ", shall I book it?"),
)  # fmt: skip

PACK: ToolPack[Guest] = ToolPack(
    name="restaurant",
    tools={
        "find_table": ToolSpec(
            "find_table", FindTable, find_table, "free times for a party on a day", 2.0
        ),
        "book_table": ToolSpec(
            "book_table",
            BookTable,
            book_table,
            "book a table once the caller said yes to its read-back",
            2.0,
        ),
    },
    result_types=(FreeTimes, TableBooking),
    open=open_restaurant,
    readbacks=(CONFIRM_TABLE,),
)
