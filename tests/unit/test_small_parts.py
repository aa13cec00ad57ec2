"""TwiML, WAV reading, handshake auth helpers and the simulator's pure pieces."""

from __future__ import annotations

import wave
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import silence, voiced
from voice_agent.simulator import _Playback, caller_turn_ends_ms, first_reply_ms
from voice_agent.transports.auth import (
    bearer_or_query_token,
    secret_matches,
    twilio_signature,
    twilio_signature_valid,
)
from voice_agent.twiml import twiml_connect_stream
from voice_agent.wav import WavError, read_wav, write_wav


def test_twiml_snippet_is_valid_xml_with_parameters() -> None:
    xml = twiml_connect_stream("wss://a.example.com/twilio", {"token": 'x"<&'})
    root = ET.fromstring(xml.split("\n", 1)[1])
    stream = root.find("Connect/Stream")
    assert stream is not None and stream.get("url") == "wss://a.example.com/twilio"
    param = stream.find("Parameter")
    assert param is not None and (param.get("name"), param.get("value")) == ("token", 'x"<&')


@pytest.mark.parametrize("bad", ["ws://a.example.com/twilio", "https://a/b", "wss:///nohost"])
def test_twiml_refuses_urls_twilio_would_refuse(bad: str) -> None:
    with pytest.raises(ValueError, match="wss://"):
        twiml_connect_stream(bad)


def test_wav_roundtrip_and_conversions(tmp_path: Path) -> None:
    tone = voiced(0.1, 22050)
    write_wav(tmp_path / "a.wav", tone, 22050)
    samples, rate = read_wav(tmp_path / "a.wav")
    assert rate == 22050 and np.array_equal(samples, tone)
    # Stereo 8-bit is downmixed and widened.
    with wave.open(str(tmp_path / "b.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(bytes([128, 128, 255, 255, 0, 128] * 10))
    samples, rate = read_wav(tmp_path / "b.wav")
    assert rate == 8000 and samples.tolist()[:3] == [0, 32512, -16384]


def test_wav_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(WavError, match="no such file"):
        read_wav(tmp_path / "missing.wav")
    (tmp_path / "junk.wav").write_bytes(b"RIFFjunk")
    with pytest.raises(WavError, match="not a PCM WAV"):
        read_wav(tmp_path / "junk.wav")
    write_wav(tmp_path / "empty.wav", np.zeros(0, np.int16), 8000)
    with pytest.raises(WavError, match="no audio"):
        read_wav(tmp_path / "empty.wav")


def test_tokens_from_header_or_query() -> None:
    assert bearer_or_query_token("Bearer abc", "/pcm") == "abc"
    assert bearer_or_query_token(None, "/pcm?x=1&token=q") == "q"
    assert bearer_or_query_token("Basic abc", "/pcm") is None
    assert secret_matches("abc", "abc") and not secret_matches("abd", "abc")
    assert not secret_matches(None, "abc")


def test_twilio_signature_depends_on_token_url_and_params() -> None:
    sig = twilio_signature("tok", "wss://h/twilio")
    assert twilio_signature_valid("tok", "wss://h/twilio", sig)
    assert not twilio_signature_valid("tok2", "wss://h/twilio", sig)
    assert not twilio_signature_valid("tok", "wss://h/twilio?x=1", sig)
    assert not twilio_signature_valid("tok", "wss://h/twilio", None)
    # POST parameters are appended sorted by name, so their order does not matter.
    a = twilio_signature("tok", "https://h/x", {"b": "2", "a": "1"})
    assert a == twilio_signature("tok", "https://h/x", {"a": "1", "b": "2"})
    assert a != twilio_signature("tok", "https://h/x", {"a": "1", "b": "3"})


def test_turn_ends_found_in_caller_audio() -> None:
    audio = np.concatenate(
        [silence(0.5), voiced(1.0), silence(0.3), voiced(0.4), silence(1.0), voiced(0.5)]
    )
    ends = caller_turn_ends_ms(audio)
    # The 300 ms pause is inside a turn; the 1 s pause separates turns.
    assert len(ends) == 2
    assert abs(ends[0] - 2200) <= 40 and abs(ends[1] - 3700) <= 40


def test_playback_buffers_frames_and_marks_like_twilio() -> None:
    pb = _Playback()
    pb.add_audio(np.ones(200, np.int16))
    pb.add_mark("m1")  # pads the partial frame
    pb.add_audio(np.ones(160, np.int16))
    pb.add_mark("m2")
    frame, marks = pb.tick()
    assert frame is not None and marks == []
    frame, marks = pb.tick()
    assert frame is not None and frame[40:].tolist() == [0] * 120 and marks == ["m1"]
    assert pb.clear() == ["m2"] and pb.idle


def test_first_reply_is_per_turn_and_none_when_unanswered() -> None:
    quiet, loud = np.zeros(160, np.int16), np.full(160, 3000, np.int16)
    played = [quiet] * 60 + [loud] * 5 + [quiet] * 100
    assert first_reply_ms([1000], played) == [200]
    assert first_reply_ms([1000, 3000], played) == [200, None]
