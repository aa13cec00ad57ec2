"""Workshop tools: opening hours, service availability, booking and cancelling.

Each takes its validated arguments and a `ShopContext`, returns a result from
`results`, or raises `ToolError`. Day words are resolved against `ctx.now()`; a booking
must start on the half hour, at or after opening, finish by closing, and not be in the
past. Bookings are written in one IMMEDIATE transaction: the capacity check and the
insert cannot interleave with another booking.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from tools.bike_shop.catalogue import SLOT_MINUTES, WEEKDAYS
from tools.bike_shop.db import Conn, ShopContext, name_key
from tools.bike_shop.results import (
    Availability,
    Booking,
    CallRefusal,
    Cancellation,
    Hours,
    ToolError,
    ToolErrorKind,
)
from tools.bike_shop.schemas import BookService, CancelBooking, CheckAvailability, OpeningHours
from tools.bike_shop.timewords import (
    DAYS_PER_WEEK,
    MINUTES_PER_HOUR,
    parse_slot,
    resolve_day,
    slot_text,
)
from voice_agent.speech.say import (
    number_words,
    say_day,
    say_hour_span,
    say_list,
    say_on_day,
    say_price,
    say_time,
)

TIMES_TO_OFFER = 3
"""How many free times a reply reads out (the result lists them all)."""
DAYS_TO_OFFER = 2
SEARCH_DAYS = 14
"""How far ahead alternatives for a full or closed day are looked for."""


@dataclass(frozen=True, slots=True)
class _Service:
    name: str
    duration_min: int
    daily_capacity: int
    price_cents: int


def _hours(conn: Conn, day: date) -> tuple[time, time] | None:
    row = conn.execute(
        "SELECT opens, closes FROM opening_hours WHERE weekday = ?", (day.weekday(),)
    ).fetchone()
    if row is None or row["opens"] is None:
        return None
    return parse_slot(row["opens"]), parse_slot(row["closes"])


def _service(conn: Conn, name: str) -> _Service:
    row = conn.execute("SELECT * FROM services WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise ToolError(CallRefusal.INVALID_ARGUMENTS, f"Sorry, we don't offer a {name}.")
    return _Service(row["name"], row["duration_min"], row["daily_capacity"], row["price_cents"])


def _starts(hours: tuple[time, time], duration_min: int) -> list[time]:
    """Half-hour starts from opening such that the service ends by closing."""
    opens, closes = (datetime.combine(date.min, t) for t in hours)
    starts, t = [], opens
    while t + timedelta(minutes=duration_min) <= closes:
        starts.append(t.time())
        t += timedelta(minutes=SLOT_MINUTES)
    return starts


def _taken(conn: Conn, day: date, service: str) -> set[str]:
    rows = conn.execute(
        "SELECT start FROM bookings WHERE day = ? AND service = ? AND cancelled = 0",
        (day.isoformat(), service),
    ).fetchall()
    return {row["start"] for row in rows}


def _free_times(conn: Conn, day: date, service: _Service, now: datetime) -> list[str]:
    """Free starts that day, or none when the day is closed, full or over."""
    hours = _hours(conn, day)
    taken = _taken(conn, day, service.name)
    if hours is None or len(taken) >= service.daily_capacity:
        return []
    starts = [t for t in _starts(hours, service.duration_min) if datetime.combine(day, t) > now]
    return [slot_text(t) for t in starts if slot_text(t) not in taken]


def _days_with_room(conn: Conn, after: date, service: _Service, now: datetime) -> list[date]:
    days = (after + timedelta(days=i) for i in range(1, SEARCH_DAYS + 1))
    return [d for d in days if _free_times(conn, d, service, now)][:DAYS_TO_OFFER]


def _offer_days(days: list[date], today: date) -> str:
    """A sentence offering `days`."""
    if not days:
        return f"I have nothing free in the next {number_words(SEARCH_DAYS)} days."
    return f"I could do {say_list([say_day(d, today) for d in days], 'or')}."


def opening_hours(args: OpeningHours, ctx: ShopContext) -> Hours:
    now = ctx.now()
    day = resolve_day(args.day, now.date())
    spoken = say_day(day, now.date())
    with ctx.db.read() as conn:
        hours = _hours(conn, day)
        next_open = next(
            (d, h)
            for d in (day + timedelta(days=i) for i in range(1, DAYS_PER_WEEK + 1))
            if (h := _hours(conn, d)) is not None
        )
    if hours is None:
        weekday = WEEKDAYS[day.weekday()]
        then = f"{say_day(next_open[0], now.date())} at {say_time(next_open[1][0])}"
        return Hours(
            day.isoformat(), None, None, f"We're closed on {weekday}s; we open again {then}."
        )
    opens, closes = hours
    when = spoken.capitalize() if spoken in ("today", "tomorrow") else f"On {spoken}"
    return Hours(
        day.isoformat(),
        slot_text(opens),
        slot_text(closes),
        f"{when} we're open {say_hour_span(opens, closes)}.",
    )


def _open_hours(conn: Conn, day: date, service: _Service, now: datetime) -> tuple[time, time]:
    """The day's hours; raises CLOSED_THAT_DAY (offering days with room) when closed."""
    hours = _hours(conn, day)
    if hours is None:
        days = _days_with_room(conn, day, service, now)
        raise ToolError(
            ToolErrorKind.CLOSED_THAT_DAY,
            f"We're closed on {WEEKDAYS[day.weekday()]}s. {_offer_days(days, now.date())}",
            tuple(d.isoformat() for d in days),
        )
    return hours


def check_availability(args: CheckAvailability, ctx: ShopContext) -> Availability:
    now = ctx.now()
    day = resolve_day(args.day, now.date())
    spoken = say_on_day(day, now.date())
    with ctx.db.read() as conn:
        service = _service(conn, args.service)
        _open_hours(conn, day, service, now)
        times = _free_times(conn, day, service, now)
        if not times:
            days = _days_with_room(conn, day, service, now)
            over = (
                day == now.date() and len(_taken(conn, day, service.name)) < service.daily_capacity
            )
            kind = ToolErrorKind.IN_THE_PAST if over else ToolErrorKind.FULLY_BOOKED
            reason = "there's no time left today" if over else f"we're fully booked {spoken}"
            raise ToolError(
                kind,
                f"Sorry, {reason} for a {service.name}. {_offer_days(days, now.date())}",
                tuple(d.isoformat() for d in days),
            )
    offered = say_list([say_time(parse_slot(t)) for t in times[:TIMES_TO_OFFER]], "or")
    return Availability(
        day.isoformat(),
        service.name,
        tuple(times),
        f"For a {service.name} {spoken}, I can do {offered}.",
    )


def _check_start(conn: Conn, day: date, start: time, service: _Service, now: datetime) -> None:
    """Raise CLOSED_THAT_DAY, INVALID_TIME or IN_THE_PAST for a start that cannot be."""
    hours = _open_hours(conn, day, service, now)
    starts = _starts(hours, service.duration_min)
    if start not in starts:
        first, last = (say_time(starts[i] if starts else hours[0]) for i in (0, -1))
        raise ToolError(
            ToolErrorKind.INVALID_TIME,
            f"A {service.name} takes {number_words(service.duration_min)} minutes; "
            f"{say_day(day, now.date())} we can start one between {first} and {last}.",
            tuple(slot_text(t) for t in starts),
        )
    if datetime.combine(day, start) <= now:
        later = tuple(_free_times(conn, day, service, now))
        raise ToolError(ToolErrorKind.IN_THE_PAST, "Sorry, that time has already passed.", later)


def _check_room(conn: Conn, day: date, start: time, service: _Service, now: datetime) -> None:
    """Raise FULLY_BOOKED (offering other days) or SLOT_TAKEN (offering the nearest free
    times that day)."""
    free = _free_times(conn, day, service, now)
    if not free:
        days = _days_with_room(conn, day, service, now)
        raise ToolError(
            ToolErrorKind.FULLY_BOOKED,
            f"Sorry, we're fully booked for a {service.name} {say_on_day(day, now.date())}. "
            + _offer_days(days, now.date()),
            tuple(d.isoformat() for d in days),
        )
    if slot_text(start) not in free:
        nearest = sorted(free, key=lambda t: abs(_minutes(parse_slot(t)) - _minutes(start)))
        nearest = nearest[:TIMES_TO_OFFER]
        offer = say_list([say_time(parse_slot(t)) for t in nearest], "or")
        raise ToolError(
            ToolErrorKind.SLOT_TAKEN, f"That time's taken, but I could do {offer}.", tuple(nearest)
        )


MAX_BOOKINGS_PER_CALLER = 3
"""Active bookings (today on) one caller (ShopContext.caller) may hold at once."""


def _check_own_limit(conn: Conn, caller: str | None, now: datetime) -> None:
    if caller is None:
        return
    held = conn.execute(
        "SELECT COUNT(*) FROM bookings WHERE caller = ? AND cancelled = 0 AND day >= ?",
        (caller, now.date().isoformat()),
    ).fetchone()[0]
    if held >= MAX_BOOKINGS_PER_CALLER:
        raise ToolError(
            ToolErrorKind.LIMIT_REACHED,
            "You already have the most bookings we take from one caller; a colleague can "
            "help with more.",
        )


def book_service(args: BookService, ctx: ShopContext) -> Booking:
    """Book, or return the identical active booking a retried call already made."""
    now = ctx.now()
    day = resolve_day(args.day, now.date())
    start = parse_slot(args.time)
    key = name_key(args.name)
    with ctx.db.write() as conn:
        service = _service(conn, args.service)
        _check_start(conn, day, start, service, now)
        existing = conn.execute(
            "SELECT booking_id FROM bookings WHERE name_key = ? AND day = ? AND start = ? "
            "AND service = ? AND cancelled = 0",
            (key, day.isoformat(), args.time, service.name),
        ).fetchone()
        if existing is None:
            _check_own_limit(conn, ctx.caller, now)
            _check_room(conn, day, start, service, now)
            booking_id = int(conn.execute(
                "INSERT INTO bookings (name, name_key, day, start, service, caller) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING booking_id",
                (args.name, key, day.isoformat(), args.time, service.name, ctx.caller),
            ).fetchone()[0])  # fmt: skip
        else:
            booking_id = int(existing["booking_id"])
    spoken = f"{say_on_day(day, now.date())} at {say_time(start)}"
    return Booking(
        booking_id, args.name, day.isoformat(), args.time, service.name, service.duration_min,
        service.price_cents, existing is not None,
        f"You're booked in for a {service.name} {spoken}, {args.name}. It takes about "
        f"{number_words(service.duration_min)} minutes and costs {say_price(service.price_cents)}.",
    )  # fmt: skip


def _minutes(t: time) -> int:
    return t.hour * MINUTES_PER_HOUR + t.minute


_CALLERS_OWN = "(CAST(? AS TEXT) IS NULL OR caller = ?)"
"""SQL: a booking the context's caller may cancel (any, when the context is unscoped)."""


def cancel_booking(args: CancelBooking, ctx: ShopContext) -> Cancellation:
    """Cancel the caller's own bookings under `args.name` on the day. With a scoped
    context (`ctx.caller`), bookings someone else made are invisible: refused exactly as
    if there were none, so their existence is not revealed either."""
    now = ctx.now()
    day = resolve_day(args.day, now.date())
    spoken = say_on_day(day, now.date())
    key = name_key(args.name)
    own = (ctx.caller, ctx.caller)
    with ctx.db.write() as conn:
        rows = conn.execute(
            "SELECT service, cancelled FROM bookings WHERE name_key = ? AND day = ? AND "
            + _CALLERS_OWN
            + " ORDER BY start",
            (key, day.isoformat(), *own),
        ).fetchall()
        active = tuple(r["service"] for r in rows if not r["cancelled"])
        if active:
            conn.execute(
                "UPDATE bookings SET cancelled = 1 "
                "WHERE name_key = ? AND day = ? AND cancelled = 0 AND " + _CALLERS_OWN,
                (key, day.isoformat(), *own),
            )
            said = say_list(list(active))
            return Cancellation(
                args.name,
                day.isoformat(),
                active,
                False,
                f"Done, I've cancelled your {said} {spoken}.",
            )
        if rows:
            services = tuple(r["service"] for r in rows)
            return Cancellation(
                args.name,
                day.isoformat(),
                services,
                True,
                f"That booking {spoken} is already cancelled.",
            )
        other = conn.execute(
            "SELECT DISTINCT day FROM bookings WHERE name_key = ? AND cancelled = 0 AND day >= ? "
            "AND " + _CALLERS_OWN + " ORDER BY day",
            (key, now.date().isoformat(), *own),
        ).fetchall()
    days = [date.fromisoformat(r["day"]) for r in other]
    hint = f" I do have one {say_list([say_on_day(d, now.date()) for d in days])}." if days else ""
    source = "" if ctx.caller is None else " made from this number"
    raise ToolError(
        ToolErrorKind.NO_SUCH_BOOKING,
        f"I can't find a booking for {args.name} {spoken}{source}.{hint}",
        tuple(d.isoformat() for d in days),
    )
