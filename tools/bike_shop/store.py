"""Shop-counter tools: order status, product search, reserving a product for pickup.

The multi-step chain is search → reserve: `search_products` returns product ids (three
digits) that `reserve_product` takes, copied from the result. A reservation decrements
stock in the same transaction that records it; a retried identical reservation on the
same day returns the first one and takes nothing more off the shelf.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date

from tools.bike_shop.catalogue import OrderState
from tools.bike_shop.db import Conn, Row, ShopContext, name_key, open_days_after
from tools.bike_shop.results import (
    OrderInfo,
    ProductHit,
    Reservation,
    SearchResult,
    ToolError,
    ToolErrorKind,
)
from tools.bike_shop.schemas import OrderStatus, ReserveProduct, SearchProducts
from voice_agent.speech.say import (
    say_count,
    say_day,
    say_digits,
    say_list,
    say_on_day,
    say_price,
)

MAX_HITS = 3
"""Products a search returns."""
MAX_ALTERNATIVES = 2
HOLD_OPEN_DAYS = 3
"""A reservation is held until the end of the third open day after it is made."""
RESERVATION_REF_BASE = 1000
MAX_HOLDS_PER_CALLER = 3
"""Reservations one caller (ShopContext.caller) may hold at once."""
"""References start at four digits, so they read like order numbers."""
STOP_WORDS = frozenset(
    {
        "a", "an", "the", "for", "some", "any", "do", "you", "have", "i", "need", "want",
        "looking", "me", "my", "of", "to", "with", "please", "bike", "bikes", "bicycle", "one",
        "new",
    }
)  # fmt: skip
"""Words that say nothing about which product (every product is for a bike)."""
PLURAL_MIN_LEN = 4


def _terms(text: str) -> list[str]:
    """Lower-case words, naive plural stripped ("tyres" → "tyre"), stop words dropped."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    stems = [w[:-1] if len(w) >= PLURAL_MIN_LEN and w.endswith("s") else w for w in words]
    return [w for w in stems if w not in STOP_WORDS]


def _hit(row: Row) -> ProductHit:
    return ProductHit(row["product_id"], row["name"], row["price_cents"], row["stock"])


def _offer(hits: list[ProductHit]) -> str:
    return say_list([f"the {h.name} at {say_price(h.price_cents)}" for h in hits])


def order_status(args: OrderStatus, ctx: ShopContext) -> OrderInfo:
    today = ctx.now().date()
    with ctx.db.read() as conn:
        row = conn.execute(
            "SELECT * FROM orders WHERE order_number = ?", (args.order_number,)
        ).fetchone()
    number = say_digits(args.order_number)
    if row is None:
        raise ToolError(
            ToolErrorKind.NO_SUCH_ORDER,
            f"I can't find order {number}. Could you read me the number again?",
        )
    state, eta = OrderState(row["state"]), date.fromisoformat(row["eta"])
    when = say_on_day(eta, today)
    news = {
        OrderState.PROCESSING: f"is being packed and should arrive {when}",
        OrderState.SHIPPED: f"is on its way and should arrive {when}",
        OrderState.READY_FOR_PICKUP: "is ready for pickup at the shop",
        OrderState.DELIVERED: f"was delivered {when}",
        OrderState.CANCELLED: "was cancelled",
    }[state]
    return OrderInfo(
        args.order_number, row["item"], state, row["eta"], f"Order {number}, {row['item']}, {news}."
    )


def search_products(args: SearchProducts, ctx: ShopContext) -> SearchResult:
    """Rank products by the query's words, each weighted by how rare it is in the
    catalogue (1 / products it matches), so "bike light" finds lights, not every bike
    part. Raises NO_MATCH, offering the categories."""
    with ctx.db.read() as conn:
        rows = conn.execute("SELECT * FROM products ORDER BY product_id").fetchall()
    vocab = {
        r["product_id"]: set(_terms(f"{r['name']} {r['category']} {r['keywords']}")) for r in rows
    }
    query = set(_terms(args.query))
    matches = Counter(t for words in vocab.values() for t in words & query)
    score = {pid: sum(1 / matches[t] for t in words & query) for pid, words in vocab.items()}
    ranked = sorted(
        (r for r in rows if score[r["product_id"]] > 0),
        key=lambda r: (-score[r["product_id"]], r["stock"] == 0, r["price_cents"]),
    )
    hits = [_hit(r) for r in ranked[:MAX_HITS]]
    if not hits:
        categories = tuple(dict.fromkeys(r["category"] for r in rows))
        raise ToolError(
            ToolErrorKind.NO_MATCH,
            f"I couldn't find anything for {args.query}. We carry {say_list(list(categories))}.",
            categories,
        )
    stocked = [h for h in hits if h.in_stock]
    gone = [h.name for h in hits if not h.in_stock]
    say = f"We have {_offer(stocked)}." if stocked else ""
    if gone:
        out = f"{say_list(gone)} {'is' if len(gone) == 1 else 'are'} out of stock."
        say = f"{say} The {out}" if say else f"Sorry, the {out}"
    return SearchResult(args.query, tuple(hits), say)


def release_expired(conn: Conn, today: date) -> int:
    """Put the stock of holds whose last day has passed back on the shelf (once each);
    the number of holds released."""
    expired = conn.execute(
        "SELECT reservation_id, product_id, quantity FROM reservations "
        "WHERE released = 0 AND hold_until IS NOT NULL AND hold_until < ?",
        (today.isoformat(),),
    ).fetchall()
    for r in expired:
        conn.execute(
            "UPDATE products SET stock = stock + ? WHERE product_id = ?",
            (r["quantity"], r["product_id"]),
        )
        conn.execute("UPDATE reservations SET released = 1 WHERE reservation_id = ?",
                     (r["reservation_id"],))  # fmt: skip
    return len(expired)


def reserve_product(args: ReserveProduct, ctx: ShopContext) -> Reservation:
    """Raises NO_SUCH_PRODUCT, or OUT_OF_STOCK offering in-stock products of the same
    category (ids in `alternatives`)."""
    today = ctx.now().date()
    key = name_key(args.name)
    with ctx.db.write() as conn:
        release_expired(conn, today)
        row = conn.execute(
            "SELECT * FROM products WHERE product_id = ?", (args.product_id,)
        ).fetchone()
        if row is None:
            raise ToolError(
                ToolErrorKind.NO_SUCH_PRODUCT,
                f"I can't find item {say_digits(args.product_id)}. Shall I search again?",
            )
        existing = conn.execute(
            "SELECT reservation_id FROM reservations WHERE product_id = ? AND quantity = ? "
            "AND name_key = ? AND made_on = ?",
            (args.product_id, args.quantity, key, today.isoformat()),
        ).fetchone()
        if existing is None and ctx.caller is not None:
            held = conn.execute(
                "SELECT COUNT(*) FROM reservations WHERE caller = ? AND released = 0",
                (ctx.caller,),
            ).fetchone()[0]
            if held >= MAX_HOLDS_PER_CALLER:
                raise ToolError(
                    ToolErrorKind.LIMIT_REACHED,
                    "You already have the most items we can hold for one caller; a "
                    "colleague can help with more.",
                )
        if existing is None and row["stock"] < args.quantity:
            others = conn.execute(
                "SELECT * FROM products WHERE category = ? AND product_id != ? AND stock >= ? "
                "ORDER BY price_cents LIMIT ?",
                (row["category"], args.product_id, args.quantity, MAX_ALTERNATIVES),
            ).fetchall()
            alternatives = [_hit(r) for r in others]
            left = (
                f"we only have {say_count(row['stock'], row['name'])} left"
                if row["stock"]
                else f"we're out of the {row['name']}"
            )
            offer = f", but we have {_offer(alternatives)}" if alternatives else ""
            raise ToolError(
                ToolErrorKind.OUT_OF_STOCK,
                f"Sorry, {left}{offer}.",
                tuple(h.product_id for h in alternatives),
            )
        if existing is None:
            conn.execute(
                "UPDATE products SET stock = stock - ? WHERE product_id = ?",
                (args.quantity, args.product_id),
            )
            reservation_id = int(conn.execute(
                "INSERT INTO reservations (product_id, quantity, name, name_key, made_on, "
                "caller, hold_until) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING reservation_id",
                (args.product_id, args.quantity, args.name, key, today.isoformat(), ctx.caller,
                 open_days_after(today, HOLD_OPEN_DAYS).isoformat()),
            ).fetchone()[0])  # fmt: skip
        else:
            reservation_id = int(existing["reservation_id"])
    reference = str(RESERVATION_REF_BASE + reservation_id)
    total = row["price_cents"] * args.quantity
    hold = open_days_after(today, HOLD_OPEN_DAYS)
    return Reservation(
        reference,
        args.product_id,
        row["name"],
        args.quantity,
        total,
        args.name,
        hold.isoformat(),
        existing is not None,
        f"I've put {say_count(args.quantity, row['name'])} aside for you, {args.name}, "
        f"{say_price(total)} in total. We'll hold {'it' if args.quantity == 1 else 'them'} "
        f"until {say_day(hold, today)}; your reference is {say_digits(reference)}.",
    )
