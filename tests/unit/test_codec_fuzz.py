"""Both wire codecs under hostile input (hypothesis; `FUZZ_CASES` cases per property).

Whatever arrives, `feed()` returns events or raises `ProtocolError` with a documented
close code and a reason that fits a close frame; nothing else escapes (an escaping
exception would be a 1011 from the websocket library and an unrecorded call). The
ordering rules hold on every path: one start, nothing after stop.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzz_settings, json_values, sequences, text, twilio_media, twilio_start
from voice_agent.events import AudioReceived, CallStarted, CallStopped, InboundEvent
from voice_agent.transports.errors import MAX_REASON_BYTES, CloseCode, ProtocolError
from voice_agent.transports.pcm import PcmCodec
from voice_agent.transports.twilio import DEFAULT_MAX_PAYLOAD_BYTES, TwilioCodec

TWILIO_CODES = {1003, 1007, 1009, 4400, 4401, 4409, 4415}
PCM_CODES = {1007, 1009, 4400, 4409, 4415}


def feed_all(codec: TwilioCodec | PcmCodec, messages: list[str | bytes]) -> ProtocolError | None:
    """Feed until the first error, checking the ordering invariants on the way."""
    starts = 0
    for message in messages:
        was_stopped = codec.stopped
        try:
            events: list[InboundEvent] = codec.feed(message)
        except ProtocolError as exc:
            if was_stopped:
                assert exc.code is CloseCode.OUT_OF_ORDER
            return exc
        assert not was_stopped, "a message after stop was accepted"
        for event in events:
            if isinstance(event, CallStarted):
                starts += 1
            if isinstance(event, AudioReceived):
                assert event.samples.dtype == np.int16 and 0 < len(event.samples) <= 48_000
                assert codec.started
            if isinstance(event, CallStopped):
                assert codec.stopped
        assert starts <= 1
    return None


def check_error(exc: ProtocolError | None, codes: set[int]) -> None:
    if exc is None:
        return
    assert int(exc.code) in codes, exc
    assert exc.reason and len(exc.reason.encode()) <= MAX_REASON_BYTES


@fuzz_settings()
@given(sequences("twilio"), st.sampled_from([None, "tok"]))
def test_twilio_codec_survives_any_sequence(messages: list[str | bytes], token: str | None) -> None:
    check_error(feed_all(TwilioCodec(expected_token=token), messages), TWILIO_CODES)


@fuzz_settings()
@given(sequences("pcm"))
def test_pcm_codec_survives_any_sequence(messages: list[str | bytes]) -> None:
    check_error(feed_all(PcmCodec(), messages), PCM_CODES)


# ------------------------------------------------- each kind of bad input, its own code


def not_json(message: str) -> bool:
    try:
        json.loads(message)
    except (ValueError, RecursionError):
        return True
    return False


@fuzz_settings()
@given(st.binary(max_size=300), st.booleans())
def test_binary_on_twilio_is_always_1003(frame: bytes, started: bool) -> None:
    codec = TwilioCodec()
    if started:
        codec.feed(json.dumps(twilio_start()))
    assert feed_all(codec, [frame]).code is CloseCode.UNSUPPORTED_DATA  # type: ignore[union-attr]


@fuzz_settings()
@given(st.one_of(text.filter(not_json), json_values.filter(lambda v: not isinstance(v, dict))))
def test_text_that_is_not_a_json_object_is_always_1007(value: object) -> None:
    message = value if isinstance(value, str) else json.dumps(value)
    for codec in (TwilioCodec(), PcmCodec()):
        error = feed_all(codec, [message])
        assert error is not None and error.code is CloseCode.INVALID_PAYLOAD, error


@fuzz_settings()
@given(st.dictionaries(text, json_values, max_size=4).filter(lambda d: "event" not in d))
def test_an_object_without_an_event_is_always_4400(obj: dict[str, object]) -> None:
    for codec in (TwilioCodec(), PcmCodec()):
        error = feed_all(codec, [json.dumps(obj)])
        assert error is not None and error.code is CloseCode.BAD_MESSAGE, error


@fuzz_settings()
@given(st.text(alphabet="!*@ .~-", min_size=1, max_size=40))
def test_a_payload_that_is_not_base64_is_always_1007(payload: str) -> None:
    codec = TwilioCodec()
    codec.feed(json.dumps(twilio_start()))
    error = feed_all(codec, [json.dumps(twilio_media(payload))])
    assert error is not None and error.code is CloseCode.INVALID_PAYLOAD


def test_numbers_python_refuses_and_lone_surrogates_get_their_codes() -> None:
    huge = '{"event": "start", "sample_rate_hz": ' + "9" * 5000 + "}"
    for codec in (TwilioCodec(), PcmCodec()):
        assert feed_all(codec, [huge]).code is CloseCode.INVALID_PAYLOAD  # type: ignore[union-attr]
    # A reason that quotes the peer's text cannot be broken by a lone surrogate.
    error = feed_all(TwilioCodec(), [json.dumps(twilio_start(encoding="\ud800"))])
    assert error is not None and error.code is CloseCode.UNSUPPORTED_MEDIA
    assert error.reason.encode()  # valid UTF-8
    big = "x" * (DEFAULT_MAX_PAYLOAD_BYTES * 2)
    error = feed_all(TwilioCodec(), [json.dumps(twilio_start(encoding=big))])
    assert error is not None and len(error.reason.encode()) <= MAX_REASON_BYTES
