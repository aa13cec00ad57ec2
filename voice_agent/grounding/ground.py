"""`ground`: a request's `engine.constraints.Grounding`, read from its prompt and the call.

What each grounded slot of the grammar may hold (the options in a tool's argument
schema, engine/constraints.py):

* a grounded digit slot: the numbers the prompt says (digits read out one by one count
  as one number), and the whole call's tool results and caller lines; a `labelled` one
  narrowed to the numbers whose label in a tool result the caller named (said.py);
* a grounded text slot: the prompt's phrases of up to `MAX_PHRASE_WORDS` words (never
  across punctuation or a turn tag); a `person_name` one among the phrases that look like
  the caller's name (names.py), an `asked_for` one among what the caller's latest request
  asks for (said.py), when any do; a `distinct` one never copies a phrase with a number
  or a word of the grammar's closed sets (a name is not "tomorrow" or "brake check");
* a `counted` digit slot: the counts the caller said, when any;
* a grounded enum slot: the values the latest caller line to name any names (as words,
  or by the field's `said_as` pattern); for the tool the prompt last read back, that
  read-back's value unless the caller named another since; else the values the prompt or
  the whole call names; else all.

A grounded digit or text slot with nothing to copy makes its tool infeasible. The
prompt's own agent turns are never a source (what the agent said first, the caller never
confirmed), except a read-back the caller answered. `relay` is the tool result the prompt
ends with, which the answer may speak word for word.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from engine.constraints import CallGrammar, Grounder, Grounding, Slot, SlotKind
from engine.readback import SayTemplate, Spoken, heard_values
from engine.tokenizer import Special
from voice_agent.grounding.names import name_phrases
from voice_agent.grounding.said import (
    WORD,
    asked_for,
    counts_said,
    labelled_said,
    labels,
    said_as_words,
)

NUMBER_SAID = re.compile(r"\d(?:(?:, |[ -])?\d)*")
"""A number in the prompt: digits, possibly read out one by one ("4 1 7 2", "4-1-7-2",
"4, 1, 7, 2")."""
AGENT_OWN = re.compile(
    "(?:" + "|".join(re.escape(t) for t in (Special.SAY, Special.THINK, Special.CALL)) + ")[^<]*"
)
"""What the agent said, thought or called: never a source of grounded values."""
PHRASE_BREAK = re.compile(r"[.,!?;:]|<[^<>\s]+>")
"""Phrases never span punctuation or a special token (`<caller>`, `<result>`, ...)."""
NEGATED = re.compile(
    r"(?:\bnot|\bnever|n't(?: do| make)?|\bcannot(?: do| make)?)\s+(?:on |at |the )?$",
    re.IGNORECASE,
)
"""Text that ends just before a value the caller rules out ("not eleven", "can't do
monday")."""
MAX_PHRASE_WORDS = 4
CALLER_SPEECH = re.compile(rf"{re.escape(Special.CALLER)}([^<]*)")
NUMBER_WORDS = frozenset((
    "zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
    "eighty", "ninety", "hundred", "thousand", "half", "quarter", "couple",
))  # fmt: skip
"""Words a `distinct` text slot never copies: numbers as a caller says them."""
LAST_RESULT = re.compile(
    rf"{re.escape(Special.TOOL_RESULT)}\s*(?:error [a-z_]+:\s*)?([^<]*?)\s*(?:\[[^\[\]<]*\])?\s*"
    rf"{re.escape(Special.AGENT)}$"
)
"""The prompt ends with a tool result: its speakable words (a refusal's message without
`error <kind>:`, no bracketed ids), which the reply may relay word for word."""


@dataclass(frozen=True, slots=True)
class CallSources:
    """What the whole call said, oldest first, for when the prompt keeps only its latest
    turns: a name slot looks for the caller's name in `caller_lines`, a grounded number
    (an order number, a product id) in those and in `tool_results` too, so a value said
    or found early in a long call can still be copied."""

    caller_lines: tuple[str, ...] = ()
    tool_results: tuple[str, ...] = ()


def grounder(sources: CallSources | None = None) -> Grounder:
    """What a `Request` takes: `ground` with the whole call's `sources`."""
    return functools.partial(ground, sources=sources)


@dataclass(frozen=True, slots=True)
class _Heard:
    """The prompt's latest read-back: its tool, where it ends, the values it spoke."""

    tool: str
    end: int
    values: dict[str, str]


def ground(grammar: CallGrammar, prompt: str, sources: CallSources | None = None) -> Grounding:
    """The grounding of a request whose prompt decodes to `prompt` (see the module
    docstring). `sources`: the whole call, when the prompt holds only its latest turns."""
    facts = _facts(grammar)
    prompt_text = AGENT_OWN.sub(" . ", prompt)
    caller_lines = CALLER_SPEECH.findall(prompt)
    result = LAST_RESULT.search(prompt)
    relay = result[1] if result and result[1] else ""
    lines, numbers_text = tuple(caller_lines), prompt_text
    if sources is not None:
        lines = sources.caller_lines
        numbers_text = " . ".join((prompt_text, *sources.tool_results, *lines))
    heard: _Heard | None = None
    for readback in facts.heard_readbacks:
        for m in readback.pattern.finditer(prompt):
            if heard is None or m.end() > heard.end:
                heard = _Heard(readback.tool, m.end(), readback.heard(m))
    heard_end = heard.end if heard else len(prompt)
    since_heard = [m[1] for m in CALLER_SPEECH.finditer(prompt) if m.start() >= heard_end]
    names = name_phrases(lines, facts.closed_words) or []
    read_name = [v for k, v in heard.values.items() if k in facts.person_keys] if heard else []
    if read_name and read_name[0] in names and not name_phrases(since_heard, facts.closed_words):
        names = read_name[:1]  # the name read back, when the caller named nobody since
    asked = asked_for(lines)
    said: dict[Slot, Slot] = {}
    for slots in grammar.slots.values():
        for slot in slots:
            if slot.grounded and slot.kind is not SlotKind.ENUM:
                text = numbers_text if slot.kind is SlotKind.DIGITS else prompt_text
                preferred = names if slot.person_name else asked if slot.asked_for else None
                choice = said_choice(grammar, slot, text, preferred)
                if choice is not None:
                    said[slot] = _narrowed(grammar, slot, choice, numbers_text, lines)
            elif slot.counted:
                counts = counts_said(lines, 10**slot.width - 1)
                if counts:
                    said[slot] = grammar.choices(slot, [str(n) for n in counts])
    source_lines: tuple[str, ...] = ()
    if sources is not None:
        source_lines = (*sources.caller_lines[::-1], *sources.tool_results[::-1])
    texts = (*reversed(caller_lines), prompt_text, *source_lines)
    mentioned = {
        (tool, slot.key): frozenset(_mentioned(slot, tool, heard, since_heard, texts))
        for tool, slots in grammar.slots.items()
        for slot in slots
        if slot.kind is SlotKind.ENUM and slot.grounded
    }
    return Grounding(said, mentioned, tuple(names), relay)


def _mentioned(
    slot: Slot, tool: str, heard: _Heard | None, since_heard: list[str], texts: Sequence[str]
) -> set[str]:
    """A grounded enum's values said (as whole words, in any case, with a hyphen, a
    space or nothing between words: Whisper writes "Tune up" for "tune-up"; or as its
    `said_as` pattern): those the latest caller line to name any names (a caller's
    correction wins: "at two ... better half past twelve"). But when the call (or
    read-back) being written is of the tool the prompt last read back, and no caller
    line since names a value, the read-back's value: the caller answered what they
    heard ("so a brake check next friday ..." "yes"), which the agent's own words
    are otherwise never a source of. Else the values the prompt names (a tool
    result), else those the whole call's lines and results name, latest first, else
    all of them (the caller may have used a synonym)."""
    values = set(slot.candidate_values)
    if heard is not None and heard.tool == tool:
        for text in reversed(since_heard):
            found = _said_in(slot, text)
            if found:
                return found
        value = heard.values.get(slot.key)
        if value in values:
            return {value}
    for text in texts:
        found = _said_in(slot, text)
        if found:
            return found
    return values


def said_choice(
    grammar: CallGrammar, slot: Slot, prompt_text: str, preferred: list[str] | None = None
) -> Slot | None:
    """A grounded digit or text slot as a choice among what the prompt says: the
    numbers in it (digits read out one by one count as one number) or its phrases of
    up to `MAX_PHRASE_WORDS` words; only those that fit the slot. `preferred`: the
    phrases that look like the slot's value (a name, the thing asked for), chosen
    among instead when any fit. None when none fit."""
    facts = _facts(grammar)
    fitting = [n for n in preferred or () if grammar.fits(slot, n)]
    if fitting:
        return grammar.choices(slot, fitting)
    if slot.kind is SlotKind.DIGITS:
        found = [re.sub(r"\D", "", m.group()) for m in NUMBER_SAID.finditer(prompt_text)]
    else:
        found = []
        for part in PHRASE_BREAK.split(prompt_text):
            words = WORD.findall(part)
            found += [" ".join(words[i : i + n]) for n in range(1, MAX_PHRASE_WORDS + 1)
                      for i in range(len(words) - n + 1)]  # fmt: skip
    values: list[str] = []
    for value in found:
        if value in values or (slot.distinct and facts.not_distinct(value)):
            continue
        if grammar.fits(slot, value):
            values.append(value)
    return grammar.choices(slot, values) if values else None


def _narrowed(
    grammar: CallGrammar, slot: Slot, choice: Slot, text: str, lines: tuple[str, ...]
) -> Slot:
    """A labelled slot's choice narrowed to the numbers whose label the caller named."""
    if not slot.labelled:
        return choice
    named = labelled_said(lines, labels([text])) or []
    kept = [v for v in choice.candidate_values if v in named]
    return grammar.choices(slot, kept) if kept else choice


def _words(text: str) -> set[str]:
    """Lower-case words of `text`, hyphenated words also as their parts."""
    out = set()
    for word in WORD.findall(text.lower()):
        out |= {word, *word.split("-")}
    return out


def _said_in(slot: Slot, text: str) -> set[str]:
    """The values of an enum `slot` that `text` names, less those only ever named inside
    another's words ("next monday" names next monday, not monday), and less those it
    names after a negation when it names others ("not eleven, I've got football at
    eleven. could you make it one" names one)."""
    spans: list[tuple[int, int, str]] = []
    for i, value in enumerate(slot.candidate_values):
        spans += [(*m.span(), value) for m in said_as_words(value, plural=True).finditer(text)]
        if slot.said_as and slot.said_as[i]:
            spans += [(*m.span(), value) for m in re.finditer(slot.said_as[i], text, re.I)]

    def inside_another(start: int, end: int, value: str) -> bool:
        return any(a <= start and end <= b and (a, b) != (start, end) and other != value
                   for a, b, other in spans)  # fmt: skip

    named = [(start, value) for start, end, value in spans if not inside_another(start, end, value)]
    values = {value for _, value in named}
    negated = {value for start, value in named if NEGATED.search(text[:start])}
    return values - negated if values - negated else values


@dataclass(frozen=True, slots=True)
class HeardReadback:
    """How to find a tool's read-back in a prompt: `pattern` matches it as spoken after
    `<say>`, one named group per argument; `values` maps an enum group's words back to
    the value ("on friday" → "friday"); a text group (a name) is the value itself."""

    tool: str
    pattern: re.Pattern[str]
    values: dict[str, dict[str, str]]
    fixed: tuple[tuple[str, str], ...] = ()
    """What the wording itself settles (`SayTemplate.fixed`)."""

    @classmethod
    def of(cls, template: SayTemplate, slots: dict[str, Slot]) -> HeardReadback:
        """The template's text (`SayTemplate.pattern`), each enum argument (or one the
        piece knows the values of) as one of its values as the template says it, any other
        argument as a run of words."""
        options = {
            p.key: slots[p.key].candidate_values
            for p in template.pieces
            if isinstance(p, Spoken) and slots[p.key].kind is SlotKind.ENUM
        }
        body, values = template.pattern(options, free=r"[^<]+?")
        pattern = re.compile(re.escape(Special.SAY) + r"\s*" + body)
        return cls(template.tool, pattern, values, template.fixed)

    def heard(self, match: re.Match[str]) -> dict[str, str]:
        """The values a match of `pattern` spoke (or its wording fixed), by key."""
        return {**heard_values(match, self.values), **dict(self.fixed)}


@dataclass(frozen=True, slots=True)
class _GrammarFacts:
    """What grounding needs of a grammar, worked out once per grammar."""

    heard_readbacks: tuple[HeardReadback, ...]
    """How each read-back is found in a prompt, to know what the caller last heard."""
    person_keys: frozenset[str]
    closed_words: frozenset[str]
    """Words a `distinct` text slot never copies: numbers and the closed sets' words."""

    def not_distinct(self, phrase: str) -> bool:
        """True when `phrase` has a digit, a number word or a closed-set word."""
        return any(c.isdigit() for c in phrase) or not self.closed_words.isdisjoint(_words(phrase))


_FACTS: weakref.WeakKeyDictionary[CallGrammar, _GrammarFacts] = weakref.WeakKeyDictionary()


def _facts(grammar: CallGrammar) -> _GrammarFacts:
    facts = _FACTS.get(grammar)
    if facts is None:
        templates: list[SayTemplate] = [t for t, _ in grammar.readbacks]
        heard = tuple(
            HeardReadback.of(t, {slot.key: slot for slot in grammar.slots[t.tool]})
            for t in templates
        )
        person = frozenset(
            s.key for slots in grammar.slots.values() for s in slots if s.person_name
        )
        closed = NUMBER_WORDS | {
            word
            for slots in grammar.slots.values()
            for slot in slots
            for value in slot.candidate_values
            for word in _words(value)
        }
        facts = _FACTS[grammar] = _GrammarFacts(heard, person, frozenset(closed))
    return facts
