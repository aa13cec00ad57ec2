"""TwilioCodec against literal Media Streams messages shaped like Twilio's documentation."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    ClearAudio,
    Connected,
    DtmfReceived,
    MarkReceived,
    Protocol,
    SendAudio,
    SendMark,
    Track,
)
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.twilio import TwilioCodec

STREAM_SID = "MZ18ad3ab5a668481ce02b83e7395059f0"

CONNECTED = '{"event": "connected", "protocol": "Call", "version": "1.0.0"}'

START = """{
  "event": "start",
  "sequenceNumber": "1",
  "start": {
    "accountSid": "AC0123456789abcdef0123456789abcdef",
    "streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0",
    "callSid": "CA0123456789abcdef0123456789abcdef",
    "tracks": ["inbound"],
    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    "customParameters": {"FirstName": "Jane", "LastName": "Doe", "RemoteParty": "Bob"}
  },
  "streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0"
}"""

# 160 bytes (20 ms) of μ-law: a 1 kHz sine of amplitude 8000 sampled at 8 kHz, i.e. the
# samples round(8000 * sin(2π n / 8)) = 0, 5657, 8000, 5657, 0, -5657, -8000, -5657, ...
SINE_PAYLOAD = (
    "/6mgqf8pICn/qaCp/ykgKf+poKn/KSAp/6mgqf8pICn/qaCp/ykgKf+poKn/KSAp/6mgqf8pICn/qaCp"
    "/ykgKf+poKn/KSAp/6mgqf8pICn/qaCp/ykgKf+poKn/KSAp/6mgqf8pICn/qaCp/ykgKf+poKn/KSAp"
    "/6mgqf8pICn/qaCp/ykgKf+poKn/KSAp/6mgqf8pICn/qaCp/ykgKQ=="
)
SINE = np.round(8000 * np.sin(2 * np.pi * np.arange(160) / 8)).astype(np.int16)

MEDIA = (
    '{"event": "media", "sequenceNumber": "3", "media": {"track": "inbound", "chunk": "1", '
    '"timestamp": "5", "payload": "' + SINE_PAYLOAD + '"}, '
    '"streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0"}'
)

DTMF = """{
  "event": "dtmf",
  "streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0",
  "sequenceNumber": "5",
  "dtmf": {"track": "inbound_track", "digit": "1"}
}"""

MARK = """{
  "event": "mark",
  "sequenceNumber": "4",
  "streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0",
  "mark": {"name": "my label"}
}"""

STOP = """{
  "event": "stop",
  "sequenceNumber": "5",
  "streamSid": "MZ18ad3ab5a668481ce02b83e7395059f0",
  "stop": {
    "accountSid": "AC0123456789abcdef0123456789abcdef",
    "callSid": "CA0123456789abcdef0123456789abcdef"
  }
}"""


DELETE = object()


def edited(message: str, path: tuple[str, ...], value: Any) -> str:
    """`message` with the field at `path` replaced (or removed when `value` is DELETE)."""
    data = json.loads(message)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(data)


def started(**kwargs: Any) -> TwilioCodec:
    codec = TwilioCodec(**kwargs)
    codec.feed(CONNECTED)
    codec.feed(START)
    return codec


def error(codec: TwilioCodec, message: str | bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        codec.feed(message)
    return info.value


# ----------------------------------------------------------------------------- inbound


def test_connected() -> None:
    assert TwilioCodec().feed(CONNECTED) == [Connected(protocol_name="Call", version="1.0.0")]


def test_start_carries_the_call_metadata() -> None:
    codec = TwilioCodec()
    assert not codec.started

    [event] = codec.feed(START)

    assert event == CallStarted(
        protocol=Protocol.TWILIO,
        call_id="CA0123456789abcdef0123456789abcdef",
        stream_id=STREAM_SID,
        sample_rate_hz=8000,
        tracks=(Track.INBOUND,),
        account_id="AC0123456789abcdef0123456789abcdef",
        custom_parameters={"FirstName": "Jane", "LastName": "Doe", "RemoteParty": "Bob"},
    )
    assert codec.started and not codec.stopped
    assert codec.stream_sid == STREAM_SID
    assert codec.wire_rate_hz == 8000


def test_start_with_both_tracks() -> None:
    [event] = TwilioCodec().feed(edited(START, ("start", "tracks"), ["inbound", "outbound"]))
    assert isinstance(event, CallStarted)
    assert event.tracks == (Track.INBOUND, Track.OUTBOUND)


def test_media_decodes_mulaw_to_pcm16() -> None:
    [event] = started().feed(MEDIA)

    assert isinstance(event, AudioReceived)
    assert event.sample_rate_hz == 8000
    assert event.timestamp_ms == 5  # Twilio's string "5"
    assert event.chunk == 1  # Twilio's string "1"
    assert event.samples.dtype == np.int16
    assert event.samples.shape == (160,)
    # μ-law keeps 8000 within one quantization step (256 in that segment).
    assert np.max(np.abs(event.samples.astype(np.int32) - SINE)) <= 256
    assert event.samples[0] == 0 and event.samples[2] > 7700 and event.samples[6] < -7700


def test_media_decodes_exact_mulaw_codes() -> None:
    # 0xFF is +0, 0x80 the largest positive code, 0x00 the largest negative one.
    message = edited(MEDIA, ("media", "payload"), base64.b64encode(b"\xff\x80\x00").decode())
    [event] = started().feed(message)
    assert isinstance(event, AudioReceived)
    assert event.samples.tolist() == [0, 32124, -32124]


def test_media_accepts_numbers_as_numbers() -> None:
    message = edited(edited(MEDIA, ("media", "chunk"), 7), ("media", "timestamp"), 140)
    [event] = started().feed(edited(message, ("sequenceNumber",), 9))
    assert isinstance(event, AudioReceived)
    assert (event.chunk, event.timestamp_ms) == (7, 140)


def test_media_without_clock_fields_counts_received_audio() -> None:
    message = edited(edited(MEDIA, ("media", "chunk"), DELETE), ("media", "timestamp"), DELETE)
    codec = started()
    events = codec.feed(message) + codec.feed(message)
    assert [(e.timestamp_ms, e.chunk) for e in events if isinstance(e, AudioReceived)] == [
        (0, 1),
        (20, 2),
    ]


def test_outbound_track_media_is_ignored() -> None:
    assert started().feed(edited(MEDIA, ("media", "track"), "outbound")) == []


def test_dtmf() -> None:
    assert started().feed(DTMF) == [DtmfReceived("1")]


def test_mark() -> None:
    assert started().feed(MARK) == [MarkReceived("my label")]


def test_stop() -> None:
    codec = started()
    assert codec.feed(STOP) == [CallStopped("stop")]
    assert codec.stopped


def test_stop_before_start_ends_the_stream() -> None:
    codec = TwilioCodec()
    assert codec.feed(STOP) == [CallStopped("stop")]
    assert codec.stopped and not codec.started


def test_unknown_events_are_ignored_and_counted() -> None:
    codec = TwilioCodec()
    assert codec.feed('{"event": "futureThing", "x": 1}') == []
    codec.feed(START)
    assert codec.feed('{"event": "anotherOne"}') == []
    assert codec.ignored_messages == 2


def test_a_whole_call_in_order() -> None:
    codec = TwilioCodec()
    kinds = [type(e) for m in (CONNECTED, START, MEDIA, DTMF, MARK, STOP) for e in codec.feed(m)]
    assert kinds == [
        Connected,
        CallStarted,
        AudioReceived,
        DtmfReceived,
        MarkReceived,
        CallStopped,
    ]


# ------------------------------------------------------------------------------ errors


def test_binary_frame_is_unsupported_data() -> None:
    assert error(started(), b"\xff" * 160).code is CloseCode.UNSUPPORTED_DATA


def test_malformed_json_is_invalid_payload() -> None:
    assert error(TwilioCodec(), '{"event": "media",').code is CloseCode.INVALID_PAYLOAD


def test_json_that_is_not_an_object_is_invalid_payload() -> None:
    assert error(TwilioCodec(), '["event", "start"]').code is CloseCode.INVALID_PAYLOAD


def test_invalid_base64_is_invalid_payload() -> None:
    message = edited(MEDIA, ("media", "payload"), "not base64!")
    assert error(started(), message).code is CloseCode.INVALID_PAYLOAD


def test_missing_event_is_bad_message() -> None:
    exc = error(TwilioCodec(), '{"protocol": "Call", "version": "1.0.0"}')
    assert exc.code is CloseCode.BAD_MESSAGE
    assert "event" in exc.reason


@pytest.mark.parametrize(
    ("message", "path", "value", "field"),
    [
        (START, ("start", "callSid"), DELETE, "start.callSid"),
        (START, ("start", "streamSid"), 42, "start.streamSid"),
        (START, ("start", "callSid"), "CA\ud800", "start.callSid"),  # a lone surrogate
        (START, ("start", "callSid"), "CA$x^2$", "start.callSid"),  # plot markup
        (START, ("start", "streamSid"), "MZ/+/#", "start.streamSid"),  # MQTT wildcards
        (START, ("start", "mediaFormat"), DELETE, "start.mediaFormat"),
        (START, ("start", "customParameters"), {"n": 1}, "start.customParameters.n"),
        (START, ("start", "tracks"), ["sideways"], "start.tracks.0"),
        (CONNECTED, ("version",), DELETE, "version"),
    ],
)
def test_missing_or_mistyped_start_field_is_bad_message(
    message: str, path: tuple[str, ...], value: Any, field: str
) -> None:
    exc = error(TwilioCodec(), edited(message, path, value))
    assert exc.code is CloseCode.BAD_MESSAGE
    assert f"'{field}'" in exc.reason


@pytest.mark.parametrize(
    ("message", "path", "value", "field"),
    [
        (MEDIA, ("media", "payload"), DELETE, "media.payload"),
        (MEDIA, ("media", "payload"), 12, "media.payload"),
        (MEDIA, ("media", "chunk"), "one", "media.chunk"),
        (MEDIA, ("media", "timestamp"), "soon", "media.timestamp"),
        (MEDIA, ("media",), DELETE, "media"),
        (DTMF, ("dtmf", "digit"), "X", "dtmf.digit"),
        (DTMF, ("dtmf", "digit"), "12", "dtmf.digit"),
        (MARK, ("mark", "name"), None, "mark.name"),
    ],
)
def test_missing_or_mistyped_call_field_is_bad_message(
    message: str, path: tuple[str, ...], value: Any, field: str
) -> None:
    exc = error(started(), edited(message, path, value))
    assert exc.code is CloseCode.BAD_MESSAGE
    assert f"'{field}'" in exc.reason


@pytest.mark.parametrize("message", [MEDIA, DTMF, MARK])
def test_call_messages_before_start_are_out_of_order(message: str) -> None:
    codec = TwilioCodec()
    codec.feed(CONNECTED)
    assert error(codec, message).code is CloseCode.OUT_OF_ORDER


def test_second_start_is_out_of_order() -> None:
    assert error(started(), START).code is CloseCode.OUT_OF_ORDER


@pytest.mark.parametrize("message", [MEDIA, MARK, STOP, START, CONNECTED, '{"event": "new"}'])
def test_anything_after_stop_is_out_of_order(message: str) -> None:
    codec = started()
    codec.feed(STOP)
    assert error(codec, message).code is CloseCode.OUT_OF_ORDER


@pytest.mark.parametrize(
    ("field", "value"),
    [("encoding", "audio/l16"), ("sampleRate", 16000), ("channels", 2)],
)
def test_other_media_formats_are_unsupported(field: str, value: Any) -> None:
    message = edited(START, ("start", "mediaFormat", field), value)
    assert error(TwilioCodec(), message).code is CloseCode.UNSUPPORTED_MEDIA


def test_payload_over_the_limit_is_too_big() -> None:
    codec = started(max_payload_bytes=160)
    assert len(codec.feed(MEDIA)) == 1  # exactly 160 bytes is fine
    big = edited(MEDIA, ("media", "payload"), base64.b64encode(b"\xff" * 161).decode())
    assert error(codec, big).code is CloseCode.MESSAGE_TOO_BIG


def test_token_missing_is_unauthorized() -> None:
    assert error(TwilioCodec(expected_token="s3cret"), START).code is CloseCode.UNAUTHORIZED


def test_wrong_token_is_unauthorized() -> None:
    message = edited(START, ("start", "customParameters", "token"), "guess")
    exc = error(TwilioCodec(expected_token="s3cret"), message)
    assert exc.code is CloseCode.UNAUTHORIZED
    assert "guess" not in exc.reason


def test_right_token_is_accepted_and_not_passed_on() -> None:
    message = edited(START, ("start", "customParameters", "token"), "s3cret")
    codec = TwilioCodec(expected_token="s3cret")
    [event] = codec.feed(message)
    assert isinstance(event, CallStarted)
    assert codec.started
    assert dict(event.custom_parameters) == {
        "FirstName": "Jane",
        "LastName": "Doe",
        "RemoteParty": "Bob",
    }


def test_token_is_not_required_without_expected_token() -> None:
    message = edited(START, ("start", "customParameters", "token"), "anything")
    [event] = TwilioCodec().feed(message)
    assert isinstance(event, CallStarted)
    assert event.custom_parameters["token"] == "anything"


@pytest.mark.parametrize("message", [MEDIA, DTMF, MARK, STOP])
def test_foreign_stream_sid_is_bad_message(message: str) -> None:
    exc = error(started(), edited(message, ("streamSid",), "MZ-someone-else"))
    assert exc.code is CloseCode.BAD_MESSAGE
    assert "streamSid" in exc.reason


def test_start_with_two_different_stream_sids_is_bad_message() -> None:
    message = edited(START, ("streamSid",), "MZ-someone-else")
    assert error(TwilioCodec(), message).code is CloseCode.BAD_MESSAGE


# ----------------------------------------------------------------------------- outbound


def test_encode_audio() -> None:
    samples = np.array([0, 32124, -32124], dtype=np.int16)
    sent = json.loads(started().encode(SendAudio(samples, 8000)))
    # μ-law 0xFF 0x80 0x00, base64 "/4AA"
    assert sent == {"event": "media", "streamSid": STREAM_SID, "media": {"payload": "/4AA"}}


def test_encode_audio_round_trips_the_sine() -> None:
    sent = json.loads(started().encode(SendAudio(SINE, 8000)))
    assert sent["media"]["payload"] == SINE_PAYLOAD


def test_encode_audio_at_another_rate_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="8000"):
        started().encode(SendAudio(np.zeros(320, dtype=np.int16), 16000))


def test_encode_mark() -> None:
    sent = json.loads(started().encode(SendMark("utterance-3")))
    assert sent == {"event": "mark", "streamSid": STREAM_SID, "mark": {"name": "utterance-3"}}


def test_encode_clear() -> None:
    assert json.loads(started().encode(ClearAudio())) == {
        "event": "clear",
        "streamSid": STREAM_SID,
    }


@pytest.mark.parametrize(
    "event", [SendAudio(np.zeros(160, dtype=np.int16), 8000), SendMark("m"), ClearAudio()]
)
def test_encode_before_start_is_a_caller_bug(event: SendAudio | SendMark | ClearAudio) -> None:
    codec = TwilioCodec()
    codec.feed(CONNECTED)
    with pytest.raises(RuntimeError):
        codec.encode(event)
