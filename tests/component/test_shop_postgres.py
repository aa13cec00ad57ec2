"""What only the PostgreSQL backend of the shop has to survive, on a real server: another
worker holding the shop's write lock, the server restarting under an open connection, a
server that is not there, and a password kept out of messages. The tools' own behaviour
on both backends is tests/component/test_bike_shop_db.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import date, datetime

import psycopg
import pytest

from scripts.services import PostgresServer, free_port
from tools.bike_shop.db import DatabaseBusy, DatabaseUnavailable, ShopContext, ShopDb
from tools.bike_shop.pack import call_tool
from tools.bike_shop.postgres import SHOP_LOCK, redact
from tools.bike_shop.results import Booking
from tools.bike_shop.shop import open_shop

MONDAY_10AM = datetime(2025, 6, 2, 10, 0)
BOOK = {"name": "Ann Lee", "day": "friday", "time": "12:00", "service": "brake check"}


@pytest.fixture
def url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    return postgres_server.database(f"pg_{request.node.name[:40]}".lower())


@pytest.fixture
def ctx(url: str) -> Iterator[ShopContext]:
    db = open_shop(url, MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM, caller="phone:+15550100")
    db.close()


def bookings(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM bookings WHERE name = 'Ann Lee'").fetchone()
        return int(row[0]) if row else -1


def test_a_writer_in_another_worker_holds_the_shop_and_the_tool_fails_in_time(
    ctx: ShopContext, url: str
) -> None:
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (SHOP_LOCK,))
        started = time.monotonic()
        with pytest.raises(DatabaseBusy):
            call_tool("book_service", BOOK, ctx)
        waited = time.monotonic() - started
        assert 0.9 < waited < 1.9  # lock_timeout, under the tool's 2 s timeout
        assert not ctx.db.writable()
        assert bookings(url) == 0
        other.execute("SELECT pg_advisory_unlock(%s)", (SHOP_LOCK,))
    assert ctx.db.writable()
    assert isinstance(call_tool("book_service", BOOK, ctx), Booking)
    assert bookings(url) == 1


def test_the_connection_is_reopened_after_the_server_restarts(
    postgres_server: PostgresServer, ctx: ShopContext, url: str
) -> None:
    assert ctx.db.writable()
    postgres_server.stop("immediate")  # a crash: the open connection breaks
    try:
        assert not ctx.db.writable()
        with pytest.raises(DatabaseUnavailable):
            call_tool("book_service", BOOK, ctx)
    finally:
        postgres_server.start()
    assert ctx.db.writable()
    first = call_tool("book_service", BOOK, ctx)
    again = call_tool("book_service", BOOK, ctx)  # the retry writes nothing twice
    assert isinstance(first, Booking) and isinstance(again, Booking)
    assert again.already_booked and again.booking_id == first.booking_id
    assert bookings(url) == 1


def test_a_server_that_is_not_there_is_a_clear_error_without_the_password() -> None:
    url = f"postgresql://shop:s3cret@127.0.0.1:{free_port()}/shop"
    with pytest.raises(DatabaseUnavailable) as info:
        open_shop(url, date(2025, 6, 2))
    assert "127.0.0.1" in str(info.value) and "s3cret" not in str(info.value)
    assert redact(url).startswith("postgresql://shop:***@127.0.0.1:")


def test_two_workers_opening_a_new_database_at_once_seed_it_once(url: str) -> None:
    opened: list[ShopDb] = []
    barrier = threading.Barrier(3)

    def open_one() -> None:
        barrier.wait()
        opened.append(open_shop(url, MONDAY_10AM.date()))

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 3
    with psycopg.connect(url) as conn:
        seeded = conn.execute("SELECT count(*) FROM meta").fetchone()
        products = conn.execute("SELECT count(*) FROM products").fetchone()
    assert seeded == (1,) and products is not None and products[0] > 0
    for db in opened:
        db.close()
