"""PcmCodec against literal start/control JSON and literal PCM16LE frames."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    ClearAudio,
    DtmfReceived,
    MarkReceived,
    Protocol,
    SendAudio,
    SendMark,
    Track,
)
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.pcm import ACCEPTED_RATES_HZ, PcmCodec

START = (
    '{"event": "start", "sample_rate_hz": 16000, "encoding": "pcm16le", "channels": 1, '
    '"call_id": "call-42", "parameters": {"caller": "+15550100", "lang": "en"}}'
)
MINIMAL_START = '{"event": "start", "sample_rate_hz": 16000}'
MARK = '{"event": "mark", "name": "utterance-1"}'
DTMF = '{"event": "dtmf", "digit": "5"}'
STOP = '{"event": "stop"}'

# PCM16LE: 0, 32767, -32768, 1
FOUR_SAMPLES = b"\x00\x00\xff\x7f\x00\x80\x01\x00"


def started(message: str = START, **kwargs: Any) -> PcmCodec:
    codec = PcmCodec(**kwargs)
    codec.feed(message)
    return codec


def error(codec: PcmCodec, message: str | bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        codec.feed(message)
    return info.value


def start_with(**fields: Any) -> str:
    return json.dumps({"event": "start", "sample_rate_hz": 16000} | fields)


# ----------------------------------------------------------------------------- inbound


def test_start_carries_the_call_metadata() -> None:
    codec = PcmCodec()
    assert not codec.started

    [event] = codec.feed(START)

    assert event == CallStarted(
        protocol=Protocol.PCM,
        call_id="call-42",
        stream_id="call-42",
        sample_rate_hz=16000,
        tracks=(Track.INBOUND,),
        custom_parameters={"caller": "+15550100", "lang": "en"},
    )
    assert codec.started and not codec.stopped
    assert codec.wire_rate_hz == 16000


def test_minimal_start_gets_defaults_and_a_fresh_call_id() -> None:
    [first] = PcmCodec().feed(MINIMAL_START)
    [second] = PcmCodec().feed(MINIMAL_START)
    assert isinstance(first, CallStarted) and isinstance(second, CallStarted)
    assert len(first.call_id) == 32 and int(first.call_id, 16) >= 0  # uuid4 hex
    assert first.call_id != second.call_id
    assert first.stream_id == first.call_id
    assert dict(first.custom_parameters) == {}


@pytest.mark.parametrize("rate_hz", ACCEPTED_RATES_HZ)
def test_every_accepted_rate_starts(rate_hz: int) -> None:
    codec = started(start_with(sample_rate_hz=rate_hz))
    assert codec.wire_rate_hz == rate_hz


def test_audio_decodes_pcm16le() -> None:
    [event] = started().feed(FOUR_SAMPLES)
    assert isinstance(event, AudioReceived)
    assert (event.sample_rate_hz, event.timestamp_ms, event.chunk) == (16000, 0, 1)
    assert event.samples.dtype == np.int16
    assert event.samples.tolist() == [0, 32767, -32768, 1]


def test_audio_timestamps_count_received_audio() -> None:
    codec = started()
    twenty_ms = bytes(640)  # 320 samples at 16 kHz
    events = codec.feed(twenty_ms) + codec.feed(b"") + codec.feed(twenty_ms) + codec.feed(b"\0\0")
    assert [(e.timestamp_ms, e.chunk) for e in events if isinstance(e, AudioReceived)] == [
        (0, 1),
        (20, 2),
        (40, 3),
    ]


def test_empty_frame_is_ignored() -> None:
    assert started().feed(b"") == []


def test_mark() -> None:
    assert started().feed(MARK) == [MarkReceived("utterance-1")]


@pytest.mark.parametrize("digit", ["0", "5", "9", "*", "#", "A", "D"])
def test_dtmf(digit: str) -> None:
    assert started().feed(json.dumps({"event": "dtmf", "digit": digit})) == [DtmfReceived(digit)]


def test_stop() -> None:
    codec = started()
    assert codec.feed(STOP) == [CallStopped("stop")]
    assert codec.stopped


def test_stop_before_start_ends_the_stream() -> None:
    codec = PcmCodec()
    assert codec.feed(STOP) == [CallStopped("stop")]
    assert codec.stopped and not codec.started


# ------------------------------------------------------------------------------ errors


def test_odd_byte_count_is_invalid_payload() -> None:
    assert error(started(), b"\x00\x00\x01").code is CloseCode.INVALID_PAYLOAD


def test_frame_over_one_second_is_too_big() -> None:
    codec = started(start_with(sample_rate_hz=8000))
    assert len(codec.feed(bytes(16000))) == 1  # exactly one second at 8 kHz
    assert error(codec, bytes(16002)).code is CloseCode.MESSAGE_TOO_BIG


def test_frame_over_an_explicit_limit_is_too_big() -> None:
    codec = started(max_frame_bytes=640)
    assert len(codec.feed(bytes(640))) == 1
    assert error(codec, bytes(642)).code is CloseCode.MESSAGE_TOO_BIG


def test_audio_before_start_is_out_of_order() -> None:
    assert error(PcmCodec(), FOUR_SAMPLES).code is CloseCode.OUT_OF_ORDER


@pytest.mark.parametrize("message", [MARK, DTMF])
def test_control_before_start_is_out_of_order(message: str) -> None:
    assert error(PcmCodec(), message).code is CloseCode.OUT_OF_ORDER


def test_malformed_json_is_invalid_payload() -> None:
    assert error(PcmCodec(), '{"event": "start", "sample_rate_hz": ').code is (
        CloseCode.INVALID_PAYLOAD
    )


def test_json_that_is_not_an_object_is_invalid_payload() -> None:
    assert error(started(), '"stop"').code is CloseCode.INVALID_PAYLOAD


@pytest.mark.parametrize("codec_factory", [PcmCodec, started])
def test_unknown_event_is_bad_message(codec_factory: Any) -> None:
    exc = error(codec_factory(), '{"event": "hello"}')
    assert exc.code is CloseCode.BAD_MESSAGE
    assert "hello" in exc.reason


def test_missing_event_is_bad_message() -> None:
    exc = error(PcmCodec(), '{"sample_rate_hz": 16000}')
    assert exc.code is CloseCode.BAD_MESSAGE
    assert "'event'" in exc.reason


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ('{"event": "start"}', "sample_rate_hz"),
        ('{"event": "start", "sample_rate_hz": "16000"}', "sample_rate_hz"),
        ('{"event": "start", "sample_rate_hz": 16000.0}', "sample_rate_hz"),
        ('{"event": "start", "sample_rate_hz": 16000, "channels": "1"}', "channels"),
        ('{"event": "start", "sample_rate_hz": 16000, "call_id": ""}', "call_id"),
        ('{"event": "start", "sample_rate_hz": 16000, "parameters": {"n": 1}}', "parameters.n"),
        ('{"event": "start", "sample_rate_hz": 16000, "sample_rate": 8000}', "sample_rate"),
    ],
)
def test_bad_start_field_is_bad_message(message: str, field: str) -> None:
    exc = error(PcmCodec(), message)
    assert exc.code is CloseCode.BAD_MESSAGE
    assert f"'{field}'" in exc.reason


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ('{"event": "dtmf", "digit": "X"}', "digit"),
        ('{"event": "dtmf", "digit": "55"}', "digit"),
        ('{"event": "dtmf", "digit": 5}', "digit"),
        ('{"event": "dtmf"}', "digit"),
        ('{"event": "mark"}', "name"),
        ('{"event": "mark", "name": 3}', "name"),
        ('{"event": "stop", "why": "bye"}', "why"),
    ],
)
def test_bad_control_field_is_bad_message(message: str, field: str) -> None:
    exc = error(started(), message)
    assert exc.code is CloseCode.BAD_MESSAGE
    assert f"'{field}'" in exc.reason


@pytest.mark.parametrize(
    "message",
    [
        start_with(sample_rate_hz=12345),
        start_with(sample_rate_hz=96000),
        start_with(encoding="pcm32f"),
        start_with(encoding="mulaw"),
        start_with(channels=2),
    ],
)
def test_unsupported_media_is_refused(message: str) -> None:
    assert error(PcmCodec(), message).code is CloseCode.UNSUPPORTED_MEDIA


def test_second_start_is_out_of_order() -> None:
    assert error(started(), START).code is CloseCode.OUT_OF_ORDER


@pytest.mark.parametrize("message", [FOUR_SAMPLES, b"", START, MARK, DTMF, STOP])
def test_anything_after_stop_is_out_of_order(message: str | bytes) -> None:
    codec = started()
    codec.feed(STOP)
    assert error(codec, message).code is CloseCode.OUT_OF_ORDER


# ----------------------------------------------------------------------------- outbound


def test_encode_audio_is_binary_pcm16le() -> None:
    samples = np.array([0, 32767, -32768, 1], dtype=np.int16)
    assert started().encode(SendAudio(samples, 16000)) == FOUR_SAMPLES


def test_encode_audio_at_another_rate_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="16000"):
        started().encode(SendAudio(np.zeros(160, dtype=np.int16), 8000))


def test_encode_mark_is_text() -> None:
    sent = started().encode(SendMark("utterance-1"))
    assert isinstance(sent, str)
    assert json.loads(sent) == {"event": "mark", "name": "utterance-1"}


def test_encode_clear_is_text() -> None:
    sent = started().encode(ClearAudio())
    assert isinstance(sent, str)
    assert json.loads(sent) == {"event": "clear"}


@pytest.mark.parametrize(
    "event", [SendAudio(np.zeros(160, dtype=np.int16), 16000), SendMark("m"), ClearAudio()]
)
def test_encode_before_start_is_a_caller_bug(event: SendAudio | SendMark | ClearAudio) -> None:
    with pytest.raises(RuntimeError):
        PcmCodec().encode(event)


def test_wire_rate_before_start_is_a_caller_bug() -> None:
    with pytest.raises(RuntimeError):
        _ = PcmCodec().wire_rate_hz


@pytest.mark.parametrize("call_id", ["\ud800", "a b", "call/+/#", "$x^2$", "é", "x" * 129])
def test_a_call_id_is_plain_ascii_or_the_start_is_refused(call_id: str) -> None:
    """Call ids become MQTT topic levels, log fields and plot labels."""
    exc = error(PcmCodec(), start_with(call_id=call_id))
    assert exc.code is CloseCode.BAD_MESSAGE and "call_id" in exc.reason
