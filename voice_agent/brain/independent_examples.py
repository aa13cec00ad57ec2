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

from tools.bike_shop.catalogue import PRODUCTS
from voice_agent.brain import lines
from voice_agent.brain.dialogues import EFFORT_WEIGHTS, Example, Intent, Thought
from voice_agent.brain.heard import REPEAT_THOUGHT
from voice_agent.brain.independent import Act, LineCase
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
