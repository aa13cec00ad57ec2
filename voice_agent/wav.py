"""WAV files in and out: any integer PCM WAV in, mono PCM16 out."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from voice_agent.events import Pcm16


class WavError(ValueError):
    """The file is not a WAV this project can read; the message says why and what to do."""


def read_wav(path: Path) -> tuple[Pcm16, int]:
    """Read a PCM WAV (8/16/24/32-bit integer, any rate, any channel count) as mono PCM16.

    Returns (samples, sample_rate_hz). Raises WavError for a missing, empty or
    unsupported file (float and compressed WAVs: convert with `sox in.wav -b 16 out.wav`).
    """
    if not path.is_file():
        raise WavError(f"no such file: {path}")
    try:
        with wave.open(str(path), "rb") as wav:
            channels = wav.getnchannels()
            width = wav.getsampwidth()
            rate = wav.getframerate()
            raw = wav.readframes(wav.getnframes())
    except (wave.Error, EOFError) as exc:
        raise WavError(
            f"{path}: not a PCM WAV file ({exc}); convert it with `sox {path} -b 16 out.wav`"
        ) from None
    if rate <= 0:
        raise WavError(f"{path}: invalid sample rate {rate}")
    if width == 1:
        data = (np.frombuffer(raw, np.uint8).astype(np.int32) - 128) << 8
    elif width == 2:
        data = np.frombuffer(raw, "<i2").astype(np.int32)
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        data = ((b[:, 0] << 8) | (b[:, 1] << 16) | (b[:, 2] << 24)) >> 16
    elif width == 4:
        data = np.frombuffer(raw, "<i4") >> 16
    else:
        raise WavError(f"{path}: unsupported sample width of {width} bytes")
    if data.size == 0:
        raise WavError(f"{path}: the file holds no audio")
    frames = data[: data.size - data.size % channels].reshape(-1, channels)
    mono = frames.mean(axis=1) if channels > 1 else frames[:, 0]
    return np.clip(np.round(mono), -32768, 32767).astype(np.int16), rate


def write_wav(path: Path, samples: Pcm16, sample_rate_hz: int) -> None:
    """Write mono PCM16; creates the parent folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate_hz)
        wav.writeframes(np.asarray(samples, dtype="<i2").tobytes())
