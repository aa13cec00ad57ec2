"""Opening the shop's database, whichever backend its address names."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from tools.bike_shop.db import POSTGRES_SCHEMES, ShopDb, SqliteShopDb


def open_shop(where: Path | str, today: date) -> ShopDb:
    """Open (creating and seeding if new) the shop at `where`: a `postgresql://` URL or
    a SQLite file path. Seed bookings and order dates are placed relative to `today`,
    the shop's date when first created. The caller closes it."""
    if isinstance(where, str) and where.startswith(POSTGRES_SCHEMES):
        from tools.bike_shop.postgres import PostgresShopDb  # psycopg only when used

        db: ShopDb = PostgresShopDb.connect(where)
    else:
        db = SqliteShopDb.connect(Path(where))
    try:
        db.create(today)
    except BaseException:
        db.close()
        raise
    return db
