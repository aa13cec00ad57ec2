"""The load test's own arithmetic and checks: /proc sampling, the memory slope, and the
bookings check against turn records on a real SQLite shop file, booked by the real tool
(identical retries make one row)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from scripts.load_test import bookings_check, proc_sample, slope_per_minute
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.shop import open_shop
from voice_agent.turn_record import Budgets, ToolCallRecord, ToolOutcome, TurnRecord


def test_proc_sample_reads_this_process() -> None:
    sample = proc_sample(os.getpid())
    assert sample["rss_mb"] > 10 and sample["fds"] >= 3 and sample["threads"] >= 1


def test_the_slope_is_megabytes_per_minute() -> None:
    assert slope_per_minute([0, 60, 120, 180], [100, 102, 104, 106]) == 2.0
    assert slope_per_minute([0, 60, 120], [5, 5, 5]) == 0.0
    assert slope_per_minute([0, 60], [1, 2]) is None  # too few samples to say


NOW = datetime(2025, 6, 2, 9, 0)  # a Monday; "tomorrow" is 2025-06-03
ANNA = {"name": "Anna", "day": "tomorrow", "time": "10:00", "service": "tune-up"}
LENA = {"name": "Lena", "day": "friday", "time": "14:00", "service": "flat repair"}


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[Path, ShopContext, int]]:
    """A real shop file, its context at `NOW`, and how many bookings it was seeded with."""
    path = tmp_path / "shop.sqlite"
    db = open_shop(path, NOW.date())
    with db.read() as conn:
        seeded = conn.execute("SELECT COUNT(*) FROM bookings").fetchone()[0]
    yield path, ShopContext(db, lambda: NOW), seeded
    db.close()


def _turn(*calls: tuple[dict[str, str] | None, ToolOutcome]) -> TurnRecord:
    """A turn at `NOW` with these book_service calls (arguments, outcome)."""
    tools = tuple(ToolCallRecord("book_service", 10.0, 20.0, outcome, args)
                  for args, outcome in calls)  # fmt: skip
    return TurnRecord("CA1", 1, Budgets.default(), tool_calls=tools,
                      wall_time_unix_s=NOW.timestamp())  # fmt: skip


def test_identical_confirmed_calls_are_one_booking(shop: tuple[Path, ShopContext, int]) -> None:
    path, ctx, seeded = shop
    for args in (ANNA, ANNA, {**ANNA, "name": "ANNA"}):  # the tool makes one row for them
        call_tool("book_service", args, ctx)
    records = [_turn((ANNA, ToolOutcome.OK)), _turn((ANNA, ToolOutcome.OK)),
               _turn(({**ANNA, "name": "ANNA"}, ToolOutcome.OK))]  # fmt: skip
    result = bookings_check(path, records, seeded)
    assert result["each_confirmed_booking_once"] is True
    assert (result["ok_calls"], result["book_service_ok"]) == (3, 3)
    assert (result["distinct_bookings"], result["new_bookings"]) == (1, 1)
    assert (result["duplicate_bookings"], result["missing"]) == (0, 0)


def test_a_lost_booking_is_named(shop: tuple[Path, ShopContext, int]) -> None:
    path, ctx, seeded = shop
    call_tool("book_service", ANNA, ctx)  # Lena's confirmed booking never reached the file
    records = [_turn((ANNA, ToolOutcome.OK)), _turn((LENA, ToolOutcome.OK))]
    result = bookings_check(path, records, seeded)
    assert result["each_confirmed_booking_once"] is False
    assert (result["ok_calls"], result["distinct_bookings"], result["new_bookings"]) == (2, 2, 1)
    assert result["missing"] == 1
    assert result["missing_bookings"] == ["lena 2025-06-06 14:00 flat repair"]


def test_a_booking_in_the_file_twice_fails(shop: tuple[Path, ShopContext, int]) -> None:
    path, ctx, seeded = shop
    call_tool("book_service", ANNA, ctx)
    with sqlite3.connect(path) as conn:  # a shop that lost its one-booking index
        conn.execute("DROP INDEX one_active_booking")
        conn.execute("INSERT INTO bookings (name, name_key, day, start, service) "
                     "SELECT name, name_key, day, start, service FROM bookings "
                     "ORDER BY booking_id DESC LIMIT 1")  # fmt: skip
    result = bookings_check(path, [_turn((ANNA, ToolOutcome.OK))], seeded)
    assert result["each_confirmed_booking_once"] is False
    assert (result["new_bookings"], result["duplicate_bookings"], result["missing"]) == (2, 1, 0)


def test_a_row_no_call_asked_for_fails(shop: tuple[Path, ShopContext, int]) -> None:
    path, ctx, seeded = shop
    call_tool("book_service", ANNA, ctx)
    call_tool("book_service", LENA, ctx)
    result = bookings_check(path, [_turn((ANNA, ToolOutcome.OK))], seeded)
    assert result["each_confirmed_booking_once"] is False
    assert (result["unexplained_bookings"], result["missing"]) == (1, 0)
    # A call that timed out may still have booked: its row is accounted for.
    timed_out = _turn((ANNA, ToolOutcome.OK), (LENA, ToolOutcome.TIMEOUT))
    assert bookings_check(path, [timed_out], seeded)["each_confirmed_booking_once"] is True


def test_a_refusal_expects_no_row(shop: tuple[Path, ShopContext, int]) -> None:
    path, _, seeded = shop
    refused = ToolCallRecord("book_service", 10.0, 20.0, ToolOutcome.REFUSED, ANNA, "slot_taken")
    record = TurnRecord("CA1", 1, Budgets.default(), tool_calls=(refused,),
                        wall_time_unix_s=NOW.timestamp())  # fmt: skip
    result = bookings_check(path, [record], seeded)
    assert result["each_confirmed_booking_once"] is True
    assert (result["ok_calls"], result["refused_calls"], result["distinct_bookings"]) == (1, 1, 0)


def test_calls_without_arguments_leave_the_check_unmade(
    shop: tuple[Path, ShopContext, int],
) -> None:
    path, ctx, seeded = shop
    call_tool("book_service", ANNA, ctx)
    records = [_turn((ANNA, ToolOutcome.OK)), _turn((None, ToolOutcome.OK))]  # an old line
    result = bookings_check(path, records, seeded)
    assert result["each_confirmed_booking_once"] is None
    assert result["calls_without_arguments"] == 1 and "without arguments" in str(result["note"])
