"""Calls through the real pipeline over a loopback websocket.

Real Whisper tiny.en, the real engine on the available checkpoint, espeak-ng for both
the caller's lines and the agent's voice (fast on a shared 2-core CPU), a real SQLite
shop in tmp_path. The brain may be weak, so nothing here judges the words of a reply or
which tool was chosen; what is checked are the mechanics: the greeting, a non-silent
reply timed from the end of the caller's speech, one turn record per turn, barge-in
clearing the audio and trimming the history to what was heard, and no tool effects from
a discarded generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect

from tests.fakes import settings, silence, url
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.results import ToolResult
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.agent import DegradeKind, ReplyKind, ToolOutcome
from voice_agent.agent.tools import RunTool
from voice_agent.audio import pcm16_to_bytes, resample, rms_dbfs
from voice_agent.dialogue.format import AgentSay
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import Pcm16
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.simulator import REPLY_DBFS, simulate_call
from voice_agent.speech import EspeakSynthesizer, Synthesizer
from voice_agent.speech.stream import WORKER_THREAD_PREFIX
from voice_agent.transports.call import CallSession
from voice_agent.transports.server import VoiceServer
from voice_agent.turn_record import Stage, read_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RATE_HZ = 8000
FRAME = 160
WORKERS = (WORKER_THREAD_PREFIX, "asr", "engine")


def spoken(*parts: tuple[float, str]) -> Pcm16:
    """Caller audio at 8 kHz: for each part, that much silence, then the line (espeak)."""
    voice = EspeakSynthesizer()
    audio: list[Pcm16] = []
    for gap_s, line in parts:
        audio += [silence(gap_s), resample(voice.synthesize(line), voice.sample_rate_hz, RATE_HZ)]
    audio.append(silence(0.3))
    return np.concatenate(audio)


def loud_ms(reply: Pcm16, start_ms: int, end_ms: int) -> int:
    frames = reply[start_ms * 8 : end_ms * 8]
    frames = frames[: len(frames) // FRAME * FRAME].reshape(-1, FRAME)
    return 20 * sum(rms_dbfs(f) > REPLY_DBFS for f in frames)


def bookings(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM bookings").fetchone()[0])


GENEROUS_BUDGETS = {"turn_ms": 20_000, "engine_ms": 10_000, "asr_final_ms": 5_000}
"""Budgets no busy CI machine overruns, for tests of what a call does rather than of the
gating (which has its own tests): answers come from final transcripts and every step."""


@contextlib.asynccontextmanager
async def pipeline_server(
    tmp_path: Path,
    synthesizer: Synthesizer | None = None,
    run_tool: RunTool = call_tool,
    shop_now: Callable[[], datetime] = datetime.now,
    budgets: Mapping[str, int] | None = None,
    **pipeline: Any,
) -> AsyncIterator[tuple[VoiceServer, list[PipelineSession]]]:
    """A loopback server whose calls go through a real pipeline; yields the sessions.
    `shop_now`: the shop's wall clock; `budgets`: `[budgets]` settings; `pipeline`: more
    `[pipeline]` settings."""
    cfg = settings(
        budgets=dict(budgets or {}),
        models={"tts_backend": "espeak"},
        pipeline={
            "records": tmp_path / "turns.jsonl",
            "shop_db": tmp_path / "shop.sqlite",
            **pipeline,
        },
    )
    sessions: list[PipelineSession] = []
    async with Pipeline(
        cfg, synthesizer=synthesizer, run_tool=run_tool, shop_now=shop_now
    ) as pipeline:

        def factory() -> CallSession:
            sessions.append(pipeline.new_session())
            return sessions[-1]

        async with VoiceServer(cfg, factory) as server:
            yield server, sessions


async def test_a_caller_turn_gets_a_timed_spoken_reply_and_a_record(tmp_path: Path) -> None:
    caller = spoken((5.0, "When do you open on Saturday?"))
    async with pipeline_server(tmp_path) as (server, sessions):
        summary, reply = await simulate_call(
            url(server), caller, RATE_HZ, idle_after_reply_s=1.0, max_tail_s=10.0
        )
    assert server.calls[-1].close_code == 1000  # recorded once the session has ended
    # Nothing outlives the call and the pipeline: no task, no worker thread.
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for _ in range(50):
        workers = [t.name for t in threading.enumerate() if t.name.startswith(WORKERS)]
        if not workers:
            break
        await asyncio.sleep(0.1)
    assert not workers

    assert summary.turns == 1 and len(sessions) == 1
    session = sessions[0]
    # The greeting played before the caller spoke.
    assert loud_ms(reply, 0, summary.turn_end_ms[0] - 2000) > 1000
    assert session.greeting and isinstance(session.agent.turns[0], AgentSay)
    # The turn was answered with speech, timed from the end of the caller's speech.
    first_reply_ms = summary.first_reply_ms[0]
    assert first_reply_ms is not None and 0 < first_reply_ms < 10_000
    assert loud_ms(reply, summary.turn_end_ms[0], summary.duration_ms) > 300
    assert len(session.turns) == 1
    turn = session.turns[0]
    assert turn.caller_text and turn.agent_text and turn.reply is not None
    assert not turn.interrupted and not turn.failed
    for call in turn.tool_calls:  # whatever the model chose, it validated and ran
        ARGUMENT_MODELS[call.tool].model_validate(call.arguments)
        assert call.outcome in (ToolOutcome.OK, ToolOutcome.REFUSED)
    # One JSON line for the one turn, with the stage timings of a whole turn.
    records = read_jsonl(tmp_path / "turns.jsonl")
    assert len(records) == 1
    record = records[0]
    assert record.turn == 1 and record.call_id == summary.call_sid
    for stage in (Stage.END_OF_TURN, Stage.ASR_FINAL, Stage.ENGINE, Stage.TURN):
        took = record.duration_ms(stage)
        assert took is not None and took >= 0, stage
    assert record.duration_ms(Stage.TTS_FIRST_AUDIO) is not None
    # The simulated caller heard the first reply frame about when the server sent it.
    sent_ms = record.first_audio_sent_at_ms
    assert sent_ms is not None and abs(first_reply_ms - sent_ms) < 600


async def test_barge_in_clears_the_audio_and_keeps_only_what_was_heard(tmp_path: Path) -> None:
    # A slow agent voice: the greeting (and any reply) lasts long enough to be talked over.
    slow = EspeakSynthesizer(words_per_minute=90)
    caller = spoken(
        (1.5, "Hello? When do you open on Saturday?"),  # over the greeting
        (3.5, "Actually, I would like to book a tune-up for tomorrow."),  # over the reply
    )
    async with pipeline_server(tmp_path, slow) as (server, sessions):
        seeded = bookings(tmp_path / "shop.sqlite")
        summary, _ = await simulate_call(
            url(server), caller, RATE_HZ, idle_after_reply_s=1.0, max_tail_s=8.0
        )
    session = sessions[0]
    assert summary.clears_received >= 1
    # The history keeps only the part of the greeting the caller heard before talking.
    heard_greeting = session.agent.turns[0]
    assert isinstance(heard_greeting, AgentSay)
    assert len(heard_greeting.text) < len(session.greeting)
    assert session.greeting.startswith(heard_greeting.text.split()[0])
    # Every turn left a record, interrupted or not.
    assert len(read_jsonl(tmp_path / "turns.jsonl")) == len(session.turns) >= 1
    # Tools: only calls that really ran may have written; a discarded one never did.
    calls = [c for t in session.turns for c in t.tool_calls] + list(session.agent.tools.records)
    booked = {
        (c.tool, str(c.arguments))
        for c in calls
        if c.tool == "book_service" and c.outcome in (ToolOutcome.OK, ToolOutcome.RAN_CANCELLED)
    }
    assert bookings(tmp_path / "shop.sqlite") - seeded == len(booked)


async def test_a_tool_that_hangs_past_its_timeout_gets_an_apology_and_the_call_goes_on(
    tmp_path: Path,
) -> None:
    release, hung = threading.Event(), []

    def first_call_hangs(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
        if not hung:  # the first tool call hangs well past its 2 s timeout, then fails
            hung.append(name)
            release.wait(8.0)
            raise RuntimeError("the back office never answered")
        return call_tool(name, args, ctx)

    caller = spoken(
        (5.0, "When are you open on Saturday?"),  # one sentence: one turn
        (7.0, "Okay. And when are you open on Sunday?"),
    )
    # The tool's fate is under test, not the model's: trust its answers (min_confidence 0)
    # under budgets no busy machine overruns (a CI run cut short once answered the first
    # line without a tool).
    try:
        async with pipeline_server(
            tmp_path, run_tool=first_call_hangs, budgets=GENEROUS_BUDGETS, min_confidence=0.0
        ) as (server, sessions):
            summary, reply = await simulate_call(
                url(server), caller, RATE_HZ, idle_after_reply_s=1.0, max_tail_s=10.0
            )
    finally:
        release.set()
    assert server.calls[-1].close_code == 1000
    said = [
        (t.caller_text, t.agent_text, [c.tool for c in t.tool_calls]) for t in sessions[0].turns
    ]
    first, second = sessions[0].turns[:2]
    assert hung and first.tool_calls, f"no tool for the first question: {said}"
    [timed_out] = first.tool_calls
    assert timed_out.tool == hung[0] and timed_out.outcome is ToolOutcome.TIMEOUT
    assert first.reply is not None and first.reply.kind is ReplyKind.FALLBACK
    assert DegradeKind.TOOL_TIMEOUT in [d.kind for d in first.reply.degrades]
    assert first.agent_text == phrases().tool_failed
    # The caller heard the apology before their next line, and the next line was answered.
    assert loud_ms(reply, summary.turn_end_ms[0], summary.turn_end_ms[1] - 3000) > 500
    assert second.reply is not None and second.agent_text and not second.failed
    assert loud_ms(reply, summary.turn_end_ms[1], summary.duration_ms) > 300
    records = read_jsonl(tmp_path / "turns.jsonl")
    assert [c.outcome.value for c in records[0].tool_calls] == ["timeout"]


async def test_a_pcm_caller_at_16_khz_is_heard_and_answered_at_its_own_rate(
    tmp_path: Path,
) -> None:
    rate, frame = 16000, 320  # 20 ms frames of PCM16LE, sent at real time
    voice = EspeakSynthesizer()
    line = resample(voice.synthesize("When do you open on Saturday?"), voice.sample_rate_hz, rate)
    caller = np.concatenate([silence(4.0, rate), line, silence(6.0, rate)])
    speech_end_s = (4.0 * rate + len(line)) / rate
    received: list[tuple[float, bytes]] = []  # (seconds into the call, audio)
    async with pipeline_server(tmp_path) as (server, sessions):
        async with connect(url(server, "/pcm")) as ws:
            await ws.send(json.dumps({"event": "start", "sample_rate_hz": rate}))
            start = time.monotonic()

            async def listen() -> None:
                async for message in ws:
                    if isinstance(message, bytes):
                        received.append((time.monotonic() - start, message))
                    elif (event := json.loads(message))["event"] == "mark":
                        await ws.send(json.dumps({"event": "mark", "name": event["name"]}))

            listening = asyncio.create_task(listen())
            for k, i in enumerate(range(0, len(caller), frame)):
                await ws.send(pcm16_to_bytes(caller[i : i + frame]))
                await asyncio.sleep(max(0.0, start + (k + 1) * 0.02 - time.monotonic()))
            await ws.send(json.dumps({"event": "stop"}))
            await asyncio.wait_for(listening, 10.0)
    [session] = sessions
    [turn] = session.turns
    assert turn.caller_text and turn.reply is not None and turn.agent_text
    # Reply audio at the caller's rate (whole 16-bit samples) after the end of the speech.
    after = b"".join(chunk for t, chunk in received if t > speech_end_s)
    samples = np.frombuffer(after, "<i2")
    assert len(after) % 2 == 0 and len(samples) > 0.3 * rate
    assert rms_dbfs(samples) > REPLY_DBFS
    [record] = read_jsonl(tmp_path / "turns.jsonl")
    assert record.duration_ms(Stage.TURN) is not None
