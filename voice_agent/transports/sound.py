"""Microphone and speakers for a `LocalCall`, through sounddevice (PortAudio).

sounddevice is an optional dependency (the `mic` extra) and is imported only here, when
a device line is opened. The microphone's callback hands 20 ms blocks to the event loop
(dropping blocks, with a warning, if the loop falls a second behind: a microphone cannot
be asked to wait); the speakers' callback pulls from the call's `Playback`, and each mark
is echoed once the block that completes it should have reached the speaker (the
stream's output latency later), so the session knows what the caller heard. There is no
echo cancellation: with loudspeakers the microphone hears the agent, which can then
interrupt itself; use headphones.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from voice_agent.audio import ASR_RATE_HZ, samples_per_frame
from voice_agent.events import Pcm16
from voice_agent.transports.local import LocalCall

log = logging.getLogger(__name__)

PREFERRED_RATE_HZ = ASR_RATE_HZ
"""Opened at this rate when the device allows it (no resampling before the VAD)."""
MIC_BACKLOG_BLOCKS = 50
"""Microphone blocks (20 ms each) waiting for the event loop before new ones are dropped."""
MAX_OUTPUT_LATENCY_S = 0.5
"""A reported output latency above this is not believed (marks would lag behind)."""
HEADLESS_HINT = "use --input-wav FILE --output-wav FILE to run without audio devices"


class NoAudioDevice(RuntimeError):
    """sounddevice or PortAudio is missing, or there is no input or output device; the
    message is one line and says how to run headless instead."""


def import_sounddevice() -> ModuleType:
    """The sounddevice module; raises NoAudioDevice when it (or PortAudio) is missing."""
    try:
        import sounddevice  # type: ignore[import-untyped]
    except ImportError:
        raise NoAudioDevice(
            "sounddevice is not installed (pip install 'voice-agent[mic]'); " + HEADLESS_HINT
        ) from None
    except OSError as exc:  # raised when the PortAudio library is not found
        raise NoAudioDevice(
            f"PortAudio is missing ({exc}; apt-get install libportaudio2); " + HEADLESS_HINT
        ) from None
    module: ModuleType = sounddevice
    return module


@dataclass(frozen=True, slots=True)
class Devices:
    """The default input and output devices and the rates to open them at."""

    input_name: str
    output_name: str
    input_rate_hz: int
    output_rate_hz: int


def default_devices(sd: ModuleType) -> Devices:
    """The default microphone and speakers; raises NoAudioDevice when either is missing."""
    try:
        mic = sd.query_devices(kind="input")
        speaker = sd.query_devices(kind="output")
    except (sd.PortAudioError, ValueError) as exc:
        raise NoAudioDevice(
            f"no audio input/output device found ({exc}); {HEADLESS_HINT}"
        ) from None
    return Devices(
        str(mic["name"]),
        str(speaker["name"]),
        _rate(sd, sd.check_input_settings, mic),
        _rate(sd, sd.check_output_settings, speaker),
    )


def _rate(sd: ModuleType, check: Any, device: Any) -> int:
    try:
        check(samplerate=PREFERRED_RATE_HZ, channels=1, dtype="int16")
    except (sd.PortAudioError, ValueError):
        return int(device["default_samplerate"])
    return PREFERRED_RATE_HZ


async def device_line(sd: ModuleType, call: LocalCall, devices: Devices) -> None:
    """Connect the microphone to `call.hear` and the speakers to its playback until
    cancelled. Raises NoAudioDevice when a stream cannot be opened."""
    loop = asyncio.get_running_loop()
    blocks: asyncio.Queue[Pcm16] = asyncio.Queue(MIC_BACKLOG_BLOCKS)
    dropped = 0

    def take(samples: Pcm16) -> None:
        nonlocal dropped
        try:
            blocks.put_nowait(samples)
        except asyncio.QueueFull:
            dropped += 1
            if dropped == 1 or dropped % MIC_BACKLOG_BLOCKS == 0:
                log.warning("microphone: %d blocks dropped (the event loop is behind)", dropped)

    def on_input(indata: Any, frames: int, time: Any, status: Any) -> None:
        loop.call_soon_threadsafe(take, np.array(indata[:, 0], dtype=np.int16))

    output_latency_s = 0.0

    def on_output(outdata: Any, frames: int, time: Any, status: Any) -> None:
        samples, marks = call.playback.pull(frames)
        outdata[:, 0] = samples
        if marks:  # heard once this block has gone through the device's buffer
            delay_s = output_latency_s + frames / devices.output_rate_hz
            for name in marks:
                loop.call_soon_threadsafe(loop.call_later, delay_s, call.player.on_mark, name)

    common = {"channels": 1, "dtype": "int16", "latency": "low"}
    try:
        mic = sd.InputStream(samplerate=devices.input_rate_hz, callback=on_input,
                             blocksize=_block(devices.input_rate_hz), **common)  # fmt: skip
        speaker = sd.OutputStream(samplerate=devices.output_rate_hz, callback=on_output,
                                  blocksize=_block(devices.output_rate_hz), **common)  # fmt: skip
    except (sd.PortAudioError, ValueError) as exc:
        raise NoAudioDevice(f"cannot open the audio devices ({exc}); {HEADLESS_HINT}") from None
    # The stream's own figure: hosts disagree on the callback's time stamps (some give 0).
    output_latency_s = min(float(speaker.latency), MAX_OUTPUT_LATENCY_S)
    with mic, speaker:
        while True:
            await call.hear(await blocks.get())


def _block(rate_hz: int) -> int:
    """20 ms blocks where the rate allows it, else the nearest whole number of samples."""
    try:
        return samples_per_frame(rate_hz)
    except ValueError:
        return round(rate_hz / 50)
