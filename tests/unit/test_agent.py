"""The agent loop's logic against a scripted stand-in for the engine and a real shop file.

`ScriptedEngine` is a TEST DOUBLE FOR THE ENGINE: it answers each request with the next
scripted answer (tokenized with the shipped tokenizer, calls laid out by the real call
grammar), block by block, and records the requests. What the model would say is not
under test here; what the agent does with it is: tools run with the decoded arguments
against SQLite, results go back into the prompt, failures become apologies, unsure or
unparseable answers a request to repeat, and barge-in never runs a discarded call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.generate import CommittedBlock, FinishReason, Generation, Request
from engine.schedule import Effort
from engine.tokenizer import TextTokenizer
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK, call_tool
from tools.bike_shop.results import ToolResult
from tools.bike_shop.shop import open_shop
from voice_agent.agent import (
    Agent,
    AgentConfig,
    DegradeKind,
    ReplyKind,
    TextChannel,
    ToolOutcome,
    pack_grammar,
    same_words,
)
from voice_agent.agent.agent import closing_parts
from voice_agent.agent.streaming import SayStreamer
from voice_agent.clock import FakeClock
from voice_agent.dialogue.format import AgentCall, AgentSay, CallerTurn, ToolResultTurn
from voice_agent.dialogue.phrases import phrases
from voice_agent.latency import Budgets, TurnTracker
from voice_agent.turn_record import Mark, Stage
from voice_agent.turn_record import ToolOutcome as TrackedOutcome

TOKENIZER = Path(__file__).resolve().parents[2] / "engine/checkpoints/synthetic-dlm/tokenizer.json"
MONDAY_10AM = datetime(2025, 6, 2, 10, 0)
WEDNESDAY = "2025-06-04"
BLOCK = 16
BOOKING = {"name": "Ann Lee", "day": "wednesday", "time": "10:00", "service": "brake check"}
PHRASES = phrases()

Script = list[int] | tuple[list[int], float]
"""Answer ids, or (answer ids, the generation's min_confidence)."""


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


def say(tok: TextTokenizer, text: str) -> list[int]:
    return tok.encode(f"<think> answer<say> {text}")


def call(tok: TextTokenizer, tool: str, **arguments: Any) -> list[int]:
    return tok.encode("<call>") + pack_grammar(tok, PACK).encode(tool, arguments)


class ScriptedEngine:
    """Test double for `engine.batching.Engine.stream_result` (see the module docstring).
    `after_answer` runs once the last block is out, before the result is delivered."""

    def __init__(self, tok: TextTokenizer, *script: Script) -> None:
        self.tok = tok
        self.script = list(script)
        self.requests: list[Request] = []
        self.after_answer: Callable[[], object] | None = None
        self.hold: asyncio.Event | None = None

    def prompt(self, i: int) -> str:
        return self.tok.decode(self.requests[i].prompt_ids)

    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        self.requests.append(request)
        item = self.script.pop(0)
        ids, confidence = item if isinstance(item, tuple) else (item, 1.0)
        for start in range(0, len(ids), BLOCK):
            await asyncio.sleep(0)
            yield CommittedBlock(tuple(ids[start : start + BLOCK]), confidence)
        if self.hold is not None:
            await self.hold.wait()
        if self.after_answer is not None:
            self.after_answer()
        forwards = -(-len(ids) // BLOCK) * 2
        yield Generation(tuple(ids), FinishReason.EOS, False, forwards, len(ids), 0.01, confidence)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


def bookings(ctx: ShopContext, name: str = "Ann Lee") -> list[tuple[str, str, str]]:
    with ctx.db.read() as conn:
        rows = conn.execute(
            "SELECT day, start, service FROM bookings WHERE name = ? AND cancelled = 0", (name,)
        ).fetchall()
    return [tuple(r) for r in rows]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_call_runs_its_tool_and_the_result_goes_back_to_the_model(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "You're booked."))
    agent = Agent(engine, tok, PACK, shop)
    agent.greet()
    reply = run(agent.respond("book me in for a brake check wednesday at ten, ann lee"))
    assert bookings(shop) == [(WEDNESDAY, "10:00", "brake check")]
    assert (reply.kind, reply.text, reply.reasoning) == (ReplyKind.SAY, "You're booked.", "answer")
    [record] = reply.tool_calls
    assert (record.tool, record.arguments, record.outcome) == (
        "book_service",
        BOOKING,
        ToolOutcome.OK,
    )
    assert record.generation == 0 and record.duration_ms >= 0
    result = agent.turns[-2]
    assert isinstance(result, ToolResultTurn) and result.error is None
    assert f"<result> {result.text}" in engine.prompt(1)  # the model read the booking
    assert agent.turns[-3] == AgentCall("book_service", BOOKING)
    assert agent.turns[-1] == AgentSay("You're booked.")
    assert reply.engine.requests == 2 and reply.engine.forwards > 0
    assert engine.requests[0].grammar is pack_grammar(tok, PACK)  # every call is constrained


def test_a_refusal_is_fed_back_as_an_error_and_the_model_explains(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(
        tok, call(tok, "order_status", order_number="98765"), say(tok, "I can't find it.")
    )
    agent = Agent(engine, tok, PACK, shop)
    reply = run(agent.respond("where is order 9 8 7 6 5"))
    assert reply.kind is ReplyKind.SAY and reply.text == "I can't find it."
    assert [c.outcome for c in reply.tool_calls] == [ToolOutcome.REFUSED]
    assert reply.tool_calls[0].error == "no_such_order"
    assert "<result> error no_such_order: " in engine.prompt(1)
    assert not reply.degrades


def slow_tool(release: threading.Event, started: threading.Event | None = None) -> Any:
    def run_tool(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
        if started is not None:
            started.set()
        release.wait(5)
        return call_tool(name, args, ctx)

    return run_tool


def broken_tool(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
    raise RuntimeError("database is on fire")


@pytest.mark.parametrize("failure", ["timeout", "crash"])
def test_a_timed_out_or_crashed_tool_is_apologised_for_and_the_call_goes_on(
    tok: TextTokenizer, shop: ShopContext, failure: str
) -> None:
    release = threading.Event()
    runner = slow_tool(release) if failure == "timeout" else broken_tool
    engine = ScriptedEngine(
        tok, call(tok, "opening_hours", day="tomorrow"), say(tok, "Anything else?")
    )
    agent = Agent(engine, tok, PACK, shop, run_tool=runner, config=AgentConfig(tool_timeout_s=0.05))

    async def two_turns() -> None:
        reply = await agent.respond("when are you open tomorrow")
        assert (reply.kind, reply.text) == (ReplyKind.FALLBACK, PHRASES.tool_failed)
        kind, outcome = {
            "timeout": (DegradeKind.TOOL_TIMEOUT, ToolOutcome.TIMEOUT),
            "crash": (DegradeKind.TOOL_FAILED, ToolOutcome.FAILED),
        }[failure]
        assert [d.kind for d in reply.degrades] == [kind]
        assert [c.outcome for c in reply.tool_calls] == [outcome]
        assert agent.turns[-1] == AgentSay(PHRASES.tool_failed)
        release.set()
        nxt = await agent.respond("okay thanks")  # the call goes on
        assert (nxt.kind, nxt.text) == (ReplyKind.SAY, "Anything else?")
        assert "<result> error " in engine.prompt(1)

    run(two_turns())


def test_the_tool_step_cap_ends_the_turn_with_the_last_result_and_runs_no_more(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    days = ["monday", "tuesday", "wednesday"]
    engine = ScriptedEngine(tok, *(call(tok, "opening_hours", day=d) for d in days))
    agent = Agent(engine, tok, PACK, shop, config=AgentConfig(max_tool_steps=2))
    reply = run(agent.respond("when are you open"))
    assert reply.kind is ReplyKind.FALLBACK
    assert [c.arguments["day"] for c in reply.tool_calls] == days[:2]
    assert [d.kind for d in reply.degrades] == [DegradeKind.TOOL_STEP_CAP]
    last_result = agent.turns[-2]
    assert isinstance(last_result, ToolResultTurn) and reply.text == last_result.text
    assert sum(isinstance(t, AgentCall) for t in agent.turns) == 2


@pytest.mark.parametrize("answer", ["hello there", "<say>", "<say> hi<call>{}"])
def test_an_unparseable_answer_asks_the_caller_again(
    tok: TextTokenizer, shop: ShopContext, answer: str
) -> None:
    engine = ScriptedEngine(tok, tok.encode(answer), tok.encode(answer))
    agent = Agent(engine, tok, PACK, shop)
    reply = run(agent.respond("mumble"))
    assert (reply.kind, reply.text) == (ReplyKind.ASK_AGAIN, PHRASES.say_again)
    assert [d.kind for d in reply.degrades] == [DegradeKind.DECODED_AGAIN, DegradeKind.UNPARSEABLE]


def test_an_unsure_first_answer_is_decoded_again_one_token_per_step(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, (say(tok, "Sure."), 0.3), (say(tok, "We open at nine."), 0.9))
    agent = Agent(engine, tok, PACK, shop, config=AgentConfig(min_confidence=0.5))
    reply = run(agent.respond("when do you open"))
    assert (reply.kind, reply.text) == (ReplyKind.SAY, "We open at nine.")
    assert [d.kind for d in reply.degrades] == [DegradeKind.DECODED_AGAIN]
    assert reply.degrades[0].detail == "low_confidence 0.300"
    first, again = (r.schedule.threshold for r in engine.requests)
    assert first == AgentConfig().threshold and again == 1.0
    off = Agent(ScriptedEngine(tok, (say(tok, "Sure."), 0.3)), tok, PACK, shop,
                config=AgentConfig(decode_again=False))  # fmt: skip
    assert run(off.respond("when do you open")).kind is ReplyKind.ASK_AGAIN


def test_a_call_written_as_speech_is_never_spoken(tok: TextTokenizer, shop: ShopContext) -> None:
    """A say holding a call's JSON (a train call: `<say> {"name": "opening_hours", ...}`)
    is unparseable: decoded again, then the repeat request; none of it streams."""
    written = '{"name": "opening_hours", "arguments": {"day": "saturday"}}'
    engine = ScriptedEngine(tok, say(tok, written), say(tok, f"Saturday? {written}"))
    pieces: list[str] = []
    reply = run(Agent(engine, tok, PACK, shop).respond("saturday hours?", on_text=pieces.append))
    assert "{" not in "".join(pieces) and "{" not in reply.text
    assert [d.kind for d in reply.degrades][:1] == [DegradeKind.DECODED_AGAIN]
    assert "braces inside <say>" in reply.degrades[0].detail


def test_an_unsure_answer_asks_again_and_an_unsure_call_never_runs(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    unsure_say, unsure_call = (say(tok, "Sure."), 0.3), (call(tok, "book_service", **BOOKING), 0.3)
    engine = ScriptedEngine(tok, unsure_say, unsure_say, unsure_call, unsure_call)
    agent = Agent(engine, tok, PACK, shop, config=AgentConfig(min_confidence=0.5))
    for _ in range(2):
        reply = run(agent.respond("book me in"))
        assert (reply.kind, reply.text) == (ReplyKind.ASK_AGAIN, PHRASES.say_again)
        kinds = [d.kind for d in reply.degrades]
        assert kinds == [DegradeKind.DECODED_AGAIN, DegradeKind.LOW_CONFIDENCE]
        assert reply.degrades[-1].detail == "0.300" and not reply.tool_calls
    assert bookings(shop) == []


def test_an_unsure_answer_is_not_streamed_before_the_turn_decides(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    unsure = (say(tok, "We open at nine. See you then."), 0.3)
    engine = ScriptedEngine(tok, unsure, unsure, (say(tok, "We open at nine."), 0.8))
    agent = Agent(engine, tok, PACK, shop, config=AgentConfig(min_confidence=0.5))
    pieces: list[str] = []
    reply = run(agent.respond("when do you open", on_text=pieces.append))
    # Only the repeat request was spoken: no half of either unsure answer, no mismatch.
    assert "".join(pieces) == reply.text == PHRASES.say_again
    assert [d.kind for d in reply.degrades] == [
        DegradeKind.DECODED_AGAIN,
        DegradeKind.LOW_CONFIDENCE,
    ]
    pieces.clear()
    sure = run(agent.respond("when do you open", on_text=pieces.append))
    assert "".join(pieces) == sure.text == "We open at nine."


def test_a_call_from_a_cancelled_generation_never_runs(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING))
    agent = Agent(engine, tok, PACK, shop)
    engine.after_answer = agent.cancel  # barge-in lands as the call is decoded

    with pytest.raises(asyncio.CancelledError):
        run(agent.respond("book me in for wednesday"))
    assert bookings(shop) == []
    assert [r.outcome for r in agent.tools.records] == [ToolOutcome.NOT_RUN_CANCELLED]
    assert agent.turns == [CallerTurn("book me in for wednesday")]  # said, but no call


def test_barge_in_during_decoding_stops_before_any_call(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING))
    engine.hold = asyncio.Event()  # never set: the answer is still being decoded
    agent = Agent(engine, tok, PACK, shop)

    async def barge_in() -> None:
        task = asyncio.create_task(agent.respond("book me in"))
        while not engine.requests:
            await asyncio.sleep(0)
        assert agent.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not agent.cancel()  # nothing in flight any more

    run(barge_in())
    assert bookings(shop) == [] and agent.tools.records == []


def test_a_tool_running_at_barge_in_finishes_is_kept_and_is_not_spoken(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    release, started = threading.Event(), threading.Event()
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Booked."))
    agent = Agent(engine, tok, PACK, shop, run_tool=slow_tool(release, started))
    heard: list[str] = []

    async def barge_in() -> None:
        task = asyncio.create_task(agent.respond("book me in", on_text=heard.append))
        await asyncio.to_thread(started.wait, 5)
        task.cancel()
        await asyncio.sleep(0.02)
        assert not task.done()  # waits for the tool: no half-done side effects
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(barge_in())
    assert bookings(shop) == [(WEDNESDAY, "10:00", "brake check")]
    assert [r.outcome for r in agent.tools.records] == [ToolOutcome.RAN_CANCELLED]
    assert isinstance(agent.turns[-1], ToolResultTurn) and heard == []
    assert len(engine.requests) == 1  # the model was not asked to speak about it


def test_the_same_call_twice_in_a_turn_runs_once(tok: TextTokenizer, shop: ShopContext) -> None:
    runs: list[str] = []

    def counting(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
        runs.append(name)
        return call_tool(name, args, ctx)

    booking = call(tok, "book_service", **BOOKING)
    agent = Agent(ScriptedEngine(tok, booking, booking), tok, PACK, shop, run_tool=counting)
    reply = run(agent.respond("book me in"))
    assert runs == ["book_service"]
    assert [c.outcome for c in reply.tool_calls] == [ToolOutcome.OK, ToolOutcome.DUPLICATE]
    assert [d.kind for d in reply.degrades] == [DegradeKind.DUPLICATE_CALL]
    result = agent.turns[-2]
    assert isinstance(result, ToolResultTurn) and reply.text == result.text  # said once
    assert sum(isinstance(t, AgentCall) for t in agent.turns) == 1
    assert len(bookings(shop)) == 1


def test_history_keeps_only_what_the_caller_heard(tok: TextTokenizer, shop: ShopContext) -> None:
    line = "Sure. We are open until six tonight. Anything else?"
    engine = ScriptedEngine(tok, say(tok, line), say(tok, "Okay."), say(tok, "Bye."))
    agent = Agent(engine, tok, PACK, shop)
    assert run(agent.respond("are you open late")).text == line
    agent.commit_spoken("Sure.")  # barge-in after the first sentence
    assert agent.turns[-1] == AgentSay("Sure.")
    run(agent.respond("wait, tomorrow?"))
    assert "<say> Sure.<caller> wait, tomorrow?" in engine.prompt(1)
    assert "until six" not in engine.prompt(1)
    agent.commit_spoken("")  # cut off before any audio
    run(agent.respond("hello?"))
    assert "Okay" not in engine.prompt(2)


def test_a_hand_off_ends_the_turn_with_the_tools_line(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    agent = Agent(ScriptedEngine(tok, call(tok, "end_call")), tok, PACK, shop)
    reply = run(agent.respond("that's all, bye"))
    assert reply.kind is ReplyKind.HANG_UP and reply.ends_call
    assert reply.text == "Thanks for calling, have a good day!"
    assert agent.turns[-1] == AgentSay(reply.text)


def test_speech_streams_as_blocks_arrive_and_adds_up_to_the_reply(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    line = "We have two front lights in stock. The cheaper one is twenty dollars."
    engine = ScriptedEngine(tok, call(tok, "search_products", query="light"), say(tok, line))
    agent = Agent(engine, tok, PACK, shop)
    pieces: list[str] = []
    first_at: list[int] = []

    def hook(piece: str) -> None:
        pieces.append(piece)
        first_at.append(len(engine.requests))

    reply = run(agent.respond("do you have front lights", on_text=hook))
    assert reply.text == line == "".join(pieces)
    assert len(pieces) > 1  # not in one piece at the end
    assert first_at[0] == 2  # nothing streamed from the call


def test_text_channel_feeds_an_async_reader(tok: TextTokenizer, shop: ShopContext) -> None:
    line = "One moment. I have checked it for you and it is ready."
    agent = Agent(ScriptedEngine(tok, say(tok, line)), tok, PACK, shop)

    async def read() -> tuple[str, str]:
        channel = TextChannel()
        task = asyncio.create_task(agent.respond("is my bike ready", on_text=channel.put))
        task.add_done_callback(lambda _: channel.close())
        text = "".join([p async for p in channel.pieces()])
        return text, (await task).text

    streamed, reply = run(read())
    assert streamed == reply == line


def test_a_tracker_plans_the_engine_deadline_and_times_the_tools(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    clock = FakeClock(100.0)
    tracker = TurnTracker(clock, Budgets.default())
    engine = ScriptedEngine(tok, call(tok, "opening_hours", day="today"), say(tok, "Till six."))
    agent = Agent(engine, tok, PACK, shop, clock=clock)
    run(agent.respond("open today?", tracker=tracker, deadline_s=1e9))
    engine_deadline = tracker.deadline_for(Stage.ENGINE)
    assert [r.deadline_s for r in engine.requests] == [engine_deadline] * 2
    for mark in (Mark.ENGINE_START, Mark.ENGINE_FIRST_BLOCK, Mark.ENGINE_DONE):
        assert tracker.marked_s(mark) is not None
    [tool] = tracker.record().tool_calls
    assert (tool.name, tool.outcome) == ("opening_hours", TrackedOutcome.OK)
    assert (tool.arguments, tool.refusal) == ({"day": "today"}, None)


def test_the_turn_record_keeps_each_calls_arguments_and_refusal(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    tracker = TurnTracker(FakeClock(100.0), Budgets.default())
    engine = ScriptedEngine(
        tok,
        call(tok, "book_service", **BOOKING),
        call(tok, "order_status", order_number="98765"),
        say(tok, "Booked, but I can't find that order."),
    )
    agent = Agent(engine, tok, PACK, shop)
    run(agent.respond("book me in, and where is order 9 8 7 6 5", tracker=tracker))
    booked, refused = tracker.record().tool_calls
    # What the tool ran with, so a reader can tell an identical retry from a new booking.
    assert (booked.name, booked.arguments, booked.outcome, booked.refusal) == (
        "book_service", BOOKING, TrackedOutcome.OK, None
    )  # fmt: skip
    # A refusal answered in time (outcome OK) but booked nothing: the record says which.
    assert (refused.arguments, refused.outcome, refused.refusal) == (
        {"order_number": "98765"}, TrackedOutcome.REFUSED, "no_such_order"
    )  # fmt: skip


def test_a_caller_turn_too_long_for_the_window_keeps_its_end(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "Sorry?"))
    agent = Agent(engine, tok, PACK, shop, config=AgentConfig(max_prompt_tokens=40))
    words = " ".join(f"word{i}" for i in range(200))
    reply = run(agent.respond(f"{words} the end"))
    assert [d.kind for d in reply.degrades] == [DegradeKind.CALLER_TEXT_CUT]
    assert len(engine.requests[0].prompt_ids) <= 40
    assert engine.prompt(0).endswith("the end<agent>")


def test_deadline_is_handed_to_every_engine_request(tok: TextTokenizer, shop: ShopContext) -> None:
    engine = ScriptedEngine(tok, call(tok, "opening_hours", day="today"), say(tok, "Till six."))
    agent = Agent(engine, tok, PACK, shop, clock=FakeClock(100.0))
    run(agent.respond("open today?", deadline_s=123.0))
    assert [r.deadline_s for r in engine.requests] == [123.0, 123.0]


def test_the_answer_after_a_tool_gets_a_floor_of_engine_time_past_the_deadline(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    """With no time left, relaying a booking just made still gets `relay_floor_s` at
    instant effort, recorded, rather than every token forced in one step."""
    clock = FakeClock(100.0)
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "You're booked."))
    agent = Agent(engine, tok, PACK, shop, clock=clock, config=AgentConfig(relay_floor_s=0.25))
    reply = run(agent.respond("book me in", deadline_s=99.0))
    first, relay = engine.requests
    assert first.deadline_s == 99.0  # no tool has run yet: no floor
    assert relay.deadline_s == pytest.approx(100.25)
    assert relay.schedule.effort is Effort.INSTANT
    assert relay.schedule.max_steps_per_block == AgentConfig().max_steps_per_block
    assert [d.kind for d in reply.degrades] == [DegradeKind.RELAY_FLOOR]
    assert reply.text == "You're booked."
    # In time, nothing changes.
    engine = ScriptedEngine(tok, call(tok, "opening_hours", day="today"), say(tok, "Till six."))
    reply = run(Agent(engine, tok, PACK, shop, clock=clock).respond("open?", deadline_s=101.0))
    assert [r.deadline_s for r in engine.requests] == [101.0, 101.0] and not reply.degrades


def test_speech_streamed_before_the_answer_breaks_stands_as_the_reply(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    broken = tok.encode("<say> Let me see. I can do that for you today") + call(tok, "end_call")
    agent = Agent(ScriptedEngine(tok, broken), tok, PACK, shop)
    pieces: list[str] = []
    reply = run(agent.respond("can you fix a flat", on_text=pieces.append))
    assert reply.text == "".join(pieces) == "Let me see. I can do that for you today"
    assert reply.kind is ReplyKind.SAY  # already playing: no "say again" on top of it
    assert [d.kind for d in reply.degrades] == [
        DegradeKind.UNPARSEABLE,
        DegradeKind.STREAM_MISMATCH,
    ]
    assert agent.turns[-1] == AgentSay(reply.text)


def test_a_draft_runs_nothing_and_leaves_the_history(tok: TextTokenizer, shop: ShopContext) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING))
    agent = Agent(engine, tok, PACK, shop)
    agent.greet()
    before = list(agent.turns)
    draft = run(agent.draft("book me in for a brake check wednesday at ten, ann lee"))
    assert agent.turns == before and bookings(shop) == [] and not agent.tools.records
    assert "brake check wednesday" in engine.prompt(0)  # decoded as if the turn had ended
    assert draft.history == tuple(before)


def test_a_fitting_draft_is_the_first_answer_and_its_call_runs_once_adopted(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "You're booked."))
    agent = Agent(engine, tok, PACK, shop)
    agent.greet()
    draft = run(agent.draft("Book me in for a brake check Wednesday at ten, Ann Lee."))
    assert bookings(shop) == []
    pieces: list[str] = []
    reply = run(agent.respond("book me in for a brake check wednesday at ten ann lee",
                              draft=draft, on_text=pieces.append))  # fmt: skip
    assert reply.preempted and reply.text == "You're booked." and "".join(pieces) == reply.text
    assert bookings(shop) == [(WEDNESDAY, "10:00", "brake check")]
    assert len(engine.requests) == 2  # the draft, then the answer to the tool's result
    assert reply.engine.requests == 2  # the draft's decode counts as the turn's first


def test_a_draft_for_other_words_or_an_old_history_is_dropped(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "Drafted."), say(tok, "Fresh."), say(tok, "Again."),
                            say(tok, "Fresh again."))  # fmt: skip
    agent = Agent(engine, tok, PACK, shop)
    agent.greet()
    draft = run(agent.draft("do you open on sunday"))
    reply = run(agent.respond("do you open on sunday morning", draft=draft))
    assert (reply.text, reply.preempted) == ("Fresh.", False)
    stale = run(agent.draft("thanks"))
    agent.commit_spoken("Fre")  # the history changed after the draft
    reply = run(agent.respond("thanks", draft=stale))
    assert (reply.text, reply.preempted) == ("Fresh again.", False)


def test_same_words_ignores_case_and_punctuation() -> None:
    assert same_words("Hi, it's Ann.", "hi its ann") is False  # an apostrophe is a letter
    assert same_words("Hi, it's Ann.", "hi it's ann")
    assert not same_words("at ten", "at ten thirty")


def test_an_answer_that_turns_unsure_midway_is_followed_by_the_repeat_request(
    tok: TextTokenizer,
) -> None:
    pieces: list[str] = []
    streamer = SayStreamer(tok, pieces.append, hold_below=0.5)
    ids = say(tok, "We open at nine. See you then.")
    streamer.feed(tuple(ids[:BLOCK]), 0.9)  # sure so far: streamed
    streamed = "".join(pieces)
    assert streamed
    streamer.feed(tuple(ids[BLOCK:]), 0.3)  # unsure from here: held back
    assert "".join(pieces) == streamed
    text, whole = streamer.finish(PHRASES.say_again)
    assert whole and text == f"{streamed} {PHRASES.say_again}" == "".join(pieces)


@pytest.mark.parametrize("commits_first", [False, True])
def test_a_write_never_lands_after_the_apology_for_it(
    tok: TextTokenizer, shop: ShopContext, commits_first: bool
) -> None:
    """A booking tool that is still writing when its timeout passes: rolled back, so the
    caller's "sorry" is true and a retry cannot double-book. When its write committed just
    before the timeout was decided, the caller hears the booking instead of an apology."""
    committed = threading.Event()

    def slow_booking(name: str, args: Mapping[str, Any], ctx: ShopContext) -> ToolResult:
        if commits_first:
            result = call_tool(name, args, ctx)
            committed.set()
            time.sleep(0.3)  # past the timeout, after the commit
            return result
        with ctx.db.write() as conn:  # the booking's own write, held past the timeout
            conn.execute("INSERT INTO bookings (name, name_key, day, start, service) "
                         "VALUES ('Ann Lee', 'ann lee', ?, '10:00', 'brake check')", (WEDNESDAY,))  # fmt: skip
            time.sleep(0.3)
        return call_tool(name, args, ctx)

    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Booked."))
    agent = Agent(engine, tok, PACK, shop, run_tool=slow_booking,
                  config=AgentConfig(tool_timeout_s=0.1))  # fmt: skip
    reply = run(agent.respond("yes please"))
    if commits_first:
        assert committed.is_set() and [c.outcome for c in reply.tool_calls] == [ToolOutcome.OK]
        assert reply.text == "Booked." and bookings(shop) == [(WEDNESDAY, "10:00", "brake check")]
    else:
        assert (reply.kind, reply.text) == (ReplyKind.FALLBACK, PHRASES.tool_failed)
        time.sleep(0.5)  # the tool's thread reaches its commit and is refused
        assert bookings(shop) == []


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        ("delivered? oh, it must be with the neighbours then. right, thanks, bye",
         ["right, thanks, bye", "bye"]),
        ("this is ridiculous, honestly. can I talk to someone please?",
         ["can I talk to someone please"]),
        ("dziekuje, bye", ["bye"]),
        ("yes please", []),
        ("hello?", []),
    ],
)  # fmt: skip
def test_the_closing_words_of_a_line_are_its_last_sentence_and_clause(
    line: str, parts: list[str]
) -> None:
    assert closing_parts(line) == parts
