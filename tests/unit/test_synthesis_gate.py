"""The synthesis gate: at most N holders, first sentences before later ones, then in
arrival order; real threads."""

from __future__ import annotations

import threading
import time

import pytest

from voice_agent.speech.gate import SynthesisGate


def test_waiting_first_sentences_go_before_later_sentences_that_came_earlier() -> None:
    gate = SynthesisGate(slots=1)
    order: list[str] = []
    release = threading.Event()

    def holder() -> None:
        with gate.hold(first=False):
            release.wait(5)

    def request(name: str, first: bool) -> None:
        with gate.hold(first):
            order.append(name)

    blocker = threading.Thread(target=holder)
    blocker.start()
    while gate.stats.held < 1:
        time.sleep(0.001)
    waiters = []
    for name, first in [
        ("later-a", False),
        ("later-b", False),
        ("first-c", True),
        ("first-d", True),
    ]:
        thread = threading.Thread(target=request, args=(name, first))
        thread.start()
        waiters.append(thread)
        time.sleep(0.02)  # arrive in this order
    release.set()
    for thread in [blocker, *waiters]:
        thread.join(5)
    assert order == ["first-c", "first-d", "later-a", "later-b"]
    stats = gate.stats
    assert (stats.held, stats.waited, stats.overtook) == (5, 4, 2)


def test_two_slots_let_two_syntheses_overlap_and_never_three() -> None:
    gate = SynthesisGate(slots=2)
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with gate.hold(first=True):
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.02)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert most == 2 and gate.stats.held == 6


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        SynthesisGate(slots=0)
    assert SynthesisGate().slots >= 1
