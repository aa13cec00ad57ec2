"""The shop's SQLite file: schema, seed, and one locked connection per process.

`ShopDb.open(path, today)` creates the file, its tables and the seed data on first use
and only opens it afterwards (idempotent: a second open seeds nothing). The connection
is shared by threads (`check_same_thread=False`), so every use goes through `read()` or
`write()`, which hold a lock; `write()` is an `IMMEDIATE` transaction, so check-then-
insert sequences (capacity, stock) are atomic against other connections to the same
file too. Bookings carry a partial unique index: one active booking per (name, date,
time, service), so a retried call cannot write a booking twice, and the caller who made
them (`ShopContext.caller`), which scopes cancelling. Every statement is parameterized.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from tools.bike_shop.catalogue import (
    OPENING_HOURS,
    ORDERS,
    PRODUCTS,
    SEED_BOOKINGS,
    SERVICES,
    WEEKDAYS,
)

BUSY_TIMEOUT_S = 1.0
"""How long a writer waits for another connection's transaction before failing: well
under a database tool's timeout (`pack.DB_TIMEOUT_S`, 2 s), so a held file fails the tool
with an error the caller hears about instead of a write that lands after the apology."""
LOCK_WAIT_S = 1.0
HEALTH_WAIT_S = 0.1
_BUSY_SHORT = "PRAGMA busy_timeout = 100"
"""HEALTH_WAIT_S in ms, as a constant statement (the pack's SQL is never formatted)."""
_BUSY_NORMAL = "PRAGMA busy_timeout = 1000"
"""BUSY_TIMEOUT_S in ms."""
"""How long a tool waits for this process's own connection (another call's tool)."""


class DatabaseBusy(sqlite3.OperationalError):
    """The connection or the file stayed busy past `LOCK_WAIT_S` / `BUSY_TIMEOUT_S`."""


class WriteAbandoned(RuntimeError):
    """The tool's caller gave up on it (its timeout passed) before it committed: rolled
    back, nothing written."""


class WriteGate:
    """Decides, once, between a tool's write committing and its caller giving up on it,
    so a write never lands after the caller heard the apology for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""

    def commit(self) -> bool:
        """May the write commit? False once abandoned."""
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "committed"
            return True

    def abandon(self) -> bool:
        """Give up on the tool: True when nothing was committed (and now never will be),
        False when a write already committed (its result should be awaited instead)."""
        with self._lock:
            if self._state == "committed":
                return False
            self._state = "abandoned"
            return True


_gates = threading.local()


@contextmanager
def gated(gate: WriteGate) -> Iterator[None]:
    """Writes in this thread, inside the block, commit only through `gate`."""
    _gates.current = gate
    try:
        yield
    finally:
        _gates.current = None


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS services (
    name TEXT PRIMARY KEY,
    duration_min INTEGER NOT NULL CHECK (duration_min > 0),
    daily_capacity INTEGER NOT NULL CHECK (daily_capacity > 0),
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0)
);
CREATE TABLE IF NOT EXISTS opening_hours (
    weekday INTEGER PRIMARY KEY CHECK (weekday BETWEEN 0 AND 6),
    opens TEXT,    -- "HH:MM", NULL when closed all day
    closes TEXT
);
CREATE TABLE IF NOT EXISTS products (
    product_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    stock INTEGER NOT NULL CHECK (stock >= 0),
    keywords TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    order_number TEXT PRIMARY KEY,
    item TEXT NOT NULL,
    state TEXT NOT NULL,
    eta TEXT NOT NULL  -- ISO date
);
CREATE TABLE IF NOT EXISTS bookings (
    booking_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,  -- casefolded, single-spaced: what "the same caller" means
    day TEXT NOT NULL,       -- ISO date
    start TEXT NOT NULL,     -- "HH:MM"
    service TEXT NOT NULL REFERENCES services (name),
    cancelled INTEGER NOT NULL DEFAULT 0,
    caller TEXT              -- who booked it (ShopContext.caller), NULL: seed or unscoped
);
CREATE UNIQUE INDEX IF NOT EXISTS one_active_booking
    ON bookings (name_key, day, start, service) WHERE cancelled = 0;
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id INTEGER PRIMARY KEY,
    product_id TEXT NOT NULL REFERENCES products (product_id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    made_on TEXT NOT NULL    -- ISO date
);
CREATE UNIQUE INDEX IF NOT EXISTS one_reservation_per_day
    ON reservations (product_id, quantity, name_key, made_on);
"""


RESERVATION_COLUMNS = {
    "caller": "ALTER TABLE reservations ADD COLUMN caller TEXT",
    "hold_until": "ALTER TABLE reservations ADD COLUMN hold_until TEXT",
    "released": "ALTER TABLE reservations ADD COLUMN released INTEGER NOT NULL DEFAULT 0",
}
"""Columns a reservation gained: who made it (ShopContext.caller), the last day it is held
(ISO date) and whether its stock went back on the shelf when it expired."""


def name_key(name: str) -> str:
    """The comparison key of a caller's name: casefolded, whitespace collapsed."""
    return " ".join(name.casefold().split())


def open_days_after(start: date, count: int) -> date:
    """The `count`-th day after `start` on which the shop opens (count ≥ 1)."""
    day, seen = start, 0
    while seen < count:
        day += timedelta(days=1)
        seen += OPENING_HOURS[WEEKDAYS[day.weekday()]] is not None
    return day


class ShopDb:
    """One connection to the shop's file, shared by threads under a lock."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.path = path

    @classmethod
    def open(cls, path: Path, today: date) -> ShopDb:
        """Open (creating and seeding if new) the database at `path`. Seed bookings and
        order dates are placed relative to `today`, the shop's date when first created.
        The caller closes it with `close()`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")  # readers do not block the writer
        db = cls(conn, path)
        with db.write() as tx:
            # executescript() would COMMIT first; run the statements inside the transaction.
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    tx.execute(statement)
            columns = {row["name"] for row in tx.execute("PRAGMA table_info(bookings)")}
            if "caller" not in columns:  # a file made before bookings recorded the caller
                tx.execute("ALTER TABLE bookings ADD COLUMN caller TEXT")
            held = {row["name"] for row in tx.execute("PRAGMA table_info(reservations)")}
            for column, sql in RESERVATION_COLUMNS.items():
                if column not in held:  # a file made before holds had an owner and an end
                    tx.execute(sql)
            if tx.execute("SELECT 1 FROM meta WHERE key = 'seeded_on'").fetchone() is None:
                _seed(tx, today)
        return db

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def writable(self) -> bool:
        """Whether a write transaction can start at once (nothing else holds the file's
        write lock, the disk is not read-only): for health checks, so it waits at most
        HEALTH_WAIT_S for each lock and writes nothing."""
        if not self._lock.acquire(timeout=HEALTH_WAIT_S):
            return False
        try:
            self._conn.execute(_BUSY_SHORT)
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("ROLLBACK")
            return True
        except sqlite3.Error:
            return False
        finally:
            self._conn.execute(_BUSY_NORMAL)
            self._lock.release()

    @contextmanager
    def _held(self) -> Iterator[None]:
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            raise DatabaseBusy(f"the shop database stayed busy for {LOCK_WAIT_S:g} s")
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, while holding the process lock (DatabaseBusy when
        it is not free within LOCK_WAIT_S)."""
        with self._held():
            yield self._conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: committed when the block ends, rolled back if it
        raises (the exception propagates), and rolled back with WriteAbandoned when the
        thread's `WriteGate` (`gated`) says the caller gave up first."""
        with self._held():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            gate: WriteGate | None = getattr(_gates, "current", None)
            if gate is not None and not gate.commit():
                self._conn.execute("ROLLBACK")
                raise WriteAbandoned("the tool's caller gave up before it committed")
            self._conn.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class ShopContext:
    """What every tool implementation gets besides its arguments."""

    db: ShopDb
    now: Callable[[], datetime]
    """The shop's wall clock (naive local time); tests pass a fixed one."""
    caller: str | None = None
    """Who is on the line, as the call's transport identified them (`caller_identity`:
    the caller's number, or this call's own id when it is withheld). Set by the session,
    never by the model. A booking records it and `cancel_booking` touches only bookings
    with the same caller, so what the caller says cannot reach anyone else's booking.
    None: unscoped, for offline simulators and tests only (bookings by name alone)."""


def _seed(conn: sqlite3.Connection, today: date) -> None:
    conn.executemany(
        "INSERT INTO services VALUES (?, ?, ?, ?)",
        [(s.name, s.duration_min, s.daily_capacity, s.price_cents) for s in SERVICES],
    )
    for weekday, day_name in enumerate(WEEKDAYS):
        hours = OPENING_HOURS[day_name]
        opens, closes = (
            (None, None) if hours is None else (f"{hours[0]:%H:%M}", f"{hours[1]:%H:%M}")
        )
        conn.execute("INSERT INTO opening_hours VALUES (?, ?, ?)", (weekday, opens, closes))
    conn.executemany(
        "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?)",
        [(p.product_id, p.name, p.category, p.price_cents, p.stock, p.keywords) for p in PRODUCTS],
    )
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?, ?)",
        [
            (
                o.order_number,
                o.item,
                o.state.value,
                (today + timedelta(days=o.days_from_seed)).isoformat(),
            )
            for o in ORDERS
        ],
    )
    conn.executemany(
        "INSERT INTO bookings (name, name_key, day, start, service) VALUES (?, ?, ?, ?, ?)",
        [
            (b.name, name_key(b.name), open_days_after(today, b.open_days_ahead).isoformat(),
             f"{b.start:%H:%M}", b.service)
            for b in SEED_BOOKINGS
        ],
    )  # fmt: skip
    conn.execute("INSERT INTO meta VALUES ('seeded_on', ?)", (today.isoformat(),))
