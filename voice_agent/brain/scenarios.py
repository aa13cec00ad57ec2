"""One whole phone call: optional small talk, one to three requests, then goodbye,
a hang-up, or a hand-off. The request scripts live in `workshop_calls` and
`counter_calls`; this module strings them together and adds the short exchanges."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from tools.bike_shop.db import ShopContext
from tools.bike_shop.shop import open_shop
from voice_agent.brain import callers, counter_calls, lines, workshop_calls
from voice_agent.brain.dialogues import (
    CLOCK_STEP_MIN,
    DAYS_SPANNED,
    FAST_SCRATCH,
    FIRST_DAY,
    OPEN_MINUTES,
    Dialogue,
    Intent,
    Sim,
    Thought,
)
from voice_agent.brain.phrasing import Split
from voice_agent.dialogue.phrases import phrases

MAX_REQUESTS = 3
LEAD_IN_CHANCE = 0.15
"""A call opens with a greeting, small talk or a garbled line before the request."""
NEXT_REQUEST_CHANCE = 0.3
SILENT_HANG_UP_CHANCE = 0.1
THANKS_CHANCE = 0.15

GOODBYE = Thought("say goodbye", "The caller is done, so end the call politely.")


def transfer(s: Sim) -> None:
    s.begin(Intent.TRANSFER)
    reason = s.rng.choice(list(callers.TRANSFER))
    s.say_caller(callers.TRANSFER[reason], edges=True)
    s.call("transfer_to_human", Thought("hand over", f"This needs a person: {reason}."),
           reason=reason)  # fmt: skip
    s.ended = True


def off_topic(s: Sim) -> None:
    s.begin(Intent.OFF_TOPIC)
    s.say_caller(callers.OFF_TOPIC, edges=True)
    s.say(phrases().out_of_scope, Thought("not shop business", "That isn't bike shop business; "
                                          "decline politely."))  # fmt: skip


def lead_in(s: Sim) -> None:
    """A greeting, small talk or a garbled line the agent answers before the request."""
    s.begin(Intent.CHITCHAT)
    pool, reply, thought = s.rng.choice(
        (
            (callers.GREETING_ONLY, lines.HI_BACK, Thought("greet back", "Just a hello; greet "
                                                             "them and ask how to help.")),
            (callers.HOW_ARE_YOU, lines.WELL, Thought("small talk", "Small talk; answer "
                                                      "briefly and ask how to help.")),
            (callers.GARBLED, phrases().say_again, Thought("didn't catch it", "The line is "
                                                           "garbled; ask them to repeat.")),
        )
    )  # fmt: skip
    if pool is callers.GARBLED:
        s.intents[-1] = s.intent = Intent.UNCLEAR
    s.say_caller(pool, edges=pool is not callers.GARBLED)
    s.say(reply, thought)


REQUESTS: dict[Callable[[Sim], None], float] = {
    workshop_calls.book: 0.27,
    workshop_calls.cancel: 0.1,
    counter_calls.order: 0.16,
    counter_calls.search: 0.18,
    counter_calls.reserve_by_id: 0.05,
    counter_calls.hours: 0.11,
    transfer: 0.06,
    off_topic: 0.07,
}


def _goodbye(s: Sim) -> None:
    s.call("end_call", GOODBYE)
    s.ended = True


def play_call(s: Sim) -> None:
    """Fill `s` with one call. Ends with end_call, a transfer, or a silent hang-up."""
    if s.rng.random() < LEAD_IN_CHANCE:
        lead_in(s)
    for request in range(MAX_REQUESTS):
        s.rng.choices(list(REQUESTS), weights=list(REQUESTS.values()))[0](s)
        if s.ended:
            return
        if s.too_long:
            break
        roll = s.rng.random()
        if roll < NEXT_REQUEST_CHANCE and request + 1 < MAX_REQUESTS:
            continue
        if roll < NEXT_REQUEST_CHANCE + SILENT_HANG_UP_CHANCE:
            return  # the caller just hangs up: nothing for the agent to do
        break
    if s.rng.random() < THANKS_CHANCE:
        s.say_caller(callers.THANKS)
        s.say(f"{lines.WELCOME} {phrases().anything_else}", Thought("offer more help", "They "
                                                                    "said thanks; check if "
                                                                    "that's all."))  # fmt: skip
    s.say_caller(callers.DONE if s.rng.random() < 0.85 else callers.HANG_UP)
    _goodbye(s)


# ---------------------------------------------------------------- whole data sets


def _now(rng: random.Random) -> datetime:
    day = FIRST_DAY + timedelta(days=rng.randrange(DAYS_SPANNED))
    minute = rng.randrange(OPEN_MINUTES[0], OPEN_MINUTES[1], CLOCK_STEP_MIN)
    return datetime.combine(day, datetime.min.time()) + timedelta(minutes=minute)


def _clock(now: datetime) -> Callable[[], datetime]:
    return lambda: now


def generate(seed: int, count: int, split: Split) -> Iterator[Dialogue]:
    """`count` dialogues of `split`, lazily; the same seed gives the same dialogues.
    Each runs on its own seeded SQLite file in a temporary directory (removed after)."""
    scratch = FAST_SCRATCH if FAST_SCRATCH.is_dir() else None
    with tempfile.TemporaryDirectory(prefix="dialogues-", dir=scratch) as tmp:
        for index in range(count):
            rng = random.Random(f"{seed}:{split.value}:{index}")
            now = _now(rng)
            db = open_shop(Path(tmp) / f"{index}.sqlite", now.date())
            try:
                sim = Sim(rng, split, ShopContext(db, _clock(now)), f"{split.value}-{seed}-{index}")
                play_call(sim)
                yield sim.dialogue(now)
            finally:
                db.close()
                (Path(tmp) / f"{index}.sqlite").unlink(missing_ok=True)
