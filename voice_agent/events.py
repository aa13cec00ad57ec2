"""Call events: what transports decode from the wire and what sessions ask them to send.

Events are frozen, slotted dataclasses. Audio travels as mono PCM16 samples in a numpy
`int16` array together with its sample rate; codecs convert to and from their wire
encodings (μ-law 8 kHz for Twilio, PCM16LE for the raw PCM socket).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

Pcm16 = npt.NDArray[np.int16]
"""Mono PCM16 samples."""


class Protocol(Enum):
    """Which wire protocol a call arrived on."""

    TWILIO = "twilio"
    PCM = "pcm"
    LOCAL = "local"
    """This machine's microphone and speakers, or a WAV file (`voice-agent mic`)."""


class Track(Enum):
    """Twilio Media Streams track names."""

    INBOUND = "inbound"
    OUTBOUND = "outbound"


def _frozen_mapping(values: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(values or {}))


# ---------------------------------------------------------------- inbound (caller -> agent)


@dataclass(frozen=True, slots=True)
class Connected:
    """The peer opened the stream (Twilio's `connected` message)."""

    protocol_name: str
    version: str


@dataclass(frozen=True, slots=True)
class CallStarted:
    """The call's metadata; no audio is accepted before it.

    `custom_parameters` are Twilio's `<Parameter>` values (or the PCM start message's
    `parameters`); `sample_rate_hz` is the wire rate of inbound audio.
    """

    protocol: Protocol
    call_id: str
    stream_id: str
    sample_rate_hz: int
    tracks: tuple[Track, ...] = (Track.INBOUND,)
    account_id: str = ""
    custom_parameters: Mapping[str, str] = field(default_factory=_frozen_mapping)


@dataclass(frozen=True, slots=True)
class AudioReceived:
    """A chunk of caller audio, decoded to PCM16 at the wire's rate.

    `timestamp_ms` is the peer's stream clock (Twilio's `media.timestamp`) when it sent
    one, else the codec's own count of received audio; `chunk` is the peer's sequence
    number of this chunk (1-based for Twilio) or the codec's own count.
    """

    samples: Pcm16
    sample_rate_hz: int
    timestamp_ms: int
    chunk: int


@dataclass(frozen=True, slots=True)
class DtmfReceived:
    """The caller pressed a key (`0`-`9`, `*`, `#`, `A`-`D`)."""

    digit: str


@dataclass(frozen=True, slots=True)
class MarkReceived:
    """The peer finished playing all audio sent before the mark of this name."""

    name: str


@dataclass(frozen=True, slots=True)
class CallStopped:
    """The peer ended the stream (hang-up, or its `stop` message)."""

    reason: str = "stop"


InboundEvent = Connected | CallStarted | AudioReceived | DtmfReceived | MarkReceived | CallStopped


# --------------------------------------------------------------- outbound (agent -> caller)


@dataclass(frozen=True, slots=True)
class SendAudio:
    """Audio for the caller, already at the wire's rate (the player resamples and frames)."""

    samples: Pcm16
    sample_rate_hz: int


@dataclass(frozen=True, slots=True)
class SendMark:
    """Ask the peer to echo `name` back once everything sent before it has been played."""

    name: str


@dataclass(frozen=True, slots=True)
class ClearAudio:
    """Ask the peer to drop all buffered, unplayed audio (barge-in)."""


OutboundEvent = SendAudio | SendMark | ClearAudio
