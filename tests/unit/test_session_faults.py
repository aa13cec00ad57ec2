"""Faults around one call's session: the caller hangs up mid-way, the engine fails.

A whole call runs through `PipelineSession.run` with the doubles of
test_pipeline_session.py (a real agent on a real SQLite shop, the scripted engine, the
real paced player on a fake clock). The caller hangs up the way the server tells the
session: the inbound stream ends (websocket closed) or carries `CallStopped`. Each hang-up
lands at a known point (the engine held, a tool blocked on an event, the wire blocked),
then `run()` is awaited and the aftermath checked: nothing left running, no tool effect
twice or from a discarded generation, a record for every turn that started.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.batching import EngineClosed
from engine.generate import Generation, Request
from engine.tokenizer import TextTokenizer
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK, call_tool
from tools.bike_shop.results import ToolResult
from tools.bike_shop.shop import open_shop
from voice_agent.agent import Agent, AgentConfig, EngineStalled, ToolOutcome
from voice_agent.agent.tools import RunTool
from voice_agent.dialogue.format import AgentCall, AgentSay, ToolResultTurn
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    OutboundEvent,
    Protocol,
    SendAudio,
)
from voice_agent.hearing.events import PausedTranscript, SpeechEnded
from voice_agent.transports.call import Inbound
from voice_agent.turn_record import DegradeAction
from voice_agent.turn_record import ToolOutcome as TrackedOutcome

from .test_agent import BOOKING, MONDAY_10AM, TOKENIZER, ScriptedEngine, bookings, call, say
from .test_pipeline_session import (
    RATE_HZ,
    Call,
    FakePipeline,
    HeldEngine,
    final,
)

PHRASES = phrases()
ENGINE_STALL_S = 0.2
"""The agent's engine grace in these tests (real seconds past the request's deadline)."""
RUN_TIMEOUT_S = 5.0
"""Bound on waiting for a session to return (a hang here is the failure under test)."""


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


class FaultPipeline(FakePipeline):
    """`FakePipeline` whose agents run `run_tool` under `tool_timeout_s`, on its clock."""

    def __init__(
        self,
        tok: TextTokenizer,
        shop: ShopContext,
        engine: Any,
        run_tool: RunTool = call_tool,
        tool_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(tok, shop, engine)
        self._run_tool = run_tool
        self._tool_timeout_s = tool_timeout_s

    def new_agent(self) -> Agent:
        config = AgentConfig(min_confidence=0.0, tool_timeout_s=self._tool_timeout_s,
                             engine_stall_s=ENGINE_STALL_S)  # fmt: skip
        return Agent(self.engine, self._tok, PACK, self._shop, config=config, run_tool=self._run_tool,
                     clock=self.clock)  # fmt: skip


class FailingEngine:
    """Fails its first request with `error` after a moment (the turn's deadline has come
    on the fake clock, so the filler is out); answers later ones from `inner`."""

    def __init__(self, inner: ScriptedEngine, error: BaseException) -> None:
        self.inner = inner
        self.error: BaseException | None = error

    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        if self.error is not None:
            error, self.error = self.error, None
            await asyncio.sleep(0.02)
            raise error
        async for item in self.inner.stream_result(request):
            yield item


class SlowWire(Call):
    """A call whose peer stops taking frames once `blocked` (the send never returns)."""

    def __init__(self, pipeline: FakePipeline, **kwargs: Any) -> None:
        super().__init__(pipeline, **kwargs)
        self.blocked = False
        self.unblocked = asyncio.Event()

    async def _send(self, event: OutboundEvent) -> None:
        if self.blocked:
            await self.unblocked.wait()
        await super()._send(event)


def blocking_tool(
    release: threading.Event, ran: list[str], error: Exception | None = None
) -> Callable[[str, Mapping[str, Any], ShopContext], ToolResult]:
    """A tool that waits for `release`, then does its work (or raises `error`); each
    finished run is appended to `ran`."""
    started = threading.Event()

    def run_tool(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
        started.set()
        release.wait(10)
        try:
            if error is not None:
                raise error
            return call_tool(name, args, ctx)
        finally:
            ran.append(name)

    run_tool.started = started  # type: ignore[attr-defined]
    return run_tool


async def dial(c: Call) -> tuple[Inbound, asyncio.Task[None]]:
    """Start the call; returns once the greeting is queued and audio flows in."""
    inbound = Inbound()
    start = CallStarted(Protocol.TWILIO, "CA1", "MZ1", RATE_HZ)
    running = asyncio.create_task(c.session.run(start, inbound, c.player))
    await inbound.put(AudioReceived(np.zeros(160, np.int16), RATE_HZ, 0, 1))
    await until(lambda: bool(c.session.greeting) and c.pipeline.listener.fed > 0)
    return inbound, running


async def until(condition: Callable[[], bool], limit_s: float = RUN_TIMEOUT_S) -> None:
    async with asyncio.timeout(limit_s):
        while not condition():
            await asyncio.sleep(0.005)


async def hang_up(c: Call, inbound: Inbound, running: asyncio.Task[None]) -> None:
    """The websocket closed: the inbound stream ends; the session must return by itself."""
    await inbound.end()
    await asyncio.wait_for(running, RUN_TIMEOUT_S)
    await c.close()


def assert_nothing_left_running() -> None:
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not leftover, leftover


def assert_call_ended(c: Call) -> None:
    p = c.pipeline
    assert p.call_events[0] == ("started", "CA1") and p.call_events[-1] == ("ended", "CA1")
    assert p.listener.closed


# ---------------------------------------------------------------- hang-ups


@pytest.mark.parametrize("how", ["socket closed", "stop message"])
async def test_hang_up_mid_utterance_while_a_draft_decodes_runs_nothing_and_records_nothing(
    tok: TextTokenizer, shop: ShopContext, how: str
) -> None:
    engine = HeldEngine(ScriptedEngine(tok, call(tok, "book_service", **BOOKING)))
    c = Call(FaultPipeline(tok, shop, engine), echo_marks=True)
    inbound, running = await dial(c)
    await until(lambda: not c.session.voice.speaking)  # the greeting was heard
    c.pipeline.listener.emit(PausedTranscript("book me a brake check wednesday at ten", 0, 900))
    await until(lambda: c.session._draft is not None)
    if how == "stop message":
        await inbound.put(CallStopped("MZ1"))
        await asyncio.wait_for(running, RUN_TIMEOUT_S)
        await c.close()
    else:
        await hang_up(c, inbound, running)
    assert_nothing_left_running()  # the draft's decoding was stopped, not left behind
    assert_call_ended(c)
    assert not c.session.turns and not c.pipeline.records  # no turn had started
    assert not c.session.agent.tools.records and bookings(shop) == []


async def test_hang_up_mid_engine_decode_records_the_interrupted_turn(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = HeldEngine(ScriptedEngine(tok, call(tok, "book_service", **BOOKING)))
    c = Call(FaultPipeline(tok, shop, engine))
    inbound, running = await dial(c)
    c.pipeline.listener.emit(SpeechEnded(0, 1000, 1400))
    c.pipeline.listener.emit(final("book me a brake check on wednesday at ten, ann lee"))
    await until(lambda: c.session._reply_task is not None)
    await asyncio.sleep(0.02)  # the engine is held: no answer yet
    await hang_up(c, inbound, running)
    assert_nothing_left_running()
    assert_call_ended(c)
    [turn] = c.session.turns
    assert turn.interrupted and turn.reply is None
    [record] = c.pipeline.records
    assert record.turn == 1 and record.call_id == "CA1"
    assert not c.session.agent.tools.records and bookings(shop) == []


async def test_hang_up_mid_tool_call_lets_the_tool_finish_once_and_speaks_nothing_of_it(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    release, ran = threading.Event(), list[str]()
    tool = blocking_tool(release, ran)
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Booked."))
    c = Call(FaultPipeline(tok, shop, engine, run_tool=tool))
    inbound, running = await dial(c)
    c.pipeline.listener.emit(final("book me a brake check on wednesday at ten, ann lee"))
    await until(tool.started.is_set)  # type: ignore[attr-defined]
    await inbound.end()
    await asyncio.sleep(0.05)
    assert not running.done()  # the call waits for the running tool: no half-done write
    release.set()
    await asyncio.wait_for(running, RUN_TIMEOUT_S)
    await c.close()
    assert ran == ["book_service"]  # the tool function finished, once
    assert_nothing_left_running()
    assert_call_ended(c)
    assert bookings(shop) == [("2025-06-04", "10:00", "brake check")]
    [tool_record] = c.session.agent.tools.records
    assert tool_record.outcome is ToolOutcome.RAN_CANCELLED
    assert len(engine.requests) == 1  # the model was not asked to talk about it
    [turn] = c.session.turns
    assert turn.interrupted and [t.outcome for t in turn.tool_calls] == [ToolOutcome.RAN_CANCELLED]
    [record] = c.pipeline.records
    assert [t.outcome for t in record.tool_calls] == [TrackedOutcome.RAN_CANCELLED]
    # The history keeps the booking that happened; nothing of it was said.
    assert isinstance(c.session.agent.turns[-2], AgentCall)
    assert isinstance(c.session.agent.turns[-1], ToolResultTurn)


async def test_hang_up_mid_tool_call_past_its_timeout_leaves_no_unretrieved_error(
    tok: TextTokenizer, shop: ShopContext, caplog: pytest.LogCaptureFixture
) -> None:
    release, ran = threading.Event(), list[str]()
    tool = blocking_tool(release, ran, RuntimeError("the back office fell over"))
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING))
    c = Call(FaultPipeline(tok, shop, engine, run_tool=tool, tool_timeout_s=0.1))
    inbound, running = await dial(c)
    c.pipeline.listener.emit(final("book me a brake check on wednesday at ten, ann lee"))
    await until(tool.started.is_set)  # type: ignore[attr-defined]
    await hang_up(c, inbound, running)  # returns at the tool's timeout, the tool still busy
    assert not ran
    release.set()  # the tool fails long after the call ended
    await until(lambda: bool(ran))
    await asyncio.sleep(0.05)  # its failure reaches the event loop
    gc.collect()
    assert "never retrieved" not in caplog.text
    assert "book_service failed after its turn stopped waiting" in caplog.text  # logged once
    assert_nothing_left_running()
    assert bookings(shop) == []
    [tool_record] = c.session.agent.tools.records
    assert tool_record.outcome is ToolOutcome.RAN_CANCELLED
    assert len(c.pipeline.records) == 1


async def test_hang_up_while_the_reply_waits_behind_the_filler_still_records_the_turn(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    line = "We open at nine."
    engine = HeldEngine(ScriptedEngine(tok, say(tok, line)))
    c = SlowWire(FaultPipeline(tok, shop, engine), echo_marks=True)
    inbound, running = await dial(c)
    await until(lambda: not c.session.voice.speaking)  # the greeting was heard
    c.blocked = True  # from now on the peer takes nothing: the filler's first frame hangs
    c.pipeline.listener.emit(final("when do you open"))
    await until(lambda: c.session.voice.speaking)  # the filler, at the turn's deadline
    engine.gate.set()
    await until(lambda: c.session.agent.turns[-1] == AgentSay(line))  # the answer is out...
    task = c.session._reply_task
    assert task is not None and not task.done()  # ...its audio queued behind the filler
    await inbound.end()
    await asyncio.wait_for(running, RUN_TIMEOUT_S)
    c.unblocked.set()
    await c.close()
    assert_nothing_left_running()
    assert_call_ended(c)
    [record] = c.pipeline.records
    assert record.turn == 1 and record.first_audio_sent_at_ms is not None  # the filler's
    assert [d.action for d in record.degrades] == [DegradeAction.PLAY_FILLER]
    [turn] = c.session.turns
    assert turn.agent_text == line and not turn.failed


# ---------------------------------------------------------------- engine faults


@pytest.mark.parametrize(
    "error",
    [EngineClosed("engine closed"), asyncio.QueueFull(), RuntimeError("CUDA error")],
    ids=["closed", "queue full", "crashed"],
)
async def test_an_engine_failure_gets_the_filler_then_the_apology_and_the_next_turn_works(
    tok: TextTokenizer, shop: ShopContext, error: BaseException
) -> None:
    engine = FailingEngine(ScriptedEngine(tok, say(tok, "We open at nine.")), error)
    await one_failed_turn_then_a_good_one(tok, shop, engine, lambda: None)


async def test_an_engine_that_never_answers_is_given_up_on_and_the_next_turn_works(
    tok: TextTokenizer, shop: ShopContext, caplog: pytest.LogCaptureFixture
) -> None:
    engine = HeldEngine(ScriptedEngine(tok, say(tok, "We open at nine.")))
    await one_failed_turn_then_a_good_one(tok, shop, engine, engine.gate.set)
    assert EngineStalled.__name__ in caplog.text  # the turn's failure names the stall


async def one_failed_turn_then_a_good_one(
    tok: TextTokenizer, shop: ShopContext, engine: Any, recover: Callable[[], None]
) -> None:
    c = Call(FaultPipeline(tok, shop, engine))
    await c.hear(final("when do you open"))
    await asyncio.wait_for(c.turn_done(), RUN_TIMEOUT_S)
    [failed] = c.session.turns
    assert failed.failed and failed.agent_text == PHRASES.say_again
    [record] = c.pipeline.records
    assert [d.action for d in record.degrades] == [DegradeAction.PLAY_FILLER]
    assert record.first_audio_sent_at_ms is not None  # the filler, at the turn's deadline
    assert record.first_audio_sent_at_ms <= c.pipeline.budgets.turn_ms
    cache = c.pipeline.phrase_cache(RATE_HZ)
    filler, sorry = cache.get(PHRASES.one_moment), cache.get(PHRASES.say_again)
    assert filler is not None and sorry is not None
    await until(lambda: sum(len(e.samples) for e in c.sent if isinstance(e, SendAudio))
                >= len(filler) + len(sorry))  # fmt: skip
    sent = np.concatenate([e.samples for e in c.sent if isinstance(e, SendAudio)])
    assert np.array_equal(sent[: len(filler)], filler)  # first the filler...
    assert np.array_equal(sent[len(filler) : len(filler) + len(sorry)], sorry)  # ...the apology
    assert c.session.agent.turns[-1] == AgentSay(PHRASES.say_again)
    recover()
    await c.hear(final("when do you open"))  # the session is still up and answers
    await asyncio.wait_for(c.turn_done(), RUN_TIMEOUT_S)
    await c.close()
    second = c.session.turns[1]
    assert not second.failed and second.agent_text == "We open at nine."
    assert len(c.pipeline.records) == 2
