"""The outbound player on a fake clock: pacing, marks, barge-in."""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest

from voice_agent.clock import FakeClock
from voice_agent.events import ClearAudio, OutboundEvent, SendAudio, SendMark
from voice_agent.transports.player import DEFAULT_LEAD_MS, AudioPlayer, PlayerClosed


class Wire:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, OutboundEvent]] = []

    async def send(self, event: OutboundEvent) -> None:
        self.sent.append((self.clock.now(), event))


async def run_until_idle(player: AudioPlayer) -> None:
    task = asyncio.create_task(player.run())
    for _ in range(10_000):
        await asyncio.sleep(0)
        if not player.queued_ms():
            break
    await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_frames_are_paced_in_real_time_then_marked() -> None:
    clock = FakeClock(100.0)
    wire = Wire(clock)
    player = AudioPlayer(wire.send, 8000, clock)
    utterance = player.play(np.ones(16000, np.int16), 16000)  # 1 s at 16 kHz
    assert utterance.duration_ms == 1000
    await run_until_idle(player)

    audio = [(t, e) for t, e in wire.sent if isinstance(e, SendAudio)]
    assert len(audio) == 50
    assert all(e.sample_rate_hz == 8000 and len(e.samples) == 160 for _, e in audio)
    times = np.array([t for t, _ in audio]) - 100.0
    # A burst of `lead` worth of frames, then exactly one frame per 20 ms.
    lead_frames = DEFAULT_LEAD_MS // 20 + 1
    assert np.all(times[:lead_frames] == 0.0)
    assert np.allclose(np.diff(times[lead_frames - 1 :]), 0.02)
    assert isinstance(wire.sent[-1][1], SendMark) and wire.sent[-1][1].name == utterance.id


async def test_mark_echo_resolves_heard_in_full() -> None:
    clock = FakeClock()
    wire = Wire(clock)
    player = AudioPlayer(wire.send, 8000, clock)
    utterance = player.play(np.ones(800, np.int16), 8000)
    await run_until_idle(player)
    assert player.speaking  # sent, not yet confirmed
    player.on_mark("some-other-mark")
    assert not utterance.heard.done()
    player.on_mark(utterance.id)
    result = await utterance.heard
    assert (result.heard_ms, result.interrupted) == (100, False)
    assert not player.speaking


async def test_clear_drops_unsent_audio_and_estimates_what_was_heard() -> None:
    clock = FakeClock()
    wire = Wire(clock)
    player = AudioPlayer(wire.send, 8000, clock)
    first = player.play(np.ones(8000, np.int16), 8000)  # 1 s
    second = player.play(np.ones(8000, np.int16), 8000)
    task = asyncio.create_task(player.run())
    while len([e for _, e in wire.sent if isinstance(e, SendAudio)]) < 20:
        await asyncio.sleep(0)
    results = await player.clear()
    sent_before_clear = len(wire.sent)
    for _ in range(50):
        await asyncio.sleep(0)
    player.close()
    await task

    assert isinstance(wire.sent[sent_before_clear - 1][1], ClearAudio)
    assert len(wire.sent) == sent_before_clear  # nothing sent after the clear
    r_first, r_second = (await first.heard), (await second.heard)
    assert r_first.interrupted and r_second.interrupted
    # 20 frames went out over 17 real-time steps after a 3-frame burst: 340 ms on the
    # clock, minus the lead still in the peer's buffer.
    assert r_first.heard_ms == pytest.approx(340 - DEFAULT_LEAD_MS + 20, abs=20)
    assert r_second.heard_ms == 0
    assert [r.utterance_id for r in results] == [first.id, second.id]


async def test_play_after_close_and_runaway_audio_are_refused() -> None:
    clock = FakeClock()
    player = AudioPlayer(Wire(clock).send, 8000, clock, max_queued_ms=500)
    with pytest.raises(ValueError, match="already queued"):
        player.play(np.ones(8000, np.int16), 8000)
    player.close()
    with pytest.raises(PlayerClosed):
        player.play(np.ones(80, np.int16), 8000)
