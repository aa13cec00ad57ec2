"""The local transport: a call from this machine's audio instead of a websocket.

`LocalCall` feeds a session exactly as the server does (an `Inbound` stream and a paced
`AudioPlayer`), but the "wire" is local: the player's frames, marks and `clear`s go into
a `Playback` buffer that the output side drains (the sound card's callback, or the
headless loop), and a mark is echoed when the audio before it has been pulled for
playing, so the dialogue history keeps what was actually heard. `clear` empties the
buffer at once.

Two lines drive it: `headless()` streams a recording at real-time pace on a `Clock` and
records what the agent said on the same timeline (tests run it on a fake clock);
`voice_agent.transports.sound` connects a microphone and speakers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voice_agent.audio import FRAME_MS, rms_dbfs, samples_per_frame
from voice_agent.clock import Clock
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    ClearAudio,
    OutboundEvent,
    Pcm16,
    Protocol,
    SendAudio,
    SendMark,
)
from voice_agent.simulator import REPLY_DBFS
from voice_agent.transports.call import CallSession, Inbound
from voice_agent.transports.player import AudioPlayer

HANGUP_GRACE_S = 5.0
"""After the input ends, the session gets this long to finish before it is cancelled."""
_MS_PER_S = 1000


class Playback:
    """What the speakers hold: the agent's samples and marks in order. Thread-safe: the
    player feeds it on the event loop, a sound card callback may pull from its thread."""

    def __init__(self) -> None:
        self._items: collections.deque[Pcm16 | str] = collections.deque()
        self._lock = threading.Lock()
        self.samples_played = 0
        self.clears = 0

    def feed(self, event: OutboundEvent) -> list[str]:
        """Take one outbound event; returns the marks a `ClearAudio` dropped unplayed."""
        with self._lock:
            if isinstance(event, SendAudio):
                self._items.append(event.samples)
            elif isinstance(event, SendMark):
                self._items.append(event.name)
            elif isinstance(event, ClearAudio):
                self.clears += 1
                dropped = [item for item in self._items if isinstance(item, str)]
                self._items.clear()
                return dropped
        return []

    def pull(self, n_samples: int) -> tuple[Pcm16, list[str]]:
        """The next `n_samples` to play (silence where nothing is queued) and the marks
        whose audio is all in them."""
        out = np.zeros(n_samples, np.int16)
        marks: list[str] = []
        filled = 0
        with self._lock:
            while self._items:
                head = self._items[0]
                if isinstance(head, str):
                    marks.append(self._items.popleft())  # type: ignore[arg-type]
                    continue
                if filled == n_samples:
                    break
                take = min(n_samples - filled, len(head))
                out[filled : filled + take] = head[:take]
                filled += take
                if take == len(head):
                    self._items.popleft()
                else:
                    self._items[0] = head[take:]
            self.samples_played += filled
        return out, marks

    @property
    def idle(self) -> bool:
        with self._lock:
            return not self._items


class LocalCall:
    """One call between a session and local audio. `inbound` takes the caller's audio
    (at `in_rate_hz`); the session's speech goes to `playback` at `out_rate_hz`."""

    def __init__(self, in_rate_hz: int, out_rate_hz: int, clock: Clock) -> None:
        self.clock = clock
        self.call = CallStarted(
            Protocol.LOCAL, f"local-{uuid.uuid4().hex[:12]}", "local", in_rate_hz
        )
        self.inbound = Inbound()
        self.playback = Playback()
        self.player = AudioPlayer(self._send, out_rate_hz, clock)
        self._chunks = 0

    async def _send(self, event: OutboundEvent) -> None:
        for name in self.playback.feed(event):  # a clear: nothing of these will play
            self.player.on_mark(name)

    async def hear(self, samples: Pcm16) -> None:
        """Caller audio in (waits while the session is `INBOUND_QUEUE_EVENTS` behind)."""
        timestamp_ms = int(self._chunks * FRAME_MS)
        self._chunks += 1
        rate = self.call.sample_rate_hz
        await self.inbound.put(AudioReceived(samples, rate, timestamp_ms, self._chunks))

    def pull(self, n_samples: int) -> Pcm16:
        """Audio to play now; echoes the marks it completes (call on the event loop)."""
        samples, marks = self.playback.pull(n_samples)
        for name in marks:
            self.player.on_mark(name)
        return samples

    async def run(self, session: CallSession, line: Coroutine[Any, Any, None]) -> None:
        """Run the session with `line` feeding it (`hear`, `pull`) until either ends.
        When the line ends first, the input stream ends and the session gets
        `HANGUP_GRACE_S` to finish. Exceptions from the line or the session propagate."""
        pacer = asyncio.create_task(self.player.run(), name="local-player")
        talker = asyncio.create_task(session.run(self.call, self.inbound, self.player))
        feeder = asyncio.create_task(line, name="local-line")
        tasks = (feeder, pacer, talker)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if feeder in done and feeder.exception() is None:
                await self.inbound.end()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(talker), HANGUP_GRACE_S)
            for task in tasks:
                if task.done() and not task.cancelled() and (exc := task.exception()):
                    raise exc
        finally:
            self.player.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(slots=True)
class Recording:
    """What a headless call played: one frame per 20 ms of the input's timeline."""

    rate_hz: int
    frames: list[Pcm16] = field(default_factory=list)

    def audio(self) -> Pcm16:
        return np.concatenate(self.frames) if self.frames else np.zeros(0, np.int16)


async def headless(
    call: LocalCall,
    caller: Pcm16,
    recording: Recording,
    *,
    last_turn_end_ms: int,
    idle_after_reply_s: float = 1.5,
    max_tail_s: float = 15.0,
) -> None:
    """Stream `caller` (at the call's input rate) in 20 ms frames at real-time pace on
    the call's clock, then silence so the last turn ends; each tick plays one frame of
    the agent's audio into `recording`, so it lines up with the input. Stops once the
    input is over, the agent has been heard after `last_turn_end_ms` (when the input
    has speech) and has been quiet for `idle_after_reply_s`, or after `max_tail_s`."""
    in_frame = samples_per_frame(call.call.sample_rate_hz)
    out_frame = samples_per_frame(recording.rate_hz)
    n_frames = -(-len(caller) // in_frame)
    caller = np.pad(caller, (0, n_frames * in_frame - len(caller)))
    silence = np.zeros(in_frame, np.int16)
    idle_needed = int(idle_after_reply_s * _MS_PER_S / FRAME_MS)
    idle, replied = 0, last_turn_end_ms <= 0
    t0 = call.clock.now()
    for i in range(n_frames + int(max_tail_s * _MS_PER_S / FRAME_MS)):
        await call.clock.sleep_until(t0 + i * FRAME_MS / _MS_PER_S)
        frame = caller[i * in_frame : (i + 1) * in_frame] if i < n_frames else silence
        await call.hear(frame)
        played = call.pull(out_frame)
        recording.frames.append(played)
        loud = rms_dbfs(played) > REPLY_DBFS
        replied = replied or (loud and i * FRAME_MS >= last_turn_end_ms)
        idle = idle + 1 if call.playback.idle and not loud else 0
        if i >= n_frames and replied and idle >= idle_needed:
            return
