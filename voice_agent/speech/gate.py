"""Sharing one synthesizer between calls: at most N syntheses at once, first sentences first.

Every call's reply is synthesized sentence by sentence in its own worker thread
(`speech.stream`). Without a gate those threads reach the synthesizer in whatever order
the scheduler picks, so with eight calls a caller whose answer is ready can wait behind
the third sentence of another caller's long answer. `SynthesisGate` lets `slots`
syntheses run at once (Piper runs its network outside its phonemizer lock, so two can
overlap) and hands a free slot to the waiting request with the best rank: a reply's first
sentence (the caller is waiting in silence for it) before any later one, then in arrival
order. Blocking, for worker threads; never call it on the event loop.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def default_slots() -> int:
    """One synthesis per two cores, at least one (Piper's network uses two threads well)."""
    return max(1, (os.cpu_count() or 1) // 2)


@dataclass(frozen=True, slots=True)
class GateStats:
    held: int
    """Syntheses that ran through the gate."""
    waited: int
    """Of them, those that found no free slot."""
    overtook: int
    """First sentences served before later sentences that had waited longer."""


class SynthesisGate:
    """At most `slots` holders at once; waiters are served first sentences first, then
    in arrival order. Thread-safe."""

    def __init__(self, slots: int | None = None) -> None:
        self._slots = default_slots() if slots is None else slots
        if self._slots < 1:
            raise ValueError(f"a synthesis gate needs at least one slot, got {self._slots}")
        self._busy = 0
        self._waiting: list[tuple[int, int]] = []  # heap of (rank, arrival)
        self._arrivals = itertools.count()
        self._cond = threading.Condition()
        self._held = self._waited = self._overtook = 0

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def stats(self) -> GateStats:
        with self._cond:
            return GateStats(self._held, self._waited, self._overtook)

    @contextmanager
    def hold(self, first: bool) -> Iterator[None]:
        """Wait for a slot (blocking); `first`: the reply's first sentence."""
        ticket = (0 if first else 1, next(self._arrivals))
        with self._cond:
            heapq.heappush(self._waiting, ticket)
            if self._busy >= self._slots:
                self._waited += 1
            while self._busy >= self._slots or self._waiting[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._waiting)
            if first and any(rank == 1 and arrival < ticket[1] for rank, arrival in self._waiting):
                self._overtook += 1
            self._busy += 1
            self._held += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()
