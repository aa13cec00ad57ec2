"""Outbound audio: paced in real time, tracked with marks, cleared on barge-in.

The player owns what the caller hears. A session calls `play()` with an utterance at any
sample rate; the player resamples it to the wire rate, cuts it into 20 ms frames and
sends them on a real-time schedule (with a small lead so the peer's jitter buffer never
runs dry), then sends a mark named after the utterance. The peer echoes the mark once the
audio has been played, which resolves the utterance's `heard` future. `clear()` drops
everything unsent, tells the peer to drop what it buffered, and resolves the pending
utterances as interrupted with an estimate of how much the caller heard.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from voice_agent.audio import FRAME_MS, Framer, resample, samples_per_frame
from voice_agent.clock import Clock
from voice_agent.events import ClearAudio, OutboundEvent, Pcm16, SendAudio, SendMark

DEFAULT_LEAD_MS = 60
"""How far ahead of real time frames are sent, to cover network jitter."""
DEFAULT_MAX_QUEUED_MS = 120_000
"""Refuse to queue more than this much unsent audio (a runaway reply is a bug)."""

Send = Callable[[OutboundEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class PlaybackResult:
    """How an utterance ended for the caller."""

    utterance_id: str
    duration_ms: float
    heard_ms: float
    """Full duration when the mark came back; an estimate when interrupted."""
    interrupted: bool


@dataclass(eq=False, slots=True)
class Utterance:
    """Handle of one queued utterance. Await `heard` for its PlaybackResult."""

    id: str
    duration_ms: float
    heard: asyncio.Future[PlaybackResult]
    frames: collections.deque[Pcm16] = field(default_factory=collections.deque)
    first_sent_at_s: float | None = None
    all_sent: bool = False


class PlayerClosed(Exception):
    """`play()` was called after the call ended."""


class AudioPlayer:
    """Paces outbound audio for one call; run `run()` as a task while the call lasts."""

    def __init__(
        self,
        send: Send,
        wire_rate_hz: int,
        clock: Clock,
        *,
        lead_ms: float = DEFAULT_LEAD_MS,
        max_queued_ms: float = DEFAULT_MAX_QUEUED_MS,
    ) -> None:
        self._send = send
        self.wire_rate_hz = wire_rate_hz
        self._clock = clock
        self._lead_s = lead_ms / 1000
        self._max_queued_ms = max_queued_ms
        self._frame_samples = samples_per_frame(wire_rate_hz)
        self._queue: collections.deque[Utterance] = collections.deque()
        self._awaiting_mark: dict[str, Utterance] = {}
        self._wakeup = asyncio.Event()
        self._ids = itertools.count(1)
        self._closed = False
        self.frames_sent = 0

    @property
    def speaking(self) -> bool:
        """True while audio is queued or sent but not yet confirmed played."""
        return bool(self._queue or self._awaiting_mark)

    def queued_ms(self) -> float:
        return sum(len(u.frames) for u in self._queue) * FRAME_MS

    def play(self, samples: Pcm16, sample_rate_hz: int) -> Utterance:
        """Queue an utterance; returns at once. Raises PlayerClosed or ValueError."""
        if self._closed:
            raise PlayerClosed("the call has ended")
        wire = resample(samples, sample_rate_hz, self.wire_rate_hz)
        framer = Framer(self._frame_samples)
        frames = framer.push(wire)
        tail = framer.flush(pad=True)
        if tail is not None:
            frames.append(tail)
        duration_ms = len(frames) * FRAME_MS
        if self.queued_ms() + duration_ms > self._max_queued_ms:
            raise ValueError(
                f"refusing {duration_ms} ms of audio: {self.queued_ms():.0f} ms already queued "
                f"(limit {self._max_queued_ms:.0f} ms)"
            )
        utterance = Utterance(
            id=f"utt-{next(self._ids)}",
            duration_ms=duration_ms,
            heard=asyncio.get_running_loop().create_future(),
            frames=collections.deque(frames),
        )
        self._queue.append(utterance)
        self._wakeup.set()
        return utterance

    def on_mark(self, name: str) -> None:
        """The peer played everything up to mark `name`; unknown names are ignored."""
        utterance = self._awaiting_mark.pop(name, None)
        if utterance is not None and not utterance.heard.done():
            utterance.heard.set_result(
                PlaybackResult(utterance.id, utterance.duration_ms, utterance.duration_ms, False)
            )

    async def clear(self) -> list[PlaybackResult]:
        """Barge-in: drop unsent audio, send `clear`, resolve pending utterances."""
        now_s = self._clock.now()
        pending = [*self._awaiting_mark.values(), *self._queue]
        self._awaiting_mark.clear()
        self._queue.clear()
        results = []
        for utterance in pending:
            result = PlaybackResult(
                utterance.id, utterance.duration_ms, self._heard_estimate_ms(utterance, now_s), True
            )
            if not utterance.heard.done():
                utterance.heard.set_result(result)
            results.append(result)
        if any(u.first_sent_at_s is not None for u in pending) and not self._closed:
            await self._send(ClearAudio())
        return results

    def _heard_estimate_ms(self, utterance: Utterance, now_s: float) -> float:
        if utterance.first_sent_at_s is None:
            return 0.0
        sent_ms = utterance.duration_ms - len(utterance.frames) * FRAME_MS
        played_ms = (now_s - utterance.first_sent_at_s - self._lead_s) * 1000
        return float(np.clip(played_ms, 0.0, sent_ms))

    async def run(self) -> None:
        """Send queued frames on a real-time schedule until cancelled or closed."""
        next_send_s: float | None = None
        while not self._closed:
            if not self._queue:
                next_send_s = None
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            utterance = self._queue[0]
            now_s = self._clock.now()
            if next_send_s is None or next_send_s < now_s - self._lead_s:
                # Starting (or falling behind after a stall): restart the schedule with a
                # burst of `lead` worth of frames, then real time.
                next_send_s = now_s - self._lead_s
            await self._clock.sleep_until(next_send_s)
            if not self._queue or self._queue[0] is not utterance:
                continue  # cleared while sleeping
            if utterance.first_sent_at_s is None:
                utterance.first_sent_at_s = self._clock.now()
            frame = utterance.frames.popleft()
            await self._send(SendAudio(frame, self.wire_rate_hz))
            self.frames_sent += 1
            next_send_s += FRAME_MS / 1000
            if not utterance.frames and self._queue and self._queue[0] is utterance:
                self._queue.popleft()
                utterance.all_sent = True
                self._awaiting_mark[utterance.id] = utterance
                await self._send(SendMark(utterance.id))

    def close(self) -> None:
        """The call ended: pending utterances resolve as interrupted where not heard."""
        self._closed = True
        now_s = self._clock.now()
        for utterance in [*self._awaiting_mark.values(), *self._queue]:
            if not utterance.heard.done():
                utterance.heard.set_result(
                    PlaybackResult(
                        utterance.id,
                        utterance.duration_ms,
                        self._heard_estimate_ms(utterance, now_s),
                        True,
                    )
                )
        self._awaiting_mark.clear()
        self._queue.clear()
        self._wakeup.set()
