"""Schema-constrained tool calls: keys and punctuation are placed, only values are denoised.

A call is written after the `<call>` token as JSON laid out by a `CallGrammar`:

    {"name": "<tool>", "arguments": {"key": "<value>", "n": <digits>}}

Every fixed piece is tokenized on its own and every value sits in a slot of a fixed
number of tokens, padded with the gap token (`<gap>`), so the layout of a tool's call is
known the moment the tool is chosen. Training data is encoded with `CallGrammar.encode`,
so the model sees exactly the layout the decoder imposes. While decoding:

* once `<call>` is committed, the name slot is placed; the tool is a joint choice among
  the tool names (sum of log-probabilities over the slot), then the tool's whole layout
  is placed, ending in EOS;
* enum slots are joint choices among their allowed values; text slots allow tokens that
  cannot break a JSON string; digit slots allow digit tokens only;
* a request may carry a `Grounding` (worked out by its `Grounder`, outside the engine:
  voice_agent/grounding): per grounded slot, the values the dialogue allows. A grounded
  digit or text slot is then a choice among those values (copied whole, never
  invented), a grounded enum slot a choice among its allowed values for the tool being
  written; when a grounded digit or text slot has nothing to copy, its tool is not
  chosen. The grounding may also name a tool result the answer relays word for word;
* so every decoded call parses and validates against its pydantic model, whatever the
  weights.

Supported field types: `Literal`/`Enum` strings (enum slots), `str` (text; `min_length`
>= 1 forbids an empty value; `pattern` `^\\d+$` makes a digit slot), `int` (digit slot,
unquoted, no leading zero). Only required fields are laid out; optional ones keep their
defaults. Per-field options go in `json_schema_extra`: `max_tokens`, and for the grounder
`grounded`, `distinct`, `person_name`, `asked_for`, `counted`, `labelled`, `said_as` (their
meaning is the grounder's: voice_agent/grounding/ground.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import torch
from pydantic import BaseModel
from torch import Tensor

from engine.readback import SayTemplate, Spoken, lead_ids
from engine.rules import Rule
from engine.tokenizer import Special, TextTokenizer

DEFAULT_TEXT_TOKENS = 8
DEFAULT_DIGIT_TOKENS = 6
DIGITS_PATTERN = r"^\d+$"
FORBIDDEN_IN_STRING = set('"\\') | {chr(c) for c in range(32)}


class SlotKind(Enum):
    ENUM = "enum"
    TEXT = "text"
    DIGITS = "digits"


@dataclass(frozen=True, slots=True)
class Slot:
    key: str
    kind: SlotKind
    width: int
    """Tokens in the slot; unused positions hold the gap token."""
    quoted: bool = True
    min_tokens: int = 0
    candidates: tuple[tuple[int, ...], ...] = ()
    """ENUM: each allowed value's tokens, gap-padded to `width`."""
    candidate_values: tuple[str, ...] = ()
    grounded: bool = False
    """The field's schema options the grounder reads (voice_agent/grounding/ground.py):
    `grounded` values are copied from the dialogue; `said_as` (ENUM: per value, a regex
    of other ways to say it, "" for none), `distinct`, `person_name`, `asked_for` (TEXT),
    `counted`, `labelled` (DIGITS) narrow what is copied. The engine only carries them."""
    said_as: tuple[str, ...] = ()
    distinct: bool = False
    person_name: bool = False
    asked_for: bool = False
    counted: bool = False
    labelled: bool = False


@dataclass(frozen=True, slots=True)
class Fixed:
    token: int


@dataclass(frozen=True, slots=True)
class SlotCell:
    slot: Slot
    offset: int


Cell = Fixed | SlotCell


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: BaseModel


@dataclass(frozen=True, slots=True)
class Grounding:
    """What the dialogue allows each grounded slot of a grammar to hold, for one request.
    Worked out outside the engine (voice_agent/grounding) from what the caller said."""

    said: Mapping[Slot, Slot] = field(default_factory=dict)
    """Grounded digit and text slots (and counted ones) → the slot as a choice among the
    values said (`CallGrammar.choices`). A grounded digit or text slot missing here has
    nothing to copy: its tool is not chosen."""
    mentioned: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """(tool, key) of a grounded enum slot → the values it may take in that tool's call or
    read-back (missing: all of them)."""
    names: tuple[str, ...] = ()
    """The phrases a read-back may speak as a `person_name` value (none: no read-back of
    a tool with one)."""
    relay: str = ""
    """A tool result's words the answer may speak word for word once it begins with them
    (a small model garbles "your reference is one zero zero four")."""


Grounder = Callable[["CallGrammar", str], Grounding]
"""A request's grounding from its grammar and its prompt as text."""


class CallGrammar:
    """The call layouts of a tool pack, for one tokenizer."""

    def __init__(
        self,
        tok: TextTokenizer,
        tools: dict[str, type[BaseModel]],
        readbacks: Sequence[SayTemplate] = (),
    ) -> None:
        """`readbacks`: spoken confirmations of calls, laid out once the model begins one
        (engine/readback.py)."""
        if not tools:
            raise ValueError("a call grammar needs at least one tool")
        self.tok = tok
        self.tools = dict(tools)
        self.gap = tok.ids.gap
        names = list(tools)
        self.name_slot = _enum_slot("name", names, tok, self.gap)
        self.prefix = tok.encode('{"name": "')
        self.slots = {name: [_slot(key, field, tok, self.gap) for key, field in _required(model)]
                      for name, model in tools.items()}  # fmt: skip
        self.text_allowed = _text_tokens(tok, [tok.decode([i]) for i in range(tok.vocab_size)])
        self.digit_allowed = _digit_tokens(tok)
        self.closing = [tok.ids.eos, tok.ids.call, tok.ids.say]
        """Tokens that would end or replace a call: banned before a laid-out call."""
        self.readbacks = [(t, lead_ids(tok, t)) for t in readbacks]
        for template in readbacks:
            keys = {slot.key for slot in self.slots.get(template.tool, [])}
            spoken = {p.key for p in template.pieces if isinstance(p, Spoken)}
            spoken |= {k for k, _ in template.fixed}
            if template.tool not in self.slots or not spoken <= keys:
                raise ValueError(
                    f"read-back of {template.tool!r} speaks {sorted(spoken - keys)}, "
                    "which are not required arguments of a tool of this grammar"
                )

    # ------------------------------------------------------------------ layouts

    def name_layout(self) -> list[Cell]:
        """Cells right after `<call>`: the prefix and the tool-name slot."""
        return [*map(Fixed, self.prefix), *_slot_cells(self.name_slot)]

    def tool_layout(self, tool: str) -> list[Cell]:
        """Cells after the name slot, through the closing braces (EOS not included)."""
        cells: list[Cell] = [*map(Fixed, self.tok.encode('", "arguments": {'))]
        for i, slot in enumerate(self.slots[tool]):
            sep = ", " if i else ""
            quote = '"' if slot.quoted else ""
            cells += map(Fixed, self.tok.encode(f'{sep}"{slot.key}": {quote}'))
            cells += _slot_cells(slot)
            if quote:
                cells += map(Fixed, self.tok.encode(quote))
        cells += map(Fixed, self.tok.encode("}}"))
        return cells

    def encode(self, tool: str, arguments: dict[str, Any]) -> list[int]:
        """The token ids after `<call>` for a call (training targets). Raises ValueError
        when a value does not fit its slot."""
        if tool not in self.tools:
            raise ValueError(f"unknown tool {tool!r}")
        self.tools[tool].model_validate(arguments)
        ids = [*self.prefix, *_fill(self.name_slot, tool, self.tok, self.gap)]
        values = {slot.key: slot for slot in self.slots[tool]}
        for cell in self.tool_layout(tool):
            if isinstance(cell, Fixed):
                ids.append(cell.token)
            elif cell.offset == 0:
                ids += _fill(
                    values[cell.slot.key], str(arguments[cell.slot.key]), self.tok, self.gap
                )
        return ids

    def parse(self, ids: list[int]) -> ToolCall:
        """Validate the ids after `<call>` (gaps and EOS dropped). Raises ValueError."""
        text = self.tok.decode([i for i in ids if i not in (self.gap, self.tok.ids.eos)])
        try:
            data = json.loads(text)
            name = data["name"]
            model = self.tools[name]
            return ToolCall(name, model.model_validate(data["arguments"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid tool call {text!r}: {exc}") from None

    # ------------------------------------------------------------------ decoding

    @property
    def max_call_tokens(self) -> int:
        """Tokens of the longest call after `<call>`, EOS included."""
        longest = max(len(self.tool_layout(name)) for name in self.tools)
        return len(self.name_layout()) + longest + 1

    def allowed(self, cell: SlotCell) -> Tensor:
        """(vocab,) bool of tokens allowed at a free text or digit slot position (grounded
        slots are choices among the values their `Grounding` allows instead)."""
        slot = cell.slot
        base = self.digit_allowed if slot.kind is SlotKind.DIGITS else self.text_allowed
        allowed = base.clone()
        if slot.kind is SlotKind.DIGITS and not slot.quoted and cell.offset == 0:
            allowed[self.tok.id("0") if _has(self.tok, "0") else self.gap] = False
        allowed[self.gap] = cell.offset >= slot.min_tokens
        return allowed

    def choose(self, slot: Slot, log_probs: dict[int, Tensor], among: set[str]) -> int:
        """Index of the best enum candidate in `among`, scored by the sum of log-probs
        at the slot offsets seen so far."""
        offsets = sorted(log_probs)
        candidates = torch.tensor(slot.candidates)[:, offsets]  # (choices, seen)
        seen = torch.stack([log_probs[o] for o in offsets])  # (seen, vocab)
        scores = seen.gather(1, candidates.T).sum(0)  # (choices,)
        allowed = torch.tensor([v in among for v in slot.candidate_values])
        return int(scores.masked_fill(~allowed, float("-inf")).argmax())

    def fits(self, slot: Slot, value: str) -> bool:
        """`value` takes as many tokens as `slot` allows."""
        return slot.min_tokens <= len(self.tok.encode(value)) <= slot.width

    def choices(self, slot: Slot, values: list[str]) -> Slot:
        """`slot` as a choice among `values` (each fits it)."""
        candidates = tuple(tuple(_fill(slot, v, self.tok, self.gap)) for v in values)
        return Slot(slot.key, SlotKind.ENUM, slot.width, slot.quoted,
                    candidates=candidates, candidate_values=tuple(values))  # fmt: skip

    def feasible(self, tool: str, said: Mapping[Slot, Slot]) -> bool:
        """False when a grounded field has nothing in the prompt to copy from (an order
        status call with no number said): such a tool is never chosen."""
        return all(
            slot in said
            for slot in self.slots[tool]
            if slot.grounded and slot.kind is not SlotKind.ENUM
        )


def _required(model: type[BaseModel]) -> list[tuple[str, dict[str, Any]]]:
    schema = model.model_json_schema()
    props = schema.get("properties", {})
    defs = schema.get("$defs", {})
    out = []
    for key in schema.get("required", []):
        field = props[key]
        if "$ref" in field:
            field = {
                **defs[field["$ref"].split("/")[-1]],
                **{k: v for k, v in field.items() if k != "$ref"},
            }
        out.append((key, field))
    return out


def _slot(key: str, field: dict[str, Any], tok: TextTokenizer, gap: int) -> Slot:
    if "enum" in field or "const" in field:
        values = [str(v) for v in field.get("enum", [field.get("const")])]
        slot = _enum_slot(key, values, tok, gap)
        said_as = field.get("said_as", {})
        unknown = set(said_as) - set(values)
        if unknown:
            raise ValueError(f"field {key!r}: said_as names values it does not have: {unknown}")
        for pattern in said_as.values():
            re.compile(pattern)  # a bad pattern fails at grammar build, not mid-call
        return replace(
            slot,
            grounded=bool(field.get("grounded")),
            said_as=tuple(said_as.get(v, "") for v in values),
        )
    kind = field.get("type")
    min_tokens = 1 if field.get("minLength", 0) >= 1 else 0
    if kind == "integer":
        width = int(
            field.get("max_tokens", len(str(field.get("maximum", 10**DEFAULT_DIGIT_TOKENS - 1))))
        )
        return Slot(key, SlotKind.DIGITS, width, quoted=False, min_tokens=1,
                    counted=bool(field.get("counted")))  # fmt: skip
    if kind == "string" and field.get("pattern") == DIGITS_PATTERN:
        width = int(field.get("max_tokens", field.get("maxLength", DEFAULT_DIGIT_TOKENS)))
        least = max(1, int(field.get("minLength", 1)))  # one token per digit
        grounded, labelled = bool(field.get("grounded")), bool(field.get("labelled"))
        return Slot(key, SlotKind.DIGITS, width, min_tokens=least, grounded=grounded,
                    labelled=labelled)  # fmt: skip
    if kind == "string":
        width = int(field.get("max_tokens", DEFAULT_TEXT_TOKENS))
        grounded, distinct = bool(field.get("grounded")), bool(field.get("distinct"))
        return Slot(key, SlotKind.TEXT, width, min_tokens=min_tokens, grounded=grounded,
                    distinct=distinct, person_name=bool(field.get("person_name")),
                    asked_for=bool(field.get("asked_for")))  # fmt: skip
    raise ValueError(f"field {key!r}: unsupported schema {field}")


def _enum_slot(key: str, values: list[str], tok: TextTokenizer, gap: int) -> Slot:
    encoded = [tuple(tok.encode(v)) for v in values]
    width = max(len(e) for e in encoded)
    padded = tuple(e + (gap,) * (width - len(e)) for e in encoded)
    return Slot(key, SlotKind.ENUM, width, candidates=padded, candidate_values=tuple(values))


def _slot_cells(slot: Slot) -> list[Cell]:
    return [SlotCell(slot, i) for i in range(slot.width)]


def _fill(slot: Slot, value: str, tok: TextTokenizer, gap: int) -> list[int]:
    if slot.kind is SlotKind.ENUM:
        return list(slot.candidates[slot.candidate_values.index(value)])
    ids = tok.encode(value)
    if len(ids) > slot.width or len(ids) < slot.min_tokens:
        raise ValueError(
            f"value {value!r} of {slot.key!r} takes {len(ids)} tokens; slot has {slot.width}"
        )
    return ids + [gap] * (slot.width - len(ids))


def _text_tokens(tok: TextTokenizer, texts: list[str]) -> Tensor:
    allowed = torch.zeros(tok.vocab_size, dtype=torch.bool)
    specials = {tok.id(t) for t in Special.ALL}
    for i, text in enumerate(texts):
        allowed[i] = (
            bool(text)
            and i not in specials
            and not (set(text) & FORBIDDEN_IN_STRING)
            and "\ufffd" not in text
        )
    return allowed


def _digit_tokens(tok: TextTokenizer) -> Tensor:
    allowed = torch.zeros(tok.vocab_size, dtype=torch.bool)
    for d in "0123456789":
        if _has(tok, d):
            allowed[tok.id(d)] = True
    return allowed


def _first_word_tokens(tok: TextTokenizer, ids: tuple[int, ...]) -> int:
    """How many of `ids` spell their first word up to an apostrophe (" B", "o", "oked" for
    " Booked"; " You" for " You're", since the model often commits " You" long before
    "'re"): the opening a relay must match, never a bare fragment like " Can" of
    "Cancelled"."""
    n = 1 if ids else 0
    while n < len(ids) and re.match(r"[^\W\d_]", tok.decode([ids[n]])):
        n += 1
    return n


def _has(tok: TextTokenizer, token: str) -> bool:
    return tok.tokenizer.token_to_id(token) is not None


class CallPlan(Rule):
    """Per-request constraint state: which answer positions the grammar governs; a rule
    of the decode loop (engine/rules.py).

    `cells` maps answer positions to their cell. Each step the decoding loop calls `ban`
    (restrict the block's logits, settle enum choices), then commits, then `take_back`
    (notice a committed `<call>`, a read-back's opening words or the start of a relayed
    tool result, and lay out what follows); `fill_block` places fixed tokens into a new
    block. `open` says a layout is placed but not yet complete, so the loop must not stop
    at a length or deadline boundary inside it.
    """

    def __init__(
        self, grammar: CallGrammar, limit: int, grounding: Grounding | None = None
    ) -> None:
        """`limit`: the answer's capacity in tokens; `<call>` is banned where the longest
        call would not end within it. `grounding`: what the dialogue lets each grounded
        slot hold (None: nothing is narrowed and every tool may be chosen)."""
        self.grammar = grammar
        self.limit = limit
        self.last_call_start = limit - grammar.max_call_tokens - 1
        self.grounding = grounding
        relay = grounding.relay if grounding is not None else ""
        self.echo = tuple(grammar.tok.encode(" " + relay)) if relay else ()
        self.echo_lead = _first_word_tokens(grammar.tok, self.echo)
        """The tool result to relay, as it would follow `<say>`: once the model's speech
        begins with its first words, the rest is laid out word for word."""
        self.echo_end: int | None = None
        self.echo_at: int | None = None
        self.layouts: dict[SayTemplate, list[Cell] | None] = {}
        """Read-back layouts, built once when first opened."""
        self.committed: dict[int, int] = {}
        """Answer position → token committed there, for openings that span blocks."""
        self.said: dict[Slot, Slot] = dict(grounding.said) if grounding is not None else {}
        """Grounded digit and text slots → choices among what was said."""
        self.names = list(grounding.names) if grounding is not None else []
        self.feasible = (
            set(grammar.tools)
            if grounding is None
            else {name for name in grammar.tools if grammar.feasible(name, self.said)}
        )
        self.cells: dict[int, Cell] = {}
        self.call_at: int | None = None
        self.say_at: int | None = None
        """Answer position where a read-back's laid-out part begins, once one is."""
        self.end: int | None = None
        """Answer position of the call's (or read-back's) EOS once it is laid out."""
        self.tool: str | None = None
        self.say_tool: str | None = None
        """The tool whose read-back is laid out, once one is."""

    @property
    def opened_at(self) -> int | None:
        """Answer position where the laid-out call, read-back or relay begins, if any."""
        for at in (self.call_at, self.say_at, self.echo_at):
            if at is not None:
                return at
        return None

    def open(self, answer_len: int) -> bool:
        """True while a call's or read-back's layout continues past `answer_len` tokens."""
        if self.echo_end is not None and self.echo_end >= answer_len:
            return True
        laid_out = self.call_at is not None or self.say_at is not None
        return laid_out and (self.end is None or self.end >= answer_len)

    def ban(self, answer: list[int], canvas: Tensor, logits: Tensor, banned: Tensor) -> int:
        """Restrict `banned` (block, vocab) at governed positions and settle enum slots
        met in this block, writing their tokens into `canvas` (block,). Returns the number
        of model-chosen tokens placed (enum values, gaps excluded)."""
        block_start = len(answer)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (block, vocab)
        placed, laid_out = self._restrict(canvas, block_start, log_probs, banned)
        while laid_out:  # choosing the tool laid out more cells, maybe in this very block
            more, laid_out = self._restrict(canvas, block_start, log_probs, banned)
            placed += more
        return placed

    def _restrict(
        self, canvas: Tensor, block_start: int, log_probs: Tensor, banned: Tensor
    ) -> tuple[int, bool]:
        """One pass of `before_commit`; also says whether a tool's layout was added."""
        mask_id = self.grammar.tok.ids.mask
        enums: dict[int, tuple[Slot, dict[int, Tensor]]] = {}
        for j in range(canvas.shape[0]):
            pos = block_start + j
            cell = self.cells.get(pos)
            if canvas[j] != mask_id:
                continue
            if cell is None and self.opened_at is not None and pos < self.opened_at:
                banned[j, self.grammar.closing] = True  # the laid-out action stays the answer's
            elif cell is None and (not self.feasible or pos > self.last_call_start):
                banned[j, self.grammar.tok.ids.call] = True  # no call could be made or end
            elif isinstance(cell, SlotCell) and cell.slot.kind is SlotKind.ENUM:
                start = pos - cell.offset
                enums.setdefault(start, (cell.slot, {}))[1][cell.offset] = log_probs[j]
            elif isinstance(cell, SlotCell):
                banned[j] = ~self.grammar.allowed(cell)
        placed, laid_out = 0, False
        for start, (slot, seen) in enums.items():
            among = self.feasible if slot is self.grammar.name_slot else self._mentioned(slot)
            choice = self.grammar.choose(slot, seen, among)
            for offset, token in enumerate(slot.candidates[choice]):
                self.cells[start + offset] = Fixed(token)
                placed += token != self.grammar.gap
            if slot is self.grammar.name_slot:
                self.tool = slot.candidate_values[choice]
                layout = [*self.grammar.tool_layout(self.tool), Fixed(self.grammar.tok.ids.eos)]
                self._extend(start + slot.width, layout)
                self.end = start + slot.width + len(layout) - 1
                laid_out = True
        self._place(canvas, block_start)
        return placed, laid_out

    def take_back(self, answer: list[int], canvas: Tensor) -> Tensor:
        """Lay out the call once `<call>` is committed, or a read-back once `<say>` and
        its opening words are. Returns the (block,) bool positions whose committed tokens
        were taken back because the layout now governs them."""
        block_start = len(answer)
        none = torch.zeros_like(canvas, dtype=torch.bool)
        if self.opened_at is not None:
            return none
        hits = (canvas == self.grammar.tok.ids.call).nonzero()
        if hits.numel() > 0:
            self.call_at = block_start + int(hits[0]) + 1
            self._extend(self.call_at, self.grammar.name_layout())
            return self._take_back(canvas, block_start, int(hits[0]) + 1)
        if not self.grammar.readbacks and not self.echo:
            return none
        mask_id, say = self.grammar.tok.ids.mask, self.grammar.tok.ids.say
        for j, token in enumerate(canvas.tolist()):
            if token != mask_id:
                self.committed[block_start + j] = token
        for pos in sorted(p for p, token in self.committed.items() if token == say):
            for template, lead in self.grammar.readbacks:
                start = pos + 1 + len(lead)
                if start < block_start or self._run(pos + 1, len(lead)) != lead:
                    continue
                opening: list[Cell] = []
                if pos + 1 >= block_start:  # the opening is still this block's to change
                    said = self._fixed_said(template)
                    if said is not None and said is not template:
                        template, lead = said, lead_ids(self.grammar.tok, said)
                        opening, start = [Fixed(t) for t in lead], pos + 1
                layout = self._layout(template)
                if layout is None or start + len(opening) + len(layout) >= self.limit:
                    continue
                self._extend(start, [*opening, *layout, Fixed(self.grammar.tok.ids.eos)])
                self.say_at, self.end = start, start + len(opening) + len(layout)
                self.say_tool = template.tool
                return self._take_back(canvas, block_start, start - block_start)
            lead, rest = self.echo[: self.echo_lead], self.echo[self.echo_lead :]
            start = pos + 1 + len(lead)
            if (rest and block_start <= start and start + len(rest) < self.limit
                    and self._run(pos + 1, len(lead)) == lead):  # fmt: skip
                self._extend(start, [Fixed(t) for t in rest])
                self.echo_at = pos + 1
                self.echo_end = start + len(rest) - 1  # what follows is the model's again
                return self._take_back(canvas, block_start, start - block_start)
        return none

    def _run(self, start: int, n: int) -> tuple[int, ...]:
        """The committed tokens at answer positions `start`.. (-1 where none is yet)."""
        return tuple(self.committed.get(start + i, -1) for i in range(n))

    def _take_back(self, canvas: Tensor, block_start: int, first: int) -> Tensor:
        """Re-mask what was committed from block index `first` on (decided without the
        layout: decided again under it) and place the layout's fixed tokens. Returns the
        positions re-masked."""
        taken = torch.zeros_like(canvas, dtype=torch.bool)
        taken[max(first, 0) :] = canvas[max(first, 0) :] != self.grammar.tok.ids.mask
        canvas[taken] = self.grammar.tok.ids.mask
        self._place(canvas, block_start)
        return taken

    def _layout(self, template: SayTemplate) -> list[Cell] | None:
        if template not in self.layouts:
            self.layouts[template] = self._readback_layout(template)
        return self.layouts[template]

    def _fixed_said(self, template: SayTemplate) -> SayTemplate | None:
        """For a read-back whose wording fixes an argument that is grounded or counted
        (the count in "Two city inner tubes for ..."), the wording of the same tool that
        speaks what the caller said (the first count of the latest line to say one; a
        count nobody said is one) and that can be laid out; None when there is none or
        `template` fixes nothing of the kind."""
        slots = {slot.key: slot for slot in self.grammar.slots[template.tool]}
        keys = [k for k, _ in template.fixed if slots[k].grounded or slots[k].counted]
        if not keys:
            return None
        wanted: dict[str, list[str]] = {}
        for key in keys:
            said = self.said.get(slots[key])
            wanted[key] = list(said.candidate_values) if said is not None else (
                ["1"] if slots[key].counted else [])  # fmt: skip
        ranked: list[tuple[int, SayTemplate]] = []
        for other, _ in self.grammar.readbacks:
            fixed = dict(other.fixed)
            if other.tool != template.tool or set(fixed) != {k for k, _ in template.fixed}:
                continue
            if all(fixed[k] in wanted[k] for k in keys) and self._layout(other) is not None:
                ranked.append((sum(wanted[k].index(fixed[k]) for k in keys), other))
        return min(ranked, key=lambda r: r[0])[1] if ranked else None

    def _readback_layout(self, template: SayTemplate) -> list[Cell] | None:
        """The cells after a read-back's opening words: its text as fixed tokens, each
        spoken argument as a choice among the values the call's slot could take, said as
        the template says them (those among the piece's `values`, when it has any). None
        when an argument has nothing to copy (nothing said looks like a name)."""
        tok, gap = self.grammar.tok, self.grammar.gap
        slots = {slot.key: slot for slot in self.grammar.slots[template.tool]}
        cells: list[Cell] = []
        for segment in template.segments()[1:]:
            if isinstance(segment, str):
                cells += [Fixed(t) for t in tok.encode(segment)]
                continue
            slot = slots[segment.key]
            base = slot if slot.kind is SlotKind.ENUM else self.said.get(slot)
            if base is None or (
                slot.person_name and not set(base.candidate_values) <= set(self.names)
            ):
                return None  # no name to speak: never read back a word that is not one
            values = [v for v in base.candidate_values if not segment.values or v in segment.values]
            if not values:
                return None  # none of what was said is a value this wording speaks
            said = _enum_slot(segment.key, [segment.render(v) for v in values], tok, gap)
            cells += _slot_cells(replace(base, width=said.width, candidates=said.candidates))
        return cells

    def _mentioned(self, slot: Slot) -> set[str]:
        """The values a grounded enum slot may take in the call or read-back being laid
        out (all of them without a grounding)."""
        values = set(slot.candidate_values)
        if not slot.grounded or self.grounding is None:
            return values
        tool = self.tool or self.say_tool
        return set(self.grounding.mentioned.get((str(tool), slot.key), values))

    def fill_block(self, answer: list[int], canvas: Tensor) -> None:
        self._place(canvas, len(answer))

    def _extend(self, start: int, layout: list[Cell]) -> None:
        for i, cell in enumerate(layout):
            if isinstance(cell, SlotCell) and cell.slot in self.said:
                cell = SlotCell(self.said[cell.slot], cell.offset)
            self.cells[start + i] = cell

    def _place(self, canvas: Tensor, block_start: int) -> None:
        eos = self.grammar.tok.ids.eos
        for j in range(canvas.shape[0]):
            pos = block_start + j
            cell = self.cells.get(pos)
            if isinstance(cell, Fixed):
                canvas[j] = cell.token
            elif self.end is not None and pos > self.end:
                canvas[j] = eos  # past the call's EOS: nothing left to decide
