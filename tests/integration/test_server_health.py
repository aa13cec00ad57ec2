"""Health over HTTP on the server's own port: `/healthz` for a supervisor (is the process
able to serve), `/readyz` for a load balancer (can it take one more call), and draining
(no new calls, the ones in progress finish). Real server
on loopback, a real SQLite shop for the database check."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from scripts.services import sqlite_write_lock
from tests.fakes import settings, silence, url, voiced
from tests.integration.test_server import closed_with, start_message
from tools.bike_shop.shop import open_shop
from voice_agent.audio import pcm16_to_bytes
from voice_agent.echo import EchoSession
from voice_agent.transports.server import VoiceServer

pytestmark = pytest.mark.integration


def get(server: VoiceServer, path: str) -> tuple[int, dict[str, Any]]:
    address = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(address, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_health_and_readiness_follow_the_process_and_its_capacity() -> None:
    state: dict[str, object] = {"alive": True, "engine": {"alive": True, "crashes": 0}}
    server = VoiceServer(settings(server={"max_calls": 1}), EchoSession, health=lambda: state)
    async with server:
        assert await asyncio.to_thread(get, server, "/healthz") == (200, {
            **state, "calls": 0, "max_calls": 1, "stopping": False})  # fmt: skip
        assert (await asyncio.to_thread(get, server, "/readyz"))[0] == 200
        async with connect(url(server, "/twilio")) as ws:  # the one call slot taken
            await ws.send(start_message())
            for _ in range(100):
                if server.active_calls:
                    break
                await asyncio.sleep(0.02)
            code, body = await asyncio.to_thread(get, server, "/readyz")
            assert code == 503 and body["calls"] == 1
            assert (await asyncio.to_thread(get, server, "/healthz"))[0] == 200
        state["alive"] = False  # the engine died, say
        assert (await asyncio.to_thread(get, server, "/healthz"))[0] == 503
        assert (await asyncio.to_thread(get, server, "/readyz"))[0] == 503


def test_the_database_is_not_writable_while_an_outside_process_holds_its_lock(
    tmp_path: Path,
) -> None:
    db = open_shop(tmp_path / "shop.sqlite", date(2026, 12, 8))
    assert db.writable()
    with sqlite_write_lock(tmp_path / "shop.sqlite"):
        assert not db.writable()
    assert db.writable()
    db.close()


def test_the_health_checks_busy_waits_match_their_names() -> None:
    from tools.bike_shop import db

    assert f"PRAGMA busy_timeout = {round(db.BUSY_TIMEOUT_S * 1000)}" == db._BUSY_NORMAL
    assert f"PRAGMA busy_timeout = {round(db.HEALTH_WAIT_S * 1000)}" == db._BUSY_SHORT
    assert db.BUSY_TIMEOUT_S < 2.0  # under the database tools' timeout (pack.DB_TIMEOUT_S)


async def echo_turn(ws: ClientConnection, rate: int = 16000) -> int:
    """Speak one short turn on /pcm and read the echo up to its mark: bytes echoed."""
    turn = np.concatenate([voiced(0.5, rate), silence(0.8, rate)])
    frame = rate // 50
    for i in range(0, len(turn), frame):
        await ws.send(pcm16_to_bytes(turn[i : i + frame]))
        await asyncio.sleep(0.004)
    return await until_mark(ws)


async def until_mark(ws: ClientConnection) -> int:
    """Read the server's audio up to its next mark, acknowledge the mark: bytes read."""
    received = 0
    while True:
        message = await asyncio.wait_for(ws.recv(), 5)
        if isinstance(message, bytes):
            received += len(message)
            continue
        event = json.loads(message)
        if event["event"] == "mark":
            await ws.send(json.dumps({"event": "mark", "name": event["name"]}))
            return received


async def test_a_draining_server_finishes_its_calls_and_takes_no_new_one() -> None:
    server = VoiceServer(settings(), lambda: EchoSession(greet=False))
    async with server:
        async with connect(url(server, "/pcm")) as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            assert await echo_turn(ws) > 0
            drain = asyncio.create_task(server.drain(timeout_s=30))
            await asyncio.sleep(0.05)
            code, body = await asyncio.to_thread(get, server, "/readyz")
            assert code == 503 and body["stopping"] and body["calls"] == 1
            assert (await asyncio.to_thread(get, server, "/healthz"))[0] == 200
            for path in ("/pcm", "/twilio"):  # a balancer retries these elsewhere
                with pytest.raises(InvalidStatus) as refused:
                    async with connect(url(server, path)):
                        pass
                assert refused.value.response.status_code == 503
            assert await echo_turn(ws) > 0  # the call in progress goes on
            assert not drain.done()
            await ws.send(json.dumps({"event": "stop"}))
            assert await asyncio.wait_for(drain, 5) == 0


async def test_a_drain_that_runs_out_of_time_leaves_the_call_for_close() -> None:
    server = VoiceServer(settings(), lambda: EchoSession(greet=False))
    async with server:
        async with connect(url(server, "/pcm")) as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            assert await echo_turn(ws) > 0
            assert await server.drain(timeout_s=0.3) == 1
            await server.close()
            assert (await closed_with(ws))[0] == 1001
