"""Training examples from the independent caller lines (`data/callers/train`).

An independent line is labelled with its act and the values it states, not with the
agent's answer; this module gives the first line of a call (after the greeting) the answer
the simulator's own policy gives in that state (voice_agent/brain/workshop_calls.py,
counter_calls.py, scenarios.py: the same phrases and reasoning), so the model learns
natural phrasings with the decisions it already knows:

* a booking or availability request: ask the service, then the day; with both, check the
  free times; with a time too, ask the name; with everything, read the booking back;
* an order with its number read out: look it up; without: ask for the number;
* opening hours on a day said: look them up; a search naming a product: search with the
  caller's words for it;
* a request for a person, a complaint, a refund or warranty: transfer with that reason;
  a goodbye: end the call; not shop business: decline; garbled: ask again.

Lines whose answer would need what the simulator has no policy for (a price question, a
cancellation, a hold before any search, mid-call lines whose context the label does not
give) are left out. The grammar's checks (`dialogues.misfit`) drop any example whose call
the engine could not decode from the line (a value the caller did not say in words the
grounding finds).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import replace

from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.pack import GOODBYE_SAID
from tools.bike_shop.readbacks import READBACKS
from voice_agent.brain import callers, lines
from voice_agent.brain.dialogues import EFFORT_WEIGHTS, Dialogue, Example, Intent, Thought
from voice_agent.brain.heard import REPEAT_THOUGHT
from voice_agent.brain.independent import Act, CallCase, LineCase
from voice_agent.brain.phrasing import Pool
from voice_agent.brain.scenarios import GOODBYE
from voice_agent.brain.workshop_calls import CHECK, READ_BACK
from voice_agent.dialogue.format import AgentAction, AgentCall, AgentSay, CallerTurn
from voice_agent.dialogue.phrases import phrases
from voice_agent.dialogue.spoken import spoken_digits


def _answer(case: LineCase) -> tuple[AgentAction, Thought, Intent] | None:
    """The simulator's answer to `case` as a call's first caller line, or None."""
    act, args = case.act, case.args
    if act in (Act.BOOK, Act.AVAILABILITY):
        service, day, time, name = (args.get(k) for k in ("service", "day", "time", "name"))
        if service is None:
            ask = Thought("need the service", "They want a booking but gave no service; ask.")
            return AgentSay(lines.ASK_SERVICE), ask, Intent.BOOK
        if day is None:
            return (
                AgentSay(lines.ASK_DAY),
                Thought("need a day", f"A {service}; I still need the day."),
                Intent.BOOK,
            )
        if time is None:
            return (
                AgentCall("check_availability", {"day": day, "service": service}),
                CHECK,
                Intent.BOOK,
            )
        if name is None:
            thought = Thought("need a name", "Service, day and time known; ask the name.")
            return AgentSay(lines.ASK_NAME), thought, Intent.BOOK
        said = re.search(re.escape(name), case.line, re.IGNORECASE)
        readback = lines.confirm_booking(service, day, time, said.group(0) if said else name)
        return AgentSay(readback), READ_BACK, Intent.BOOK
    if act is Act.ORDER:
        number = args.get("order_number")
        if number is None:
            thought = Thought("need the number", "To look up an order I need its number.")
            return AgentSay(lines.ASK_ORDER), thought, Intent.ORDER
        look = Thought("look up the order", "The caller gave an order number; look it up.")
        return AgentCall("order_status", {"order_number": number}), look, Intent.ORDER
    if act is Act.HOURS and "day" in args:
        look = Thought("look up hours", "They ask about opening hours; check that day.")
        return AgentCall("opening_hours", {"day": args["day"]}), look, Intent.HOURS
    if act is Act.SEARCH:
        query = _query(case)
        if query is None:
            return None
        look = Thought("search it", "The caller asks for a product; search with their words.")
        return AgentCall("search_products", {"query": query}), look, Intent.SEARCH
    if act is Act.TRANSFER:
        reason = case.reason or "caller asked"
        hand = Thought("hand over", f"This needs a person: {reason}.")
        return AgentCall("transfer_to_human", {"reason": reason}), hand, Intent.TRANSFER
    if act is Act.END:
        return AgentCall("end_call", {}), GOODBYE, Intent.CHITCHAT
    if act is Act.OUT_OF_SCOPE:
        thought = Thought("not shop business", "That isn't bike shop business; say what we do.")
        return AgentSay(phrases().out_of_scope), thought, Intent.OFF_TOPIC
    if act is Act.UNCLEAR:
        return AgentSay(phrases().say_again), REPEAT_THOUGHT, Intent.UNCLEAR
    return None


def _query(case: LineCase) -> str | None:
    """The caller's own words for a product that fits: its name, else one of its keywords
    (longest first), as they stand in the line; None when the line has neither."""
    text = case.line.lower()
    for product in PRODUCTS:
        if product.product_id not in case.products:
            continue
        for words in sorted([product.name, *product.keywords.split()], key=len, reverse=True):
            if re.search(rf"\b{re.escape(words)}s?\b", text) and len(words) > 3:
                return words
    return None


def first_line_examples(cases: Iterable[LineCase], seed: int = 0) -> list[Example]:
    """One training example per first caller line the simulator's policy can answer."""
    rng = random.Random(seed)
    greeting = phrases().greeting
    out: list[Example] = []
    for case in cases:
        if case.after is not None:
            continue
        answer = _answer(case)
        if answer is None:
            continue
        action, thought, intent = answer
        effort = rng.choices(list(EFFORT_WEIGHTS), weights=list(EFFORT_WEIGHTS.values()))[0]
        history = (AgentSay(greeting), CallerTurn(spoken_digits(case.line.strip())))
        out.append(Example(f"independent-{case.id}", 1, history, effort, thought.at(effort),
                           action, intent))  # fmt: skip
    return out


# ---------------------------------------------------------------- mid-call lines

_MID_POOLS: dict[str, tuple[Pool, ...]] = {
    "yes": (callers.YES,),
    "time": (callers.GIVE_TIME,),
    "name": (callers.GIVE_NAME, callers.NAME_WRONG),
    "day": (callers.GIVE_DAY,),
    "service": (callers.GIVE_SVC,),
    "change time": (callers.CHANGE_TIME,),
    "change day": (callers.CHANGE_DAY,),
}
"""The simulator's mid-call caller frames an independent line may stand in for, by the
kind of line (`_kind`) that replaces them."""


_YES_WORDS = {
    "book_service": ("book",),
    "cancel_booking": ("cancel",),
    "reserve_product": ("hold", "aside", "reserv", "put"),
}
"""Words by which a yes names what it agrees to: such a yes stands in only for a yes to
that tool's read-back ("yes, cancel it" is no answer to "shall I book that?")."""


def _kind(case: LineCase) -> str | None:
    """Which simulator line `case` can stand in for: a plain yes, or a detail given or
    corrected on its own (one value, nothing else)."""
    keys = tuple(case.args)
    if case.act is Act.YES and not keys:
        return "yes"
    if case.act is Act.GIVE_INFO and len(keys) == 1 and keys[0] in ("time", "name", "day"):
        return keys[0]
    if case.act is Act.GIVE_INFO and keys == ("service",):
        return "service"
    if case.act is Act.CORRECTION and keys == ("name",):
        return "name"
    if case.act is Act.CORRECTION and keys in (("time",), ("day",)):
        return f"change {keys[0]}"
    return None


def _said(value: str, line: str) -> str | None:
    """`value` as the line spells it (case aside), or None when the line does not."""
    found = re.search(rf"\b{re.escape(value)}\b", line, re.IGNORECASE)
    return found.group(0) if found else None


def _booked(dialogue: Dialogue) -> dict[str, str] | None:
    """The arguments of the dialogue's booking call, if it made one."""
    for turn in dialogue.turns:
        if isinstance(turn, AgentCall) and turn.tool == "book_service":
            return {k: str(v) for k, v in turn.arguments.items()}
    return None


def _stand_in(example: Example, kind: str, case: LineCase, booked: dict[str, str] | None
              ) -> AgentAction | None:  # fmt: skip
    """The answer to `example`'s history with its latest caller line replaced by `case`
    (a line of `kind`), by the simulator's policy; None where the policy's answer would
    need what the substitution cannot keep right."""
    action = example.action
    if kind == "yes":  # the answer follows from the read-back, not from the words
        other = [w for tool, words in _YES_WORDS.items() for w in words
                 if not (isinstance(action, AgentCall) and action.tool == tool)]  # fmt: skip
        return None if re.search(rf"\b({'|'.join(other)})", case.line, re.I) else action
    if isinstance(action, AgentSay) and action.text in (lines.ASK_NAME, lines.ASK_DAY):
        # asks the next thing; the value given is not repeated
        return action if kind in ("time", "service") else None
    if isinstance(action, AgentCall) and action.tool == "check_availability":
        if kind == "service":
            return AgentCall(action.tool, {**action.arguments, "service": case.args["service"]})
        if kind != "day" or _said(case.args["day"], case.line) is None:
            return None  # "the day after tomorrow": the grounding would not find the day
        return AgentCall(action.tool, {**action.arguments, "day": case.args["day"]})
    if booked is None or not isinstance(action, AgentSay):
        return None
    if action.text != lines.confirm_booking(**booked):
        return None  # a read-back of other values than the booking made
    field = {"name": "name", "change time": "time", "change day": "day"}.get(kind)
    if field is None:
        return None
    value = case.args[field]
    if field in ("name", "day"):
        said = _said(value, case.line)
        if said is None:
            return None
        value = said if field == "name" else value
    readback = lines.confirm_booking(**{**booked, field: value})
    before = [t for t in example.history if isinstance(t, AgentSay)][-1:]
    return None if before == [AgentSay(readback)] else AgentSay(readback)  # no change made


def mid_call_examples(
    dialogues: Iterable[Dialogue], cases: Iterable[LineCase], seed: int = 0
) -> list[Example]:
    """Copies of simulator steps whose latest caller line is a plain yes, or a time, day,
    service or name given or corrected on its own, with an independent line of the same
    kind and values in its place and the simulator's answer to it (a read-back or a
    lookup takes the new line's value). Each step gets one line, drawn at random."""
    rng = random.Random(seed)
    by_kind: dict[str, list[LineCase]] = {}
    for case in cases:
        kind = _kind(case)
        if kind is not None:
            by_kind.setdefault(kind, []).append(case)
    frames = {f: k for k, pools in _MID_POOLS.items() for p in pools for f in p.train}
    out: list[Example] = []
    for dialogue in dialogues:
        said = [i for i, t in enumerate(dialogue.turns) if isinstance(t, CallerTurn)]
        frame_at = dict(zip(said, dialogue.templates, strict=False))
        booked = _booked(dialogue)
        for example in dialogue.examples:
            kind = frames.get(frame_at.get(len(example.history) - 1, ""))
            if kind is None or not by_kind.get(kind):
                continue
            case = rng.choice(by_kind[kind])
            action = _stand_in(example, kind, case, booked)
            if action is None:
                continue
            history = (*example.history[:-1], CallerTurn(spoken_digits(case.line.strip())))
            out.append(replace(example, dialogue_id=f"{example.dialogue_id}+{case.id}",
                               history=history, action=action))  # fmt: skip
    return out


# ---------------------------------------------------------------- goodbyes and hand-offs anywhere

EXIT_SHARES = {"end": 0.4, "transfer": 0.2}
"""Per simulated dialogue, the chance that one of its mid-call caller lines is replaced by
an independent goodbye, or by a request for a person."""
_READ_BACK_ENDS = tuple(sorted({t.pieces[-1] for t in READBACKS if isinstance(t.pieces[-1], str)}))
"""How the read-backs end ("Shall I book that?"): an agent line that reads a write back
waits for a yes, and a goodbye after it may be that yes ("nice one, thanks, bye"), so no
goodbye stands in there."""
_NOT_ONLY_GOODBYE = re.compile(
    r"\b(?:yes|yeah|yep|yup|ok|okay|sure|right|book|hold|reserve|cancel|aside|person|"
    r"someone|\w+day)\b|\d",
    re.IGNORECASE,
)
"""Words by which a call's last line does more than say goodbye ("yes, see you Thursday")."""


def exit_lines(
    cases: Iterable[LineCase], calls: Iterable[CallCase]
) -> tuple[list[str], list[LineCase]]:
    """The goodbyes (lines labelled `end`, and the last lines of calls that end with a
    goodbye and say nothing more) that the pack's goodbye gate lets end a call, and the
    lines labelled `transfer`."""
    said = re.compile(GOODBYE_SAID, re.IGNORECASE)
    goodbyes = [c.line for c in cases if c.act is Act.END]
    goodbyes += [c.turns[-1] for c in calls
                 if c.end == "end_call" and not _NOT_ONLY_GOODBYE.search(c.turns[-1])]  # fmt: skip
    goodbyes = list(dict.fromkeys(g.strip() for g in goodbyes if said.search(g)))
    return goodbyes, [c for c in cases if c.act is Act.TRANSFER]


def exit_examples(
    dialogues: Iterable[Dialogue],
    cases: Iterable[LineCase],
    calls: Iterable[CallCase] = (),
    seed: int = 0,
) -> list[Example]:
    """Copies of simulated mid-call steps whose caller line is replaced by an independent
    goodbye (answer: end the call) or request for a person (answer: transfer, with the
    line's reason): a caller may leave or ask for someone at any point, not only after
    "anything else?" (independent calls hang up on "what name is it under?" with "ok I'll
    just come in for that, bye"). At most one step per dialogue (`EXIT_SHARES`); never
    the first caller line (those are `first_line_examples`) or a line after a read-back."""
    rng = random.Random(f"exits:{seed}")
    goodbyes, transfers = exit_lines(list(cases), list(calls))
    out: list[Example] = []
    for dialogue in dialogues:
        roll = rng.random()
        if roll < EXIT_SHARES["end"]:
            kind = "end"
        elif roll < EXIT_SHARES["end"] + EXIT_SHARES["transfer"]:
            kind = "transfer"
        else:
            continue
        if not (goodbyes if kind == "end" else transfers):
            continue
        places = [ex for ex in dialogue.examples if _exit_place(ex)]
        if not places:
            continue
        example = rng.choice(places)
        action: AgentAction
        if kind == "end":
            line, thought, intent = rng.choice(goodbyes), GOODBYE, Intent.CHITCHAT
            action = AgentCall("end_call", {})
        else:
            case = rng.choice(transfers)
            line = case.line
            answer = _answer(case)
            assert answer is not None  # a transfer line always has one
            action, thought, intent = answer
        history = (*example.history[:-1], CallerTurn(spoken_digits(line.strip())))
        out.append(replace(example, dialogue_id=f"{example.dialogue_id}+{kind}",
                           history=history, reasoning=thought.at(example.effort),
                           action=action, intent=intent))  # fmt: skip
    return out


def _exit_place(example: Example) -> bool:
    """A step that answers a caller line said after the agent's first answer, not after a
    read-back, and does not already end the call."""
    history = example.history
    if len(history) < 4 or not isinstance(history[-1], CallerTurn):
        return False
    action = example.action
    if isinstance(action, AgentCall) and action.tool in ("end_call", "transfer_to_human"):
        return False
    said = [t for t in history[:-1] if isinstance(t, AgentSay)]
    return not (said and said[-1].text.endswith(_READ_BACK_ENDS))
