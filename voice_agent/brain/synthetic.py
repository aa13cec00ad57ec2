"""A small synthetic tool-call task that proves the engine in minutes of CPU training.

Caller requests to a bike shop become either a tool call (name + JSON arguments) or a
short spoken reply, after an optional reasoning segment. Each intent has training
templates and held-out templates, so accuracy on the held-out split measures
generalization to unseen phrasings. The brain issue replaces this with the real dialogue
data; the engine benchmark uses it until then.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from engine.constraints import CallGrammar
from engine.schedule import Effort
from engine.tokenizer import Special, TextTokenizer

T = TypeVar("T", bound=tuple[Any, ...])

SERVICES = {
    "tune-up": ["tune-up", "tune up", "service"],
    "flat repair": ["flat repair", "flat fix", "puncture repair"],
    "brake check": ["brake check", "brake inspection", "look at my brakes"],
    "chain replacement": ["chain replacement", "new chain"],
}
DAYS = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "today",
    "tomorrow",
]
TIMES = {
    "9 am": "09:00", "10 am": "10:00", "11 am": "11:00", "noon": "12:00", "1 pm": "13:00",
    "2 pm": "14:00", "3 pm": "15:00", "4 pm": "16:00", "half past 10": "10:30",
    "half past 2": "14:30",
}  # fmt: skip
NAMES = [
    "alice",
    "bob",
    "carla",
    "dev",
    "erin",
    "farid",
    "grace",
    "hugo",
    "ines",
    "jonas",
    "kim",
    "lena",
    "marco",
    "nina",
]

Service = Literal["tune-up", "flat repair", "brake check", "chain replacement"]
Day = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
              "today", "tomorrow"]  # fmt: skip
TimeOfDay = Literal["09:00", "10:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00",
                    "10:30", "14:30"]  # fmt: skip
DAY_FIELD = Field(json_schema_extra={"grounded": True})
NAME_FIELD = Field(min_length=1, json_schema_extra={"max_tokens": 4, "grounded": True})


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BookService(_Args):
    service: Service
    day: Day = DAY_FIELD
    time: TimeOfDay
    name: str = NAME_FIELD


class OrderStatus(_Args):
    order_number: str = Field(
        pattern=r"^\d+$", min_length=4, max_length=6, json_schema_extra={"grounded": True}
    )


class OpeningHours(_Args):
    day: Day = DAY_FIELD


class CancelBooking(_Args):
    day: Day = DAY_FIELD
    name: str = NAME_FIELD


TOOLS: dict[str, type[BaseModel]] = {
    "book_service": BookService,
    "order_status": OrderStatus,
    "opening_hours": OpeningHours,
    "cancel_booking": CancelBooking,
}
"""The synthetic task's tools; their schemas lay out the calls (engine/constraints.py)."""

# Each template: (text with {slots}, held_out)
BOOK = [
    ("i'd like to book a {service} on {day} at {time}, my name is {name}", False),
    ("can i get a {service} {day} at {time}? it's {name}", False),
    ("hi this is {name}, i need a {service} for {day} around {time}", False),
    ("book me in for a {service} on {day}, {time} works, name {name}", False),
    ("um yeah {name} here, could you do a {service} {day} {time}", False),
    ("{name} speaking, is a {service} possible on {day} at {time}", False),
    ("i want to schedule a {service} {day} at {time} under {name}", False),
    ("please put {name} down for a {service} on {day} at {time}", True),
    ("my bike needs a {service}, {day} at {time} would be great, i'm {name}", True),
]
ORDER = [
    ("where is my order {order}", False),
    ("i'm calling about order number {order}", False),
    ("can you check the status of order {order} please", False),
    ("hi, my order {order} hasn't arrived yet", False),
    ("order {order}, any news on that one", False),
    ("could you look up my order, it's {order}", True),
    ("what's happening with order number {order}", True),
]
HOURS = [
    ("are you open on {day}", False),
    ("what are your hours {day}", False),
    ("when do you open {day}", False),
    ("what time do you close on {day}", True),
]
CANCEL = [
    ("i need to cancel my booking on {day}, name's {name}", False),
    ("please cancel {name}'s appointment {day}", False),
    ("this is {name}, cancel my {day} booking please", False),
    ("{name} here, i can't make it {day}, can you cancel", True),
]
CHAT = [
    ("thanks a lot", "you're welcome! anything else i can help with?", False),
    ("thank you so much", "you're welcome! anything else i can help with?", False),
    ("hello", "hi! how can i help you today?", False),
    ("hi there", "hi! how can i help you today?", False),
    ("can you order me a pizza", "sorry, i can only help with the bike shop.", False),
    ("what's the weather like", "sorry, i can only help with the bike shop.", False),
    ("cheers, thanks", "you're welcome! anything else i can help with?", True),
    ("good morning", "hi! how can i help you today?", True),
    ("tell me a joke", "sorry, i can only help with the bike shop.", True),
]


@dataclass(frozen=True, slots=True)
class TaskExample:
    prompt: str
    answer: str
    """Without EOS."""
    action: str
    """The part after the reasoning: `<call>{json}` or `<say> text` (what accuracy checks)."""
    call: tuple[str, dict[str, str]] | None = None
    """(tool, arguments) when the action is a call."""
    effort: Effort = Effort.LOW
    """The effort the prompt asks for (its effort token)."""

    def answer_ids(self, tok: TextTokenizer, grammar: CallGrammar) -> list[int]:
        """Training target: the call is laid out by the grammar (gap-padded slots)."""
        if self.call is None:
            return tok.encode(self.answer)
        head = self.answer[: self.answer.index(Special.CALL) + len(Special.CALL)]
        return tok.encode(head) + grammar.encode(*self.call)


def _call(tool: str, **arguments: str) -> tuple[str, tuple[str, dict[str, str]]]:
    text = Special.CALL + json.dumps({"name": tool, "arguments": arguments})
    return text, (tool, arguments)


def _order_words(rng: random.Random, digits: str) -> str:
    return " ".join(digits) if rng.random() < 0.6 else digits


def _example(rng: random.Random, held_out: bool, effort: Effort) -> TaskExample:
    kind = rng.choice(["book", "book", "order", "hours", "cancel", "chat"])
    call: tuple[str, dict[str, str]] | None = None
    detail = ""

    def pick(templates: list[T]) -> T:
        return rng.choice([t for t in templates if t[-1] == held_out])

    if kind == "book":
        service = rng.choice(list(SERVICES))
        time_words = rng.choice(list(TIMES))
        day, name = rng.choice(DAYS), rng.choice(NAMES)
        text = pick(BOOK)[0].format(
            service=rng.choice(SERVICES[service]), day=day, time=time_words, name=name
        )
        action, call = _call(
            "book_service", service=service, day=day, time=TIMES[time_words], name=name
        )
        thought, detail = f"book {service}", f"{day} {time_words} for {name}, slot free?"
    elif kind == "order":
        digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([4, 5])))
        text = pick(ORDER)[0].format(order=_order_words(rng, digits))
        (action, call), thought = _call("order_status", order_number=digits), "order lookup"
        detail = f"number {' '.join(digits)}, read back digits"
    elif kind == "hours":
        day = rng.choice(DAYS)
        text = pick(HOURS)[0].format(day=day)
        (action, call), thought = _call("opening_hours", day=day), f"hours {day}"
        detail = "check the calendar for holidays"
    elif kind == "cancel":
        day, name = rng.choice(DAYS), rng.choice(NAMES)
        text = pick(CANCEL)[0].format(day=day, name=name)
        (action, call), thought = _call("cancel_booking", day=day, name=name), "cancel booking"
        detail = f"{name} on {day}, confirm after"
    else:
        line, reply, _ = pick(CHAT)
        text, action, thought = line, f"{Special.SAY} {reply}", "small talk"
        detail = "no tool needed, keep it short"
    effort_token = {Effort.INSTANT: Special.EFFORT_INSTANT, Effort.LOW: Special.EFFORT_LOW,
                    Effort.MEDIUM: Special.EFFORT_MEDIUM}[effort]  # fmt: skip
    prompt = f"{Special.BOS}{effort_token}{Special.CALLER} {text}{Special.AGENT}"
    reasoning = {
        Effort.INSTANT: "",
        Effort.LOW: f"{Special.THINK} {thought}",
        Effort.MEDIUM: f"{Special.THINK} {thought}: {detail}",
    }[effort]
    return TaskExample(prompt, reasoning + action, action, call, effort)


def make_examples(n: int, seed: int, held_out: bool = False) -> list[TaskExample]:
    """n examples from the training (or held-out) templates; deterministic per seed."""
    rng = random.Random(seed)
    efforts = list(Effort)
    return [_example(rng, held_out, rng.choice(efforts)) for _ in range(n)]


def action_of(answer: str) -> str:
    """The action part of a decoded answer (reasoning and gaps dropped), for accuracy."""
    answer = answer.replace(Special.GAP, "")
    cut = [answer.find(t) for t in (Special.CALL, Special.SAY) if t in answer]
    return answer[min(cut) :].strip() if cut else answer.strip()
