"""Sans-I/O codec for our raw PCM websocket protocol (`/pcm`).

The client opens with one text frame,

    {"event": "start", "sample_rate_hz": 16000, "encoding": "pcm16le", "channels": 1,
     "call_id": "optional", "parameters": {"k": "v"}}

(`encoding`, `channels`, `call_id` and `parameters` may be left out), then streams its
microphone as binary frames of mono PCM16LE at that rate. Text frames after `start` are
control messages: `{"event": "mark", "name": ...}` (echoing our mark once the audio
before it has played), `{"event": "dtmf", "digit": "5"}` and `{"event": "stop"}`. We send
binary PCM16LE at the same rate and text `{"event": "mark", "name": ...}` and
`{"event": "clear"}`. It is our own protocol, so unknown events and fields are errors.
"""

from __future__ import annotations

import uuid
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from voice_agent.audio import bytes_to_pcm16, pcm16_to_bytes
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    ClearAudio,
    DtmfReceived,
    InboundEvent,
    MarkReceived,
    OutboundEvent,
    Protocol,
    SendAudio,
    SendMark,
)
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.wire import (
    CallId,
    DtmfDigit,
    dump_json,
    event_name,
    parse_json_object,
    validate,
)

ACCEPTED_RATES_HZ = (8000, 16000, 22050, 24000, 44100, 48000)
PCM_ENCODING = "pcm16le"
PCM_CHANNELS = 1
BYTES_PER_SAMPLE = 2

_MS_PER_S = 1000


class _Model(BaseModel):
    # Strict: our own clients must send JSON numbers as numbers and no unknown fields.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _Start(_Model):
    event: Literal["start"]
    sample_rate_hz: int
    encoding: str = PCM_ENCODING
    channels: int = PCM_CHANNELS
    call_id: CallId | None = None
    parameters: dict[str, str] = Field(default_factory=dict)


class _Mark(_Model):
    event: Literal["mark"]
    name: str


class _Dtmf(_Model):
    event: Literal["dtmf"]
    digit: DtmfDigit


class _Stop(_Model):
    event: Literal["stop"]


class PcmCodec:
    """Decode the client's frames into events and encode ours; does no I/O.

    Feed every websocket message to `feed()` and send what `encode()` returns (text or
    binary). Any ProtocolError means the connection must be closed with its `code`.
    """

    def __init__(self, *, max_frame_bytes: int | None = None) -> None:
        """`max_frame_bytes`: the largest binary frame accepted; by default one second
        of audio at the call's rate (`sample_rate_hz * 2` bytes)."""
        if max_frame_bytes is not None and max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        self._rate_hz: int | None = None
        self._stopped = False
        self._received_samples = 0
        self._received_chunks = 0

    @property
    def started(self) -> bool:
        return self._rate_hz is not None

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def wire_rate_hz(self) -> int:
        """The start message's sample rate; RuntimeError before `start`."""
        if self._rate_hz is None:
            raise RuntimeError("the wire rate is unknown before the start message")
        return self._rate_hz

    # ------------------------------------------------------------------ inbound

    def feed(self, message: str | bytes) -> list[InboundEvent]:
        """Decode one websocket message into zero or more events.

        Raises ProtocolError: INVALID_PAYLOAD (bad JSON, odd PCM byte count), BAD_MESSAGE
        (unknown event, missing, mistyped or unknown field, bad DTMF digit), OUT_OF_ORDER,
        UNSUPPORTED_MEDIA, MESSAGE_TOO_BIG.
        """
        if self._stopped:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, "message after stop")
        if isinstance(message, bytes):
            return self._on_audio(message)
        data = parse_json_object(message)
        match event_name(data):
            case "start":
                return [self._on_start(data)]
            case "mark":
                self._require_started("mark")
                return [MarkReceived(validate(_Mark, data, "mark message").name)]
            case "dtmf":
                self._require_started("dtmf")
                return [DtmfReceived(validate(_Dtmf, data, "dtmf message").digit)]
            case "stop":
                validate(_Stop, data, "stop message")
                self._stopped = True
                return [CallStopped("stop")]
            case unknown:
                raise ProtocolError(CloseCode.BAD_MESSAGE, f"unknown event {unknown!r}")

    def _on_start(self, data: dict[str, Any]) -> CallStarted:
        if self.started:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, "second start message")
        start = validate(_Start, data, "start message")
        if start.sample_rate_hz not in ACCEPTED_RATES_HZ:
            raise ProtocolError(
                CloseCode.UNSUPPORTED_MEDIA,
                f"sample_rate_hz {start.sample_rate_hz} not in {ACCEPTED_RATES_HZ}",
            )
        if start.encoding != PCM_ENCODING:
            raise ProtocolError(
                CloseCode.UNSUPPORTED_MEDIA,
                f"encoding {start.encoding!r} unsupported; use {PCM_ENCODING!r}",
            )
        if start.channels != PCM_CHANNELS:
            raise ProtocolError(
                CloseCode.UNSUPPORTED_MEDIA, f"{start.channels} channels unsupported; send mono"
            )
        self._rate_hz = start.sample_rate_hz
        call_id = start.call_id if start.call_id is not None else uuid.uuid4().hex
        return CallStarted(
            protocol=Protocol.PCM,
            call_id=call_id,
            stream_id=call_id,
            sample_rate_hz=start.sample_rate_hz,
            custom_parameters=MappingProxyType(dict(start.parameters)),
        )

    def _on_audio(self, frame: bytes) -> list[InboundEvent]:
        rate_hz = self._require_started("audio")
        if not frame:
            return []
        max_bytes = self._max_frame_bytes or rate_hz * BYTES_PER_SAMPLE
        if len(frame) > max_bytes:
            raise ProtocolError(
                CloseCode.MESSAGE_TOO_BIG, f"audio frame of {len(frame)} bytes exceeds {max_bytes}"
            )
        try:
            samples = bytes_to_pcm16(frame)
        except ValueError:
            raise ProtocolError(
                CloseCode.INVALID_PAYLOAD,
                f"audio frame of {len(frame)} bytes is not whole PCM16 samples",
            ) from None
        timestamp_ms = self._received_samples * _MS_PER_S // rate_hz
        self._received_samples += len(samples)
        self._received_chunks += 1
        return [AudioReceived(samples, rate_hz, timestamp_ms, self._received_chunks)]

    def _require_started(self, what: str) -> int:
        if self._rate_hz is None:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, f"{what} before start")
        return self._rate_hz

    # ----------------------------------------------------------------- outbound

    def encode(self, event: OutboundEvent) -> str | bytes:
        """Encode an outbound event: audio as a binary frame, the rest as text.

        Raises RuntimeError before `start`, ValueError for audio not at the call's rate.
        """
        rate_hz = self._rate_hz
        if rate_hz is None:
            raise RuntimeError("cannot send to a PCM client before its start message")
        match event:
            case SendAudio(samples=samples, sample_rate_hz=sample_rate_hz):
                if sample_rate_hz != rate_hz:
                    raise ValueError(
                        f"audio must be at the call's {rate_hz} Hz, got {sample_rate_hz}"
                    )
                return pcm16_to_bytes(samples)
            case SendMark(name=name):
                return dump_json({"event": "mark", "name": name})
            case ClearAudio():
                return dump_json({"event": "clear"})
        raise TypeError(f"not an outbound event: {event!r}")
