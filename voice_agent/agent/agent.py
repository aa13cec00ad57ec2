"""The agent loop: one `Agent` per call holds the dialogue and answers each caller turn.

    pack = load_pack("bike_shop")                   # tools.core.ToolPack
    agent = Agent(engine, tok, pack, pack.open("shop.sqlite", datetime.now).context())
    agent.greet()                                    # the fixed greeting, into the history
    reply = await agent.respond("hi, do you have front lights?", deadline_s=t + 0.5)
    ...speak reply.text; on barge-in: agent.cancel(); agent.commit_spoken(text_heard)

`respond` appends the caller's turn, renders the prompt (prompts/FORMAT.md, truncated to
the window), asks the engine for the next action under the tool grammar, and then:
a `<say>` is the reply; a `<call>` runs its tool (`ToolRunner`: off the event loop, under
its timeout, at most once per turn) and the result goes back to the model, at most
`max_tool_steps` times per turn. The agent never guesses: an unparseable answer or one
whose least confident token is under `min_confidence` is decoded once more, one token per
step (`decode_again`), and if still so gets the "say again" phrase (after a tool ran this
turn: the tool's own line). A
hand-off tool (transfer, end call) ends the turn with the tool's own line and a reply
kind the session acts on. A timed-out or crashed tool gets the "tool failed" phrase and
the call goes on. Every such fallback is recorded in `AgentReply.degrades`. An engine
that has not answered by the request's deadline plus `engine_stall_s` is given up on:
`respond` raises `EngineStalled` (the session then apologizes, as for any engine error).

Preemptive generation: `draft(text)` decodes the first answer to a transcript heard at
a pause, before the end of the turn is certain, without touching the history or running
anything. `respond(text, draft=d)` starts from it when the caller's final words are the
same and the history has not changed since (`Draft.fits`); otherwise the draft is
dropped and `respond` decodes afresh. A tool call in a draft runs only once `respond`
adopts it, so a discarded draft has no side effects.

Barge-in: cancelling the task running `respond` (or `cancel()`) stops the engine request;
a call decoded by that generation never starts; a tool already running finishes and is
kept in the history, unspoken. The history holds what the caller actually heard:
`commit_spoken` trims the last agent line to it.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import BaseModel

from engine.constraints import CallGrammar, SlotKind
from engine.generate import CommittedBlock, Generation, Request
from engine.readback import SayTemplate
from engine.schedule import Effort, Schedule
from engine.tokenizer import TextTokenizer
from tools.core import CallAction, ToolPack
from voice_agent.agent.prompt import fit_prompt, pack_grammar
from voice_agent.agent.reply import (
    AgentDegrade,
    AgentReply,
    DegradeKind,
    EngineRecord,
    ReplyKind,
    ToolOutcome,
)
from voice_agent.agent.streaming import SayStreamer, TextHook
from voice_agent.agent.tools import RunTool, ToolRun, ToolRunner
from voice_agent.clock import Clock, MonotonicClock
from voice_agent.dialogue.format import (
    ANSWER_TOKENS,
    MAX_PROMPT_TOKENS,
    AgentCall,
    AgentSay,
    Answer,
    AnswerError,
    CallerTurn,
    Turn,
    call_sources,
    last_caller,
    parse_answer,
)
from voice_agent.dialogue.hints import CallerHints
from voice_agent.dialogue.phrases import Phrases, phrases
from voice_agent.dialogue.spoken import spoken_digits
from voice_agent.grounding import grounder
from voice_agent.latency import TurnTracker
from voice_agent.turn_record import EffortLevel, Mark

ANONYMOUS_PREFIX = "anonymous:"
"""The caller identity of an agent nobody identified: unique to that agent."""
HANDOFF_KINDS = {CallAction.TRANSFER: ReplyKind.TRANSFER, CallAction.HANG_UP: ReplyKind.HANG_UP}
_FAILURES = {
    ToolOutcome.TIMEOUT: DegradeKind.TOOL_TIMEOUT,
    ToolOutcome.FAILED: DegradeKind.TOOL_FAILED,
}


class AnswerEngine(Protocol):
    """What the agent needs of `engine.batching.Engine`."""

    def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        """Committed blocks of answer ids, then the `Generation`."""
        ...


@dataclass(frozen=True, slots=True)
class AgentConfig:
    max_tool_steps: int = 3
    """Tool calls per caller turn; a further call gets a fallback line instead."""
    decode_again: bool = True
    """An unsure or unparseable first answer is decoded once more, one token per step,
    before the caller is asked to say it again."""
    min_confidence: float = 0.5
    """An answer whose least confident committed token is below this is not trusted:
    the caller is asked to say it again (scripts/eval_brain.py measures the trade-off)."""
    effort: Effort = Effort.LOW
    threshold: float = 0.9
    """The engine's commit threshold."""
    max_steps_per_block: int = 16
    max_new_tokens: int = ANSWER_TOKENS
    max_prompt_tokens: int = MAX_PROMPT_TOKENS
    """Older turns are dropped to fit. Keep it to the prompt length the model was trained
    on (`prompt_budget(card)`; the pipeline does): longer prompts degrade its answers."""
    tool_timeout_s: float | None = None
    """None: each tool's own `ToolSpec.timeout_s`."""
    engine_stall_s: float = 2.0
    """How long past its deadline an engine request may go before the turn gives up on
    it (`EngineStalled`). The engine commits what is left at its deadline, so only a
    wedged or hopelessly overloaded engine gets here."""
    relay_floor_s: float = 0.12
    """Engine time an answer after a tool's result always gets, at `instant` effort, even
    past the engine's deadline (recorded as `RELAY_FLOOR`): with none left, every token is
    forced in one step, the answer comes out unsure, and a booking just made would be
    answered with "say that again" (seen in tests/e2e/test_booking_call.py)."""


_SENTENCE_END = re.compile(r"[.?!;]+\s+")


def _spoken(templates: list[SayTemplate], call: AgentCall) -> str | None:
    """The read-back of `call` in the first of its tool's wordings that can say it."""
    for template in templates:
        if template.fits(call.arguments):
            return template.render({k: str(v) for k, v in call.arguments.items()})
    return None


def closing_parts(line: str) -> list[str]:
    """How a caller's line ends, besides the line itself: its last sentence and its last
    comma clause, when they are shorter than the line (a request or a goodbye said after
    something else: "shipped? that's ridiculous. can I talk to someone please")."""
    text = line.strip().rstrip(".?!; ")
    sentence = _SENTENCE_END.split(text)[-1].strip()
    parts = [sentence, sentence.rsplit(",", 1)[-1].strip()]
    out: list[str] = []
    for part in parts:
        if part and part != text and part not in out and _WORD.search(part):
            out.append(part)
    return out


class EngineStalled(TimeoutError):
    """The engine gave no answer by the request's deadline plus `engine_stall_s`."""


_WORD = re.compile(r"[\w']+")


def same_words(a: str, b: str) -> bool:
    """Two transcripts say the same words (case and punctuation aside)."""
    return _WORD.findall(a.lower()) == _WORD.findall(b.lower())


@dataclass(frozen=True, slots=True)
class Draft:
    """A first answer decoded before the end of the caller's turn was certain."""

    caller_text: str
    history: tuple[Turn, ...]
    """The dialogue the draft was decoded after (without the caller's line)."""
    generation: Generation

    def fits(self, caller_text: str, history: list[Turn]) -> bool:
        return same_words(self.caller_text, caller_text) and tuple(history) == self.history


@dataclass(slots=True)
class _Turn:
    """The state of one `respond`."""

    number: int
    streamer: SayStreamer
    figures: EngineRecord = field(default_factory=EngineRecord)
    degrades: tuple[AgentDegrade, ...] = ()
    last_run: ToolRun | None = None
    draft: Draft | None = None
    """The draft this turn adopted as its first answer."""
    withheld: frozenset[str] = frozenset()
    """Tools the caller's words did not ask for (`Agent` consent): left out of the
    grammar for the rest of the turn."""
    careful: bool = False
    """The turn's answer is being decoded again, one token per step, after an unsure one."""

    def degrade(self, kind: DegradeKind, detail: str = "") -> None:
        self.degrades += (AgentDegrade(kind, detail),)


def _count(turn: _Turn, g: Generation, tracker: TurnTracker | None) -> None:
    """One engine request's figures, into the turn's reply; its turn record holds the same."""
    turn.figures = turn.figures.add(g.forwards, len(g.token_ids), g.decided_tokens,
                                    g.deadline_forced, g.latency_s * 1000.0,
                                    g.min_confidence)  # fmt: skip
    if tracker is not None:
        tracker.engine_figures(turn.figures)


class Agent:
    """One per call. Not thread-safe; one `respond` at a time."""

    def __init__(
        self,
        engine: AnswerEngine,
        tok: TextTokenizer,
        pack: ToolPack[Any],
        ctx: Any,
        *,
        config: AgentConfig | None = None,
        run_tool: RunTool | None = None,
        grammar: CallGrammar | None = None,
        fixed: Phrases | None = None,
        clock: Clock | None = None,
        hints: CallerHints | None = None,
        consent: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """`pack`: the business's tools (`tools.core.ToolPack`) and `ctx` the pack's
        context for this call; `run_tool` runs them (default `pack.call`; tests pass a
        slow or failing runner); `grammar` defaults to `pack_grammar(tok, pack)`;
        `fixed`: the fixed phrases (prompts/phrases.toml).
        `ctx.caller` scopes what the tools may change; when it is None the agent acts for
        an anonymous caller of its own (it can cancel only what it booked) until
        `set_caller` names the caller. `hints`: the caller hints the checkpoint was trained
        with (voice_agent/dialogue/hints.py `for_card`), shown on the latest caller line.
        `consent`: tool → the caller acts (hint labels) that ask for it
        (the pipeline passes `pack.consent`); a call of such a tool after a caller line of
        another act is not run, and the model answers again without that tool; such a
        tool with a read-back in the pack also runs only right after its read-back, with
        the read-back's values (`_read_back`). Off without `hints` (no reading of the
        caller's line to go by)."""
        self.config = config or AgentConfig()
        self._consent = dict(consent or {}) if hints is not None else {}
        self._narrowed: dict[frozenset[str], CallGrammar] = {}
        self._engine = engine
        self._tok = tok
        self.pack = pack
        self._grammar = grammar or pack_grammar(tok, pack)
        self._readbacks: dict[str, list[SayTemplate]] = {}
        for t in pack.readbacks:  # a tool may have several wordings (one per count)
            if t.tool in self._consent:
                self._readbacks.setdefault(t.tool, []).append(t)
        self._options = {  # each read-back's enum arguments and their values, to read it back
            tool: {s.key: s.candidate_values for s in self._grammar.slots[tool]
                   if s.kind is SlotKind.ENUM}
            for tool in self._readbacks
        }  # fmt: skip
        self._models: dict[str, type[BaseModel]] = pack.argument_models
        self.phrases = fixed or phrases()
        if ctx.caller is None:  # fail closed: an unidentified call reaches only its own
            ctx = replace(ctx, caller=f"{ANONYMOUS_PREFIX}{uuid.uuid4().hex}")
        self._hints = hints
        self._clock = clock or MonotonicClock()
        """The engine's clock: request deadlines are on it (so are tool timings)."""
        self.tools = ToolRunner(pack, ctx, self.phrases.tool_failed, run_tool=run_tool,
                                timeout_s=self.config.tool_timeout_s,
                                clock=self._clock)  # fmt: skip
        self.turns: list[Turn] = []
        """The dialogue so far, as the model reads it."""
        self._turn = 0
        self._task: asyncio.Task[Any] | None = None

    @property
    def grammar(self) -> CallGrammar:
        """The grammar every answer is decoded under (before a turn withholds tools)."""
        return self._grammar

    def greet(self) -> str:
        """The greeting phrase, put into the history; the session speaks it."""
        self.turns.append(AgentSay(self.phrases.greeting))
        return self.phrases.greeting

    def set_caller(self, caller: str) -> None:
        """Scope the tools to the caller on the line (`caller_identity(call)`): what they
        book records it, and they can cancel only their own bookings, whatever the caller
        says. Call when the call starts, before the first turn."""
        self.tools.scope_to(caller)

    def cancel(self) -> bool:
        """Cancel the `respond` in flight (barge-in); False when there is none."""
        task = self._task
        if task is None or task.done():
            return False
        self.tools.discard()
        return task.cancel()

    def commit_spoken(self, text_heard: str) -> None:
        """Keep in the history only the agent speech the caller heard (from mark echoes):
        the last agent line becomes `text_heard` ('' removes it). When the cancelled turn
        had not produced its line yet, what was heard of its streamed speech is added."""
        heard = text_heard.strip()
        if self.turns and isinstance(self.turns[-1], AgentSay):
            if heard:
                self.turns[-1] = AgentSay(heard)
            else:
                self.turns.pop()
        elif heard:
            self.turns.append(AgentSay(heard))

    async def respond(
        self,
        caller_text: str,
        *,
        deadline_s: float | None = None,
        effort: Effort | None = None,
        tracker: TurnTracker | None = None,
        on_text: TextHook | None = None,
        draft: Draft | None = None,
    ) -> AgentReply:
        """Answer one caller turn. `deadline_s` bounds every engine request of the turn,
        on the engine's clock. With `tracker` (on the same clock), each request's effort,
        step cap and deadline come from `tracker.plan_engine` (the earlier deadline wins),
        and engine marks and tool calls are timed on it. `on_text` receives the reply's
        text piece by piece while it is decoded (then any rest), for streaming synthesis.
        `draft`: the first answer when it fits (see `draft`). Raises CancelledError when
        cancelled; the caller's turn stays in the history."""
        self._turn += 1
        self._task = asyncio.current_task()
        turn = _Turn(self._turn, SayStreamer(self._tok, on_text, self.config.min_confidence))
        if draft is not None and draft.fits(caller_text, self.turns):
            turn.draft = draft
        line = spoken_digits(caller_text.strip())
        self.turns.append(CallerTurn(line))
        try:
            await self._warm_hint(line)
            for generation in range(self.config.max_tool_steps + 1):
                turn.streamer.restart()
                if generation == 0 and turn.draft is not None:
                    g = self._adopt(turn, turn.draft.generation, tracker)
                else:
                    g = await self._generate(turn, deadline_s, effort, tracker)
                answer, doubt = self._judge(g)
                if doubt is not None and self._may_retry(turn):
                    turn.careful = True
                    turn.degrade(DegradeKind.DECODED_AGAIN, f"{doubt[0].value} {doubt[1]}")
                    turn.streamer.restart()
                    g = await self._generate(turn, deadline_s, effort, tracker)
                    answer, doubt = self._judge(g)
                if doubt is not None or answer is None:
                    turn.degrade(*(doubt or (DegradeKind.UNPARSEABLE, "")))
                    return self._untrusted(turn)
                action = answer.action
                if isinstance(action, AgentSay):
                    return self._finish(turn, ReplyKind.SAY, action.text, answer.reasoning)
                if generation == self.config.max_tool_steps:
                    turn.degrade(DegradeKind.TOOL_STEP_CAP, f"not run: {action.json()}")
                    break
                unasked = await self._unasked(action)
                ask = self._ask_first(action) if unasked else None
                if ask is not None:
                    turn.degrade(DegradeKind.NOT_ASKED, f"read back: {action.json()} ({unasked})")
                    return self._finish(turn, ReplyKind.SAY, ask)
                if unasked:
                    turn.degrade(DegradeKind.NOT_ASKED, f"not run: {action.json()} ({unasked})")
                    turn.withheld |= {action.tool}
                    continue
                confirmed = self._read_back(action)
                if isinstance(confirmed, str):
                    turn.degrade(DegradeKind.NOT_READ_BACK, f"not run: {action.json()}")
                    return self._finish(turn, ReplyKind.SAY, confirmed)
                if confirmed != action:
                    changed = f"{action.json()} -> {confirmed.json()}"
                    turn.degrade(DegradeKind.READ_BACK_VALUES, changed)
                    action = confirmed
                reply = await self._call(turn, action, generation, tracker)
                if reply is not None:
                    return reply
            last = turn.last_run
            line = last.line if last is not None else self.phrases.tool_failed
            return self._finish(turn, ReplyKind.FALLBACK, line)
        finally:
            self._task = None

    def _judge(self, g: Generation) -> tuple[Answer | None, tuple[DegradeKind, str] | None]:
        """The answer of `g`, or why it is not trusted (unparseable, unsure)."""
        try:
            answer = parse_answer(g.token_ids, self._tok, self._models)
        except AnswerError as exc:
            return None, (DegradeKind.UNPARSEABLE, str(exc))
        if g.min_confidence < self.config.min_confidence:
            return answer, (DegradeKind.LOW_CONFIDENCE, f"{g.min_confidence:.3f}")
        return answer, None

    def _may_retry(self, turn: _Turn) -> bool:
        """An unsure first answer is decoded once more, one token per step (slower, and
        each token sees the ones before it), before the caller is asked to say it again;
        not once a tool ran or any of the answer was spoken."""
        return (self.config.decode_again and not turn.careful and turn.last_run is None
                and not turn.streamer.streamed)  # fmt: skip

    def _untrusted(self, turn: _Turn) -> AgentReply:
        """The reply to an answer the agent does not trust: after a tool ran this turn, the
        tool's own line (a booking just made is said, not followed by "say that again");
        else the repeat request."""
        if turn.last_run is not None:
            return self._finish(turn, ReplyKind.FALLBACK, turn.last_run.line)
        return self._finish(turn, ReplyKind.ASK_AGAIN, self.phrases.say_again)

    async def _unasked(self, call: AgentCall) -> str:
        """Why `call` is not what the caller asked for ('' when it is): a tool with a
        consent rule needs the act of the latest caller line among the rule's acts; a tool
        of the pack's `closing` may have it from the line's closing words instead
        (`closing_parts`: "... it must be with the neighbours then. right, thanks, bye"
        reads as an order line whole, as a goodbye at its end). A write needs the whole
        line: "yes, two sets, perfect" after a read-back of another thing is no yes. A tool
        in the pack's `said` also needs its words in the line (a goodbye for `end_call`),
        and one in its `held_back` is never run on a line that holds it back ("actually
        no, don't cancel it" read as a yes)."""
        acts = self._consent.get(call.tool)
        if acts is None or self._hints is None:
            return ""
        last = last_caller(self.turns)
        line = self.turns[last]
        assert isinstance(line, CallerTurn)
        held = self.pack.held_back.get(call.tool)
        if held is not None and re.search(held, line.text, re.IGNORECASE) is not None:
            return "the caller's words hold it back"
        words = self.pack.said.get(call.tool)
        if words is not None and re.search(words, line.text, re.IGNORECASE) is None:
            return "the caller's words do not ask for it"
        act = self._hints.hint(line.text)
        if act in acts:
            return ""
        needs = self.pack.closing_said.get(call.tool)
        for part in closing_parts(line.text) if call.tool in self.pack.closing else ():
            if needs is not None and re.search(needs, part, re.IGNORECASE) is None:
                continue
            if await asyncio.to_thread(self._hints.hint, part) in acts:
                return ""
        return f"the caller's line reads as {act!r}"

    def _ask_first(self, call: AgentCall) -> str | None:
        """The read-back of a write the caller has not agreed to yet ("oh sorry, it's
        friday, not monday" after a cancellation's read-back: the friday one is read back),
        so the caller can; None, and the tool is left out instead, when the line answered
        the read-back of this very call (anything but a yes is a no) or reads as a goodbye
        or a request for a person (the pack's `closing` tools' acts), or the tool has none."""
        templates = self._readbacks.get(call.tool)
        if not templates or self._hints is None:
            return None
        last = last_caller(self.turns)
        line, before = self.turns[last], self.turns[last - 1] if last > 0 else None
        assert isinstance(line, CallerTurn)
        if isinstance(before, AgentSay):
            options = self._options[call.tool]
            for template in templates:
                heard = template.read(before.text, options)
                if heard is not None and all(str(call.arguments.get(k)) == v
                                             for k, v in heard.items()):  # fmt: skip
                    return None
        closing = set().union(*(self._consent.get(t, frozenset()) for t in self.pack.closing))
        if self._hints.hint(line.text) in closing:
            return None
        return _spoken(templates, call)

    def _read_back(self, call: AgentCall) -> AgentCall | str:
        """A write with a read-back (the pack's `readbacks`, under the consent rule) runs
        only as the caller heard it: right after the agent spoke that read-back, with the
        read-back's values (what the caller said yes to), whatever values the model put in
        the call. Without one just before the caller's line, the read-back of the model's
        call (a str) is spoken instead, so nothing is written that the caller did not
        hear and accept. A call no wording can read back gets the repeat request."""
        templates = self._readbacks.get(call.tool)
        if not templates:
            return call
        last = last_caller(self.turns)
        before = self.turns[last - 1] if last > 0 else None
        heard = None
        if isinstance(before, AgentSay):
            for template in templates:
                heard = template.read(before.text, self._options[call.tool])
                if heard is not None:
                    break
        if heard is not None:
            said = {k: heard.get(k, v) for k, v in call.arguments.items()}
            try:
                args = self._models[call.tool].model_validate(said).model_dump()
            except ValueError:  # a read-back of values the tool cannot take
                args = None
            if args is not None:
                return call if args == dict(call.arguments) else AgentCall(call.tool, args)
        return _spoken(templates, call) or self.phrases.say_again

    def _grammar_for(self, withheld: frozenset[str]) -> CallGrammar:
        """The call grammar without the `withheld` tools (built once per set)."""
        if not withheld:
            return self._grammar
        if withheld not in self._narrowed:
            base = self._grammar
            tools = {n: m for n, m in base.tools.items() if n not in withheld}
            readbacks = [t for t, _ in base.readbacks if t.tool not in withheld]
            self._narrowed[withheld] = CallGrammar(base.tok, tools, readbacks)
        return self._narrowed[withheld]

    async def _generate(
        self,
        turn: _Turn,
        deadline_s: float | None,
        effort: Effort | None,
        tracker: TurnTracker | None,
    ) -> Generation:
        request = self._request(turn, deadline_s, effort, tracker)
        if tracker is not None:
            tracker.mark(Mark.ENGINE_START)
        result: Generation | None = None
        limit = asyncio.timeout(self._stall_s(request))
        try:
            async with limit:
                async for item in self._engine.stream_result(request):
                    if isinstance(item, Generation):
                        result = item
                        continue
                    if tracker is not None:
                        tracker.mark(Mark.ENGINE_FIRST_BLOCK)
                    sure = item.min_confidence if isinstance(item, CommittedBlock) else 1.0
                    turn.streamer.feed(item, sure)
        except TimeoutError:
            if not limit.expired():
                raise
            stall_s = self.config.engine_stall_s
            raise EngineStalled(f"no answer {stall_s:g} s past the engine deadline") from None
        if tracker is not None:
            tracker.mark(Mark.ENGINE_DONE)
        if result is None:
            raise RuntimeError("the engine ended a request without its result")
        _count(turn, result, tracker)
        return result

    def _stall_s(self, request: Request) -> float | None:
        """Real seconds the request may take before the turn gives up on the engine
        (None without a deadline). `request.deadline_s` is on the engine's clock, which
        is the agent's."""
        if request.deadline_s is None:
            return None
        left_s = max(0.0, request.deadline_s - self._clock.now())
        return left_s + self.config.engine_stall_s

    async def draft(self, caller_text: str, *, effort: Effort | None = None) -> Draft:
        """Decode the first answer to `caller_text` as if it ended the caller's turn,
        leaving the history as it is and running nothing (cancel it when the caller goes
        on). No deadline: it runs while the caller is silent."""
        history = tuple(self.turns)
        line = spoken_digits(caller_text.strip())
        await self._warm_hint(line)
        self.turns.append(CallerTurn(line))
        try:
            request = self._request(_Turn(0, SayStreamer(self._tok, None)), None, effort, None)
        finally:
            self.turns.pop()
        result: Generation | None = None
        async for item in self._engine.stream_result(request):
            if isinstance(item, Generation):
                result = item
        if result is None:
            raise RuntimeError("the engine ended a request without its result")
        return Draft(caller_text.strip(), history, result)

    async def _warm_hint(self, line: str) -> None:
        """Work out the caller line's hint (one sentence-encoder forward, tens of ms on a
        CPU) on a worker thread, so `_request` finds it cached and the event loop, which
        carries every call's audio, never waits on the encoder."""
        if self._hints is not None:
            await asyncio.to_thread(self._hints.hint, line)

    def _adopt(self, turn: _Turn, result: Generation, tracker: TurnTracker | None) -> Generation:
        """Take a draft's answer as this turn's first: streamed at once, timed as an
        engine stage of no length (the decoding happened before the turn began)."""
        if tracker is not None:
            tracker.note_preempted()
            for mark in (Mark.ENGINE_START, Mark.ENGINE_FIRST_BLOCK, Mark.ENGINE_DONE):
                tracker.mark(mark)
        turn.streamer.feed(result.token_ids, result.min_confidence)
        _count(turn, result, tracker)
        return result

    def _request(
        self,
        turn: _Turn,
        deadline_s: float | None,
        asked: Effort | None,
        tracker: TurnTracker | None,
    ) -> Request:
        """The next engine request: the tracker's plan (when there is one) decides effort,
        step cap and deadline; `asked` None means the admitted or configured effort."""
        cfg = self.config
        effort, steps = asked or cfg.effort, cfg.max_steps_per_block
        if tracker is not None:
            plan = tracker.plan_engine(EffortLevel(asked.value) if asked else None)
            effort = Effort(plan.effort.value)
            steps = min(steps, plan.max_steps_per_block or steps)
            deadline_s = plan.deadline_s if deadline_s is None else min(deadline_s, plan.deadline_s)
        if turn.last_run is not None and deadline_s is not None:
            floor_s = self._clock.now() + cfg.relay_floor_s
            if deadline_s < floor_s:
                past_ms = (floor_s - deadline_s) * 1000
                turn.degrade(DegradeKind.RELAY_FLOOR, f"{past_ms:.0f} ms past the engine deadline")
                effort, steps, deadline_s = Effort.INSTANT, cfg.max_steps_per_block, floor_s
        turns = self.turns if self._hints is None else list(self._hints.annotate(self.turns))
        text, kept_words = fit_prompt(turns, effort, self._tok, cfg.max_prompt_tokens)
        if kept_words is not None and turns is not self.turns:  # keep the cut, not the hint
            self.turns[:] = [replace(t, hint="") if isinstance(t, CallerTurn) else t for t in turns]
        if kept_words is not None:
            turn.degrade(DegradeKind.CALLER_TEXT_CUT, f"kept its last {kept_words} words")
        prompt = tuple(self._tok.encode(text))
        threshold = 1.0 if turn.careful else cfg.threshold  # 1.0: one token per step
        schedule = Schedule(threshold, steps, cfg.max_new_tokens, effort)
        grammar = self._grammar_for(turn.withheld)
        grounding = grounder(call_sources(self.turns))
        return Request(prompt, schedule, deadline_s, grammar, grounding)

    async def _call(
        self, turn: _Turn, call: AgentCall, generation: int, tracker: TurnTracker | None
    ) -> AgentReply | None:
        """Run the call; a reply when it ends the turn, None to ask the model again."""

        def into_history(run: ToolRun) -> None:
            self.turns += [call, run.result]

        run = await self.tools.run(call, turn.number, generation, into_history, tracker)
        turn.last_run = run
        outcome = run.record.outcome
        if outcome is ToolOutcome.DUPLICATE:
            turn.degrade(DegradeKind.DUPLICATE_CALL, call.json())
            return self._finish(turn, ReplyKind.FALLBACK, run.line)
        if outcome in _FAILURES:
            turn.degrade(_FAILURES[outcome], run.record.error)
            return self._finish(turn, ReplyKind.FALLBACK, run.line)
        if run.handoff is not None:
            return self._finish(turn, HANDOFF_KINDS[run.handoff], run.line)
        return None

    def _finish(
        self, turn: _Turn, kind: ReplyKind, line: str, reasoning: str | None = None
    ) -> AgentReply:
        text, whole = turn.streamer.finish(line)
        if not whole:
            turn.degrade(DegradeKind.STREAM_MISMATCH, f"{kind.value} {line!r} after streaming")
            kind = ReplyKind.SAY
        if text:
            self.turns.append(AgentSay(text))
        calls = tuple(r for r in self.tools.records if r.turn == turn.number)
        return AgentReply(text, kind, turn.number, calls, turn.figures, turn.degrades, reasoning,
                          preempted=turn.draft is not None)  # fmt: skip
