"""Tool packs as a parameter: `tools.core.load_pack` and a second pack (a restaurant,
tests/packs/restaurant.py) through the agent, with a scripted engine.

Nothing under voice_agent/ or engine/ changes for the restaurant: the agent gets the
pack, builds its grammar from the pack's argument models and read-backs, runs its tools
under their timeouts, feeds their lines (and refusals) back to the model, and writes
through the pack's own database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.constraints import CallGrammar
from engine.readback import SayTemplate
from engine.tokenizer import TextTokenizer
from tests.fakes import settings
from tests.packs import restaurant
from tests.packs.restaurant import Guest, RestaurantState
from tests.unit.test_agent import TOKENIZER, ScriptedEngine, say
from tools.bike_shop.pack import PACK as BIKE_SHOP
from tools.core import ToolPack, ToolSpec, load_pack
from voice_agent.agent import Agent, AgentConfig, ReplyKind, ToolOutcome, pack_grammar
from voice_agent.dialogue.format import ToolResultTurn
from voice_agent.pipeline import Pipeline

RESTAURANT = restaurant.PACK
FRIDAY_NOON = datetime(2025, 6, 6, 12, 0)


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[RestaurantState]:
    opened = RESTAURANT.open(str(tmp_path / "calls.sqlite"), lambda: FRIDAY_NOON)
    assert isinstance(opened, RestaurantState)
    yield opened
    opened.close()


def table_call(tok: TextTokenizer, tool: str, **arguments: Any) -> list[int]:
    return tok.encode("<call>") + pack_grammar(tok, RESTAURANT).encode(tool, arguments)


def test_a_pack_is_named_by_package_module_or_attribute() -> None:
    assert load_pack("bike_shop") is BIKE_SHOP
    assert load_pack("tests.packs.restaurant") is RESTAURANT
    assert load_pack("tests.packs.restaurant:PACK") is RESTAURANT


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("dentist", "no module tools.dentist"),
        ("tests.packs.nowhere", "no module tests.packs.nowhere"),
        ("tests.packs.restaurant:MENU", "has no ToolPack named MENU"),
        ("tests.packs.restaurant:TABLES_PER_SLOT", "has no ToolPack named TABLES_PER_SLOT"),
    ],
)
def test_an_unknown_pack_is_a_clear_error(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match="no tool pack") as info:
        load_pack(spec)
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import mypackz_not_installed\n", "No module named 'mypackz_not_installed'"),
        ("raise RuntimeError('no database driver')\n", "no database driver"),
    ],
)
def test_a_pack_whose_module_fails_to_import_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, says: str
) -> None:
    (tmp_path / "broken_pack.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="tool pack 'broken_pack' fails to import") as info:
        load_pack("broken_pack")
    assert says in str(info.value)


async def test_the_pipeline_names_an_unknown_pack_before_loading_anything() -> None:
    pipeline = Pipeline(settings(tools={"pack": "dentist"}))
    with pytest.raises(ValueError, match="no tool pack 'dentist'"):
        await pipeline.start()
    await pipeline.close()


def test_a_pack_that_names_tools_it_lacks_is_refused() -> None:
    spec = RESTAURANT.tools["find_table"]
    with pytest.raises(ValueError, match="holds the spec of"):
        ToolPack("bad", {"book": spec}, ())
    with pytest.raises(ValueError, match="read-back for unknown 'book_service'"):
        ToolPack("bad", {"find_table": spec}, (), readbacks=BIKE_SHOP.readbacks)
    with pytest.raises(ValueError, match="consent for unknown"):
        ToolPack("bad", {"find_table": spec}, (), consent={"end_call": frozenset({"done"})})
    with pytest.raises(ValueError, match=r"closing for tools without consent \['find_table'\]"):
        ToolPack("bad", {"find_table": spec}, (), closing=frozenset({"find_table"}))
    with pytest.raises(ValueError, match=r"said for tools without consent \['find_table'\]"):
        ToolPack("bad", {"find_table": spec}, (), said={"find_table": "bye"})
    with pytest.raises(ValueError, match=r"'find_table'.s words are no regex"):
        consent = {"find_table": frozenset({"done"})}
        ToolPack("bad", {"find_table": spec}, (), consent=consent, said={"find_table": "(bye"})
    with pytest.raises(ValueError, match=r"closing_said for tools not closing \['find_table'\]"):
        consent = {"find_table": frozenset({"done"})}
        ToolPack("bad", {"find_table": spec}, (), consent=consent, closing_said={"find_table": "x"})
    with pytest.raises(ValueError, match=r"held_back for tools without consent \['find_table'\]"):
        ToolPack("bad", {"find_table": spec}, (), held_back={"find_table": "wait"})
    with pytest.raises(ValueError, match=r"'find_table'.s words are no regex"):
        consent = {"find_table": frozenset({"done"})}
        ToolPack("bad", {"find_table": spec}, (), consent=consent, held_back={"find_table": "(x"})
    assert isinstance(spec, ToolSpec)


def test_the_grammar_is_the_packs_own(tok: TextTokenizer) -> None:
    grammar = pack_grammar(tok, RESTAURANT)
    assert isinstance(grammar, CallGrammar)
    assert set(grammar.tools) == {"find_table", "book_table"}
    assert pack_grammar(tok, RESTAURANT) is grammar  # built once per pack
    assert pack_grammar(tok, BIKE_SHOP) is not grammar
    ((template, _),) = grammar.readbacks
    assert isinstance(template, SayTemplate) and template.tool == "book_table"


async def test_a_restaurant_booking_runs_through_the_agent(
    tok: TextTokenizer, state: RestaurantState
) -> None:
    engine = ScriptedEngine(
        tok,
        table_call(tok, "find_table", day="friday", party_size=2),
        say(tok, "We have seven or eight. Which one, and what name?"),
        table_call(tok, "book_table", name="Priya Nair", day="friday", time="19:00", party_size=2),
        say(tok, "See you then."),
    )
    agent = Agent(engine, tok, RESTAURANT, state.context(), config=AgentConfig(min_confidence=0))
    agent.greet()
    first = await agent.respond("a table for two on friday evening")
    assert first.kind is ReplyKind.SAY and "seven or eight" in first.text
    (found,) = first.tool_calls
    assert (found.tool, found.outcome) == ("find_table", ToolOutcome.OK)
    # The pack's line went back to the model, in the turn format.
    assert "For 2 friday we have six, half past six, seven" in engine.prompt(1)
    assert all(r.grammar is pack_grammar(tok, RESTAURANT) for r in engine.requests)

    second = await agent.respond("seven please, Priya Nair")
    (booked,) = second.tool_calls
    assert (booked.tool, booked.outcome) == ("book_table", ToolOutcome.OK)
    assert state.db.rows() == [("Priya Nair", "friday", "19:00", 2)]
    assert "Booked: a table for 2 friday at seven, Priya Nair." in engine.prompt(3)
    # The agent scoped the pack's context to an anonymous caller of its own.
    assert agent.tools.caller is not None and agent.tools.caller.startswith("anonymous:")


async def test_a_packs_refusal_is_fed_back_as_an_error_turn(
    tok: TextTokenizer, state: RestaurantState
) -> None:
    engine = ScriptedEngine(
        tok,
        table_call(tok, "find_table", day="saturday", party_size=9),
        say(tok, "Our largest table seats eight."),
    )
    agent = Agent(engine, tok, RESTAURANT, state.context(), config=AgentConfig(min_confidence=0))
    reply = await agent.respond("a table for nine on saturday")
    (refused,) = reply.tool_calls
    assert (refused.outcome, refused.error) == (ToolOutcome.REFUSED, "party_too_large")
    result = next(t for t in agent.turns if isinstance(t, ToolResultTurn))
    assert result.text == "error party_too_large: Sorry, our largest table seats 8."
    assert state.db.rows() == []


async def test_a_result_of_another_packs_type_is_a_failed_tool(
    tok: TextTokenizer, state: RestaurantState
) -> None:
    """The runner accepts only the pack's own result types (and hand-offs)."""

    def wrong(name: str, arguments: Any, ctx: Guest) -> object:
        return json.loads('{"say": "a dict is not a result"}')

    engine = ScriptedEngine(tok, table_call(tok, "find_table", day="friday", party_size=2))
    agent = Agent(engine, tok, RESTAURANT, state.context(), run_tool=wrong,
                  config=AgentConfig(min_confidence=0))  # fmt: skip
    reply = await asyncio.wait_for(agent.respond("a table friday for two"), 10)
    assert reply.kind is ReplyKind.FALLBACK
    assert reply.tool_calls[0].outcome is ToolOutcome.FAILED
