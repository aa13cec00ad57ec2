"""Suite-wide pytest set-up: the `slow` marker (registered here, not in pyproject.toml).

`slow` tests (big hostile-input runs: thousands of fuzz cases, connection churn) are
skipped by default so the default run stays fast. They run when `FUZZ_CASES` is set
(`FUZZ_CASES=5000 pytest -m slow tests/`) or when `-m` selects them explicitly.
"""

from __future__ import annotations

import os

import pytest

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
