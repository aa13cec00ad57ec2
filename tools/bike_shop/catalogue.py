"""The shop's seed data: services, opening hours, catalogue, orders, bookings.

Plain constants, so the data generator can draw slot values from the same facts the
database holds. Prices are in cents; times are shop-local wall-clock times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time
from enum import Enum

from voice_agent.speech.say import WEEKDAYS as WEEKDAYS  # the shop's week: re-exported


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    name: str
    duration_min: int
    daily_capacity: int
    """Bookings of this service the workshop takes on one day."""
    price_cents: int


SERVICES = (
    ServiceInfo("tune-up", 90, 4, 6500),
    ServiceInfo("flat repair", 30, 8, 1500),
    ServiceInfo("brake check", 30, 6, 2000),
    ServiceInfo("chain replacement", 45, 4, 3500),
    ServiceInfo("wheel true", 60, 3, 3000),
    ServiceInfo("gear adjustment", 45, 4, 2500),
    ServiceInfo("e-bike check", 60, 2, 5000),
)


OPENING_HOURS: dict[str, tuple[time, time] | None] = {
    "monday": (time(9), time(18)),
    "tuesday": (time(9), time(18)),
    "wednesday": (time(9), time(18)),
    "thursday": (time(9), time(19)),
    "friday": (time(9), time(18)),
    "saturday": (time(10), time(16)),
    "sunday": None,
}
"""Weekday → (opens, closes), or None when closed all day."""

SLOT_MINUTES = 30
"""Services start on the half hour."""


class OrderState(Enum):
    PROCESSING = "processing"
    SHIPPED = "shipped"
    READY_FOR_PICKUP = "ready for pickup"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Product:
    product_id: str
    """Three digits; what `reserve_product` takes."""
    name: str
    category: str
    price_cents: int
    stock: int
    keywords: str
    """Extra words a caller might use for it, space-separated."""


PRODUCTS = (
    Product("101", "city inner tube", "tubes", 750, 25, "tube inner puncture 700c"),
    Product("102", "mountain bike inner tube", "tubes", 850, 0, "tube inner mtb 29 puncture"),
    Product("103", "kids bike inner tube", "tubes", 600, 6, "tube inner small child"),
    Product("104", "puncture repair kit", "tubes", 599, 14, "patch kit flat repair"),
    Product("105", "road tyre", "tyres", 3999, 8, "tire tyre road slick 700c"),
    Product("106", "mountain bike tyre", "tyres", 4599, 0, "tire tyre mtb knobbly trail"),
    Product("107", "winter tyre", "tyres", 5499, 3, "tire tyre studded snow ice"),
    Product("108", "front light", "lights", 2499, 10, "lamp headlight led usb"),
    Product("109", "rear light", "lights", 1599, 0, "lamp tail red led"),
    Product("110", "light set", "lights", 3499, 2, "lamp lights front rear pair"),
    Product("111", "d lock", "locks", 4999, 7, "lock u-lock shackle"),
    Product("112", "cable lock", "locks", 1999, 12, "lock cable combination"),
    Product("113", "road helmet", "helmets", 7999, 4, "helmet head road"),
    Product("114", "kids helmet", "helmets", 3499, 0, "helmet child small"),
    Product("115", "city helmet", "helmets", 5999, 5, "helmet head commuter"),
    Product("116", "brake pads", "brakes", 1299, 20, "brake pad pads disc rim"),
    Product("117", "bike chain", "chains", 2999, 9, "chain 11 speed"),
    Product("118", "chain lube", "chains", 899, 30, "oil lubricant grease chain"),
    Product("119", "floor pump", "tools", 3999, 6, "pump inflator track"),
    Product("120", "multi tool", "tools", 2499, 0, "tool allen key hex"),
)


@dataclass(frozen=True, slots=True)
class SeedOrder:
    order_number: str
    item: str
    state: OrderState
    days_from_seed: int
    """Expected (or actual) arrival, in days after the day the database was seeded."""


ORDERS = (
    SeedOrder("40213", "a road tyre", OrderState.SHIPPED, 2),
    SeedOrder("40877", "a light set", OrderState.PROCESSING, 5),
    SeedOrder("41502", "two inner tubes", OrderState.READY_FOR_PICKUP, 0),
    SeedOrder("39120", "a d lock", OrderState.DELIVERED, -3),
    SeedOrder("1274", "a floor pump", OrderState.CANCELLED, -10),
)


@dataclass(frozen=True, slots=True)
class SeedBooking:
    name: str
    service: str
    open_days_ahead: int
    """1 = the first day after seeding that the shop is open, 2 = the next, ..."""
    start: time


SEED_BOOKINGS = (
    SeedBooking("maria lopez", "tune-up", 1, time(9)),
    SeedBooking("tom becker", "tune-up", 1, time(11)),
    SeedBooking("sam okafor", "tune-up", 1, time(14)),
    SeedBooking("lena fischer", "e-bike check", 1, time(10)),
    SeedBooking("lena fischer", "flat repair", 2, time(9, 30)),
    SeedBooking("ken adams", "brake check", 3, time(15)),
)
"""Bookings on the open days after seeding: three of the four tune-ups on the first."""
