"""Shared test helpers: synthetic caller audio and a server on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

from voice_agent.config import Settings, load_settings
from voice_agent.events import Pcm16
from voice_agent.transports.call import SessionFactory
from voice_agent.transports.server import VoiceServer

RATE_HZ = 8000


def voiced(duration_s: float, rate_hz: int = RATE_HZ, f0_hz: float = 140.0, seed: int = 0) -> Pcm16:
    """Speech-like audio: a harmonic buzz whose loudness moves at a syllable rate."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration_s * rate_hz)) / rate_hz
    buzz = sum(np.sin(2 * np.pi * f0_hz * k * t + rng.uniform(0, 6)) / k for k in range(1, 12))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t)
    return (6000 * envelope * buzz).astype(np.int16)


def silence(duration_s: float, rate_hz: int = RATE_HZ) -> Pcm16:
    return np.zeros(int(duration_s * rate_hz), np.int16)


def settings(**sections: dict[str, Any]) -> Settings:
    merged: dict[str, dict[str, Any]] = {"server": {"host": "127.0.0.1", "port": 0}}
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    return load_settings(None, **merged)


@contextlib.asynccontextmanager
async def running_server(
    factory: SessionFactory, **sections: dict[str, Any]
) -> AsyncIterator[VoiceServer]:
    async with VoiceServer(settings(**sections), factory) as server:
        yield server


def url(server: VoiceServer, path: str = "/twilio") -> str:
    return f"ws://127.0.0.1:{server.port}{path}"


SessionMaker = Callable[[], Any]
