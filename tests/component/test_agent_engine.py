"""The agent on the real engine: the shipped synthetic checkpoint, the real call grammar
and a real shop file.

The synthetic checkpoint was trained on single caller lines of the same turn format, not
on dialogues, so what it says after a tool result is not judged here. What is: its first
answers to lines of its own task parse, every call it decodes validates against the tool
schemas and runs against SQLite (a booking it makes is in the file), and a deadline
forces the engine to commit early and the turn still ends with a reply.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from engine.batching import Engine
from engine.checkpoint import Checkpoint, load
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK
from tools.bike_shop.schemas import ARGUMENT_MODELS
from tools.bike_shop.shop import open_shop
from tools.bike_shop.timewords import resolve_day
from voice_agent.agent import Agent, AgentConfig, AgentReply, DegradeKind, ToolOutcome

CHECKPOINT = Path(__file__).resolve().parents[2] / "engine" / "checkpoints" / "synthetic-dlm"
MONDAY_10AM = datetime(2025, 6, 2, 10, 0)
LINES = [  # phrasings of the checkpoint's own task (voice_agent/brain/synthetic.py)
    "i want to schedule a service wednesday at 2 pm under lena",
    "hi, my order 9092 hasn't arrived yet",
    "book me in for a brake inspection on wednesday, half past 10 works, name carla",
    "please cancel ines's appointment saturday",
    "when do you open on saturday?",
]
TRUSTING = AgentConfig(min_confidence=0.0, max_tool_steps=1)
"""Judge what the agent does with the model's answers, not the model's confidence."""
RAN = {ToolOutcome.OK, ToolOutcome.REFUSED}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ck() -> Checkpoint:
    return load(CHECKPOINT)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


def booked(ctx: ShopContext, name: str, day: str, time: str, service: str) -> bool:
    with ctx.db.read() as conn:
        row = conn.execute(
            "SELECT 1 FROM bookings WHERE name = ? AND day = ? AND start = ? AND service = ? "
            "AND cancelled = 0",
            (name, resolve_day(day, MONDAY_10AM.date()).isoformat(), time, service),
        ).fetchone()
    return row is not None


async def test_decoded_calls_validate_and_run_against_sqlite(
    ck: Checkpoint, shop: ShopContext
) -> None:
    replies: list[AgentReply] = []
    async with Engine(ck.model, ck.tokenizer.ids, max_batch=4) as engine:
        for line in LINES:
            agent = Agent(engine, ck.tokenizer, PACK, shop, config=TRUSTING)
            replies.append(await agent.respond(line))
    calls = [c for r in replies for c in r.tool_calls]
    for reply in replies:  # the first answer parsed: it was a call, or no parse error
        first_parsed = any(c.generation == 0 for c in reply.tool_calls)
        assert first_parsed or DegradeKind.UNPARSEABLE not in {d.kind for d in reply.degrades}
        assert reply.text and reply.engine.requests >= 1 and reply.engine.forwards >= 1
    assert calls and all(c.outcome in RAN for c in calls)
    for c in calls:
        ARGUMENT_MODELS[c.tool].model_validate(c.arguments)  # schema-valid, whatever weights
    bookings = [c for c in calls if c.tool == "book_service" and c.outcome is ToolOutcome.OK]
    assert bookings  # two booking lines: at least one decodes to a feasible booking
    for c in bookings:
        assert booked(shop, **{k: str(v) for k, v in c.arguments.items()})
    assert any(c.outcome is ToolOutcome.OK for c in calls)


async def test_a_deadline_makes_the_engine_commit_early_and_the_turn_still_answers(
    ck: Checkpoint, shop: ShopContext
) -> None:
    async with Engine(ck.model, ck.tokenizer.ids, max_batch=4) as engine:
        # A line whose relaxed decode takes more than one forward per block (the order
        # number and the reply to its result): only such a decode can be cut short.
        line = LINES[1]
        relaxed = await Agent(engine, ck.tokenizer, PACK, shop, config=TRUSTING).respond(line)
        rushed_agent = Agent(engine, ck.tokenizer, PACK, shop, config=TRUSTING)
        rushed = await rushed_agent.respond(line, deadline_s=engine.clock() + 0.005)
    assert not relaxed.engine.deadline_forced
    assert rushed.engine.deadline_forced
    assert rushed.engine.forwards < relaxed.engine.forwards
    assert rushed.text  # an answer on time, even if only the repeat request
    for c in rushed.tool_calls:
        ARGUMENT_MODELS[c.tool].model_validate(c.arguments)
