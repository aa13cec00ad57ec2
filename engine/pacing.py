"""Deadline pressure for a decode loop: a running estimate of one step's duration.

Both loops that decode against a deadline (`generate.stream` and the batching engine's
model thread, for the shipped model and the adapters alike) time their steps with one
`StepTimer` and ask it whether the next step would end past the deadline; the answer makes
the loop commit the rest of the block in that step.
"""

from __future__ import annotations

from dataclasses import dataclass

STEP_TIME_SMOOTHING = 0.3
"""Weight of the newest step in the running estimate of a step's duration."""


@dataclass(slots=True)
class StepTimer:
    estimate_s: float = 0.0
    """Exponentially smoothed duration of a step; 0 before the first."""
    steps: int = 0

    def add(self, took_s: float) -> None:
        """Record a step that took `took_s`: the first sets the estimate."""
        w = STEP_TIME_SMOOTHING
        self.estimate_s = took_s if not self.steps else (1 - w) * self.estimate_s + w * took_s
        self.steps += 1

    def late(self, now_s: float, deadline_s: float | None) -> bool:
        """Would a step started at `now_s` end past `deadline_s` (never without one)?"""
        return deadline_s is not None and now_s + self.estimate_s > deadline_s
