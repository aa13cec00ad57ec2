"""The load test's own arithmetic and checks: /proc sampling, the memory slope, and the
bookings check against turn records on a real SQLite shop file."""

from __future__ import annotations

import os
import sqlite3
from datetime import date
from pathlib import Path

from scripts.load_test import bookings_check, proc_sample, slope_per_minute
from tools.bike_shop.db import ShopDb
from voice_agent.turn_record import Budgets, ToolCallRecord, ToolOutcome, TurnRecord


def test_proc_sample_reads_this_process() -> None:
    sample = proc_sample(os.getpid())
    assert sample["rss_mb"] > 10 and sample["fds"] >= 3 and sample["threads"] >= 1


def test_the_slope_is_megabytes_per_minute() -> None:
    assert slope_per_minute([0, 60, 120, 180], [100, 102, 104, 106]) == 2.0
    assert slope_per_minute([0, 60, 120], [5, 5, 5]) == 0.0
    assert slope_per_minute([0, 60], [1, 2]) is None  # too few samples to say


def _booking_turn(outcome: ToolOutcome) -> TurnRecord:
    call = ToolCallRecord("book_service", 10.0, 20.0, outcome)
    return TurnRecord("CA1", 1, Budgets.default(), tool_calls=(call,))


def test_each_confirmed_booking_is_in_the_shop_exactly_once(tmp_path: Path) -> None:
    shop = tmp_path / "shop.sqlite"
    ShopDb.open(shop, date(2025, 6, 2)).close()
    with sqlite3.connect(shop) as conn:
        seeded = conn.execute("SELECT COUNT(*) FROM bookings").fetchone()[0]
        row = conn.execute("SELECT * FROM bookings LIMIT 1").fetchone()
    records = [_booking_turn(ToolOutcome.OK), _booking_turn(ToolOutcome.TIMEOUT)]
    # No new row for the one booking that ran OK: a lost booking.
    lost = bookings_check(shop, records, seeded)
    assert lost["book_service_ok"] == 1 and lost["new_bookings"] == 0
    assert lost["each_confirmed_booking_once"] is False
    # One new row for it: right.
    with sqlite3.connect(shop) as conn:
        marks = ",".join("?" * len(row))
        conn.execute(f"INSERT INTO bookings VALUES ({marks})", (None, "ann lee", "ann lee",
                                                                *row[3:]))  # fmt: skip
    right = bookings_check(shop, records, seeded)
    assert right["new_bookings"] == 1 and right["duplicate_bookings"] == 0
    assert right["each_confirmed_booking_once"] is True
    # A row no confirmed call accounts for (the shop's UNIQUE key already refuses the
    # very same booking twice).
    with sqlite3.connect(shop) as conn:
        conn.execute(f"INSERT INTO bookings VALUES ({marks})", (None, "bo li", "bo li", *row[3:]))
    extra = bookings_check(shop, records, seeded)
    assert extra["new_bookings"] == 2 and extra["each_confirmed_booking_once"] is False
