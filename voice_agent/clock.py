"""Clocks: every component that reads time takes one, so tests can run on a fake clock."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """A monotonic clock in seconds with an awaitable sleep."""

    def now(self) -> float:
        """Seconds on a monotonic scale; only differences are meaningful."""
        ...

    async def sleep_until(self, t_s: float) -> None:
        """Return once `now() >= t_s` (immediately when that is already so)."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic` and `asyncio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep_until(self, t_s: float) -> None:
        delay_s = t_s - time.monotonic()
        # sleep(0) still yields, so a tight pacing loop never starves the event loop.
        await asyncio.sleep(max(0.0, delay_s))


class FakeClock:
    """A clock that only moves when told to; `sleep_until` jumps straight to its target.

    Suited to tests of pacing and budgets: a 10 s schedule runs in microseconds and the
    recorded times are exact.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s

    def now(self) -> float:
        return self._now_s

    def advance(self, delta_s: float) -> None:
        if delta_s < 0:
            raise ValueError(f"a clock cannot go back (delta_s={delta_s})")
        self._now_s += delta_s

    async def sleep_until(self, t_s: float) -> None:
        self._now_s = max(self._now_s, t_s)
        await asyncio.sleep(0)
