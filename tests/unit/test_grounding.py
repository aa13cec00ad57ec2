"""Grounded call arguments in the bike shop's grammar: start times heard however a caller
says them, the caller's latest word winning, names that are never a day, time or number,
and nothing grounded in what the agent said, thought or called itself.

Decoded with random weights pulled towards `<call>`, so every choice below comes from the
grounding, not from a trained model."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, get_args

import pytest

from engine.constraints import CallGrammar
from engine.generate import Request, generate
from engine.schedule import Schedule
from engine.tokenizer import Special, TextTokenizer
from tests.grounded import grounded_plan
from tests.unit.test_engine_constraints import CallBiased, random_model
from tools.bike_shop import schemas
from tools.bike_shop.readbacks import READBACKS
from voice_agent.grounding import CallSources, grounder
from voice_agent.grounding.ground import _said_in, said_choice

TOKENIZER = Path(__file__).resolve().parents[2] / "engine/checkpoints/brain-dlm/tokenizer.json"
C, A, SAY = Special.CALLER, Special.AGENT, Special.SAY


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


def calls(
    tok: TextTokenizer,
    tool: str,
    prompt: str,
    seeds: int = 5,
    *,
    readback: bool = False,
    sources: CallSources | None = None,
) -> list[dict[str, Any]]:
    """The arguments of `tool` decoded from `prompt` by `seeds` random models; with
    `readback`, the grammar knows the tool's read-back (tools/bike_shop/readbacks.py)."""
    templates = [t for t in READBACKS if t.tool == tool] if readback else []
    grammar = CallGrammar(tok, {tool: schemas.ARGUMENT_MODELS[tool]}, templates)
    out = []
    for seed in range(seeds):
        request = Request(tuple(tok.encode(f"{Special.BOS}{prompt}{A}")),
                          Schedule(threshold=0.5, max_new_tokens=96), grammar=grammar,
                          grounder=grounder(sources))  # fmt: skip
        model = CallBiased(random_model(tok, seed, block_size=16), tok.ids.call)
        g = generate(model, tok.ids, request, time.monotonic)  # type: ignore[arg-type]
        ids = list(g.token_ids)
        assert tok.ids.call in ids, tok.decode(ids)
        out.append(grammar.parse(ids[ids.index(tok.ids.call) + 1 :]).arguments.model_dump())
    return out


@pytest.mark.parametrize(
    ("said", "times"),
    [
        ("Go like, with 9.", {"09:00"}),
        ("around 5.30 thank you", {"17:30"}),
        ("at 2 cheers", {"14:00"}),
        ("Oh, better 12:30 p.m. actually.", {"12:30"}),
        ("Nine thirty is fine.", {"09:30"}),
        ("half past three", {"15:30"}),
        ("three sharp please", {"15:00"}),
        ("Ten o'clock um, is fine.", {"10:00"}),
        ("9.30am or 14:00", {"09:30", "14:00"}),
        ("1 pm", {"13:00"}),
        ("one o'clock", {"13:00"}),
        ("at noon", {"12:00"}),
        ("say half twelve", {"12:30"}),  # British: half past
        ("er, morning, half nine", {"09:30"}),
        ("one of the floor pumps", set()),  # a bare "one" is not a time
        ("could you make it one instead", {"13:00"}),
        ("at one if you can", {"13:00"}),
        ("look at one of those locks", set()),
        ("item 1 8 8", set()),  # digits read out one by one are not a time
        ("order 4 1 7 2", set()),
    ],
)
def test_a_start_time_is_heard_however_a_caller_says_it(said: str, times: set[str]) -> None:
    heard = {t for t in get_args(schemas.SlotTime)
             if re.search(schemas._time_said_as(t), said, re.IGNORECASE)}  # fmt: skip
    assert heard == times


@pytest.mark.parametrize(
    ("said", "times"),
    [
        ("oh no, sorry, not eleven, I've got the kids' football at eleven. could you make it "
         "one instead", {"13:00"}),
        ("I can't do ten, how about half past two", {"14:30"}),
        ("not eleven", {"11:00"}),  # the only time named: the model decides
        ("eleven or one o'clock", {"11:00", "13:00"}),
    ],
)  # fmt: skip
def test_a_time_ruled_out_beside_another_is_not_offered(
    tok: TextTokenizer, said: str, times: set[str]
) -> None:
    assert heard_in(tok, "book_service", "time", said) == times


def test_the_latest_caller_line_to_name_a_value_wins(tok: TextTokenizer) -> None:
    prompt = (
        f"{C} a tune-up on friday at 2 please, it's for anna{A}{SAY} So a tune-up on "
        f"friday at two o'clock for anna?{C} oh better monday at half past twelve"
    )
    for args in calls(tok, "book_service", prompt):
        assert (args["day"], args["time"], args["service"]) == ("monday", "12:30", "tune-up")


READ_BACK = (
    f"{A}{SAY} So a brake check next friday at half past two for anna okafor. Shall I book that?"
)
EARLY_LINES = ("i need my brakes looked at, it's anna okafor", "whatever you have first")
"""The call's lines before the prompt's window: a name, no day, no time."""


def test_a_confirmed_read_back_is_booked_as_it_was_read(tok: TextTokenizer) -> None:
    """The caller said yes to what they heard; the day and time are only in the agent's
    read-back (said out of the prompt's window, or chosen by the agent from a list)."""
    sources = CallSources(caller_lines=(*EARLY_LINES, "yes please"))
    prompt = f"{READ_BACK}{C} yes please"
    for args in calls(tok, "book_service", prompt, readback=True, sources=sources):
        assert args == {"name": "anna okafor", "day": "next friday", "time": "14:30",
                        "service": "brake check"}  # fmt: skip
    unheard = calls(tok, "book_service", prompt, sources=sources)  # no read-back known
    assert {(a["day"], a["time"]) for a in unheard} != {("next friday", "14:30")}


def test_the_name_read_back_is_the_one_booked_among_those_said(tok: TextTokenizer) -> None:
    lines = ("a brake check next friday at half past two", "nina adams, anna okafor")
    prompt = f"{C} {lines[0]}{C} {lines[1]}{READ_BACK}{C} yep"
    sources = CallSources(caller_lines=(*lines, "yep"))
    names = {a["name"] for a in calls(tok, "book_service", prompt, readback=True, sources=sources)}
    assert names == {"anna okafor"}
    unheard = calls(tok, "book_service", prompt, sources=sources, seeds=8)
    assert {a["name"] for a in unheard} == {"anna okafor", "nina adams"}
    corrected = f"{prompt}{A}{SAY} Sorry?{C} no, it's for nina adams"
    sources = CallSources(caller_lines=(*lines, "yep", "no, it's for nina adams"))
    for args in calls(tok, "book_service", corrected, readback=True, sources=sources):
        assert args["name"] == "nina adams"


def test_a_correction_after_the_read_back_wins_over_it(tok: TextTokenizer) -> None:
    sources = CallSources(caller_lines=(*EARLY_LINES, "yes but make it saturday"))
    prompt = f"{READ_BACK}{C} yes but make it saturday"
    for args in calls(tok, "book_service", prompt, readback=True, sources=sources):
        assert (args["day"], args["time"]) == ("saturday", "14:30")


def test_a_value_said_early_in_the_call_is_found_in_the_whole_call(tok: TextTokenizer) -> None:
    """The prompt keeps only the latest turns; the day and service were said before."""
    sources = CallSources(caller_lines=("my wheel needs truing on thursday", "whenever suits"))
    for args in calls(tok, "check_availability", f"{C} whenever suits", sources=sources):
        assert (args["day"], args["service"]) == ("thursday", "wheel true")


def heard_in(tok: TextTokenizer, tool: str, key: str, said: str) -> set[str]:
    """The values of `tool`'s enum argument `key` that the words `said` name."""
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    slot = next(s for s in grammar.slots[tool] if s.key == key)
    return _said_in(slot, said)


@pytest.mark.parametrize(
    ("said", "services"),
    [
        ("a check on my brakes please", {"brake check"}),
        ("can you get my puncture mended", {"flat repair"}),
        ("My ebike needs looking at.", {"e-bike check"}),
        ("the shifting is all over the place", {"gear adjustment"}),
        ("could you service my bike", {"tune-up"}),
        ("a new chain fitted", {"chain replacement"}),
        ("a puncture in my back wheel", {"flat repair", "wheel true"}),
        ("an e-bike check please", {"e-bike check"}),
        ("just a few questions about my order", set()),
    ],
)
def test_a_service_is_heard_by_its_head_words(
    tok: TextTokenizer, said: str, services: set[str]
) -> None:
    assert heard_in(tok, "book_service", "service", said) == services


def test_a_day_said_inside_a_longer_one_is_not_heard_alone(tok: TextTokenizer) -> None:
    prompt = f"{C} when are you open next monday"
    assert {a["day"] for a in calls(tok, "opening_hours", prompt)} == {"next monday"}


@pytest.mark.parametrize(
    ("said", "days"),
    [
        ("Friday next week, please.", {"friday next week"}),
        ("um on friday of next week", {"friday next week"}),
        ("next week on Tuesday if you can", {"tuesday next week"}),
        ("next friday please", {"next friday"}),
        ("friday or monday next week", {"friday", "monday next week"}),
        ("sometime next week", set()),
    ],
)
def test_a_weekday_next_week_is_heard_whole_and_never_as_next_friday(
    tok: TextTokenizer, said: str, days: set[str]
) -> None:
    assert heard_in(tok, "check_availability", "day", said) == days


def test_a_name_is_never_a_number_or_a_day_time_or_service_word(tok: TextTokenizer) -> None:
    prompt = f"{C} a brake check tomorrow at 10, two of us. my name is anna berg"
    closed = {"brake", "check", "brake check", "tomorrow", "10", "two", "of", "us"}
    names = {a["name"] for a in calls(tok, "book_service", prompt, seeds=8)}
    for name in names:
        assert name in prompt and not set(name.split()) & closed, name
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    slot = next(s for s in grammar.slots["book_service"] if s.key == "name")
    said = said_choice(grammar, slot, prompt)
    assert said is not None and "anna berg" in said.candidate_values
    assert not {"tomorrow", "brake check", "10", "two"} & set(said.candidate_values)


def test_what_the_agent_said_thought_or_called_is_not_grounds(tok: TextTokenizer) -> None:
    prompt = (
        f"{C} two winter tyres please{A}{Special.THINK} search with their words"
        f'{Special.CALL}{{"name": "search_products", "arguments": {{"query": "winter '
        f'tyres"}}}}{Special.TOOL_RESULT} We have the winter tyre. [107 winter tyre]{A}'
        f"{SAY} Shall I put it aside for bob?{C} yes it's for greta"
    )
    for args in calls(tok, "reserve_product", prompt, seeds=3):
        assert args["product_id"] == "107"
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    plan = grounded_plan(grammar, tuple(tok.encode(f"{Special.BOS}{prompt}{A}")), 96)
    slot = next(s for s in grammar.slots["reserve_product"] if s.key == "name")
    names = set(plan.said[slot].candidate_values)
    assert "greta" in names
    words = {w for n in names for w in n.split()}
    assert not {"arguments", "query", "search", "their", "bob", "put"} & words


def test_a_phrase_never_starts_or_ends_inside_a_word(tok: TextTokenizer) -> None:
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    slot = next(s for s in grammar.slots["cancel_booking"] if s.key == "name")
    said = said_choice(grammar, slot, f"{C} i won't make it, it'll be o'brien, jean o'brien")
    assert said is not None
    names = set(said.candidate_values)
    assert {"o'brien", "jean o'brien", "won't"} <= names
    assert not {"t", "ll", "brien", "o"} & names


def test_a_number_found_before_the_prompt_window_is_still_copied(tok: TextTokenizer) -> None:
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    prompt = tuple(tok.encode(f"{Special.BOS}{C} yes, do it{A}"))
    assert "reserve_product" not in grounded_plan(grammar, prompt, 96).feasible
    sources = CallSources(
        caller_lines=("a winter tyre please", "it's greta", "yes, do it"),
        tool_results=("We have the winter tyre. [107 winter tyre]",),
    )
    plan = grounded_plan(grammar, prompt, 96, sources)
    assert "reserve_product" in plan.feasible
    slot = next(s for s in grammar.slots["reserve_product"] if s.key == "product_id")
    assert plan.said[slot].candidate_values == ("107",)
