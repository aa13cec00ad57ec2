"""The bike shop tools against a real database, each test once on a SQLite file and once
on a PostgreSQL database: seed, every tool, every error kind, exactly-once bookings and
reservations under retries and concurrent callers (threads sharing one connection, and
separate connections as separate workers would have)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from tools.bike_shop import catalogue
from tools.bike_shop.catalogue import OrderState
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.results import (
    Availability,
    Booking,
    CallAction,
    Cancellation,
    Handoff,
    Hours,
    OrderInfo,
    Reservation,
    SearchResult,
    ToolError,
    ToolErrorKind,
    ToolResult,
    to_dict,
)
from tools.bike_shop.shop import open_shop
from tools.bike_shop.timewords import resolve_day
from tools.core import CallRefusal

MONDAY_10AM = datetime(2025, 6, 2, 10, 0)
"""Seed day. Seeded bookings: tuesday 3 of 4 tune-ups (09:00, 11:00, 14:00) and an e-bike
check; wednesday a flat repair at 09:30; thursday a brake check at 15:00."""
TUESDAY, WEDNESDAY = date(2025, 6, 3), date(2025, 6, 4)


class Shop:
    """A seeded shop with a settable wall clock."""

    def __init__(self, where: Path | str, now: datetime) -> None:
        self.where, self.now = where, now
        self.db = open_shop(where, now.date())
        self.ctx = ShopContext(self.db, lambda: self.now)

    def call(self, tool: str, **args: Any) -> Any:
        result = call_tool(tool, args, self.ctx)
        json.dumps(to_dict(result))  # every result is JSON-serializable
        return result

    def error(self, tool: str, **args: Any) -> ToolError:
        with pytest.raises(ToolError) as info:
            call_tool(tool, args, self.ctx)
        json.dumps(info.value.to_dict())
        return info.value

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        with self.db.read() as conn:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]


@pytest.fixture
def shop(shop_where: Path | str) -> Iterator[Shop]:
    s = Shop(shop_where, MONDAY_10AM)
    yield s
    s.db.close()


def active_bookings(shop: Shop, day: date, service: str) -> list[tuple[Any, ...]]:
    return shop.rows(
        "SELECT name, start FROM bookings WHERE day = ? AND service = ? AND cancelled = 0",
        day.isoformat(), service,
    )  # fmt: skip


def stock(shop: Shop, product_id: str) -> int:
    return int(shop.rows("SELECT stock FROM products WHERE product_id = ?", product_id)[0][0])


# ---------------------------------------------------------------- seed


def test_seed_is_created_once(shop_where: Path | str) -> None:
    first = open_shop(shop_where, date(2025, 6, 2))
    first.close()
    again = Shop(shop_where, datetime(2025, 7, 1, 9))  # a later day must not reseed
    assert again.rows("SELECT count(*) FROM products") == [(len(catalogue.PRODUCTS),)]
    assert again.rows("SELECT count(*) FROM bookings") == [(len(catalogue.SEED_BOOKINGS),)]
    assert again.rows("SELECT value FROM meta WHERE key = 'seeded_on'") == [("2025-06-02",)]
    assert again.rows("SELECT weekday FROM opening_hours WHERE opens IS NULL") == [(6,)]
    assert {r[0] for r in again.rows("SELECT name FROM services")} == {
        s.name for s in catalogue.SERVICES
    }
    again.db.close()


def test_seed_bookings_skip_the_closed_day(shop_where: Path | str) -> None:
    saturday = Shop(shop_where, datetime(2025, 6, 7, 12))
    days = {r[0] for r in saturday.rows("SELECT day FROM bookings")}
    assert "2025-06-08" not in days  # sunday
    assert "2025-06-09" in days
    saturday.db.close()


# ---------------------------------------------------------------- workshop


def test_opening_hours(shop: Shop) -> None:
    today = shop.call("opening_hours", day="today")
    assert isinstance(today, Hours)
    assert (today.opens, today.closes, today.say) == (
        "09:00",
        "18:00",
        "Today we're open from nine to six.",
    )
    saturday = shop.call("opening_hours", day="saturday")
    assert (saturday.opens, saturday.closes) == ("10:00", "16:00")
    sunday = shop.call("opening_hours", day="sunday")
    assert (sunday.day, sunday.opens, sunday.closes) == ("2025-06-08", None, None)
    assert "closed" in sunday.say and "nine" in sunday.say


def test_availability_skips_taken_and_too_late_starts(shop: Shop) -> None:
    free = shop.call("check_availability", day="tomorrow", service="tune-up")
    assert isinstance(free, Availability)
    assert free.day == TUESDAY.isoformat()
    assert free.times[0] == "09:30" and free.times[-1] == "16:30"  # 90 min, closes at 18:00
    assert not {"09:00", "11:00", "14:00"} & set(free.times)
    assert "half past nine" in free.say
    today = shop.call("check_availability", day="today", service="flat repair")
    assert today.times[0] == "10:30"  # 10:00 is now, not the future


def test_closed_day(shop: Shop) -> None:
    err = shop.error("check_availability", day="sunday", service="brake check")
    assert err.kind is ToolErrorKind.CLOSED_THAT_DAY
    assert err.alternatives == ("2025-06-09", "2025-06-10")
    err = shop.error("book_service", name="ann", day="sunday", time="10:00", service="tune-up")
    assert err.kind is ToolErrorKind.CLOSED_THAT_DAY


def test_booking_is_written_once_under_a_retried_call(shop: Shop) -> None:
    args = {"name": "Ann Lee", "day": "wednesday", "time": "10:00", "service": "wheel true"}
    first = shop.call("book_service", **args)
    again = shop.call("book_service", **{**args, "name": "ann  LEE"})
    assert isinstance(first, Booking) and isinstance(again, Booking)
    assert not first.already_booked and again.already_booked
    assert again.booking_id == first.booking_id
    assert active_bookings(shop, WEDNESDAY, "wheel true") == [("Ann Lee", "10:00")]
    assert first.say.startswith("You're booked in for a wheel true on wednesday at ten o'clock")
    assert "thirty dollars" in first.say


def test_fully_booked(shop: Shop) -> None:
    shop.call("book_service", name="ann", day="tomorrow", time="15:30", service="tune-up")
    err = shop.error("book_service", name="bob", day="tomorrow", time="10:00", service="tune-up")
    assert err.kind is ToolErrorKind.FULLY_BOOKED
    assert err.alternatives == (WEDNESDAY.isoformat(), "2025-06-05")
    assert "fully booked" in err.message and "wednesday" in err.message
    err = shop.error("check_availability", day="tomorrow", service="tune-up")
    assert err.kind is ToolErrorKind.FULLY_BOOKED
    assert len(active_bookings(shop, TUESDAY, "tune-up")) == 4


def test_slot_taken_offers_nearest_times(shop: Shop) -> None:
    err = shop.error(
        "book_service", name="cy", day="wednesday", time="09:30", service="flat repair"
    )
    assert err.kind is ToolErrorKind.SLOT_TAKEN
    assert err.alternatives == ("09:00", "10:00", "10:30")
    assert "nine o'clock" in err.message


def test_invalid_time(shop: Shop) -> None:
    late = shop.error("book_service", name="cy", day="tomorrow", time="17:00", service="tune-up")
    assert late.kind is ToolErrorKind.INVALID_TIME  # would end at 18:30, after closing
    assert late.alternatives[-1] == "16:30"
    early = shop.error(
        "book_service", name="cy", day="saturday", time="09:00", service="flat repair"
    )
    assert early.kind is ToolErrorKind.INVALID_TIME  # saturdays open at ten
    assert "ten o'clock" in early.message


def test_in_the_past(shop: Shop) -> None:
    err = shop.error("book_service", name="cy", day="today", time="09:30", service="flat repair")
    assert err.kind is ToolErrorKind.IN_THE_PAST
    assert err.alternatives[0] == "10:30"


def test_late_evening_has_no_time_left_today(shop: Shop) -> None:
    shop.now = datetime(2025, 6, 2, 21, 30)
    err = shop.error("check_availability", day="today", service="brake check")
    assert err.kind is ToolErrorKind.IN_THE_PAST
    assert err.alternatives[0] == TUESDAY.isoformat()
    tomorrow = shop.call("check_availability", day="tomorrow", service="brake check")
    assert tomorrow.times[0] == "09:00"


def test_day_words_follow_the_clock_on_a_sunday(shop: Shop) -> None:
    shop.now = datetime(2025, 6, 8, 11, 0)  # sunday
    assert shop.error("check_availability", day="today", service="tune-up").kind is (
        ToolErrorKind.CLOSED_THAT_DAY
    )
    booked = shop.call("book_service", name="di", day="friday", time="12:00", service="brake check")
    assert booked.day == "2025-06-13"
    assert shop.call("opening_hours", day="tomorrow").day == "2025-06-09"


def test_friday_next_week_is_booked_a_week_after_next_friday(shop: Shop) -> None:
    """Said on a Monday, "next friday" is in four days and "friday next week" in eleven;
    the booking and its spoken confirmation name the later date."""
    soon = shop.call("book_service", name="di", day="next friday", time="12:00",
                     service="brake check")  # fmt: skip
    later = shop.call("book_service", name="di", day="friday next week", time="12:00",
                      service="brake check")  # fmt: skip
    assert (soon.day, later.day) == ("2025-06-06", "2025-06-13")
    assert "friday the thirteenth" in later.say.lower()
    hours = shop.call("opening_hours", day="monday next week")
    assert hours.day == "2025-06-09"


def test_cancel_then_retry_then_rebook(shop: Shop) -> None:
    done = shop.call("cancel_booking", name="Lena Fischer", day="tomorrow")
    assert isinstance(done, Cancellation)
    assert (done.services, done.already_cancelled) == (("e-bike check",), False)
    assert active_bookings(shop, TUESDAY, "e-bike check") == []
    again = shop.call("cancel_booking", name="lena fischer", day="tomorrow")
    assert again.already_cancelled
    rebooked = shop.call("book_service", name="lena fischer", day="tomorrow", time="10:00",
                         service="e-bike check")  # fmt: skip
    assert not rebooked.already_booked


def test_no_such_booking_mentions_other_days(shop: Shop) -> None:
    err = shop.error("cancel_booking", name="lena fischer", day="friday")
    assert err.kind is ToolErrorKind.NO_SUCH_BOOKING
    assert err.alternatives == (TUESDAY.isoformat(), WEDNESDAY.isoformat())
    assert "tomorrow" in err.message
    assert shop.error("cancel_booking", name="nobody", day="friday").alternatives == ()


# ---------------------------------------------------------------- counter


@pytest.mark.parametrize("order", catalogue.ORDERS, ids=lambda o: o.state.value)
def test_order_status(shop: Shop, order: catalogue.SeedOrder) -> None:
    info = shop.call("order_status", order_number=order.order_number)
    assert isinstance(info, OrderInfo)
    assert (info.state, info.item) == (order.state, order.item)
    assert info.say.startswith(f"Order {' '.join(_digit_words(order.order_number))}")
    if order.state is OrderState.SHIPPED:
        assert info.say.endswith("should arrive on wednesday.")


def _digit_words(digits: str) -> list[str]:
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    return [names[int(d)] for d in digits]


def test_no_such_order(shop: Shop) -> None:
    err = shop.error("order_status", order_number="99999")
    assert err.kind is ToolErrorKind.NO_SUCH_ORDER
    assert "nine nine nine nine nine" in err.message


def test_search_then_reserve_decrements_stock_once(shop: Shop) -> None:
    found = shop.call("search_products", query="a bike light")
    assert isinstance(found, SearchResult)
    assert [p.product_id for p in found.products] == ["108", "110", "109"]  # out of stock last
    assert "rear light is out of stock" in found.say
    product = found.products[0]
    before = stock(shop, product.product_id)
    reserved = shop.call("reserve_product", product_id=product.product_id, quantity=2, name="Eva")
    assert isinstance(reserved, Reservation)
    assert (reserved.product_name, reserved.total_cents) == ("front light", 2 * product.price_cents)
    assert "two front lights" in reserved.say and "forty-nine dollars ninety-eight" in reserved.say
    assert stock(shop, product.product_id) == before - 2
    retried = shop.call("reserve_product", product_id=product.product_id, quantity=2, name="eva")
    assert retried.already_reserved and retried.reference == reserved.reference
    assert stock(shop, product.product_id) == before - 2
    assert reserved.hold_until == "2025-06-05"  # third open day after monday


def test_out_of_stock_offers_alternatives(shop: Shop) -> None:
    err = shop.error("reserve_product", product_id="109", quantity=1, name="Eva")
    assert err.kind is ToolErrorKind.OUT_OF_STOCK
    assert err.alternatives == ("108", "110")
    assert err.message.startswith("Sorry, we're out of the rear light, but we have the front light")
    short = shop.error("reserve_product", product_id="110", quantity=3, name="Eva")
    assert short.kind is ToolErrorKind.OUT_OF_STOCK and "only have two light sets" in short.message
    assert stock(shop, "110") == 2


def test_no_such_product_and_no_match(shop: Shop) -> None:
    assert shop.error("reserve_product", product_id="999", quantity=1, name="x").kind is (
        ToolErrorKind.NO_SUCH_PRODUCT
    )
    err = shop.error("search_products", query="pizza")
    assert err.kind is ToolErrorKind.NO_MATCH and "helmets" in err.alternatives


def test_handoffs_and_bad_calls(shop: Shop) -> None:
    bye = shop.call("end_call")
    assert isinstance(bye, Handoff) and bye.action is CallAction.HANG_UP
    moved = shop.call("transfer_to_human", reason="refund")
    assert (moved.action, moved.reason) == (CallAction.TRANSFER, "refund")
    bad = shop.error("order_status", order_number="40x13")
    assert bad.kind is CallRefusal.INVALID_ARGUMENTS and "order number" in bad.message
    assert shop.error("order_pizza").kind is CallRefusal.UNKNOWN_TOOL


# ---------------------------------------------------------------- concurrency

RACE_DAYS = ("wednesday", "thursday", "friday", "saturday")
"""One race per day: the e-bike check (capacity 2) is pre-booked once, two callers race."""


def race(*calls: Callable[[], ToolResult]) -> list[ToolResult | ToolError]:
    """Run the calls in threads released together; results in call order."""
    barrier = threading.Barrier(len(calls))
    out: list[ToolResult | ToolError | None] = [None] * len(calls)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except ToolError as err:
            out[i] = err

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in out if r is not None]


@pytest.mark.parametrize("connections", [1, 2])
def test_two_callers_race_for_the_last_slot(shop: Shop, connections: int) -> None:
    """One shared connection (lock) or two connections (IMMEDIATE / advisory lock)."""
    other = ShopContext(open_shop(shop.where, MONDAY_10AM.date()), shop.ctx.now)
    second = other if connections == 2 else shop.ctx
    for day in RACE_DAYS:
        target = resolve_day(day, MONDAY_10AM.date())
        shop.call("book_service", name="pre", day=day, time="10:00", service="e-bike check")

        def book(name: str, time: str, ctx: ShopContext, day: str = day) -> ToolResult:
            args = {"name": name, "day": day, "time": time, "service": "e-bike check"}
            return call_tool("book_service", args, ctx)

        results = race(lambda: book("ann", "13:00", shop.ctx), lambda: book("bob", "14:00", second))
        booked = [x for x in results if isinstance(x, Booking)]
        refused = [x for x in results if isinstance(x, ToolError)]
        assert len(booked) == 1 and len(refused) == 1
        assert refused[0].kind is ToolErrorKind.FULLY_BOOKED
        assert len(active_bookings(shop, target, "e-bike check")) == 2
    other.db.close()


def test_concurrent_retries_of_one_booking_write_one_row(shop: Shop) -> None:
    args = {"name": "ann", "day": "friday", "time": "12:00", "service": "brake check"}
    results = race(*[lambda: call_tool("book_service", args, shop.ctx)] * 4)
    assert all(isinstance(x, Booking) for x in results)
    assert len({x.booking_id for x in results if isinstance(x, Booking)}) == 1
    assert len(active_bookings(shop, date(2025, 6, 6), "brake check")) == 1


def test_concurrent_reservations_never_oversell(shop: Shop) -> None:
    other = ShopContext(open_shop(shop.where, MONDAY_10AM.date()), shop.ctx.now)
    results = race(
        lambda: call_tool("reserve_product", {"product_id": "107", "quantity": 2, "name": "a"}, shop.ctx),
        lambda: call_tool("reserve_product", {"product_id": "107", "quantity": 2, "name": "b"}, other),
    )  # fmt: skip
    assert sorted(type(x).__name__ for x in results) == ["Reservation", "ToolError"]
    assert stock(shop, "107") == 1
    other.db.close()
