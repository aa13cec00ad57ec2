"""A deterministic dialogue simulator: multi-turn phone calls against the real tool pack.

Each dialogue runs the bike shop's real tools on its own SQLite file (a fresh seeded
`ShopDb` in a temporary directory, clock fixed at the dialogue's `now`), so every tool
result and refusal in the data is what the shop would really say. Callers speak in
ASR-style lines built from frames and values of the dialogue's split (`callers`,
`lexicon`); the scripted agent follows the rules of prompts/system.md (`scenarios`).
Every agent action is one training `Example`: the history before it, an effort level,
the reasoning that effort allows, and the action.

    for dialogue in scenarios.generate(seed=1, count=100, split=Split.TRAIN):
        for ex in dialogue.examples:
            prompt, target = ex.prompt(tok), ex.answer().answer_ids(tok, grammar)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from engine.constraints import CallGrammar
from engine.schedule import Effort
from engine.tokenizer import TextTokenizer
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.results import ToolError, ToolResult
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.brain.callers import with_edges
from voice_agent.brain.phrasing import (
    Casing,
    Pool,
    Split,
    caller_line,
    pick_casing,
    slots,
    surface,
)
from voice_agent.brain.results import result_turn
from voice_agent.dialogue.format import (
    ANSWER_TOKENS,
    MAX_PROMPT_TOKENS,
    AgentAction,
    AgentCall,
    AgentSay,
    CallerTurn,
    PromptTooLongError,
    RenderedAnswer,
    Turn,
    render_answer,
    render_prompt,
    turn_from_json,
    turn_to_json,
)
from voice_agent.dialogue.phrases import phrases

FIRST_DAY = date(2025, 6, 2)
"""Dialogues happen on days from here on (the shop's seed day is each dialogue's today)."""
DAYS_SPANNED = 56
OPEN_MINUTES = (8 * 60 + 30, 17 * 60 + 30)
"""A dialogue's clock time is drawn between these minutes after midnight."""
CLOCK_STEP_MIN = 10
EFFORT_WEIGHTS = {Effort.INSTANT: 0.4, Effort.LOW: 0.35, Effort.MEDIUM: 0.25}
VALUE_SLOTS = ("name", "order", "product", "item")
"""Slots whose values the held-out split keeps apart (recorded per dialogue)."""
FAST_SCRATCH = Path("/dev/shm")
"""Memory-backed scratch space for the per-dialogue shop files when the OS has one."""
MAX_TURNS = 40
"""A dialogue that runs this long is wrapped up (a safety net for loops)."""


class Intent(Enum):
    BOOK = "book"
    CANCEL = "cancel"
    ORDER = "order"
    SEARCH = "search"
    RESERVE_BY_ID = "reserve_by_id"
    HOURS = "hours"
    TRANSFER = "transfer"
    OFF_TOPIC = "off_topic"
    CHITCHAT = "chitchat"
    UNCLEAR = "unclear"


@dataclass(frozen=True, slots=True)
class Thought:
    """Reasoning for an action at each effort: `low` a few words, `medium` a sentence."""

    low: str
    medium: str

    def at(self, effort: Effort) -> str | None:
        return {Effort.INSTANT: None, Effort.LOW: self.low, Effort.MEDIUM: self.medium}[effort]


@dataclass(frozen=True, slots=True)
class Example:
    """One agent action in context: the training unit."""

    dialogue_id: str
    step: int
    """Index of the action in its dialogue's turns; `history` is the turns before it."""
    history: tuple[Turn, ...]
    effort: Effort
    reasoning: str | None
    action: AgentAction
    intent: Intent

    def prompt(self, tok: TextTokenizer | None = None, max_tokens: int = MAX_PROMPT_TOKENS) -> str:
        """The rendered prompt (exact truncation with `tok`). Raises PromptTooLongError."""
        return render_prompt(self.history, self.effort, tok, max_tokens)

    def answer(self) -> RenderedAnswer:
        return render_answer(self.action, self.reasoning)


@dataclass(frozen=True, slots=True)
class Dialogue:
    dialogue_id: str
    split: Split
    now: datetime
    """The shop's clock during the call."""
    intents: tuple[Intent, ...]
    turns: tuple[Turn, ...]
    examples: tuple[Example, ...]
    templates: tuple[str, ...]
    """Caller frames used, for the held-out checks."""
    values: tuple[str, ...]
    """Slot values said by the caller (names, order numbers, product phrases, items)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.dialogue_id,
            "split": self.split.value,
            "now": self.now.isoformat(),
            "intents": [i.value for i in self.intents],
            "turns": [turn_to_json(t) for t in self.turns],
            "templates": list(self.templates),
            "values": list(self.values),
            "examples": [
                {
                    "step": ex.step,
                    "intent": ex.intent.value,
                    "effort": ex.effort.value,
                    "reasoning": ex.reasoning,
                    "prompt": ex.prompt(),
                    "answer": ex.answer().full_text,
                    "call": turn_to_json(ex.action) if isinstance(ex.action, AgentCall) else None,
                }
                for ex in self.examples
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Dialogue:
        """Inverse of `to_json` (rendered prompts are recomputed). Raises ValueError/KeyError
        on malformed records."""
        turns = tuple(turn_from_json(t) for t in data["turns"])
        dialogue_id = str(data["id"])
        examples = []
        for ex in data["examples"]:
            action = turns[ex["step"]]
            if not isinstance(action, AgentSay | AgentCall):
                raise ValueError(f"{dialogue_id}: step {ex['step']} is not an agent action")
            examples.append(
                Example(dialogue_id, ex["step"], turns[: ex["step"]], Effort(ex["effort"]),
                        ex["reasoning"], action, Intent(ex["intent"]))
            )  # fmt: skip
        return cls(
            dialogue_id, Split(data["split"]), datetime.fromisoformat(data["now"]),
            tuple(Intent(i) for i in data["intents"]), turns, tuple(examples),
            tuple(data["templates"]), tuple(data["values"]),
        )  # fmt: skip


class Sim:
    """The builder of one dialogue: caller lines, agent actions, real tool calls."""

    def __init__(
        self, rng: random.Random, split: Split, ctx: ShopContext, dialogue_id: str
    ) -> None:
        self.rng, self.split, self.ctx, self.dialogue_id = rng, split, ctx, dialogue_id
        self.casing: Casing = pick_casing(rng)
        self.turns: list[Turn] = [AgentSay(phrases().greeting)]
        self.examples: list[Example] = []
        self.templates: list[str] = []
        self.values: list[str] = []
        self.intents: list[Intent] = []
        self.intent = Intent.CHITCHAT
        self.ended = False

    @property
    def today(self) -> date:
        return self.ctx.now().date()

    def pick(self, pool: Pool) -> str:
        return pool.pick(self.rng, self.split)

    def name(self, raw: str) -> str:
        """A name as this caller's ASR writes it (also the value a call copies)."""
        return surface(self.casing, raw, proper=True)

    def frame(self, pool: Pool, have: set[str], need: frozenset[str] = frozenset()) -> str:
        """A frame of `pool` for this split using only slots in `have` and all of `need`;
        the held-out split falls back to training frames when none of its own fit."""
        fitting = [f for f in pool.options(self.split) if need <= slots(f) <= have]
        if not fitting:
            fitting = [f for f in pool.train if need <= slots(f) <= have]
        if not fitting:
            raise ValueError(f"no frame in {pool} with slots {sorted(need)} ⊆ … ⊆ {sorted(have)}")
        return self.rng.choice(fitting)

    def caller(self, frame: str, *, edges: bool = False, **values: str) -> None:
        """The caller says `frame` (around it a greeting and a politeness word when
        `edges`), filled with `values`: names already in surface form (`name()`), the
        rest raw."""
        self.templates.append(frame)
        line = (
            with_edges(self.rng, self.split, frame, opener=not self.intents[1:]) if edges else frame
        )
        spoken = {k: v if k == "name" else surface(self.casing, v) for k, v in values.items()}
        self.values += [v for k, v in values.items() if k in VALUE_SLOTS and "{" + k + "}" in frame]
        self.turns.append(CallerTurn(caller_line(self.rng, line, spoken, self.casing)))

    def say_caller(self, pool: Pool, *, edges: bool = False, **values: str) -> None:
        """The caller says a frame of `pool` that uses exactly the slots given."""
        self.caller(self.frame(pool, set(values), frozenset(values)), edges=edges, **values)

    def begin(self, intent: Intent) -> None:
        self.intent = intent
        self.intents.append(intent)

    def _act(self, action: AgentAction, thought: Thought) -> None:
        effort = self.rng.choices(list(EFFORT_WEIGHTS), weights=list(EFFORT_WEIGHTS.values()))[0]
        self.examples.append(
            Example(self.dialogue_id, len(self.turns), tuple(self.turns), effort,
                    thought.at(effort), action, self.intent)
        )  # fmt: skip
        self.turns.append(action)

    def say(self, text: str, thought: Thought) -> None:
        self._act(AgentSay(text), thought)

    def call(self, tool: str, thought: Thought, **arguments: Any) -> ToolResult | ToolError:
        """Call the real tool (arguments in the model's field order) and record its result."""
        order = list(ARGUMENT_MODELS[tool].model_fields)
        args = {k: arguments[k] for k in order}
        self._act(AgentCall(tool, args), thought)
        outcome = self.run(tool, **args)
        self.turns.append(result_turn(tool, outcome))
        return outcome

    def run(self, tool: str, **arguments: Any) -> ToolResult | ToolError:
        """Run a tool without recording it (world set-up: other customers)."""
        try:
            return call_tool(tool, arguments, self.ctx)
        except ToolError as error:
            return error

    @property
    def too_long(self) -> bool:
        return len(self.turns) >= MAX_TURNS

    def dialogue(self, now: datetime) -> Dialogue:
        return Dialogue(
            self.dialogue_id, self.split, now, tuple(self.intents), tuple(self.turns),
            tuple(self.examples), tuple(self.templates), tuple(self.values),
        )  # fmt: skip


class Misfit(Enum):
    """Why an example does not fit the model's window or the call grammar."""

    PROMPT = "prompt"
    """The last caller turn alone overflows the prompt budget."""
    SLOT = "slot"
    """A call value is wider than its grammar slot for this tokenizer."""
    ANSWER = "answer"
    """Reasoning + action + EOS exceed the answer budget."""
    REASONING = "reasoning"
    """The reasoning exceeds its effort's token budget."""


def misfit(example: Example, grammar: CallGrammar) -> Misfit | None:
    """Why `example` cannot be trained on with `grammar`'s tokenizer, or None if it fits.
    The trainer drops misfits and reports their count."""
    tok = grammar.tok
    try:
        example.prompt(tok)
    except PromptTooLongError:
        return Misfit.PROMPT
    if example.reasoning and len(tok.encode(example.reasoning)) > (
        example.effort.reasoning_budget_tokens
    ):
        return Misfit.REASONING
    try:
        ids = example.answer().answer_ids(tok, grammar)
    except ValueError:
        return Misfit.SLOT
    return Misfit.ANSWER if len(ids) + 1 > ANSWER_TOKENS else None


def fits(example: Example, grammar: CallGrammar) -> bool:
    """The trainer's filter hook: True when `misfit` finds nothing."""
    return misfit(example, grammar) is None
