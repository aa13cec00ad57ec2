"""One call through the pipeline: hearing, the agent, streaming speech, barge-in.

    caller audio -> Listener (VAD, turns, ASR) -> Agent (engine, tools)
                 -> AgentVoice (streaming TTS, phrase cache) -> AudioPlayer (pacing, marks)

Three tasks per call: the inbound reader (feeds the listener and tells it whether the
agent is audible), the hearing loop (acts on speech events), and at most one reply in
flight. A final transcript starts a reply: a `TurnTracker` from the end of the caller's
speech, `Agent.respond` streaming its text into the synthesizer, each synthesized piece
queued on the player as it comes, and "one moment please" at the turn's deadline when
no reply audio is ready yet. Barge-in clears the player, cancels the reply (the agent
never runs a tool from a discarded generation) and keeps in the history only what the
caller heard. A reply that ends the call (hang-up or hand-off) is played to its end,
then the session returns and the server closes the call. A turn that fails gets the
repeat request instead of a dead call. Each turn's `TurnRecord` goes to the pipeline's
JSON-lines file when the turn ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from engine.batching import Engine
from voice_agent.agent import Agent, AgentReply, Draft, TextChannel, ToolCallRecord, same_words
from voice_agent.audio import FRAME_MS
from voice_agent.clock import Clock
from voice_agent.config import Settings
from voice_agent.degrade import TranscriptChoice
from voice_agent.events import AudioReceived, CallStarted, CallStopped, DtmfReceived, Pcm16
from voice_agent.hearing.events import (
    BargeIn,
    FinalTranscript,
    HearingEvent,
    PartialTranscript,
    PausedTranscript,
    SpeechEnded,
    SpeechStarted,
    TranscriptionFailed,
)
from voice_agent.hearing.listener import Listener
from voice_agent.latency import TurnTracker
from voice_agent.pipeline.voice import AgentVoice
from voice_agent.speech import PhraseCache, SynthesisGate, Synthesizer
from voice_agent.transports.call import Inbound, caller_identity
from voice_agent.transports.player import AudioPlayer, Utterance
from voice_agent.turn_record import Budgets, Mark, Stage, TurnRecord
from voice_agent.turn_record import ToolCallRecord as TimedToolCall


class CallServices(Protocol):
    """What a call's session uses from the process (`Pipeline` in production): the
    session takes it rather than importing the pipeline."""

    settings: Settings
    clock: Clock
    budgets: Budgets
    synthesis_gate: SynthesisGate | None

    @property
    def engine(self) -> Engine: ...
    @property
    def synthesizer(self) -> Synthesizer: ...
    @property
    def active_calls(self) -> int: ...
    def new_agent(self) -> Agent: ...
    def new_listener(self, sample_rate_hz: int) -> Listener: ...
    def phrase_cache(self, rate_hz: int) -> PhraseCache: ...
    async def phrase(self, text: str, rate_hz: int) -> Pcm16: ...
    def call_started(self, call_id: str) -> None: ...
    def call_ended(self, call_id: str, turns: int) -> None: ...
    def tool_called(self, call_id: str, turn: int, call: TimedToolCall) -> None: ...
    def write_record(self, record: TurnRecord) -> None: ...


log = logging.getLogger(__name__)

LISTENER_CLOSE_S = 3.0
"""How long a call's end waits for a final transcript still decoding."""
PARTIAL_COVER_MS = 100
"""A transcript heard before the end of the turn (partial or at a pause) may stand in for
a final that is late only when its audio reaches this close to the end of the speech:
then it already holds the whole turn."""
FIRST_FRAME_WAIT_S = 2.0
"""How long a turn waits for its first reply frame to go out before writing its record."""
_MS_PER_S = 1000.0
LIMIT_POLL_S = 0.25
"""How often the call's limits (length, silence, turns) are checked."""


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One caller turn as the session saw it (for the demo and tests)."""

    number: int
    caller_text: str
    agent_text: str
    """What the agent meant to say: the reply's text, or the apology after a failure."""
    reply: AgentReply | None
    """None when the turn was interrupted or failed."""
    tool_calls: tuple[ToolCallRecord, ...]
    record: TurnRecord
    interrupted: bool = False
    failed: bool = False


@dataclass(slots=True)
class TurnOutcome:
    """How one reply task ended, filled in as it runs; its record is written from it."""

    number: int
    caller_text: str
    tracker: TurnTracker
    agent_text: str = ""
    """The reply's text, or the apology after a failure."""
    reply: AgentReply | None = None
    fillers: list[Utterance] = field(default_factory=list)
    """The filler that played before the answer, if one did."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    failed: bool = False

    @property
    def interrupted(self) -> bool:
        """Cancelled (barge-in, hang-up) before the agent answered."""
        return self.reply is None and not self.failed


class PipelineSession:
    """One call (implements `transports.call.CallSession`)."""

    def __init__(self, pipeline: CallServices) -> None:
        self._p = pipeline
        self._clock = pipeline.clock
        self._agent = pipeline.new_agent()
        self._phrases = self._agent.phrases
        self._voice: AgentVoice | None = None
        self._call_id = ""
        self._ended = asyncio.Event()
        self._reply_task: asyncio.Task[None] | None = None
        self._draft: tuple[str, asyncio.Task[Draft]] | None = None
        """The caller's words at their last pause and the draft answer being decoded."""
        self._speech_ended: collections.deque[SpeechEnded] = collections.deque()
        """Turns heard whose transcript has not come yet (finals come in turn order)."""
        self._latest: PartialTranscript | PausedTranscript | None = None
        """The latest transcript of the caller's open turn, before its final."""
        self._watches: dict[int, asyncio.Task[None]] = {}
        """Per ended turn (its `end_ms`) waiting for its final: the partial fallback."""
        self._answered_early: set[int] = set()
        """Ended turns (`end_ms`) answered from a partial: their final is dropped."""
        self._fed_ms = 0.0
        self._fed_at_s = 0.0
        self._heard_at_s = 0.0
        """When the caller last started or stopped speaking (the silence limit)."""
        self._turns = 0
        self.ended_by_limit = ""
        """Why the session ended the call at a limit ('' when it did not)."""
        self.greeting = ""
        self.turns: list[TurnSummary] = []

    @property
    def agent(self) -> Agent:
        """The call's agent (its `turns` are the dialogue as the model reads it)."""
        return self._agent

    @property
    def voice(self) -> AgentVoice:
        if self._voice is None:
            raise RuntimeError("the session is not running")
        return self._voice

    def _attach(self, player: AudioPlayer) -> None:
        rate = player.wire_rate_hz
        self._voice = AgentVoice(player, self._p.synthesizer, self._p.phrase_cache(rate),
                                 self._p.phrase, self._clock,
                                 gate=self._p.synthesis_gate)  # fmt: skip

    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        """Greet, then converse until the caller hangs up or the agent ends the call."""
        self._attach(player)
        self._call_id = call.call_id
        self._agent.set_caller(caller_identity(call))
        self._fed_at_s = self._clock.now()
        listener = self._p.new_listener(call.sample_rate_hz)
        hearing = asyncio.create_task(self._hear(listener), name=f"hear-{call.call_id}")
        reading = asyncio.create_task(self._read(inbound, listener), name=f"read-{call.call_id}")
        ending = asyncio.create_task(self._ended.wait(), name=f"end-{call.call_id}")
        limits = asyncio.create_task(self._watch_limits(), name=f"limits-{call.call_id}")
        self._p.call_started(call.call_id)
        try:
            await self._greet()
            await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, ending, limits):
                task.cancel()
            await asyncio.gather(reading, ending, limits, return_exceptions=True)
            await self._cancel_reply()
            hearing.cancel()
            await asyncio.gather(hearing, return_exceptions=True)
            await self._cancel_watches()  # any the hearing loop started meanwhile
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(listener.close(), LISTENER_CLOSE_S)
            self._p.call_ended(call.call_id, self._turns)

    async def _watch_limits(self) -> None:
        """End the call politely at the configured limits: its length, the caller's
        silence, its number of turns (a line left open, a script looping on the agent)."""
        cfg = self._p.settings.pipeline
        started_s = self._heard_at_s = self._clock.now()
        while True:
            await asyncio.sleep(LIMIT_POLL_S)  # polls; the limits are read on the clock
            now_s = self._clock.now()
            why = ""
            if now_s - started_s >= cfg.max_call_s:
                why = f"the call reached {cfg.max_call_s:g} s"
            elif now_s - self._heard_at_s >= cfg.silence_hangup_s and not self.voice.speaking:
                why = f"no caller speech for {cfg.silence_hangup_s:g} s"
            elif self._turns >= cfg.max_turns and not self.voice.speaking:
                why = f"the call reached {cfg.max_turns} turns"
            if why:
                log.info("call %s: ending it: %s", self._call_id, why)
                await self._cancel_reply()
                await self.voice.say(self._phrases.goodbye)
                await self.voice.played_out()
                self.ended_by_limit = why
                self._ended.set()
                return

    # ------------------------------------------------------------------ inbound

    async def _read(self, inbound: Inbound, listener: Listener) -> None:
        async for event in inbound:
            if isinstance(event, CallStopped):
                return
            if isinstance(event, DtmfReceived):
                log.info("call %s: key %s (no keypad menu)", self._call_id, event.digit)
            elif isinstance(event, AudioReceived):
                listener.set_agent_speaking(self.voice.speaking)
                try:
                    await listener.feed(event.samples)
                except (TypeError, ValueError) as exc:
                    log.warning("call %s: audio chunk dropped: %s", self._call_id, exc)
                    continue
                self._fed_ms += _MS_PER_S * len(event.samples) / event.sample_rate_hz
                self._fed_at_s = self._clock.now()

    def _stream_s(self, stream_ms: float) -> float:
        """A time on the inbound audio's own clock, on the session's clock (audio arrives
        in real time, so the latest chunk fed anchors the two)."""
        return self._fed_at_s - (self._fed_ms - stream_ms) / _MS_PER_S

    # ------------------------------------------------------------------ hearing

    async def _hear(self, listener: Listener) -> None:
        async for event in listener:
            try:
                await self._on_hearing(event)
            except Exception:  # one bad event must not end the call
                log.exception("call %s: handling %s failed", self._call_id, event)

    async def _on_hearing(self, event: HearingEvent) -> None:
        if isinstance(event, BargeIn):
            log.info("call %s: barge-in at %d ms", self._call_id, event.detected_ms)
            await self._interrupt()
        elif isinstance(event, SpeechStarted):
            self._latest = None
            self._heard_at_s = self._clock.now()
        elif isinstance(event, PartialTranscript):
            self._latest = event
        elif isinstance(event, PausedTranscript):
            self._latest = event
            self._start_draft(event.text)
        elif isinstance(event, SpeechEnded):
            self._heard_at_s = self._clock.now()
            self._speech_ended.append(event)
            self._watch_final(event)
        elif isinstance(event, FinalTranscript):
            ended = self._speech_ended.popleft() if self._speech_ended else None
            if ended is not None and self._settle_watch(ended):
                log.info("call %s: final %r came after the turn was answered from a partial",
                         self._call_id, event.text)  # fmt: skip
            elif self._backchannel(ended):
                log.info("call %s: backchannel %r not answered", self._call_id, event.text)
            elif event.text.strip():
                self._start_reply(event.text, ended)
        elif isinstance(event, TranscriptionFailed):
            log.warning("call %s: transcription failed: %s", self._call_id, event.reason)
            ended = self._speech_ended.popleft() if self._speech_ended else None
            if ended is not None and self._settle_watch(ended):
                return  # answered from a partial already
            idle = self._reply_task is None or self._reply_task.done()
            if idle and not self.voice.speaking:
                await self.voice.say(self._phrases.say_again)

    # ------------------------------------------------------------ late finals

    def _watch_final(self, ended: SpeechEnded) -> None:
        """If a transcript of the whole turn was heard before its end, answer from it
        should the final not come by the tracker's transcript deadline."""
        latest, self._latest = self._latest, None
        if latest is None or not latest.text.strip():
            return
        if latest.end_ms < ended.end_ms - PARTIAL_COVER_MS:
            return  # the caller said more after it
        self._watches[ended.end_ms] = asyncio.create_task(
            self._answer_if_final_late(ended, latest.text), name=f"watch-{self._call_id}"
        )

    def _settle_watch(self, ended: SpeechEnded) -> bool:
        """The final (or its failure) for `ended` came: stop waiting for it. True when the
        turn was already answered from a partial."""
        task = self._watches.pop(ended.end_ms, None)
        if task is not None:
            task.cancel()
        if ended.end_ms in self._answered_early:
            self._answered_early.discard(ended.end_ms)
            return True
        return False

    async def _answer_if_final_late(self, ended: SpeechEnded, text: str) -> None:
        deadline_s = self._new_tracker(ended, self._turns + 1).transcript_deadline_s()
        await self._clock.sleep_until(deadline_s)
        self._watches.pop(ended.end_ms, None)
        if self._backchannel(ended):
            return
        tracker = self._new_tracker(ended, self._turns + 1)
        if tracker.choose_transcript(final_ready=False, have_partial=True) is not (
            TranscriptChoice.PARTIAL
        ):
            return
        log.info("call %s: no final by %.0f ms; answering from %r", self._call_id,
                 tracker.elapsed_ms(), text)  # fmt: skip
        self._answered_early.add(ended.end_ms)
        self._start_reply(text, ended, tracker)

    def _backchannel(self, ended: SpeechEnded | None) -> bool:
        """Speech that began over the agent without interrupting it, while the agent is
        still talking ("mhm", "ok"): not a turn. Once the agent's line is over, the
        same speech is the caller's turn (they talked on after the agent finished)."""
        if ended is None or not ended.during_agent_speech or ended.barged_in:
            return False
        return self.voice.speaking

    # ------------------------------------------------------------------ speaking

    async def _greet(self) -> None:
        self.greeting = self._agent.greet()
        await self.voice.say(self.greeting)

    async def _interrupt(self) -> None:
        """Stop the agent (barge-in): see `_stop`."""
        task, self._reply_task = self._reply_task, None
        await self._stop(task)

    async def _stop(self, reply: asyncio.Task[None] | None) -> None:
        """Cancel `reply` if it runs, clear the audio, keep in the history what the
        caller heard of the current line."""
        busy = reply is not None and not reply.done()
        if reply is not None and busy:
            self._agent.cancel()
            reply.cancel()
            await asyncio.gather(reply, return_exceptions=True)
        if busy or self.voice.speaking:
            self._agent.commit_spoken(await self.voice.clear())
        self.voice.new_line()

    async def _cancel_watches(self) -> None:
        watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.cancel()
        await asyncio.gather(*watches, return_exceptions=True)

    async def _cancel_reply(self) -> None:
        self._drop_draft()
        await self._cancel_watches()
        task, self._reply_task = self._reply_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------------ drafts

    def _start_draft(self, caller_text: str) -> None:
        """The caller paused: decode a draft answer to what they said so far, while no
        reply is under way, the agent is silent and the engine is not busy with others'
        turns (a draft must not delay a real turn). A newer pause replaces it."""
        self._drop_draft()
        cfg = self._p.settings.pipeline
        idle = self._reply_task is None or self._reply_task.done()
        if not cfg.preemptive or not idle or self.voice.speaking:
            return
        if self._p.engine.queue_depth > cfg.preemptive_max_queue:
            return
        task = asyncio.create_task(self._agent.draft(caller_text), name=f"draft-{self._call_id}")
        self._draft = (caller_text, task)

    def _drop_draft(self) -> None:
        if self._draft is not None:
            self._draft[1].cancel()
            self._draft = None

    def _take_draft(self, caller_text: str) -> asyncio.Task[Draft] | None:
        """The draft for these words, if one is under way or done (others are dropped)."""
        draft, self._draft = self._draft, None
        if draft is None:
            return None
        if not same_words(draft[0], caller_text):
            draft[1].cancel()
            return None
        return draft[1]

    @staticmethod
    async def _draft_result(task: asyncio.Task[Draft] | None, wait_s: float) -> Draft | None:
        """The draft, if it is ready within `wait_s` (the engine stage's budget); else it
        is cancelled and the turn decodes afresh (under the engine's stall guard)."""
        if task is None:
            return None
        try:
            return await asyncio.wait_for(task, max(0.0, wait_s))
        except TimeoutError:
            log.warning("draft not ready within the engine budget; decoding afresh")
            return None
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # this reply itself is being cancelled
            return None
        except Exception:
            log.exception("draft failed; decoding the turn afresh")
            return None

    # ------------------------------------------------------------------ a turn

    def _new_tracker(self, ended: SpeechEnded | None, turn: int) -> TurnTracker:
        now_s = self._clock.now()
        tracker = TurnTracker(
            self._clock,
            self._p.budgets,
            call_id=self._call_id,
            turn=turn,
            speech_ended_s=self._stream_s(ended.end_ms) if ended else now_s,
            wall_time_unix_s=time.time(),
            concurrent_calls=self._p.active_calls,
            on_tool_call=self._p.tool_called,
        )
        if ended is not None:
            tracker.mark(Mark.END_OF_TURN, self._stream_s(ended.detected_ms))
        return tracker

    def _start_reply(
        self, caller_text: str, ended: SpeechEnded | None, tracker: TurnTracker | None = None
    ) -> None:
        """Answer a turn: `tracker` when it was made already (answering from a partial),
        else a new one; the transcript counts as final now."""
        self._turns += 1
        tracker = tracker or self._new_tracker(ended, self._turns)
        tracker.mark(Mark.FINAL_TRANSCRIPT)
        previous = self._reply_task
        draft = self._take_draft(caller_text) if previous is None or previous.done() else None
        self._reply_task = asyncio.create_task(
            self._reply(self._turns, caller_text, tracker, previous, draft),
            name=f"reply-{self._turns}",
        )

    async def _reply(
        self,
        number: int,
        caller_text: str,
        tracker: TurnTracker,
        previous: asyncio.Task[None] | None,
        drafting: asyncio.Task[Draft] | None = None,
    ) -> None:
        await self._stop(previous)  # the caller said more while a reply was under way
        tools_before = len(self._agent.tools.records)
        tracker.admit(self._p.engine.queue_depth)
        channel = TextChannel()
        respond = asyncio.create_task(self._respond(caller_text, tracker, channel, drafting))
        respond.add_done_callback(lambda _: channel.close())
        turn = TurnOutcome(number, caller_text, tracker)
        filler = asyncio.create_task(self.voice.filler(self._phrases.one_moment, tracker))
        try:
            await self.voice.speak(channel.pieces(), tracker)
            turn.reply = await respond
            turn.agent_text = turn.reply.text
        except Exception:
            log.exception("call %s: turn %d failed", self._call_id, number)
            turn.failed, turn.agent_text = True, self._phrases.say_again
            await self._cancel(respond)
            self._agent.commit_spoken(turn.agent_text)
            await self.voice.say(turn.agent_text)
        finally:  # no await before the record's own finally: a hang-up may land anywhere
            filler.cancel()  # a filler still pending has not played (playing is its last step)
            played = filler.done() and not filler.cancelled() and filler.exception() is None
            if played and isinstance(u := filler.result(), Utterance):
                turn.fillers.append(u)
            try:
                await self._cancel(respond)
            finally:
                turn.tool_calls = self._agent.tools.records[tools_before:]
                await self._finish_turn(turn)
        reply = turn.reply
        if reply is not None and reply.ends_call:
            log.info("call %s: the agent ends the call (%s)", self._call_id, reply.kind.value)
            await self.voice.played_out()
            self._ended.set()

    async def _respond(
        self,
        caller_text: str,
        tracker: TurnTracker,
        channel: TextChannel,
        drafting: asyncio.Task[Draft] | None,
    ) -> AgentReply:
        """The agent's answer, from the draft when it is (or becomes) ready: waiting on
        a draft still decoding is engine time of this turn."""
        if drafting is not None and not drafting.done():
            tracker.mark(Mark.ENGINE_START)
        wait_s = tracker.deadline_for(Stage.ENGINE) - self._clock.now()
        draft = await self._draft_result(drafting, wait_s)
        return await self._agent.respond(
            caller_text, tracker=tracker, on_text=channel.put, draft=draft
        )

    @staticmethod
    async def _cancel(task: asyncio.Task[AgentReply]) -> None:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _finish_turn(self, turn: TurnOutcome) -> None:
        first = self.voice.first
        # Cancelled (hang-up, barge-in): record the turn at once, without waiting on the wire.
        cancelled = (task := asyncio.current_task()) is not None and task.cancelling() > 0
        try:
            if first is not None and not turn.interrupted and not cancelled:
                await _first_frame_out(first)
        finally:  # a hang-up while waiting still leaves the turn's record
            self._record(turn)

    def _record(self, turn: TurnOutcome) -> None:
        first, tracker = self.voice.first, turn.tracker
        heard_first = [*turn.fillers, first] if first is not None else turn.fillers
        sent = [t for u in heard_first if (t := u.first_sent_at_s) is not None]
        if sent:  # the first reply frame, speech or filler
            tracker.mark(Mark.FIRST_AUDIO_SENT, min(sent))
        if first is not None and first.first_sent_at_s is not None:
            tracker.mark(Mark.ANSWER_AUDIO_SENT, first.first_sent_at_s)
        record = tracker.record()
        if self._p.settings.pipeline.record_text:
            record = replace(record, heard_text=turn.caller_text, said_text=turn.agent_text)
        self._p.write_record(record)
        self.turns.append(TurnSummary(turn.number, turn.caller_text, turn.agent_text, turn.reply,
                                      tuple(turn.tool_calls), record, turn.interrupted,
                                      turn.failed))  # fmt: skip


async def _first_frame_out(first: Utterance) -> None:
    """Wait (at most `FIRST_FRAME_WAIT_S`) until `first` has its first frame on the wire."""
    waited_s = 0.0
    while first.first_sent_at_s is None and not first.heard.done():
        if waited_s >= FIRST_FRAME_WAIT_S:
            break
        await asyncio.sleep(FRAME_MS / _MS_PER_S)
        waited_s += FRAME_MS / _MS_PER_S
