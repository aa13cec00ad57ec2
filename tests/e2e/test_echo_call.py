"""End-to-end calls over a real loopback websocket with the call simulator."""

from __future__ import annotations

import numpy as np

from tests.fakes import running_server, silence, url, voiced
from voice_agent.echo import END_OF_TURN_MS, EchoSession
from voice_agent.simulator import simulate_call


async def test_two_turn_call_is_echoed_with_marks_and_latency() -> None:
    caller = np.concatenate(
        [silence(0.6), voiced(1.0), silence(1.5), voiced(0.8, seed=1), silence(0.2)]
    )
    async with running_server(EchoSession) as server:
        summary, reply = await simulate_call(url(server), caller, 8000, idle_after_reply_s=0.6)
        assert server.calls[-1].close_code == 1000

    assert summary.turns == 2
    assert all(ms is not None for ms in summary.first_reply_ms)
    for ms in summary.first_reply_ms:
        assert ms is not None
        # The echo session waits END_OF_TURN_MS of silence before it answers.
        assert END_OF_TURN_MS - 40 <= ms <= END_OF_TURN_MS + 600
    # Greeting + two echoes, each followed by a mark that the simulator echoed.
    assert summary.marks_received == 3
    assert summary.marks_echoed == 3
    # 280 ms of chime, then 1.0 s and 0.8 s of echoed speech, in 20 ms frames.
    assert abs(summary.frames_received - (0.28 + 1.0 + 0.8) * 50) <= 2
    assert summary.clears_received == 0
    # What the caller heard after turn one is their own first turn, μ-law round-tripped.
    start = (summary.turn_end_ms[0] + summary.first_reply_ms[0]) * 8  # type: ignore[operator]
    heard = reply[start : start + 4000].astype(float)
    said = caller[int(0.6 * 8000) : int(0.6 * 8000) + 4000].astype(float)
    assert np.corrcoef(heard, said)[0, 1] > 0.95


async def test_caller_barge_in_clears_the_reply() -> None:
    # A 2 s turn is echoed; the caller talks over the echo 0.3 s into it.
    gap_s = END_OF_TURN_MS / 1000 + 0.3
    caller = np.concatenate(
        [silence(0.4), voiced(2.0), silence(gap_s), voiced(1.0, seed=2), silence(0.2)]
    )
    async with running_server(lambda: EchoSession(greet=False)) as server:
        summary, reply = await simulate_call(url(server), caller, 8000, idle_after_reply_s=0.6)
    assert summary.clears_received >= 1
    # The first echo was cut short: far less than its 2 s reached the caller's ear
    # before the second turn's own echo began.
    first_reply_start = (summary.turn_end_ms[0] + (summary.first_reply_ms[0] or 0)) // 20
    second_turn_end = summary.turn_end_ms[1] // 20
    played = reply.reshape(-1, 160)[first_reply_start:second_turn_end]
    loud = int((np.abs(played).max(axis=1) > 500).sum())
    assert loud * 20 < 1500
