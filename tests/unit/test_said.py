"""Counts and labelled numbers a caller means (engine/said.py), and the reserve call that
uses them, decoded with random weights so the choice can only come from grounding."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.constraints import CallGrammar
from engine.tokenizer import Special, TextTokenizer
from tests.grounded import grounded_plan
from tests.unit.test_grounding import calls
from tools.bike_shop import schemas
from voice_agent.grounding import CallSources
from voice_agent.grounding.said import asked_for, counts_said, labelled_said, labels

TOKENIZER = Path(__file__).resolve().parents[2] / "engine/checkpoints/brain-dlm/tokenizer.json"


@pytest.mark.parametrize(
    ("line", "counts"),
    [
        ("Uh, go on, a couple of the d lock.", [2]),
        ("go yeah on two of them of the road tyre", [2]),
        ("yes please, just the one", [1]),
        ("a single one of the floor pump", [1]),
        ("3 please", [3]),
        ("a pair of those", None),  # often one product: a pair of brake pads
        ("two twenty", None),  # a time
        ("order four one seven two", None),  # a number read out in words
        ("in 5 minutes", None),
        ("£5", None),
        ("Sofia. One sec.", None),
        ("no one told me", None),
        ("yes just the one more question", None),
        ("a road tyre please", None),  # a bare "a" is not a count
        ("at 2 tomorrow", None),  # times are not counts
        ("half past one", None),
        ("two thirty suits me", None),
        ("order 4 1 7 2", None),  # digits read out one by one
        ("item 188", None),
        ("twelve of them", None),  # more than the most
    ],
)
def test_a_count_is_heard_however_a_caller_says_it(line: str, counts: list[int] | None) -> None:
    assert counts_said([line], 9) == counts


def test_the_latest_line_that_says_a_count_wins() -> None:
    assert counts_said(["two of the road tyre", "sorry, make that three", "yes"], 9) == [3]


def test_the_caller_picks_a_number_by_its_label() -> None:
    found = labels(["We have the winter tyre and the road tyre. [107 winter tyre; 105 road tyre]"])
    assert found == {"107": "winter tyre", "105": "road tyre"}
    assert labelled_said(["one of the Winter Tyre", "yes"], found) == ["107"]
    assert labelled_said(["road-tyre please"], found) == ["105"]
    assert labelled_said(["a tyre please"], found) is None  # no whole label named
    assert labelled_said(["two of the winter tyres"], found) == ["107"]  # plural
    assert labelled_said(["the road tyres and the winter tyre"], found) == ["107", "105"]
    assert labelled_said(["the winter ones please", "it's ann"], found) == ["107"]  # own word


def test_a_word_only_one_label_has_picks_it() -> None:
    found = labels(["[103 kids bike inner tube; 101 city inner tube; 110 light set]"])
    assert labelled_said(["the city ones please, I need two"], found) == ["101"]
    assert labelled_said(["the set, front and rear"], found) == ["110"]
    assert labelled_said(["an inner tube please"], found) is None  # words both labels have
    # the first product named by its own word; what follows describes it (train calls
    # held the front light for "the set with the front and back")
    lights = labels(["[108 front light; 110 light set]"])
    assert labelled_said(["ah, the set with the front and back sounds good"], lights) == ["110"]
    assert labelled_said(["the front one please, not a set"], lights) == ["108"]


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


def test_a_reserve_copies_the_named_product_and_the_count_whatever_the_weights(
    tok: TextTokenizer,
) -> None:
    history = (
        f"{Special.CALLER} any winter tyres?{Special.AGENT}{Special.TOOL_RESULT} We have the "
        "road tyre and the winter tyre. [105 road tyre; 107 winter tyre]"
        f"{Special.AGENT}{Special.SAY} Shall I put it aside for you?"
        f"{Special.CALLER} go on, a couple of the winter tyre{Special.AGENT}"
        f"{Special.SAY} And what name is it under?{Special.CALLER} name is ngozi"
    )
    for args in calls(tok, "reserve_product", history, seeds=4):
        assert args == {"product_id": "107", "quantity": 2, "name": "ngozi"}


def test_with_no_count_said_the_quantity_is_the_models(tok: TextTokenizer) -> None:
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    slot = next(s for s in grammar.slots["reserve_product"] if s.key == "quantity")
    prompt = tuple(tok.encode(f"{Special.BOS}{Special.CALLER} yes please{Special.AGENT}"))
    assert slot not in grounded_plan(grammar, prompt, 96).said
    plan = grounded_plan(
        grammar, prompt, 96, CallSources(caller_lines=("two of them", "yes please"))
    )
    assert plan.said[slot].candidate_values == ("2",)


@pytest.mark.parametrize(
    ("lines", "things"),
    [
        (["any chance you stock a tube for a child's bike please"], ["a tube for a child's bike"]),
        (["Hiya, are a headlight something you sell if you can."], ["a headlight"]),
        (["Any chance er, you stock snow tyres if that's possible?"], ["snow tyres"]),
        (["do you have a 700c tube, and some chain oil"], ["a 700c tube", "some chain oil"]),
        (["snow tyres please", "yes please"], ["snow tyres"]),  # the latest line asking
        (["yes please", "thanks"], None),
        # what follows a word of asking in its sentence, when anything does (a dev call
        # searched for "ride")
        (["hi, do you have kids helmets? my little one's just learned to ride"],
         ["kids helmets"]),
        (["I've got a broken spoke, it's rubbing on the frame"], ["a broken spoke", "rubbing", "frame"]),
    ],
)  # fmt: skip
def test_what_the_caller_asks_for(lines: list[str], things: list[str] | None) -> None:
    assert asked_for(lines) == things


def test_a_search_copies_what_the_caller_asks_for_whatever_the_weights(
    tok: TextTokenizer,
) -> None:
    prompt = f"{Special.CALLER} hi there, any chance you stock a red bell, please?"
    queries = {a["query"] for a in calls(tok, "search_products", prompt, seeds=4)}
    assert queries == {"a red bell"}
