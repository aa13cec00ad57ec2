"""Suite-wide pytest set-up: the `slow` marker (registered here, not in pyproject.toml).

`slow` tests (big hostile-input runs: thousands of fuzz cases, connection churn) are
skipped by default so the default run stays fast. They run when `FUZZ_CASES` is set
(`FUZZ_CASES=5000 pytest -m slow tests/`) or when `-m` selects them explicitly.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.services import PostgresServer, postgres_available

SLOW_ENV = "FUZZ_CASES"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: long hostile-input runs; skipped unless FUZZ_CASES is set or -m selects them",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marks = config.getoption("-m") or ""
    if os.environ.get(SLOW_ENV) or ("slow" in marks and "not slow" not in marks):
        return
    skip = pytest.mark.skip(reason=f"slow: set {SLOW_ENV} (e.g. {SLOW_ENV}=5000) or -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# ---------------------------------------------------------------- the shop's backends

SHOP_BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL cluster for the run (Debian's postgresql, which the
    README's set-up installs); tests that need it are skipped, saying so, without it."""
    if not postgres_available():
        pytest.skip("PostgreSQL is not installed (scripts/setup.sh installs it)")
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


_databases = itertools.count()


@pytest.fixture(params=SHOP_BACKENDS)
def shop_where(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a fresh shop lives, once per backend: a SQLite path that does not exist yet,
    or the URL of a new, empty PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "shop" / "shop.sqlite"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.database(f"shop_{next(_databases)}")
