"""`voice-agent serve` (the real pipeline, espeak voices) stops cleanly on SIGTERM, and on
SIGINT when it was started with SIGINT ignored (as a non-interactive shell starts a
background job), while calls are in progress: with no drain time each call is closed with
1001, the turn records are whole, and the process exits 0. With drain time (the default)
the call in progress goes on to its end and no new call is taken; a second signal stops
the draining."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from scripts.calls import ServerProcess, place_calls
from tests.integration.test_server import closed_with
from tests.integration.test_server_health import echo_turn, until_mark
from voice_agent.speech import EspeakSynthesizer
from voice_agent.transports.errors import CloseCode
from voice_agent.turn_record import read_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

IGNORING_SIGINT = ("sh", "-c", 'trap "" INT; exec "$@"', "sh")
"""Execs the server with SIGINT ignored, which Python and asyncio.run then leave alone."""
SCRIPTS = (
    ("When are you open on Saturday?", "And on Sunday?"),
    ("Do you sell bike locks?", "What about a cable lock?"),
    ("How much is a brake check?", "Thanks, bye."),
)
SECOND_LINE_AFTER_S = 30.0
"""Long enough that every call is still in progress when the signal is sent."""
FIRST_RECORD_S = 60.0
SHUTDOWN_S = 15.0
"""Above the server's own bounds on winding a call down (hang-up grace, close)."""


def has_record(path: Path) -> bool:
    return path.exists() and bool(path.read_text().strip())


async def first_record(path: Path) -> None:
    """Until the server has answered a turn (the calls are under way)."""
    async with asyncio.timeout(FIRST_RECORD_S):
        while not has_record(path):  # a few bytes, read rarely
            await asyncio.sleep(0.1)


async def test_serve_stops_cleanly_with_calls_in_progress(tmp_path: Path) -> None:
    signum, launcher = signal.SIGTERM, ()
    config = tmp_path / "espeak.toml"
    config.write_text('[models]\ntts_backend = "espeak"\n[server]\ndrain_timeout_s = 0\n')
    server = ServerProcess(tmp_path, config=config, launcher=launcher)
    await server.start()
    calls = asyncio.create_task(
        place_calls(server.twilio_url, SCRIPTS, EspeakSynthesizer(), stagger_s=0.3,
                    max_tail_s=4.0, first_gap_s=1.0, gap_s=SECOND_LINE_AFTER_S)
    )  # fmt: skip
    try:
        await first_record(server.records)
        assert server.proc is not None
        server.proc.send_signal(signum)
        code = await asyncio.wait_for(server.proc.wait(), SHUTDOWN_S)
        results = await calls
    finally:
        await server.stop()
        calls.cancel()
    output = "".join(server.output[-20:])
    assert code == 0, output
    assert f"{signum.name}: stopping" in output and "Traceback" not in output
    assert [r.error for r in results] == ["", "", ""]
    assert [r.summary.close_code for r in results if r.summary] == [CloseCode.GOING_AWAY] * 3
    assert read_jsonl(server.records)  # whole lines only, the answered turns among them


async def test_sigint_stops_serve_when_it_was_started_with_sigint_ignored(
    tmp_path: Path,
) -> None:
    """A background job of a non-interactive shell inherits SIGINT ignored; `serve` still
    stops on it (the echo stand-in: the signal handling is the same for the pipeline)."""
    server = ServerProcess(tmp_path, echo=True, launcher=IGNORING_SIGINT,
                           env={"VOICE_AGENT_SERVER__DRAIN_TIMEOUT_S": "0"})  # fmt: skip
    await server.start()
    try:
        assert server.proc is not None
        async with connect(server.url + "/pcm") as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            assert await until_mark(ws) > 0  # the greeting: the call is in progress
            server.proc.send_signal(signal.SIGINT)
            assert (await closed_with(ws))[0] == CloseCode.GOING_AWAY
            code = await asyncio.wait_for(server.proc.wait(), SHUTDOWN_S)
    finally:
        await server.stop()
    output = "".join(server.output)
    assert code == 0 and "SIGINT: stopping" in output and "Traceback" not in output, output


async def test_sigterm_drains_a_call_in_progress_and_a_second_signal_stops(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path, echo=True)
    await server.start()
    try:
        assert server.proc is not None
        async with connect(server.url + "/pcm") as first, connect(server.url + "/pcm") as second:
            for ws in (first, second):
                await ws.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
                assert await until_mark(ws) > 0  # the greeting
                assert await echo_turn(ws) > 0
            server.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)
            with pytest.raises(InvalidStatus):  # no new call while draining
                async with connect(server.url + "/pcm"):
                    pass
            assert await echo_turn(first) > 0  # the calls in progress go on
            await first.send(json.dumps({"event": "stop"}))
            assert (await closed_with(first))[0] == 1000
            assert server.proc.returncode is None  # the second call still holds it
            server.proc.send_signal(signal.SIGTERM)  # the second signal: stop now
            assert (await closed_with(second))[0] == CloseCode.GOING_AWAY
            code = await asyncio.wait_for(server.proc.wait(), SHUTDOWN_S)
    finally:
        await server.stop()
    output = "".join(server.output)
    assert code == 0 and "draining: 2 calls" in output and "second signal" in output, output
