"""Per-caller limits on the real shop (SQLite and PostgreSQL): one caller holds at most
`MAX_BOOKINGS_PER_CALLER` bookings and `MAX_HOLDS_PER_CALLER` reservations; a hold
belongs to its caller and expires, its stock going back on the shelf once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.results import ToolError, ToolErrorKind
from tools.bike_shop.shop import open_shop
from tools.bike_shop.store import MAX_HOLDS_PER_CALLER, release_expired
from tools.bike_shop.workshop import MAX_BOOKINGS_PER_CALLER

MONDAY_9AM = datetime(2026, 12, 7, 9, 0)


@pytest.fixture
def shop(shop_where: Path | str) -> Iterator[ShopContext]:
    db = open_shop(shop_where, MONDAY_9AM.date())
    yield ShopContext(db, lambda: MONDAY_9AM, caller="phone:+15550100")
    db.close()


def stock(ctx: ShopContext, product_id: str) -> int:
    with ctx.db.read() as conn:
        return int(conn.execute("SELECT stock FROM products WHERE product_id = ?",
                                (product_id,)).fetchone()[0])  # fmt: skip


def test_one_caller_books_at_most_the_limit_and_another_caller_is_not_affected(
    shop: ShopContext,
) -> None:
    days = ["tuesday", "wednesday", "thursday", "friday"]
    for day in days[:MAX_BOOKINGS_PER_CALLER]:
        call_tool("book_service", {"name": "Ann Lee", "day": day, "time": "15:00",
                                   "service": "flat repair"}, shop)  # fmt: skip
    more = {"name": "Ann Lee", "day": days[MAX_BOOKINGS_PER_CALLER], "time": "15:00",
            "service": "flat repair"}  # fmt: skip
    with pytest.raises(ToolError) as refused:
        call_tool("book_service", more, shop)
    assert refused.value.kind is ToolErrorKind.LIMIT_REACHED
    call_tool("book_service", {**more, "time": "15:00"}, replace(shop, caller="phone:+15550199"))
    # a retry of a booking already made is not a new one
    call_tool("book_service", {"name": "Ann Lee", "day": "tuesday", "time": "15:00",
                               "service": "flat repair"}, shop)  # fmt: skip


def test_holds_are_limited_per_caller_and_expire_back_onto_the_shelf(shop: ShopContext) -> None:
    before = stock(shop, "101")
    for name in ("Ann Lee", "Bo Chen", "Cy Dia")[:MAX_HOLDS_PER_CALLER]:
        call_tool("reserve_product", {"product_id": "101", "quantity": 1, "name": name}, shop)
    with pytest.raises(ToolError) as refused:
        call_tool("reserve_product", {"product_id": "101", "quantity": 1, "name": "Di E"}, shop)
    assert refused.value.kind is ToolErrorKind.LIMIT_REACHED
    assert stock(shop, "101") == before - MAX_HOLDS_PER_CALLER
    with shop.db.read() as conn:
        owners = {r[0] for r in conn.execute("SELECT caller FROM reservations")}
    assert owners == {"phone:+15550100"}
    later = MONDAY_9AM.date() + timedelta(days=14)
    with shop.db.write() as conn:
        assert release_expired(conn, later) == MAX_HOLDS_PER_CALLER
        assert release_expired(conn, later) == 0  # once each
    assert stock(shop, "101") == before
    two_weeks_on = replace(shop, now=lambda: MONDAY_9AM + timedelta(days=14))
    call_tool("reserve_product", {"product_id": "101", "quantity": 1, "name": "Di E"}, two_weeks_on)
