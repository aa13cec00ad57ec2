"""Authentication before any pipeline work, on a real server on loopback.

A refused caller never gets a session: the session factory (where the pipeline builds a
call's agent, listener and voice) is not called for a missing or wrong `/pcm` secret, a
missing or bad `X-Twilio-Signature`, or a missing or wrong Twilio stream token. Every
comparison of a presented secret goes through `hmac.compare_digest`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Callable
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.fakes import running_server, silence, url
from tests.fuzz import twilio_start
from voice_agent.events import CallStarted
from voice_agent.simulator import simulate_call
from voice_agent.transports.auth import secret_matches, twilio_signature, twilio_signature_valid
from voice_agent.transports.call import Inbound
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.player import AudioPlayer
from voice_agent.transports.twilio import TwilioCodec

pytestmark = pytest.mark.integration

PUBLIC = "wss://agent.example.com"
AUTH_TOKEN = "twilio-auth-token"


class Counting:
    """A session factory that counts the sessions it was asked for."""

    def __init__(self) -> None:
        self.sessions = 0

    def __call__(self) -> Counting:
        self.sessions += 1
        return self

    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        async for _ in inbound:
            pass


async def refused_status(address: str, headers: dict[str, str] | None = None) -> int:
    with pytest.raises(InvalidStatus) as info:
        async with connect(address, additional_headers=headers or {}):
            pass
    return info.value.response.status_code


async def test_no_session_without_the_pcm_secret() -> None:
    factory = Counting()
    async with running_server(factory, auth={"pcm_secret": "s3cret"}) as server:
        pcm = url(server, "/pcm")
        for headers in ({}, {"Authorization": "Bearer s3cre"}, {"Authorization": "Bearer s3cret2"}):
            assert await refused_status(pcm, headers) == 401
        assert await refused_status(pcm + "?token=wrong") == 401
        assert await refused_status(pcm + "?token=s3cr%C3%A9t") == 401  # non-ASCII
        assert factory.sessions == 0 and server.active_calls == 0 and not server.calls
        async with connect(pcm + "?token=s3cret") as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            await ws.send(json.dumps({"event": "stop"}))
            with pytest.raises(ConnectionClosed):
                await ws.recv()
    assert factory.sessions == 1


async def test_no_session_without_a_valid_twilio_signature() -> None:
    factory = Counting()
    async with running_server(
        factory, auth={"twilio_auth_token": AUTH_TOKEN}, server={"public_url": PUBLIC}
    ) as server:
        good = twilio_signature(AUTH_TOKEN, PUBLIC + "/twilio")
        for headers in (
            {},
            {"X-Twilio-Signature": ""},
            {"X-Twilio-Signature": twilio_signature("other-token", PUBLIC + "/twilio")},
            {"X-Twilio-Signature": twilio_signature(AUTH_TOKEN, PUBLIC + "/twilio?x=1")},
            {"X-Twilio-Signature": good.lower()},
        ):
            assert await refused_status(url(server), headers) == 403
        assert factory.sessions == 0 and not server.calls
        summary, _ = await simulate_call(
            url(server), silence(0.1), 8000, max_tail_s=0.2, headers={"X-Twilio-Signature": good}
        )
    assert summary.close_code == 1000 and factory.sessions == 1


@pytest.mark.parametrize("token", [None, "", "wrong", "tok ", "tok\u00e9"])
async def test_no_session_without_the_right_stream_token(token: str | None) -> None:
    factory = Counting()
    async with running_server(factory, auth={"twilio_stream_token": "tok"}) as server:
        start = twilio_start()
        if token is not None:
            start["start"]["customParameters"] = {"token": token}
        async with connect(url(server)) as ws:
            await ws.send(json.dumps(start))
            with pytest.raises(ConnectionClosed):
                await ws.recv()
        assert ws.close_code == CloseCode.UNAUTHORIZED
        for _ in range(100):  # recorded once the server's side of the close is done
            if server.calls:
                break
            await asyncio.sleep(0.01)
        assert [c.close_code for c in server.calls] == [4401]
        assert factory.sessions == 0


# ----------------------------------------------------------------- timing-safe comparison


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Every hmac.compare_digest call's arguments (the real comparison still runs)."""
    calls: list[tuple[Any, Any]] = []
    real: Callable[[Any, Any], bool] = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    return calls


def test_the_pcm_secret_is_compared_in_constant_time(compared: list[tuple[Any, Any]]) -> None:
    assert secret_matches("s3cret", "s3cret")
    assert not secret_matches("s3cre", "s3cret")  # a prefix: no length short-cut by us
    assert not secret_matches("s3cr\u00e9t", "s3cret")  # non-ASCII: no TypeError
    assert not secret_matches(None, "s3cret")
    assert compared == [
        (b"s3cret", b"s3cret"),
        (b"s3cre", b"s3cret"),
        ("s3cr\u00e9t".encode(), b"s3cret"),
    ]


def test_the_twilio_signature_is_compared_in_constant_time(
    compared: list[tuple[Any, Any]],
) -> None:
    url_ = PUBLIC + "/twilio"
    good = twilio_signature(AUTH_TOKEN, url_)
    assert twilio_signature_valid(AUTH_TOKEN, url_, good)
    assert not twilio_signature_valid(AUTH_TOKEN, url_, good[:-1])
    assert not twilio_signature_valid(AUTH_TOKEN, url_, "\u00ff" * len(good))
    assert not twilio_signature_valid(AUTH_TOKEN, url_, None)
    assert len(compared) == 3 and all(expected == good.encode() for expected, _ in compared)


def test_the_stream_token_is_compared_in_constant_time(compared: list[tuple[Any, Any]]) -> None:
    start = twilio_start()
    start["start"]["customParameters"] = {"token": "tok-wrong"}
    with pytest.raises(ProtocolError) as info:
        TwilioCodec(expected_token="tok").feed(json.dumps(start))
    assert info.value.code is CloseCode.UNAUTHORIZED
    assert compared == [(b"tok-wrong", b"tok")]
    assert "tok-wrong" not in info.value.reason  # the secret's guess is not echoed
