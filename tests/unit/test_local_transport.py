"""The local transport: the playback buffer, headless calls on a fake clock (timeline,
marks, barge-in `clear`), and the device line against a fake sounddevice module."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.fakes import voiced
from voice_agent.audio import rms_dbfs
from voice_agent.clock import FakeClock, MonotonicClock
from voice_agent.events import AudioReceived, CallStarted, ClearAudio, SendAudio, SendMark
from voice_agent.simulator import REPLY_DBFS
from voice_agent.transports.call import Inbound
from voice_agent.transports.local import LocalCall, Playback, Recording, headless
from voice_agent.transports.player import AudioPlayer, PlaybackResult, Utterance
from voice_agent.transports.sound import NoAudioDevice, default_devices, device_line

RATE_HZ = 16000
FRAME = 320


def tone(duration_s: float, rate_hz: int = RATE_HZ) -> np.ndarray[Any, np.dtype[np.int16]]:
    t = np.arange(int(duration_s * rate_hz)) / rate_hz
    return (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)


def loud_frames(recording: Recording) -> list[int]:
    return [i for i, f in enumerate(recording.frames) if rms_dbfs(f) > REPLY_DBFS]


class ScriptedSession:
    """Plays `first` at once; at the caller chunk stamped `at_ms`, plays `second`, or
    clears the player when `second` is None (a barge-in). Keeps what was heard."""

    def __init__(self, first_s: float, at_ms: int, second_s: float | None) -> None:
        self.first_s, self.at_ms, self.second_s = first_s, at_ms, second_s
        self.utterances: list[Utterance] = []
        self.cleared: list[PlaybackResult] = []
        self.chunks = 0

    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        self.utterances.append(player.play(tone(self.first_s), RATE_HZ))
        async for event in inbound:
            if not isinstance(event, AudioReceived):
                continue
            self.chunks += 1
            if event.timestamp_ms == self.at_ms:
                if self.second_s is None:
                    self.cleared = await player.clear()
                else:
                    self.utterances.append(player.play(tone(self.second_s), RATE_HZ))


def test_playback_plays_audio_then_its_mark_and_clear_drops_the_rest() -> None:
    pb = Playback()
    pb.feed(SendAudio(np.ones(300, np.int16), RATE_HZ))
    pb.feed(SendMark("m1"))
    pb.feed(SendAudio(np.full(300, 2, np.int16), RATE_HZ))
    pb.feed(SendMark("m2"))
    samples, marks = pb.pull(200)
    assert samples.tolist() == [1] * 200 and marks == []
    samples, marks = pb.pull(200)  # the rest of m1's audio, then into the next
    assert samples.tolist() == [1] * 100 + [2] * 100 and marks == ["m1"]
    assert pb.feed(ClearAudio()) == ["m2"] and pb.idle and pb.clears == 1
    samples, marks = pb.pull(200)  # nothing queued: silence
    assert not samples.any() and marks == []
    assert pb.samples_played == 400


async def test_headless_records_the_agent_on_the_input_timeline_and_echoes_marks() -> None:
    call = LocalCall(RATE_HZ, RATE_HZ, FakeClock())
    session = ScriptedSession(first_s=0.5, at_ms=1000, second_s=0.4)
    recording = Recording(RATE_HZ)
    caller = np.zeros(2 * RATE_HZ, np.int16)  # 2 s; the "turn" ends at 1000 ms
    line = headless(call, caller, recording, last_turn_end_ms=1000, idle_after_reply_s=1.0)
    await call.run(session, line)

    loud = loud_frames(recording)
    greeting = [i for i in loud if i < 40]
    reply = [i for i in loud if i >= 40]
    assert greeting[0] <= 2 and len(greeting) == 25  # 0.5 s from the start
    assert 50 <= reply[0] <= 53 and len(reply) == 20  # 0.4 s from the caller's 1000 ms
    # The input, then silence until the agent has been quiet for 1 s after its reply.
    assert reply[-1] + 50 <= len(recording.frames) <= reply[-1] + 53
    results = [await u.heard for u in session.utterances]
    assert [(r.interrupted, r.heard_ms) for r in results] == [(False, 500), (False, 400)]
    assert session.chunks == len(recording.frames)


async def test_clear_stops_playback_at_once_and_reports_what_was_heard() -> None:
    call = LocalCall(RATE_HZ, RATE_HZ, FakeClock())
    session = ScriptedSession(first_s=3.0, at_ms=500, second_s=None)
    recording = Recording(RATE_HZ)
    line = headless(call, np.zeros(RATE_HZ, np.int16), recording, last_turn_end_ms=0)
    await call.run(session, line)

    loud = loud_frames(recording)
    assert loud and max(loud) <= 26  # nothing of the 3 s line plays after 500 ms
    assert call.playback.clears == 1
    [result] = session.cleared
    assert result.interrupted and 0 < result.heard_ms < 3000


async def test_the_line_ending_ends_the_inbound_stream_and_the_session() -> None:
    call = LocalCall(RATE_HZ, RATE_HZ, FakeClock())
    session = ScriptedSession(first_s=0.1, at_ms=-1, second_s=None)
    recording = Recording(RATE_HZ)
    caller = np.zeros(RATE_HZ // 2, np.int16)
    await call.run(session, headless(call, caller, recording, last_turn_end_ms=0))
    assert session.chunks == len(recording.frames) >= 25


async def test_a_failing_line_propagates() -> None:
    async def broken() -> None:
        raise OSError("device unplugged")

    call = LocalCall(RATE_HZ, RATE_HZ, FakeClock())
    with pytest.raises(OSError, match="unplugged"):
        await call.run(ScriptedSession(0.1, -1, None), broken())


# ---------------------------------------------------------------- sound devices


class FakeSoundDevice:
    """The parts of sounddevice the device line uses: the microphone plays `mic_audio`
    in blocks from a thread, the speakers pull blocks into `played` from another."""

    PortAudioError = type("PortAudioError", (Exception,), {})

    def __init__(self, mic_audio: np.ndarray[Any, Any], devices: bool = True) -> None:
        self.mic_audio = mic_audio
        self.devices = devices
        self.played: list[np.ndarray[Any, Any]] = []
        self.opened: list[dict[str, Any]] = []

    def query_devices(self, kind: str) -> dict[str, Any]:
        if not self.devices:
            raise self.PortAudioError("Error querying device -1")
        return {"name": f"fake {kind}", "default_samplerate": 48000.0}

    def check_input_settings(self, **settings: Any) -> None:
        raise self.PortAudioError("Invalid sample rate")  # only the device rate works

    def check_output_settings(self, **settings: Any) -> None:
        return None

    def InputStream(self, **kw: Any) -> _Stream:
        self.opened.append(kw)
        return _Stream(self, kw, mic=True)

    def OutputStream(self, **kw: Any) -> _Stream:
        self.opened.append(kw)
        return _Stream(self, kw, mic=False)


class _Stream:
    def __init__(self, sd: FakeSoundDevice, kw: dict[str, Any], *, mic: bool) -> None:
        self.sd, self.kw, self.mic = sd, kw, mic
        self.stop = threading.Event()
        self.latency = 0.01
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        block, callback = self.kw["blocksize"], self.kw["callback"]
        at = SimpleNamespace(outputBufferDacTime=1.0, currentTime=1.0)
        for start in range(0, 10**9, block):
            if self.stop.wait(block / self.kw["samplerate"] / 4):
                return
            if self.mic:
                data = self.sd.mic_audio[start : start + block]
                if len(data) < block:
                    return
                callback(data.reshape(-1, 1), block, at, None)
            else:
                out = np.zeros((block, 1), np.int16)
                callback(out, block, at, None)
                self.sd.played.append(out[:, 0].copy())

    def __enter__(self) -> _Stream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def test_devices_are_opened_at_16khz_where_allowed_else_at_their_rate() -> None:
    sd: Any = FakeSoundDevice(np.zeros(0, np.int16))
    devices = default_devices(sd)
    assert (devices.input_rate_hz, devices.output_rate_hz) == (48000, 16000)
    assert devices.input_name == "fake input"
    with pytest.raises(NoAudioDevice, match="--input-wav FILE --output-wav FILE"):
        default_devices(FakeSoundDevice(np.zeros(0, np.int16), devices=False))


async def test_the_device_line_feeds_the_microphone_and_plays_to_the_speakers() -> None:
    mic = voiced(0.6, 48000)
    sd: Any = FakeSoundDevice(mic)
    devices = default_devices(sd)
    call = LocalCall(devices.input_rate_hz, devices.output_rate_hz, MonotonicClock())
    session = ScriptedSession(first_s=0.2, at_ms=-1, second_s=None)
    running = asyncio.create_task(call.run(session, device_line(sd, call, devices)))
    while not session.utterances:
        await asyncio.sleep(0)
    heard = await asyncio.wait_for(asyncio.shield(session.utterances[0].heard), 10)
    for _ in range(200):
        if session.chunks == len(mic) // 960:
            break
        await asyncio.sleep(0.02)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)

    assert [kw["blocksize"] for kw in sd.opened] == [960, 320]  # 20 ms at 48 and 16 kHz
    assert session.chunks == len(mic) // 960  # every microphone block reached the session
    played = np.concatenate(sd.played)
    assert rms_dbfs(played) > REPLY_DBFS and (np.abs(played) > 0).sum() >= 0.2 * RATE_HZ * 0.9
    assert (heard.interrupted, heard.heard_ms) == (False, 200)  # marked once played
