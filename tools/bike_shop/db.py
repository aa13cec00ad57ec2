"""The shop's database: schema, seed, and one locked connection per process, in SQLite
(the embedded default) or PostgreSQL (shared by a fleet of workers).

`shop.open_shop(where, today)` takes a file path (SQLite) or a `postgresql://` URL and
creates the tables and the seed data on first use (`ShopDb.create`), only opening them
afterwards (idempotent: a second open seeds nothing). The tools see one interface whatever the
backend: `read()` gives a connection (`Conn`) for reads, `write()` one inside a
transaction that is atomic against every other writer — SQLite's `IMMEDIATE` lock on the
file, PostgreSQL's transaction-wide advisory lock on the shop (`postgres.py`) — so
check-then-insert sequences (capacity, stock) hold across processes and machines. Both
connections are shared by threads under a process lock, which `read()`/`write()` hold.
The tools' SQL is written once, with `?` placeholders and `RETURNING`, and every statement
is parameterized. Bookings carry a partial unique index: one active booking per (name,
date, time, service), so a retried call cannot write a booking twice, and the caller who
made them (`ShopContext.caller`), which scopes cancelling.
"""

from __future__ import annotations

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from tools.bike_shop.catalogue import (
    OPENING_HOURS,
    ORDERS,
    PRODUCTS,
    SEED_BOOKINGS,
    SERVICES,
    WEEKDAYS,
)
from tools.core import WriteAbandoned, current_gate

BUSY_TIMEOUT_S = 1.0
"""How long a writer waits for another connection's transaction before failing: well
under a database tool's timeout (`pack.DB_TIMEOUT_S`, 2 s), so a held file fails the tool
with an error the caller hears about instead of a write that lands after the apology."""
LOCK_WAIT_S = 1.0
"""How long a tool waits for this process's own connection (another call's tool)."""
HEALTH_WAIT_S = 0.1
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class ShopDbError(RuntimeError):
    """The shop's database failed in a way the tools report as an apology."""


class DatabaseBusy(ShopDbError):
    """The connection or the database stayed busy past `LOCK_WAIT_S` / `BUSY_TIMEOUT_S`."""


class DatabaseUnavailable(ShopDbError):
    """The database server cannot be reached (a PostgreSQL restart, a network fault)."""


class Row(Protocol):
    """A result row: by column name or position (sqlite3.Row, postgres.NamedRow)."""

    def __getitem__(self, key: int | str, /) -> Any: ...


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    """What the tools' SQL runs on: `execute` with `?` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...


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


RESERVATION_COLUMNS = {
    "caller": "ALTER TABLE reservations ADD COLUMN caller TEXT",
    "hold_until": "ALTER TABLE reservations ADD COLUMN hold_until TEXT",
    "released": "ALTER TABLE reservations ADD COLUMN released INTEGER NOT NULL DEFAULT 0",
}
"""Columns a reservation gained: who made it (ShopContext.caller), the last day it is held
(ISO date) and whether its stock went back on the shelf when it expired."""
BOOKING_COLUMNS = {"caller": "ALTER TABLE bookings ADD COLUMN caller TEXT"}
"""A file made before bookings recorded the caller gains the column."""


class ShopDb(ABC):
    """One connection to the shop's database, shared by threads under a lock."""

    location: str
    """Where the data lives, for messages: a file path, or a URL without its password."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def create(self, today: date) -> None:
        """Create the tables and seed them, unless that was done before (idempotent; one
        writer at a time does it, so workers opening a new database together seed once).
        Seed bookings and order dates are placed relative to `today`."""
        with self.write() as tx:
            for statement in self.schema().split(";"):
                if statement.strip():
                    tx.execute(statement)
            for table, added in (("bookings", BOOKING_COLUMNS),
                                 ("reservations", RESERVATION_COLUMNS)):  # fmt: skip
                held = self.columns(tx, table)
                for column, sql in added.items():
                    if column not in held:  # a database from before the column
                        tx.execute(sql)
            if tx.execute("SELECT 1 FROM meta WHERE key = 'seeded_on'").fetchone() is None:
                _seed(tx, today)

    @abstractmethod
    def schema(self) -> str:
        """SCHEMA in this backend's dialect."""

    @abstractmethod
    def columns(self, conn: Conn, table: str) -> set[str]:
        """The columns `table` has now."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def writable(self) -> bool:
        """Whether a write transaction can start at once (nothing else holds the shop's
        write lock, the database is not read-only or away): for health checks, so it
        waits at most HEALTH_WAIT_S for each lock and writes nothing."""

    @abstractmethod
    def _connection(self) -> Conn:
        """The connection, reopened if it broke (called holding the process lock)."""

    @abstractmethod
    def _begin(self, conn: Conn) -> None:
        """Start a write transaction that excludes every other writer of the shop."""

    def _end(self, conn: Conn, commit: bool) -> None:
        conn.execute("COMMIT" if commit else "ROLLBACK")

    @contextmanager
    def _held(self) -> Iterator[Conn]:
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            raise DatabaseBusy(f"the shop database stayed busy for {LOCK_WAIT_S:g} s")
        try:
            yield self._connection()
        finally:
            self._lock.release()

    @contextmanager
    def read(self) -> Iterator[Conn]:
        """The connection, for reads, while holding the process lock (DatabaseBusy when
        it is not free within LOCK_WAIT_S)."""
        with self._held() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Conn]:
        """A transaction that excludes other writers: committed when the block ends,
        rolled back if it raises (the exception propagates), and rolled back with
        WriteAbandoned when the thread's `WriteGate` (`gated`) says the caller gave up
        first."""
        with self._held() as conn:
            self._begin(conn)
            try:
                yield conn
            except BaseException:
                self._end(conn, commit=False)
                raise
            gate = current_gate()
            if gate is not None and not gate.commit():
                self._end(conn, commit=False)
                raise WriteAbandoned("the tool's caller gave up before it committed")
            self._end(conn, commit=True)


_BUSY_SHORT = "PRAGMA busy_timeout = 100"
"""HEALTH_WAIT_S in ms, as a constant statement (the pack's SQL is never formatted)."""
_BUSY_NORMAL = "PRAGMA busy_timeout = 1000"
"""BUSY_TIMEOUT_S in ms."""


class SqliteShopDb(ShopDb):
    """The shop in one SQLite file (WAL: readers do not block the writer)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        super().__init__()
        self._conn = conn
        self.path = path
        self.location = str(path)

    @classmethod
    def connect(cls, path: Path) -> SqliteShopDb:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        return cls(conn, path)

    def schema(self) -> str:
        return SCHEMA

    def columns(self, conn: Conn, table: str) -> set[str]:
        sql = {"bookings": "PRAGMA table_info(bookings)",
               "reservations": "PRAGMA table_info(reservations)"}[table]  # fmt: skip
        return {row["name"] for row in conn.execute(sql).fetchall()}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def writable(self) -> bool:
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

    def _connection(self) -> Conn:
        return self._conn

    def _begin(self, conn: Conn) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise DatabaseBusy(
                    f"the shop file stayed locked for {BUSY_TIMEOUT_S:g} s: {exc}"
                ) from exc
            raise


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


def _seed(conn: Conn, today: date) -> None:
    for s in SERVICES:
        conn.execute("INSERT INTO services VALUES (?, ?, ?, ?)",
                     (s.name, s.duration_min, s.daily_capacity, s.price_cents))  # fmt: skip
    for weekday, day_name in enumerate(WEEKDAYS):
        hours = OPENING_HOURS[day_name]
        opens, closes = (
            (None, None) if hours is None else (f"{hours[0]:%H:%M}", f"{hours[1]:%H:%M}")
        )
        conn.execute("INSERT INTO opening_hours VALUES (?, ?, ?)", (weekday, opens, closes))
    for p in PRODUCTS:
        conn.execute(
            "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?)",
            (p.product_id, p.name, p.category, p.price_cents, p.stock, p.keywords),
        )
    for o in ORDERS:
        conn.execute("INSERT INTO orders VALUES (?, ?, ?, ?)",
                     (o.order_number, o.item, o.state.value,
                      (today + timedelta(days=o.days_from_seed)).isoformat()))  # fmt: skip
    for b in SEED_BOOKINGS:
        conn.execute(
            "INSERT INTO bookings (name, name_key, day, start, service) VALUES (?, ?, ?, ?, ?)",
            (b.name, name_key(b.name), open_days_after(today, b.open_days_ahead).isoformat(),
             f"{b.start:%H:%M}", b.service),
        )  # fmt: skip
    conn.execute("INSERT INTO meta VALUES ('seeded_on', ?)", (today.isoformat(),))
