"""The websocket server on loopback: routing, auth, capacity and bad input.

Each bad connection must be closed with its specific code, and the server must go on
serving the next call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.fakes import running_server, silence, url, voiced
from voice_agent.audio import pcm16_to_bytes, pcm16_to_ulaw
from voice_agent.echo import EchoSession
from voice_agent.events import AudioReceived, CallStarted, InboundEvent
from voice_agent.simulator import simulate_call
from voice_agent.transports.auth import call_token, twilio_signature
from voice_agent.transports.call import Inbound
from voice_agent.transports.player import AudioPlayer

SID = "MZ" + "0" * 32


def start_message(**media_format: Any) -> str:
    fmt = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1, **media_format}
    return json.dumps(
        {
            "event": "start",
            "sequenceNumber": "1",
            "streamSid": SID,
            "start": {
                "streamSid": SID,
                "accountSid": "AC" + "1" * 32,
                "callSid": "CA" + "2" * 32,
                "tracks": ["inbound"],
                "customParameters": {},
                "mediaFormat": fmt,
            },
        }
    )


def media_message(payload: str, chunk: int = 1) -> str:
    return json.dumps(
        {
            "event": "media",
            "streamSid": SID,
            "media": {
                "track": "inbound",
                "chunk": str(chunk),
                "timestamp": "0",
                "payload": payload,
            },
        }
    )


async def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    with pytest.raises(ConnectionClosed):
        for _ in range(100):
            await asyncio.wait_for(ws.recv(), 5)
    return ws.close_code, ws.close_reason


class Recorder:
    """A session that records what it was given and never speaks."""

    instances: list[Recorder] = []

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.call: CallStarted | None = None
        Recorder.instances.append(self)

    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        self.call = call
        async for event in inbound:
            self.events.append(event)


BAD_TWILIO_INPUT = [
    pytest.param([start_message(), "{not json"], 1007, id="malformed-json"),
    pytest.param([b"\x00\x01binary"], 1003, id="binary-on-twilio"),
    pytest.param(
        [media_message(base64.b64encode(b"\xff" * 160).decode())], 4409, id="media-before-start"
    ),
    pytest.param([start_message(), media_message("***not base64***")], 1007, id="invalid-base64"),
    pytest.param([start_message(sampleRate=16000)], 4415, id="wrong-sample-rate"),
    pytest.param([start_message(), start_message()], 4409, id="second-start"),
    pytest.param(
        [json.dumps({"event": "start", "streamSid": SID})], 4400, id="start-without-fields"
    ),
    pytest.param(["x" * 70_000], 1009, id="oversized-message"),
]


@pytest.mark.parametrize(("messages", "code"), BAD_TWILIO_INPUT)
async def test_bad_twilio_input_closes_only_that_connection(messages: list[Any], code: int) -> None:
    async with running_server(EchoSession) as server:
        async with connect(url(server)) as ws:
            for message in messages:
                await ws.send(message)
            got_code, reason = await closed_with(ws)
        assert got_code == code, reason
        assert reason
        # The server is still up and serves a normal call.
        summary, _ = await simulate_call(url(server), voiced(0.3), 8000, max_tail_s=0.5)
        assert summary.close_code == 1000


async def test_unknown_twilio_event_is_ignored_and_audio_flows() -> None:
    Recorder.instances.clear()
    async with running_server(Recorder) as server, connect(url(server)) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(start_message())
        await ws.send(json.dumps({"event": "brand-new-event", "streamSid": SID}))
        tone = voiced(0.02)
        await ws.send(media_message(base64.b64encode(pcm16_to_ulaw(tone)).decode()))
        await ws.send(json.dumps({"event": "stop", "streamSid": SID, "stop": {}}))
        code, _ = await closed_with(ws)
    assert code == 1000
    session = Recorder.instances[-1]
    assert session.call is not None and session.call.call_id == "CA" + "2" * 32
    audio = [e for e in session.events if isinstance(e, AudioReceived)]
    assert len(audio) == 1 and audio[0].sample_rate_hz == 8000
    assert np.corrcoef(audio[0].samples.astype(float), tone.astype(float))[0, 1] > 0.99


async def test_unknown_path_is_refused_with_404() -> None:
    async with running_server(EchoSession) as server:
        with pytest.raises(InvalidStatus) as info:
            async with connect(url(server, "/nope")):
                pass
    assert info.value.response.status_code == 404


async def test_calls_beyond_the_limit_are_refused_with_1013() -> None:
    async with running_server(Recorder, server={"max_calls": 1}) as server:
        async with connect(url(server)) as first:
            await first.send(start_message())
            async with connect(url(server)) as second:
                await second.send(start_message())  # refused once it asks for a call
                code, reason = await closed_with(second)
            assert code == 1013 and reason and "capacity" in reason
            assert server.active_calls == 1
        # Once the first call has gone, a new one is accepted.
        summary, _ = await simulate_call(url(server), voiced(0.2), 8000, max_tail_s=0.3)
        assert summary.close_code == 1000


async def test_no_start_in_time_closes_with_4409() -> None:
    async with running_server(EchoSession, server={"start_timeout_s": 0.3}) as server:
        async with connect(url(server)) as ws:
            code, _ = await closed_with(ws)
    assert code == 4409


# ------------------------------------------------------------------------- auth


async def test_pcm_secret_required_by_header_or_query() -> None:
    async with running_server(EchoSession, auth={"pcm_secret": "s3cret"}) as server:
        for bad in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            with pytest.raises(InvalidStatus) as info:
                async with connect(url(server, "/pcm"), additional_headers=bad):
                    pass
            assert info.value.response.status_code == 401
        async with connect(
            url(server, "/pcm"), additional_headers={"Authorization": "Bearer s3cret"}
        ) as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            await ws.send(json.dumps({"event": "stop"}))
            assert (await closed_with(ws))[0] == 1000
        async with connect(url(server, "/pcm?token=s3cret")) as ws:
            await ws.send(json.dumps({"event": "stop"}))
            await ws.close()


async def test_twilio_signature_checked_when_auth_token_set() -> None:
    token = "twilio-auth-token"
    async with running_server(
        EchoSession,
        auth={"twilio_auth_token": token},
        server={"public_url": "wss://agent.example.com"},
    ) as server:
        good = twilio_signature(token, "wss://agent.example.com/twilio")
        other_url = twilio_signature(token, "wss://evil.example.com/twilio")
        for headers in (
            {},
            {"X-Twilio-Signature": other_url},
            {"X-Twilio-Signature": good[:-2] + "AA"},
        ):
            with pytest.raises(InvalidStatus) as info:
                async with connect(url(server), additional_headers=headers):
                    pass
            assert info.value.response.status_code == 403
        summary, _ = await simulate_call(
            url(server), voiced(0.2), 8000, max_tail_s=0.3, headers={"X-Twilio-Signature": good}
        )
        assert summary.close_code == 1000


async def test_twilio_stream_token_in_custom_parameters() -> None:
    async with running_server(Recorder, auth={"twilio_stream_token": "tok"}) as server:
        async with connect(url(server)) as ws:
            await ws.send(start_message())  # no token parameter
            assert (await closed_with(ws))[0] == 4401
        summary, _ = await simulate_call(
            url(server), silence(0.1), 8000, token="wrong", max_tail_s=0.2
        )
        assert summary.close_code == 4401
        summary, _ = await simulate_call(
            url(server), silence(0.1), 8000, token="tok", max_tail_s=0.2
        )
        assert summary.close_code == 1000


def start_with(parameters: dict[str, str], call_sid: str = "CA" + "2" * 32) -> str:
    message = json.loads(start_message())
    message["start"]["customParameters"] = parameters
    message["start"]["callSid"] = call_sid
    return json.dumps(message)


async def test_a_call_token_admits_its_own_call_once_and_no_other() -> None:
    secret, caller, sid = "per-call-secret", "+15551234567", "CA" + "2" * 32
    token = call_token(secret, sid, caller, int(time.time()) + 60)
    auth = {"twilio_call_token_secret": secret}
    async with running_server(Recorder, auth=auth) as server:
        async with connect(url(server)) as ws:
            await ws.send(start_with({"token": token, "caller": caller}))
            await ws.send(json.dumps({"event": "stop", "streamSid": SID}))
            assert (await closed_with(ws))[0] == 1000
        call = Recorder.instances[-1].call
        assert call is not None and dict(call.custom_parameters) == {"caller": caller}
        refusals = [
            ({"token": token, "caller": caller}, sid, "already used"),  # a replayed start
            ({"token": token, "caller": "+15550000000"}, sid, "does not match"),  # a claim
            ({"token": token, "caller": caller}, "CA" + "3" * 32, "does not match"),
            ({"caller": caller}, sid, "no call token"),
        ]
        for parameters, call_sid, why in refusals:
            async with connect(url(server)) as ws:
                await ws.send(start_with(parameters, call_sid))
                code, reason = await closed_with(ws)
                assert code == 4401 and why in reason


# -------------------------------------------------------------------------- pcm


async def test_pcm_endpoint_echoes_audio_and_marks() -> None:
    rate = 16000
    async with running_server(lambda: EchoSession(greet=False)) as server:
        async with connect(url(server, "/pcm")) as ws:
            await ws.send(
                json.dumps({"event": "start", "sample_rate_hz": rate, "call_id": "pcm-1"})
            )
            turn = np.concatenate([voiced(0.6, rate), silence(0.8, rate)])
            frame = rate // 50
            for i in range(0, len(turn), frame):
                await ws.send(pcm16_to_bytes(turn[i : i + frame]))
                await asyncio.sleep(0.004)
            received = bytearray()
            mark = None
            while mark is None:
                message = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(message, bytes):
                    received += message
                else:
                    mark = json.loads(message)
            assert mark["event"] == "mark"
            await ws.send(json.dumps({"event": "mark", "name": mark["name"]}))
            await ws.send(json.dumps({"event": "stop"}))
            assert (await closed_with(ws))[0] == 1000
    # The echo is the caller's turn at the call's own rate, in 20 ms frames.
    assert len(received) % (2 * frame) == 0
    assert len(received) // 2 >= 0.6 * rate


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        pytest.param([json.dumps({"event": "start", "sample_rate_hz": 11025})], 4415, id="rate"),
        pytest.param([b"\x00\x00" * 160], 4409, id="audio-before-start"),
        pytest.param(
            [json.dumps({"event": "start", "sample_rate_hz": 8000}), b"\x00" * 161], 1007, id="odd"
        ),
        pytest.param(
            [json.dumps({"event": "start", "sample_rate_hz": 8000}), '{"event": "dance"}'],
            4400,
            id="unknown",
        ),
    ],
)
async def test_bad_pcm_input(messages: list[Any], code: int) -> None:
    async with running_server(EchoSession) as server, connect(url(server, "/pcm")) as ws:
        for message in messages:
            await ws.send(message)
        assert (await closed_with(ws))[0] == code


async def test_pcm_switched_off_answers_404_and_twilio_still_serves() -> None:
    async with running_server(EchoSession, server={"pcm_enabled": False}) as server:
        with pytest.raises(InvalidStatus) as info:
            async with connect(url(server, "/pcm")):
                pass
        assert info.value.response.status_code == 404
        async with connect(url(server, "/twilio")) as ws:
            await ws.send(start_message())
            await ws.send(media_message(base64.b64encode(b"\xff" * 160).decode()))


async def test_sockets_that_never_start_hold_no_call_slot() -> None:
    """Idle sockets wait for their start outside the calls' slots (and are bounded on
    their own): a real call still gets through, the next idle one gets 1013."""
    cfg = {"max_calls": 1, "max_waiting": 2, "start_timeout_s": 5.0}
    async with running_server(EchoSession, server=cfg) as server:
        async with connect(url(server)) as idle1, connect(url(server)) as idle2:
            for _ in range(100):
                if server.waiting == 2:
                    break
                await asyncio.sleep(0.02)
            async with connect(url(server)) as third:
                code, reason = await closed_with(third)
            assert code == 1013 and "waiting to start" in reason
            assert server.active_calls == 0 and not idle1.close_code and not idle2.close_code
        summary, _ = await simulate_call(url(server), voiced(0.2), 8000, max_tail_s=0.3)
        assert summary.close_code == 1000


async def test_behind_a_local_proxy_each_callers_address_is_capped_on_its_own() -> None:
    """Through nginx every connection comes from 127.0.0.1; the cap per address applies
    to the address the proxy put in X-Forwarded-For, and a client's own forged entry to
    its left changes nothing."""
    cfg = {"max_per_address": 1, "start_timeout_s": 5.0}
    async with running_server(EchoSession, server=cfg) as server:
        first = {"X-Forwarded-For": "203.0.113.9"}
        forged = {"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}
        async with connect(url(server), additional_headers=first) as held:
            for _ in range(100):
                if server.waiting == 1:
                    break
                await asyncio.sleep(0.02)
            async with connect(url(server), additional_headers=forged) as same:
                code, reason = await closed_with(same)
            assert code == 1013 and "203.0.113.9" in reason
            other = {"X-Forwarded-For": "198.51.100.1"}
            summary, _ = await simulate_call(url(server), voiced(0.2), 8000, max_tail_s=0.3,
                                             headers=other)  # fmt: skip
            assert summary.close_code == 1000 and not held.close_code


async def test_audio_faster_than_real_time_is_closed_with_4429() -> None:
    """A phone line delivers audio in real time; a client flooding it (1 s frames as fast
    as TCP takes them) would starve the other calls' recognition."""
    async with running_server(EchoSession) as server:
        async with connect(url(server, "/pcm")) as flood:
            await flood.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            second = pcm16_to_bytes(voiced(1.0, 16000))
            for _ in range(5):
                try:
                    await flood.send(second)
                except ConnectionClosed:
                    break
            code, reason = await closed_with(flood)
        assert code == 4429 and "ahead of real time" in reason
        summary, _ = await simulate_call(url(server), voiced(0.2), 8000, max_tail_s=0.3)
        assert summary.close_code == 1000  # a real-time caller is served as before
