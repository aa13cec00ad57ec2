"""Faults in real calls: the real pipeline over a loopback websocket (see
test_pipeline_call.py for the parts: Whisper tiny.en, the real engine, espeak voices).

Two callers at once on one server whose telemetry broker is down from the start (its URL
points at a closed loopback port). One caller hangs up while the agent's reply is being
spoken; the other is answered as if nothing happened. Nothing of the first call is left
running, both turns are recorded, and the broker's absence costs the calls nothing.
(The hang-up is the simulated client's task being cancelled: websockets then closes with
1011, which the server records as it went on the wire.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes import settings, url
from tests.mqtt_broker import free_port
from voice_agent.config import Settings
from voice_agent.events import Pcm16
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.simulator import CallSummary, simulate_call
from voice_agent.transports.call import CallSession
from voice_agent.transports.server import VoiceServer
from voice_agent.turn_record import read_jsonl

from .test_pipeline_call import RATE_HZ, WORKERS, loud_ms, spoken

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HANGS_UP = "+15550000001"
STAYS = "+15550000002"


@contextlib.asynccontextmanager
async def server_without_broker(
    tmp_path: Path,
) -> AsyncIterator[tuple[VoiceServer, Pipeline, list[PipelineSession]]]:
    """A loopback server on a real pipeline whose `[telemetry] broker_url` is a closed
    port; yields the server, the pipeline and the sessions."""
    cfg = settings(
        models={"tts_backend": "espeak"},
        pipeline={"records": tmp_path / "turns.jsonl", "shop_db": tmp_path / "shop.sqlite"},
        telemetry={"broker_url": f"mqtt://127.0.0.1:{free_port()}", "node": "faults"},
    )
    async with serving(cfg) as served:
        yield served


@contextlib.asynccontextmanager
async def serving(
    cfg: Settings,
) -> AsyncIterator[tuple[VoiceServer, Pipeline, list[PipelineSession]]]:
    """A loopback server on a real pipeline built from `cfg`; yields the server, the
    pipeline and the sessions it made, one per call."""
    sessions: list[PipelineSession] = []
    async with Pipeline(cfg) as pipeline:

        def factory() -> CallSession:
            sessions.append(pipeline.new_session())
            return sessions[-1]

        async with VoiceServer(cfg, factory) as server:
            yield server, pipeline, sessions


def dial(
    server: VoiceServer, caller: Pcm16, number: str, max_tail_s: float
) -> asyncio.Task[tuple[CallSummary, Pcm16]]:
    """A simulated call from `number` (the `caller` parameter names it to the session)."""
    call = simulate_call(url(server), caller, RATE_HZ, parameters={"caller": number},
                         idle_after_reply_s=1.0, max_tail_s=max_tail_s)  # fmt: skip
    return asyncio.create_task(call)


def session_of(sessions: list[PipelineSession], number: str) -> PipelineSession | None:
    return next((s for s in sessions if s.agent.tools.caller == f"phone:{number}"), None)


def replying(session: PipelineSession | None) -> bool:
    """The agent's reply to a caller turn is queued or on the air."""
    if session is None or session._reply_task is None:
        return False
    return bool(session.voice.line) and session.voice.speaking


async def test_one_caller_hangs_up_mid_reply_the_other_is_answered_with_the_broker_down(
    tmp_path: Path,
) -> None:
    first = spoken((1.5, "When do you open on Saturday?"))
    second = spoken((3.5, "Do you have front lights?"))
    async with server_without_broker(tmp_path) as (server, pipeline, sessions):
        gone = dial(server, first, HANGS_UP, max_tail_s=15.0)
        stays = dial(server, second, STAYS, max_tail_s=10.0)
        async with asyncio.timeout(60):
            while not replying(session_of(sessions, HANGS_UP)):
                assert not gone.done(), "the first call ended before its reply was spoken"
                await asyncio.sleep(0.02)
        gone.cancel()  # the caller hangs up: the client closes its websocket
        await asyncio.gather(gone, return_exceptions=True)
        summary, reply = await stays
        async with asyncio.timeout(10):
            while len(server.calls) < 2:  # the hung-up call's session has returned
                await asyncio.sleep(0.05)
        publisher = pipeline._publisher
        assert publisher is not None
        stats = publisher.stats
        health = pipeline.health()  # a broker down does not make the worker unhealthy
        assert health["alive"] and health["database_writable"]
        assert health["broker_connected"] is False
        assert health["engine"] == {"alive": True, "crashes": 0, "queue_depth": 0}
    # The broker was never there and nobody waited for it.
    assert stats.connections == 0 and stats.delivered == 0 and stats.accepted > 0
    # Nothing of either call outlives the pipeline: no task, no worker thread.
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for _ in range(50):
        workers = [t.name for t in threading.enumerate() if t.name.startswith(WORKERS)]
        if not workers:
            break
        await asyncio.sleep(0.1)
    assert not workers

    hung_up, answered = session_of(sessions, HANGS_UP), session_of(sessions, STAYS)
    assert hung_up is not None and answered is not None
    # The hung-up call: its one turn started and was recorded, whether cut or complete.
    assert len(hung_up.turns) == 1
    # The other call: answered with speech after the caller's turn, as usual.
    assert summary.turns == 1 and len(answered.turns) == 1
    turn = answered.turns[0]
    assert turn.reply is not None and not turn.failed and not turn.interrupted
    assert loud_ms(reply, summary.turn_end_ms[0], summary.duration_ms) > 300
    closed = {c.call_id: c.close_code for c in server.calls}
    assert closed[summary.call_sid] == 1000 and hung_up._call_id in closed
    records = read_jsonl(tmp_path / "turns.jsonl")
    assert sorted(r.call_id for r in records) == sorted(
        s._call_id for s in (hung_up, answered)
    )  # one line per turn, each call's own
    assert all(r.concurrent_calls is not None and r.concurrent_calls >= 1 for r in records)
