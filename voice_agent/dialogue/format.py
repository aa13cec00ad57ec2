"""The model's turn format (prompts/FORMAT.md): turn records, prompt and answer rendering,
answer parsing.

    prompt = render_prompt([CallerTurn("hi, do you have front lights?")], Effort.LOW, tok)
    answer = render_answer(AgentCall("search_products", {"query": "front lights"}), "search")
    ids = answer.answer_ids(tok, grammar)          # training target (EOS not included)
    parsed = parse_answer(decoded_text)             # -> Answer(reasoning, action)

The module knows no tool pack: pass `tools` (name → argument model) to `parse_answer` to
validate a call's arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from engine.constraints import CallGrammar
from engine.schedule import Effort
from engine.tokenizer import Special, TextTokenizer
from tools.core import ToolError
from voice_agent.grounding import CallSources

WINDOW_TOKENS = 256
"""The model's window: prompt + answer."""
ANSWER_BLOCK_TOKENS = 16
ANSWER_BLOCKS = 6
ANSWER_TOKENS = ANSWER_BLOCK_TOKENS * ANSWER_BLOCKS
"""Room left for the answer (reasoning + action + EOS)."""
MAX_PROMPT_TOKENS = WINDOW_TOKENS - ANSWER_TOKENS
BYTES_PER_TOKEN_ESTIMATE = 3.0
"""Used when no tokenizer is given: a BPE of about a thousand tokens trained on this data
averages ≈3.5 bytes per token on dialogue text, so this errs towards keeping less."""

EFFORT_TOKENS = {
    Effort.INSTANT: Special.EFFORT_INSTANT,
    Effort.LOW: Special.EFFORT_LOW,
    Effort.MEDIUM: Special.EFFORT_MEDIUM,
}
ERROR_PREFIX = "error"
HINT_MARK = "~"
"""Separates a caller line from its hint in a prompt (`<caller> sure thing ~ yes`)."""


@dataclass(frozen=True, slots=True)
class CallerTurn:
    """What the caller said, as the ASR transcribed it; `hint` is the act of the nearest
    known phrasing (voice_agent/dialogue/hints.py), shown after the line when set."""

    text: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class AgentSay:
    """Speech the agent said (or, as an answer, will say)."""

    text: str


@dataclass(frozen=True, slots=True)
class AgentCall:
    """A tool call; `arguments` in the argument model's field order."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def json(self) -> str:
        """The call as the grammar lays it out, without gap tokens."""
        return json.dumps({"name": self.tool, "arguments": dict(self.arguments)})


class SaysLine(Protocol):
    """A tool result: whatever else it holds, a line the agent can say."""

    @property
    def say(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolResultTurn:
    """A tool's outcome as fed back to the model: its speakable line, or
    `error <kind>: <message>` for a refusal (`error` holds the kind then)."""

    tool: str
    text: str
    error: str | None = None

    @classmethod
    def of(cls, tool: str, outcome: SaysLine | ToolError, notes: str = "") -> ToolResultTurn:
        """The turn for a tool's result (its `say`) or refusal (its kind's value and
        message), with the pack's `notes` after it."""
        if isinstance(outcome, ToolError):
            kind = str(outcome.kind.value)
            return cls(tool, f"{ERROR_PREFIX} {kind}: {outcome.message}{notes}", kind)
        return cls(tool, f"{outcome.say}{notes}")


Turn = CallerTurn | AgentSay | AgentCall | ToolResultTurn
AgentAction = AgentSay | AgentCall


@dataclass(frozen=True, slots=True)
class Answer:
    """A parsed answer: optional reasoning, then exactly one action."""

    reasoning: str | None
    action: AgentAction


@dataclass(frozen=True, slots=True)
class RenderedAnswer:
    """A training target. `text` runs up to and including `<call>` for a call, whose
    `(tool, arguments)` the grammar lays out; `full_text` is the readable whole."""

    text: str
    call: tuple[str, dict[str, Any]] | None

    @property
    def full_text(self) -> str:
        if self.call is None:
            return self.text
        return self.text + AgentCall(*self.call).json()

    def answer_ids(self, tok: TextTokenizer, grammar: CallGrammar) -> list[int]:
        """Target ids without EOS. Raises ValueError when a value does not fit its slot."""
        head = tok.encode(self.text)
        return head if self.call is None else head + grammar.encode(*self.call)


class AnswerError(ValueError):
    """An answer that is not `[<think> ...](<say> ...|<call>{...})`; the message says why."""


class PromptTooLongError(ValueError):
    """The last caller turn alone does not fit the prompt budget."""


def plain(text: str) -> str:
    """`text` with no special token's spelling and no hint mark left in it ("<result>"
    becomes "result"): what a caller says or a tool returns is words, never format, so a
    caller cannot fake a tool result, an agent turn or a hint."""
    for special in Special.ALL:
        text = text.replace(special, special[1:-1])
    return text.replace(HINT_MARK, " ")


def render_turn(turn: Turn) -> str:
    """One turn as it appears in a prompt (prompts/FORMAT.md); caller and tool text are
    made `plain`."""
    match turn:
        case CallerTurn(text, hint):
            return f"{Special.CALLER} {plain(text)}" + (f" {HINT_MARK} {hint}" if hint else "")
        case AgentSay(text):
            return f"{Special.AGENT}{Special.SAY} {text}"
        case AgentCall():
            return f"{Special.AGENT}{Special.CALL}{turn.json()}"
        case ToolResultTurn(_, text):
            return f"{Special.TOOL_RESULT} {plain(text)}"
    raise TypeError(f"not a turn: {turn!r}")


def count_tokens(text: str, tok: TextTokenizer | None) -> int:
    """Tokens of `text` under `tok`, or a conservative estimate without one."""
    if tok is not None:
        return len(tok.encode(text))
    specials = sum(text.count(s) for s in Special.ALL)
    return specials + int(len(text.encode()) / BYTES_PER_TOKEN_ESTIMATE) + 1


def call_sources(turns: Sequence[Turn]) -> CallSources:
    """The whole call's caller lines and tool results, for the engine's grounded slots
    (the prompt may keep only the latest turns)."""
    return CallSources(
        caller_lines=tuple(t.text for t in turns if isinstance(t, CallerTurn)),
        tool_results=tuple(t.text for t in turns if isinstance(t, ToolResultTurn)),
    )


def last_caller(turns: Sequence[Turn]) -> int:
    """Index of the latest caller turn in `turns`, -1 when there is none."""
    return max((i for i, t in enumerate(turns) if isinstance(t, CallerTurn)), default=-1)


def render_prompt(
    turns: Sequence[Turn],
    effort: Effort,
    tok: TextTokenizer | None = None,
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
) -> str:
    """`<bos><effort:E>` + the most recent whole turns that fit + `<agent>`.

    The last caller turn and the turns after it are always kept; if they do not all fit,
    the newest of the turns after it are kept. Raises ValueError without a caller turn,
    PromptTooLongError when the last caller turn alone overflows `max_prompt_tokens`.
    Token counts are exact with `tok` (specials split turns), estimated without.
    """
    latest = last_caller(turns)
    if latest < 0:
        raise ValueError("a prompt needs at least one caller turn")
    head, tail = f"{Special.BOS}{EFFORT_TOKENS[effort]}", Special.AGENT
    pieces = [render_turn(t) for t in turns]
    sizes = [count_tokens(p, tok) for p in pieces]
    budget = max_prompt_tokens - count_tokens(head, tok) - count_tokens(tail, tok)
    budget -= sizes[latest]
    if budget < 0:
        raise PromptTooLongError(
            f"the last caller turn takes {sizes[latest]} tokens; "
            f"the prompt budget is {max_prompt_tokens}"
        )
    kept = {latest}
    for i in range(len(turns) - 1, latest, -1):  # after the caller turn, newest first
        if sizes[i] > budget:
            break
        kept.add(i)
        budget -= sizes[i]
    if kept == set(range(latest, len(turns))):  # then older turns, while contiguous
        for i in range(latest - 1, -1, -1):
            if sizes[i] > budget:
                break
            kept.add(i)
            budget -= sizes[i]
    return head + "".join(pieces[i] for i in sorted(kept)) + tail


def render_answer(action: AgentAction, reasoning: str | None = None) -> RenderedAnswer:
    """The training target for `action` after optional `reasoning` (None or empty: no
    `<think>` segment, as at effort instant)."""
    think = f"{Special.THINK} {reasoning}" if reasoning else ""
    if isinstance(action, AgentSay):
        return RenderedAnswer(f"{think}{Special.SAY} {action.text}", None)
    return RenderedAnswer(f"{think}{Special.CALL}", (action.tool, dict(action.arguments)))


def parse_answer(
    answer: str | Sequence[int],
    tok: TextTokenizer | None = None,
    tools: Mapping[str, type[BaseModel]] | None = None,
) -> Answer:
    """Parse a decoded answer (text, or ids with `tok`). Gaps are dropped and anything
    from `<eos>` on is ignored. With `tools`, a call's tool must exist and its arguments
    validate (they are returned as validated, in field order). Raises AnswerError."""
    if not isinstance(answer, str):
        if tok is None:
            raise TypeError("parsing token ids needs the tokenizer")
        answer = tok.decode(answer)
    text = answer.split(Special.EOS, 1)[0]
    for filler in (Special.GAP, Special.PAD):
        text = text.replace(filler, "")
    if not text.strip():
        raise AnswerError("empty answer")
    reasoning: str | None = None
    if text.lstrip().startswith(Special.THINK):
        text = text.lstrip().removeprefix(Special.THINK)
        cut = [i for i in (text.find(Special.SAY), text.find(Special.CALL)) if i >= 0]
        if not cut:
            raise AnswerError(f"reasoning but no <say> or <call>: {answer!r}")
        reasoning, text = text[: min(cut)].strip(), text[min(cut) :]
    text = text.strip()
    if text.startswith(Special.SAY):
        speech = text.removeprefix(Special.SAY).strip()
        _reject_markers(speech, answer)
        if not speech:
            raise AnswerError(f"empty <say>: {answer!r}")
        if "{" in speech or "}" in speech:  # a tool call written as speech
            raise AnswerError(f"braces inside <say>, never speech: {answer!r}")
        return Answer(reasoning, AgentSay(speech))
    if text.startswith(Special.CALL):
        return Answer(reasoning, _parse_call(text.removeprefix(Special.CALL), answer, tools))
    raise AnswerError(f"answer must start with <think>, <say> or <call>: {answer!r}")


def _reject_markers(body: str, answer: str) -> None:
    for marker in (Special.THINK, Special.SAY, Special.CALL, Special.CALLER, Special.AGENT):
        if marker in body:
            raise AnswerError(f"{marker} inside the action: one action per answer: {answer!r}")


def _parse_call(body: str, answer: str, tools: Mapping[str, type[BaseModel]] | None) -> AgentCall:
    _reject_markers(body, answer)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"call is not JSON ({exc.msg}): {body!r}") from None
    if not isinstance(data, dict) or set(data) != {"name", "arguments"}:
        raise AnswerError(f'call must be {{"name": ..., "arguments": {{...}}}}: {body!r}')
    name, arguments = data["name"], data["arguments"]
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise AnswerError(f"call name must be a string, arguments an object: {body!r}")
    if tools is None:
        return AgentCall(name, arguments)
    if name not in tools:
        raise AnswerError(f"unknown tool {name!r}; known: {sorted(tools)}")
    try:
        validated = tools[name].model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise AnswerError(f"invalid arguments for {name}: {problems}") from None
    return AgentCall(name, validated.model_dump())


def turn_to_json(turn: Turn) -> dict[str, Any]:
    """A turn as a JSON object with a `role` key (caller, say, call, result)."""
    match turn:
        case CallerTurn(text):
            return {"role": "caller", "text": text}
        case AgentSay(text):
            return {"role": "say", "text": text}
        case AgentCall(tool, arguments):
            return {"role": "call", "tool": tool, "arguments": dict(arguments)}
        case ToolResultTurn(tool, text, error):
            return {"role": "result", "tool": tool, "text": text, "error": error}
    raise TypeError(f"not a turn: {turn!r}")


def turn_from_json(data: Mapping[str, Any]) -> Turn:
    """Inverse of `turn_to_json`. Raises ValueError for an unknown role or missing key."""
    try:
        match data["role"]:
            case "caller":
                return CallerTurn(data["text"])
            case "say":
                return AgentSay(data["text"])
            case "call":
                return AgentCall(data["tool"], dict(data["arguments"]))
            case "result":
                return ToolResultTurn(data["tool"], data["text"], data.get("error"))
    except KeyError as exc:
        raise ValueError(f"turn {dict(data)!r} lacks {exc}") from None
    raise ValueError(f"unknown turn role {data.get('role')!r}")
