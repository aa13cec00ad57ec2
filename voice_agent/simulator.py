"""A call simulator that behaves like Twilio Media Streams, for tests and benchmarks.

It dials the server's `/twilio` endpoint, sends `connected` and `start`, streams the
caller's audio as μ-law 8 kHz in 20 ms `media` messages at real-time pace, and keeps
the line open with silence afterwards, as a phone line does. Reply audio goes into a
playback buffer drained 20 ms per tick, like Twilio's; `mark`s are echoed when playback
reaches them (or when a `clear` empties the buffer) and `clear` drops what is buffered.
The played audio is recorded on the call's timeline, so `first_reply_ms` measures what a
caller would hear: from the end of each caller turn to the first non-silent reply frame.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voice_agent.audio import (
    FRAME_MS,
    PHONE_RATE_HZ,
    pcm16_to_ulaw,
    resample,
    rms_dbfs,
    samples_per_frame,
    ulaw_to_pcm16,
)
from voice_agent.clock import Clock, MonotonicClock
from voice_agent.events import Pcm16

SPEECH_DBFS = -40.0
"""Caller frames louder than this count as speech when finding turn ends."""
REPLY_DBFS = -45.0
"""Reply frames louder than this count as the agent speaking."""
TURN_GAP_MS = 600
"""A silence at least this long in the caller's audio ends a turn."""
FRAME_SAMPLES = samples_per_frame(PHONE_RATE_HZ)


@dataclass(slots=True)
class CallSummary:
    """What the simulator observed; printed as JSON by `voice-agent call`."""

    turns: int = 0
    turn_end_ms: list[int] = field(default_factory=list)
    first_reply_ms: list[int | None] = field(default_factory=list)
    frames_sent: int = 0
    frames_received: int = 0
    frames_played: int = 0
    marks_received: int = 0
    marks_echoed: int = 0
    clears_received: int = 0
    duration_ms: int = 0
    close_code: int | None = None
    close_reason: str = ""
    stream_sid: str = ""
    call_sid: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def caller_turn_ends_ms(samples: Pcm16) -> list[int]:
    """End times (ms from the start) of each stretch of caller speech in 8 kHz audio."""
    ends: list[int] = []
    last_speech_ms: int | None = None
    for i in range(len(samples) // FRAME_SAMPLES):
        frame = samples[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]
        t_ms = i * FRAME_MS
        if rms_dbfs(frame) > SPEECH_DBFS:
            last_speech_ms = t_ms + FRAME_MS
        elif last_speech_ms is not None and t_ms - last_speech_ms >= TURN_GAP_MS:
            ends.append(last_speech_ms)
            last_speech_ms = None
    if last_speech_ms is not None:
        ends.append(last_speech_ms)
    return ends


class _Playback:
    """Twilio's side of outbound audio: a FIFO of frames and marks, drained per tick."""

    def __init__(self) -> None:
        self.items: collections.deque[Pcm16 | str] = collections.deque()
        self._partial = np.zeros(0, np.int16)

    def add_audio(self, samples: Pcm16) -> None:
        data = np.concatenate([self._partial, samples])
        whole = len(data) - len(data) % FRAME_SAMPLES
        for start in range(0, whole, FRAME_SAMPLES):
            self.items.append(data[start : start + FRAME_SAMPLES])
        self._partial = data[whole:]

    def add_mark(self, name: str) -> None:
        if len(self._partial):  # a mark closes the audio before it
            self.items.append(np.pad(self._partial, (0, FRAME_SAMPLES - len(self._partial))))
            self._partial = np.zeros(0, np.int16)
        self.items.append(name)

    def tick(self) -> tuple[Pcm16 | None, list[str]]:
        """Play one frame; return it (None when idle) and the marks reached."""
        marks: list[str] = []
        frame: Pcm16 | None = None
        while self.items and isinstance(self.items[0], str):
            marks.append(str(self.items.popleft()))
        if self.items:
            frame = self.items.popleft()  # type: ignore[assignment]
            while self.items and isinstance(self.items[0], str):
                marks.append(str(self.items.popleft()))
        return frame, marks

    def clear(self) -> list[str]:
        marks = [item for item in self.items if isinstance(item, str)]
        self.items.clear()
        self._partial = np.zeros(0, np.int16)
        return marks

    @property
    def idle(self) -> bool:
        return not self.items and not len(self._partial)


def twilio_start(stream_sid: str, call_sid: str, parameters: dict[str, str]) -> dict[str, Any]:
    """A Twilio Media Streams `start` message for one call (μ-law 8 kHz, inbound track),
    with `parameters` as its `customParameters`."""
    return {
        "event": "start",
        "streamSid": stream_sid,
        "start": {
            "streamSid": stream_sid,
            "accountSid": "AC" + uuid.uuid4().hex,
            "callSid": call_sid,
            "tracks": ["inbound"],
            "customParameters": parameters,
            "mediaFormat": {
                "encoding": "audio/x-mulaw",
                "sampleRate": PHONE_RATE_HZ,
                "channels": 1,
            },
        },
    }


async def simulate_call(
    url: str,
    caller: Pcm16,
    caller_rate_hz: int,
    *,
    token: str | None = None,
    parameters: dict[str, str] | None = None,
    idle_after_reply_s: float = 1.5,
    max_tail_s: float = 15.0,
    clock: Clock | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[CallSummary, Pcm16]:
    """Run one call; returns the summary and the reply audio as heard (8 kHz, on the call
    timeline, same length as the call). Connection errors propagate (OSError,
    websockets' InvalidStatus for a refused handshake)."""
    clock = clock or MonotonicClock()
    audio = resample(caller, caller_rate_hz, PHONE_RATE_HZ)
    summary = CallSummary(turn_end_ms=caller_turn_ends_ms(audio))
    summary.turns = len(summary.turn_end_ms)
    summary.stream_sid = "MZ" + uuid.uuid4().hex
    summary.call_sid = "CA" + uuid.uuid4().hex
    custom = dict(parameters or {})
    if token is not None:
        custom["token"] = token
    async with connect(url, additional_headers=headers, compression=None) as ws:
        sim = _Simulation(ws, summary, clock)
        await sim.run(audio, custom, idle_after_reply_s, max_tail_s)
        if ws.close_code is None:
            await ws.close()
        summary.close_code = ws.close_code
        summary.close_reason = ws.close_reason or ""
    played = np.concatenate(sim.played) if sim.played else np.zeros(0, np.int16)
    summary.first_reply_ms = first_reply_ms(summary.turn_end_ms, sim.played)
    return summary, played


def first_reply_ms(turn_ends_ms: list[int], played: list[Pcm16]) -> list[int | None]:
    loud_ms = [i * FRAME_MS for i, f in enumerate(played) if rms_dbfs(f) > REPLY_DBFS]
    result: list[int | None] = []
    for k, end_ms in enumerate(turn_ends_ms):
        next_end = turn_ends_ms[k + 1] if k + 1 < len(turn_ends_ms) else None
        first = next((t for t in loud_ms if t >= end_ms), None)
        ok = first is not None and (next_end is None or first < next_end)
        result.append(first - end_ms if ok and first is not None else None)
    return result


class _Simulation:
    def __init__(self, ws: ClientConnection, summary: CallSummary, clock: Clock) -> None:
        self.ws = ws
        self.summary = summary
        self.clock = clock
        self.playback = _Playback()
        self.played: list[Pcm16] = []
        self._sequence = 0
        self._closed = asyncio.Event()

    async def _send(self, message: dict[str, Any]) -> None:
        self._sequence += 1
        message = {"sequenceNumber": str(self._sequence), **message}
        await self.ws.send(json.dumps(message))

    async def run(
        self, audio: Pcm16, custom: dict[str, str], idle_after_s: float, max_tail_s: float
    ) -> None:
        receiver = asyncio.create_task(self._receive())
        try:
            await self._stream(audio, custom, idle_after_s, max_tail_s)
        except ConnectionClosed:
            pass
        finally:
            # Also when the server ended the call (its end-call tool) mid-stream.
            self.summary.duration_ms = len(self.played) * FRAME_MS
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)

    async def _stream(
        self, audio: Pcm16, custom: dict[str, str], idle_after_s: float, max_tail_s: float
    ) -> None:
        sid = self.summary.stream_sid
        await self.ws.send(
            json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        )
        await self._send(twilio_start(sid, self.summary.call_sid, custom))
        n_frames = -(-len(audio) // FRAME_SAMPLES)
        audio = np.pad(audio, (0, n_frames * FRAME_SAMPLES - len(audio)))
        silence = np.zeros(FRAME_SAMPLES, np.int16)
        last_turn_ms = self.summary.turn_end_ms[-1] if self.summary.turn_end_ms else 0
        max_frames = n_frames + int(max_tail_s * 1000 / FRAME_MS)
        idle_frames_needed = int(idle_after_s * 1000 / FRAME_MS)
        idle_frames = 0
        heard_reply_after_last_turn = False
        t0 = self.clock.now()
        for i in range(max_frames):
            if self._closed.is_set():
                break
            await self.clock.sleep_until(t0 + i * FRAME_MS / 1000)
            frame = audio[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES] if i < n_frames else silence
            await self._send(
                {
                    "event": "media",
                    "streamSid": sid,
                    "media": {
                        "track": "inbound",
                        "chunk": str(i + 1),
                        "timestamp": str(i * FRAME_MS),
                        "payload": base64.b64encode(pcm16_to_ulaw(frame)).decode(),
                    },
                }
            )
            self.summary.frames_sent += 1
            played = await self._play_tick(sid)
            if (
                i * FRAME_MS >= last_turn_ms
                and played is not None
                and rms_dbfs(played) > REPLY_DBFS
            ):
                heard_reply_after_last_turn = True
            # Idle means nothing played this tick and nothing waits: a reply's first
            # frame restarts the count even when nothing else has arrived yet.
            idle_frames = idle_frames + 1 if played is None and self.playback.idle else 0
            if (
                i >= n_frames
                and (heard_reply_after_last_turn or not self.summary.turns)
                and idle_frames >= idle_frames_needed
            ):
                break
        if not self._closed.is_set():
            await self._send(
                {"event": "stop", "streamSid": sid, "stop": {"callSid": self.summary.call_sid}}
            )

    async def _play_tick(self, sid: str) -> Pcm16 | None:
        frame, marks = self.playback.tick()
        self.played.append(frame if frame is not None else np.zeros(FRAME_SAMPLES, np.int16))
        if frame is not None:
            self.summary.frames_played += 1
        for name in marks:
            await self._echo_mark(sid, name)
        return frame

    async def _echo_mark(self, sid: str, name: str) -> None:
        await self._send({"event": "mark", "streamSid": sid, "mark": {"name": name}})
        self.summary.marks_echoed += 1

    async def _receive(self) -> None:
        try:
            async for message in self.ws:
                data = json.loads(message)
                event = data.get("event")
                if event == "media":
                    payload = base64.b64decode(data["media"]["payload"])
                    self.playback.add_audio(ulaw_to_pcm16(payload))
                    self.summary.frames_received += 1
                elif event == "mark":
                    self.playback.add_mark(data["mark"]["name"])
                    self.summary.marks_received += 1
                elif event == "clear":
                    self.summary.clears_received += 1
                    for name in self.playback.clear():
                        await self._echo_mark(self.summary.stream_sid, name)
        except ConnectionClosed:
            pass
        finally:
            self._closed.set()
