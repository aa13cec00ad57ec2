"""Sans-I/O codec for Twilio Media Streams (a bidirectional `<Connect><Stream>`).

Twilio sends text frames holding JSON: `connected`, then one `start` with the call's
metadata, then `media` (base64 G.711 μ-law, 8 kHz mono, 20 ms per message), `dtmf` and
`mark` (the echo of a mark we sent, once the audio before it has played), and finally
`stop`. We answer with `media`, `mark` and `clear`. Twilio writes some numbers as
strings (`sequenceNumber`, `media.chunk`, `media.timestamp`); both forms are accepted.
Unknown event names are skipped (Twilio may add events) and counted.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from voice_agent.audio import PHONE_RATE_HZ, pcm16_to_ulaw, ulaw_to_pcm16
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    ClearAudio,
    Connected,
    DtmfReceived,
    InboundEvent,
    MarkReceived,
    OutboundEvent,
    Protocol,
    SendAudio,
    SendMark,
    Track,
)
from voice_agent.transports.auth import CallTokens
from voice_agent.transports.call import CALLER_PARAMETER
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.wire import (
    CallId,
    DtmfDigit,
    dump_json,
    event_name,
    parse_json_object,
    validate,
)

TWILIO_ENCODING = "audio/x-mulaw"
TWILIO_CHANNELS = 1
DEFAULT_MAX_PAYLOAD_BYTES = PHONE_RATE_HZ  # one second of μ-law; Twilio sends 160 bytes
TOKEN_PARAMETER = "token"
"""The `<Parameter name="token">` checked against `expected_token`."""
_MS_PER_S = 1000


class _Model(BaseModel):
    # Twilio may add fields: ignore extras. Lax mode accepts "5" for an int field.
    model_config = ConfigDict(alias_generator=to_camel, frozen=True, extra="ignore")


class _Connected(_Model):
    protocol: str
    version: str


class _MediaFormat(_Model):
    encoding: str
    sample_rate: int
    channels: int


class _StartBody(_Model):
    stream_sid: CallId
    call_sid: CallId
    account_sid: str = ""
    tracks: tuple[Track, ...] = (Track.INBOUND,)
    media_format: _MediaFormat
    custom_parameters: dict[str, str] = Field(default_factory=dict)


class _Start(_Model):
    stream_sid: str | None = None
    sequence_number: int | None = Field(None, ge=0)
    start: _StartBody


class _MediaBody(_Model):
    track: Track = Track.INBOUND
    chunk: int | None = Field(None, ge=0)
    timestamp: int | None = Field(None, ge=0)
    payload: str


class _Media(_Model):
    stream_sid: str | None = None
    sequence_number: int | None = Field(None, ge=0)
    media: _MediaBody


class _DtmfBody(_Model):
    track: str | None = None
    digit: DtmfDigit


class _Dtmf(_Model):
    stream_sid: str | None = None
    sequence_number: int | None = Field(None, ge=0)
    dtmf: _DtmfBody


class _MarkBody(_Model):
    name: str


class _Mark(_Model):
    stream_sid: str | None = None
    sequence_number: int | None = Field(None, ge=0)
    mark: _MarkBody


class _Stop(_Model):
    stream_sid: str | None = None
    sequence_number: int | None = Field(None, ge=0)


_InCallT = TypeVar("_InCallT", _Media, _Dtmf, _Mark)


class TwilioCodec:
    """Decode Twilio's messages into events and encode ours; does no I/O.

    Feed every websocket message to `feed()` and send what `encode()` returns. Any
    ProtocolError means the connection must be closed with its `code` and `reason`.
    """

    def __init__(
        self,
        *,
        expected_token: str | None = None,
        call_tokens: CallTokens | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        """`expected_token`: when set, `start` must carry a matching `token` custom
        parameter (which is then removed from `custom_parameters`, so the secret does not
        travel on). `call_tokens`: when set, `start` must instead carry a per-call
        `token` for its CallSid and `caller` parameter, used once (`auth.CallTokens`).
        `max_payload_bytes`: the largest decoded μ-law payload accepted."""
        if max_payload_bytes <= 0:
            raise ValueError(f"max_payload_bytes must be positive, got {max_payload_bytes}")
        self._expected_token = expected_token
        self._call_tokens = call_tokens
        self._max_payload_bytes = max_payload_bytes
        self._stream_sid: str | None = None
        self._stopped = False
        self._received_samples = 0
        self._received_chunks = 0
        self.ignored_messages = 0
        """Messages with an event name this codec does not know, skipped."""

    @property
    def started(self) -> bool:
        return self._stream_sid is not None

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def stream_sid(self) -> str | None:
        return self._stream_sid

    @property
    def wire_rate_hz(self) -> int:
        return PHONE_RATE_HZ

    # ------------------------------------------------------------------ inbound

    def feed(self, message: str | bytes) -> list[InboundEvent]:
        """Decode one websocket message into zero or more events.

        Raises ProtocolError: UNSUPPORTED_DATA (binary frame), INVALID_PAYLOAD (bad JSON
        or base64), BAD_MESSAGE (missing or mistyped field, foreign streamSid),
        OUT_OF_ORDER, UNSUPPORTED_MEDIA, MESSAGE_TOO_BIG, UNAUTHORIZED.
        """
        if self._stopped:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, "message after stop")
        if not isinstance(message, str):
            raise ProtocolError(CloseCode.UNSUPPORTED_DATA, "Twilio sends text frames only")
        data = parse_json_object(message)
        match event_name(data):
            case "connected":
                connected = validate(_Connected, data, "connected message")
                return [Connected(connected.protocol, connected.version)]
            case "start":
                return [self._on_start(data)]
            case "media":
                return self._on_media(data)
            case "dtmf":
                dtmf = self._validate_in_call(_Dtmf, data, "dtmf")
                return [DtmfReceived(dtmf.dtmf.digit)]
            case "mark":
                mark = self._validate_in_call(_Mark, data, "mark")
                return [MarkReceived(mark.mark.name)]
            case "stop":
                stop = validate(_Stop, data, "stop message")
                if self.started:
                    self._check_stream_sid(stop.stream_sid, "stop")
                self._stopped = True
                return [CallStopped("stop")]
            case _:
                self.ignored_messages += 1
                return []

    def _on_start(self, data: dict[str, Any]) -> CallStarted:
        if self.started:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, "second start message")
        start = validate(_Start, data, "start message")
        body = start.start
        if start.stream_sid is not None and start.stream_sid != body.stream_sid:
            raise ProtocolError(CloseCode.BAD_MESSAGE, "streamSid differs from start.streamSid")
        parameters = dict(body.custom_parameters)
        if self._call_tokens is not None:
            presented = parameters.pop(TOKEN_PARAMETER, None)
            caller = parameters.get(CALLER_PARAMETER, "")
            why = self._call_tokens.check(presented, body.call_sid, caller)
            if why is not None:
                raise ProtocolError(CloseCode.UNAUTHORIZED, why)
        elif self._expected_token is not None:
            self._check_token(parameters.pop(TOKEN_PARAMETER, None))
        fmt = body.media_format
        if (fmt.encoding, fmt.sample_rate, fmt.channels) != (
            TWILIO_ENCODING,
            PHONE_RATE_HZ,
            TWILIO_CHANNELS,
        ):
            raise ProtocolError(
                CloseCode.UNSUPPORTED_MEDIA,
                f"unsupported mediaFormat {fmt.encoding} {fmt.sample_rate} Hz "
                f"{fmt.channels} ch; expected {TWILIO_ENCODING} {PHONE_RATE_HZ} Hz mono",
            )
        self._stream_sid = body.stream_sid
        return CallStarted(
            protocol=Protocol.TWILIO,
            call_id=body.call_sid,
            stream_id=body.stream_sid,
            sample_rate_hz=fmt.sample_rate,
            tracks=body.tracks,
            account_id=body.account_sid,
            custom_parameters=MappingProxyType(parameters),
        )

    def _check_token(self, presented: str | None) -> None:
        assert self._expected_token is not None
        if presented is None:
            raise ProtocolError(
                CloseCode.UNAUTHORIZED, f"start has no '{TOKEN_PARAMETER}' custom parameter"
            )
        if not hmac.compare_digest(presented.encode(), self._expected_token.encode()):
            raise ProtocolError(CloseCode.UNAUTHORIZED, "wrong stream token")

    def _on_media(self, data: dict[str, Any]) -> list[InboundEvent]:
        media = self._validate_in_call(_Media, data, "media").media
        if media.track is not Track.INBOUND:
            return []  # our own audio echoed back: not the caller
        try:
            ulaw = base64.b64decode(media.payload, validate=True)
        except binascii.Error as exc:
            raise ProtocolError(
                CloseCode.INVALID_PAYLOAD, f"media.payload is not valid base64: {exc}"
            ) from None
        if len(ulaw) > self._max_payload_bytes:
            raise ProtocolError(
                CloseCode.MESSAGE_TOO_BIG,
                f"media payload of {len(ulaw)} bytes exceeds {self._max_payload_bytes}",
            )
        if not ulaw:
            return []
        # Without Twilio's own clock and sequence, fall back to counting what arrived.
        received_ms = self._received_samples * _MS_PER_S // PHONE_RATE_HZ
        self._received_samples += len(ulaw)
        self._received_chunks += 1
        return [
            AudioReceived(
                samples=ulaw_to_pcm16(ulaw),
                sample_rate_hz=PHONE_RATE_HZ,
                timestamp_ms=media.timestamp if media.timestamp is not None else received_ms,
                chunk=media.chunk if media.chunk is not None else self._received_chunks,
            )
        ]

    def _validate_in_call(
        self, model: type[_InCallT], data: dict[str, Any], event: str
    ) -> _InCallT:
        if not self.started:
            raise ProtocolError(CloseCode.OUT_OF_ORDER, f"{event} before start")
        message = validate(model, data, f"{event} message")
        self._check_stream_sid(message.stream_sid, event)
        return message

    def _check_stream_sid(self, stream_sid: str | None, event: str) -> None:
        if stream_sid is not None and stream_sid != self._stream_sid:
            raise ProtocolError(
                CloseCode.BAD_MESSAGE, f"{event} message streamSid differs from the start's"
            )

    # ----------------------------------------------------------------- outbound

    def encode(self, event: OutboundEvent) -> str:
        """Encode an outbound event as one text frame.

        Raises RuntimeError before `start` (there is no streamSid to address), ValueError
        for audio that is not at 8000 Hz.
        """
        if self._stream_sid is None:
            raise RuntimeError("cannot send to Twilio before its start message")
        match event:
            case SendAudio(samples=samples, sample_rate_hz=rate_hz):
                if rate_hz != PHONE_RATE_HZ:
                    raise ValueError(f"Twilio audio must be {PHONE_RATE_HZ} Hz, got {rate_hz}")
                payload = base64.b64encode(pcm16_to_ulaw(samples)).decode("ascii")
                return dump_json(
                    {"event": "media", "streamSid": self._stream_sid, "media": {"payload": payload}}
                )
            case SendMark(name=name):
                return dump_json(
                    {"event": "mark", "streamSid": self._stream_sid, "mark": {"name": name}}
                )
            case ClearAudio():
                return dump_json({"event": "clear", "streamSid": self._stream_sid})
        raise TypeError(f"not an outbound event: {event!r}")
