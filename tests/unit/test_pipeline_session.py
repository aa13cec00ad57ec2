"""The call session's event handling, on real parts where they are cheap.

The agent is real, on a real SQLite shop, with `ScriptedEngine` (the TEST DOUBLE FOR THE
ENGINE from test_agent.py); the player is the real paced player on a fake clock, its
frames collected; the synthesizer is a tone per character (TEST DOUBLE FOR TTS: what
matters is how much audio each sentence gets, not how it sounds). Hearing events are
handed to the session as the listener would emit them. `heard_text` is checked on its
own with real utterance handles.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.generate import Generation, Request
from engine.tokenizer import TextTokenizer
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK
from tools.bike_shop.shop import open_shop
from voice_agent.agent import Agent, AgentConfig, ReplyKind
from voice_agent.clock import FakeClock
from voice_agent.config import load_settings
from voice_agent.dialogue.format import AgentSay
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    ClearAudio,
    OutboundEvent,
    Pcm16,
    Protocol,
    SendAudio,
    SendMark,
)
from voice_agent.hearing.events import (
    BargeIn,
    FinalTranscript,
    PartialTranscript,
    PausedTranscript,
    SpeechEnded,
    SpeechStarted,
)
from voice_agent.pipeline import PipelineSession, SpokenPiece, heard_text
from voice_agent.speech import PhraseCache
from voice_agent.transports.call import Inbound
from voice_agent.transports.player import AudioPlayer, PlaybackResult, Utterance
from voice_agent.turn_record import Budgets, DegradeAction, Mark, TurnRecord

from .test_agent import BOOKING, MONDAY_10AM, TOKENIZER, ScriptedEngine, call, say

RATE_HZ = 8000
MS_PER_CHAR = 20


class ToneSynth:
    """TEST DOUBLE FOR TTS: a tone lasting MS_PER_CHAR per character."""

    voice = "tone"
    sample_rate_hz = RATE_HZ

    def synthesize(self, text: str) -> Pcm16:
        n = len(text) * MS_PER_CHAR * RATE_HZ // 1000
        return (3000 * np.sin(np.arange(n) * 0.3)).astype(np.int16)


class BrokenEngine:
    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        raise RuntimeError("the engine fell over")
        yield ()  # pragma: no cover


class HeldEngine:
    """The scripted engine, held before its first block until `gate` is set."""

    def __init__(self, inner: ScriptedEngine) -> None:
        self.inner = inner
        self.gate = asyncio.Event()

    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        await self.gate.wait()
        async for item in self.inner.stream_result(request):
            yield item


class FakePipeline:
    """What a session uses of `Pipeline` (`CallServices`), with the engine and TTS doubles
    above."""

    def __init__(self, tok: TextTokenizer, shop: ShopContext, engine: Any) -> None:
        self.clock = FakeClock()
        self.settings = load_settings(None)
        self.budgets = Budgets.default()
        self.engine = engine
        engine.queue_depth = 0
        self.synthesizer = ToneSynth()
        self.synthesis_gate = None
        self.records: list[TurnRecord] = []
        self.call_events: list[tuple[str, str]] = []
        self._tok, self._shop = tok, shop
        self._cache = PhraseCache(self.synthesizer, RATE_HZ)

    def new_agent(self) -> Agent:
        return Agent(
            self.engine, self._tok, PACK, self._shop, config=AgentConfig(min_confidence=0.0)
        )

    def phrase_cache(self, rate_hz: int) -> PhraseCache:
        assert rate_hz == RATE_HZ
        return self._cache

    async def phrase(self, text: str, rate_hz: int) -> Pcm16:
        return self._cache.synthesize(text)

    def write_record(self, record: TurnRecord) -> None:
        self.records.append(record)

    active_calls = 1

    def call_started(self, call_id: str) -> None:
        self.call_events.append(("started", call_id))

    def call_ended(self, call_id: str, turns: int) -> None:
        self.call_events.append(("ended", call_id))

    def tool_called(self, call_id: str, turn: int, call: Any) -> None:
        self.call_events.append(("tool", call.name))

    def new_listener(self, sample_rate_hz: int) -> ScriptedListener:
        self.listener = ScriptedListener()
        return self.listener


class ScriptedListener:
    """TEST DOUBLE FOR `Listener`: audio fed is counted; events come from `emit`."""

    def __init__(self) -> None:
        self.fed = 0
        self.agent_speaking: list[bool] = []
        self.closed = False
        self._events: asyncio.Queue[Any] = asyncio.Queue()

    def emit(self, event: Any) -> None:
        self._events.put_nowait(event)

    async def feed(self, samples: Pcm16) -> None:
        self.fed += len(samples)

    def set_agent_speaking(self, speaking: bool) -> None:
        self.agent_speaking.append(speaking)

    async def close(self) -> None:
        self.closed = True
        self._events.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[Any]:
        while (event := await self._events.get()) is not None:
            yield event


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


class Call:
    """A session wired to a real player whose frames are collected (no socket)."""

    def __init__(self, pipeline: FakePipeline, *, echo_marks: bool = False) -> None:
        """`echo_marks`: the peer plays everything at once and echoes each mark."""
        self.echo_marks = echo_marks
        self.pipeline = pipeline
        self.sent: list[OutboundEvent] = []
        self.player = AudioPlayer(self._send, RATE_HZ, pipeline.clock)
        self.session = PipelineSession(pipeline)  # type: ignore[arg-type]
        self.session._attach(self.player)
        self.pacer = asyncio.create_task(self.player.run())

    async def _send(self, event: OutboundEvent) -> None:
        self.sent.append(event)
        if self.echo_marks and isinstance(event, SendMark):
            asyncio.get_running_loop().call_soon(self.player.on_mark, event.name)

    async def hear(self, *events: Any) -> None:
        for event in events:
            await self.session._on_hearing(event)

    async def turn_done(self) -> None:
        task = self.session._reply_task
        assert task is not None
        await task

    async def close(self) -> None:
        await self.session._cancel_reply()
        self.player.close()
        self.pacer.cancel()
        await asyncio.gather(self.pacer, return_exceptions=True)


def final(text: str) -> FinalTranscript:
    return FinalTranscript(text, 0, 1000, 50.0)


async def test_a_final_transcript_is_answered_in_speech_and_recorded(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    line = "We open at nine. See you then."
    c = Call(FakePipeline(tok, shop, ScriptedEngine(tok, say(tok, line))))
    await c.hear(SpeechEnded(0, 1000, 1400), final("when do you open"))
    await c.turn_done()
    await c.close()
    [turn] = c.session.turns
    assert turn.caller_text == "when do you open" and turn.agent_text == line
    assert turn.reply is not None and not turn.interrupted and not turn.failed
    audio = sum(len(e.samples) for e in c.sent if isinstance(e, SendAudio))
    assert audio >= len(line.replace(" ", "")) * MS_PER_CHAR * RATE_HZ // 1000 // 2
    [record] = c.pipeline.records
    assert record.turn == 1
    assert record.concurrent_calls == 1
    assert record.engine is not None and record.engine.requests == 1
    assert record.engine == turn.reply.engine  # one vocabulary: the reply's figures recorded
    assert record.engine.latency_ms > 0 and record.engine.min_confidence == 1.0
    for mark in (Mark.END_OF_TURN, Mark.FINAL_TRANSCRIPT, Mark.ENGINE_START, Mark.ENGINE_DONE,
                 Mark.TTS_START, Mark.FIRST_TTS_AUDIO, Mark.FIRST_AUDIO_SENT):  # fmt: skip
        assert record.at_ms(mark) is not None, mark


async def test_records_carry_the_turns_words_only_when_record_text_is_on(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    line = "We open at nine."
    records = []
    for on in (False, True):
        pipeline = FakePipeline(tok, shop, ScriptedEngine(tok, say(tok, line)))
        pipeline.settings = load_settings(None, pipeline={"record_text": on})
        c = Call(pipeline)
        await c.hear(SpeechEnded(0, 1000, 1400), final("when do you open"))
        await c.turn_done()
        await c.close()
        records += c.pipeline.records
    off, on_ = records
    assert off.heard_text is None and off.said_text is None  # personal data: off by default
    assert on_.heard_text == "when do you open" and on_.said_text == line
    assert TurnRecord.from_json_line(on_.to_json_line()) == on_


async def test_barge_in_during_a_tool_call_generation_never_runs_the_tool(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Booked."))
    engine.hold = asyncio.Event()  # the call is decoded, its result not yet delivered
    c = Call(FakePipeline(tok, shop, engine))
    await c.session._greet()
    await asyncio.sleep(0.05)  # the greeting's frames go out (fake clock)...
    c.player.on_mark(c.session.voice.line[0].utterance.id)  # ...and the caller heard it all
    await c.hear(final("book me a brake check on wednesday at ten, ann lee"))
    await asyncio.sleep(0.05)
    assert c.session._reply_task is not None and not c.session._reply_task.done()
    await c.hear(BargeIn(2000, 2500))
    await c.close()
    [turn] = c.session.turns
    assert turn.interrupted and turn.reply is None
    assert len(c.pipeline.records) == 1
    with shop.db.read() as conn:
        count = conn.execute("SELECT COUNT(*) FROM bookings WHERE name = 'Ann Lee'").fetchone()
    assert count[0] == 0
    assert not any(r.outcome.value == "ok" for r in c.session.agent.tools.records)
    # Nothing of the cancelled turn was heard: the history ends with the caller's turn.
    assert c.session.agent.turns[0] == AgentSay(c.session.greeting)
    assert not isinstance(c.session.agent.turns[-1], AgentSay)


async def test_barge_in_while_the_reply_plays_clears_it_and_keeps_what_was_heard(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    line = "We open at nine. Would you like to book a slot for your bike?"
    c = Call(FakePipeline(tok, shop, ScriptedEngine(tok, say(tok, line))))
    await c.hear(final("when do you open"))
    await c.turn_done()
    first_sentence = [p for p in c.session.voice.line if p.sentence_index == 0]
    assert first_sentence and len(first_sentence) < len(c.session.voice.line)
    marks = {p.utterance.id for p in first_sentence}
    for _ in range(500):  # the pacer sends a mark once its audio is out; on a busy CPU, later
        if marks <= {e.name for e in c.sent if isinstance(e, SendMark)}:
            break
        await asyncio.sleep(0.01)
    for p in first_sentence:  # the caller heard the first sentence to its end
        c.player.on_mark(p.utterance.id)
    await c.hear(BargeIn(3000, 3500))
    await c.close()
    assert any(isinstance(e, ClearAudio) for e in c.sent)
    heard = c.session.agent.turns[-1]
    assert isinstance(heard, AgentSay)
    assert heard.text.startswith("We open at nine.") and len(heard.text) < len(line)


async def test_a_late_reply_is_preceded_by_the_filler_which_stays_out_of_the_history(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = HeldEngine(ScriptedEngine(tok, say(tok, "We open at nine.")))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(final("when do you open"))
    await asyncio.sleep(0.05)  # the fake clock jumps to the deadline: no reply text yet
    filler = c.pipeline.phrase_cache(RATE_HZ).get(phrases().one_moment)
    assert filler is not None
    sent = np.concatenate([e.samples for e in c.sent if isinstance(e, SendAudio)])
    assert np.array_equal(sent, filler)
    engine.gate.set()
    await c.turn_done()
    await c.close()
    [record] = c.pipeline.records
    assert [d.action for d in record.degrades] == [DegradeAction.PLAY_FILLER]
    assert record.first_audio_sent_at_ms is not None
    assert record.first_audio_sent_at_ms < (record.first_tts_audio_at_ms or 0)
    assert phrases().one_moment not in [getattr(t, "text", "") for t in c.session.agent.turns]
    assert c.session.agent.turns[-1] == AgentSay("We open at nine.")


async def test_each_transcript_is_timed_from_the_end_of_its_own_turn(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "One."), say(tok, "Two."))
    c = Call(FakePipeline(tok, shop, engine))
    # Both turns end before the first transcript is ready (a slow recognizer).
    await c.hear(SpeechEnded(0, 1000, 1400), SpeechEnded(2000, 3000, 3700))
    await c.hear(final("first"))
    await c.turn_done()
    await c.hear(final("second"))
    await c.turn_done()
    await c.close()
    first, second = c.pipeline.records
    assert first.end_of_turn_at_ms == pytest.approx(400)
    assert second.end_of_turn_at_ms == pytest.approx(700)


async def test_a_backchannel_over_the_agent_is_not_answered_speech_after_its_line_is(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    c = Call(FakePipeline(tok, shop, ScriptedEngine(tok, say(tok, "Sure."))))
    await c.session._greet()
    await asyncio.sleep(0.05)  # the greeting is out, not yet heard to its end
    mhm = SpeechEnded(0, 300, 700, during_agent_speech=True)
    await c.hear(mhm, final("mhm"))
    assert c.session._reply_task is None and not c.session.turns
    c.player.on_mark(c.session.voice.line[0].utterance.id)  # the greeting has ended
    await c.hear(SpeechEnded(0, 2500, 2900, during_agent_speech=True), final("so, about my bike"))
    await c.turn_done()
    await c.close()
    [turn] = c.session.turns
    assert turn.caller_text == "so, about my bike" and turn.agent_text == "Sure."


async def test_a_failing_turn_gets_the_repeat_request_and_the_call_goes_on(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    c = Call(FakePipeline(tok, shop, BrokenEngine()))
    await c.hear(final("hello?"))
    await c.turn_done()
    await asyncio.sleep(0.05)
    await c.close()
    [turn] = c.session.turns
    assert turn.failed and turn.agent_text == phrases().say_again
    assert any(isinstance(e, SendAudio) for e in c.sent)  # the apology was played
    assert len(c.pipeline.records) == 1
    assert c.session.agent.turns[-1] == AgentSay(phrases().say_again)


async def test_a_call_greets_hears_and_ends_itself_after_a_hang_up_reply(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    pipeline = FakePipeline(tok, shop, ScriptedEngine(tok, call(tok, "end_call")))
    c = Call(pipeline, echo_marks=True)
    inbound = Inbound()
    start = CallStarted(Protocol.TWILIO, "CA1", "MZ1", RATE_HZ)
    running = asyncio.create_task(c.session.run(start, inbound, c.player))
    await inbound.put(AudioReceived(np.zeros(160, np.int16), RATE_HZ, 0, 1))
    await asyncio.sleep(0.05)
    assert c.session.agent.tools.caller == "call:CA1"  # tools scoped to this call's caller
    pipeline.listener.emit(final("thanks, bye"))
    await asyncio.wait_for(running, 5.0)  # returns by itself: nobody hung up
    await c.close()
    assert pipeline.listener.fed == 160 and pipeline.listener.closed
    assert pipeline.call_events[0] == ("started", "CA1")
    assert pipeline.call_events[-1] == ("ended", "CA1")
    assert pipeline.listener.agent_speaking  # told before each chunk
    [turn] = c.session.turns
    assert turn.reply is not None and turn.reply.kind is ReplyKind.HANG_UP
    assert c.session.agent.turns[0] == AgentSay(c.session.greeting)
    marks = [e.name for e in c.sent if isinstance(e, SendMark)]
    assert len(marks) >= 2  # the greeting, then the goodbye, each played to its end
    assert not c.player.speaking
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not leftover, leftover


def piece(index: int, sentence: str, duration_ms: float, heard_ms: float) -> SpokenPiece:
    future: asyncio.Future[PlaybackResult] = asyncio.get_running_loop().create_future()
    future.set_result(PlaybackResult("u", duration_ms, heard_ms, heard_ms < duration_ms))
    return SpokenPiece(Utterance("u", duration_ms, future), index, sentence)


async def test_heard_text_keeps_whole_sentences_and_the_heard_share_of_the_cut_one() -> None:
    pieces = [
        piece(0, "We open at nine.", 400, 400),
        piece(0, "We open at nine.", 400, 400),
        piece(1, "Would you like to book a slot?", 600, 300),
        piece(2, "Bye.", 200, 0),
    ]
    assert heard_text(pieces) == "We open at nine. Would you like"
    assert heard_text(pieces[:2]) == "We open at nine."
    assert heard_text([piece(0, "Hello there.", 500, 100)]) == ""


async def test_heard_text_refuses_audio_still_playing() -> None:
    future: asyncio.Future[PlaybackResult] = asyncio.get_running_loop().create_future()
    with pytest.raises(ValueError, match="has not finished"):
        heard_text([SpokenPiece(Utterance("u", 100, future), 0, "Hi.")])


async def test_a_draft_at_the_pause_becomes_the_reply_when_the_final_has_the_same_words(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Booked."))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(PausedTranscript("Book me a brake check on Wednesday at ten, Ann Lee.", 0, 900))
    await asyncio.sleep(0.05)  # the draft decodes while the caller is silent
    assert len(engine.requests) == 1 and not c.session.agent.tools.records  # nothing ran
    await c.hear(SpeechEnded(0, 900, 1300),
                 final("book me a brake check on wednesday at ten ann lee"))  # fmt: skip
    await c.turn_done()
    await c.close()
    [turn] = c.session.turns
    assert turn.reply is not None and turn.reply.preempted and turn.agent_text == "Booked."
    assert len(engine.requests) == 2  # the draft, then the answer to the booking's result
    [booked] = c.session.agent.tools.records
    assert booked.outcome.value == "ok" and booked.turn == 1
    [record] = c.pipeline.records
    assert record.engine is not None and record.engine.requests == 2 and record.preempted


async def test_a_draft_for_words_the_caller_then_changed_is_dropped_and_never_runs(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    other = {**BOOKING, "day": "thursday"}
    engine = ScriptedEngine(tok, call(tok, "book_service", **other), say(tok, "Which day?"))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(PausedTranscript("book me a brake check on thursday", 0, 900))
    await asyncio.sleep(0.05)
    await c.hear(final("book me a brake check on thursday no wait"))
    await c.turn_done()
    await c.close()
    [turn] = c.session.turns
    assert turn.reply is not None and not turn.reply.preempted
    assert turn.agent_text == "Which day?" and not c.session.agent.tools.records
    assert not c.pipeline.records[0].preempted
    with shop.db.read() as conn:
        assert (
            conn.execute("SELECT COUNT(*) FROM bookings WHERE name = 'Ann Lee'").fetchone()[0] == 0
        )


async def test_no_draft_while_the_engine_is_busy_or_the_agent_speaks(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "We open at nine."))
    c = Call(FakePipeline(tok, shop, engine))
    engine.queue_depth = 1  # others' turns wait: a draft would delay them
    await c.hear(PausedTranscript("when do you open", 0, 900))
    await asyncio.sleep(0.05)
    assert not engine.requests and c.session._draft is None
    engine.queue_depth = 0
    await c.session._greet()  # the agent is talking
    await c.hear(PausedTranscript("when do you open", 0, 900))
    assert c.session._draft is None
    await c.close()


async def test_a_late_final_is_replaced_by_a_partial_that_holds_the_whole_turn(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "We open at nine."))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(SpeechStarted(0, 100), PartialTranscript("when do you open", 0, 960),
                 SpeechEnded(0, 1000, 1400))  # fmt: skip
    await asyncio.sleep(0.05)  # no final: the fake clock reaches the transcript deadline
    assert c.session._reply_task is not None
    await c.turn_done()
    await c.hear(final("when do you open on monday"))  # the late final: dropped
    await asyncio.sleep(0.01)
    await c.close()
    [turn] = c.session.turns
    assert turn.caller_text == "when do you open" and turn.agent_text == "We open at nine."
    [record] = c.pipeline.records
    assert DegradeAction.USE_PARTIAL_TRANSCRIPT in [d.action for d in record.degrades]
    assert record.at_ms(Mark.FINAL_TRANSCRIPT) is not None
    assert len(engine.requests) == 1


async def test_a_partial_that_misses_the_end_of_the_turn_waits_for_the_final(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = ScriptedEngine(tok, say(tok, "We open at nine."))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(SpeechStarted(0, 100), PartialTranscript("when do", 0, 500),
                 SpeechEnded(0, 1000, 1400))  # fmt: skip
    await asyncio.sleep(0.05)
    assert c.session._reply_task is None  # nothing to answer from yet
    await c.hear(final("when do you open"))
    await c.turn_done()
    await c.close()
    [turn] = c.session.turns
    assert turn.caller_text == "when do you open"
    actions = [d.action for d in c.pipeline.records[0].degrades]
    assert DegradeAction.USE_PARTIAL_TRANSCRIPT not in actions


class FirstRequestHangs:
    """The scripted engine, except that its first request never answers."""

    def __init__(self, inner: ScriptedEngine) -> None:
        self.inner, self.calls = inner, 0

    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()
        async for item in self.inner.stream_result(request):
            yield item


async def test_a_draft_stuck_past_the_engine_budget_is_dropped_and_the_turn_decodes_afresh(
    tok: TextTokenizer, shop: ShopContext
) -> None:
    engine = FirstRequestHangs(ScriptedEngine(tok, say(tok, "We open at nine.")))
    c = Call(FakePipeline(tok, shop, engine))
    await c.hear(PausedTranscript("when do you open", 0, 900))
    await asyncio.sleep(0.01)
    await c.hear(final("when do you open"))
    await asyncio.wait_for(c.turn_done(), 5.0)  # the engine budget (0.5 s), then afresh
    await c.close()
    [turn] = c.session.turns
    assert turn.reply is not None and not turn.reply.preempted
    assert turn.agent_text == "We open at nine." and engine.calls == 2
