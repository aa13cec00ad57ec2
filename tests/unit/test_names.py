"""A caller's name among their words (engine/names.py) and the name slot that uses it.

Names here are not in the brain's training lexicon, so nothing below can pass by memory."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from engine.constraints import CallGrammar
from engine.tokenizer import Special, TextTokenizer
from tests.grounded import grounded_plan
from tests.unit.test_grounding import calls
from tools.bike_shop import schemas
from voice_agent.grounding import CallSources, names
from voice_agent.grounding.ground import NUMBER_WORDS
from voice_agent.grounding.names import name_phrases

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "engine/checkpoints/brain-dlm/tokenizer.json"
CLOSED = NUMBER_WORDS | {"tomorrow", "friday", "tune-up", "tune", "up", "brake", "check"}


@pytest.mark.parametrize(
    ("lines", "best"),
    [
        (["hi it's priyanka okonkwo, can i book a tune-up tomorrow at ten"], "priyanka okonkwo"),
        (["Um, good afternoon, this is Siobhan Mbeki."], "Siobhan Mbeki"),
        (["Yusuf Demir here, I need a brake check."], "Yusuf Demir"),
        (["my name, um, so, is zofia"], "zofia"),
        (["Ingrid Haugen, thanks."], "Ingrid Haugen"),
        (["it'll be o'donoghue"], "o'donoghue"),
        (["please put kwame asante down for a tune-up friday"], "kwame asante"),
        (["Sure, it's Tom Brown, tomorrow at 9."], "Tom Brown"),  # capitals inside a sentence
        (["my name is tom brown"], "tom"),  # common words after a strong cue: 1 and 2 words
        # the latest cued name wins (a correction), and a later "yes" is no name
        (["it's anna okafor", "no sorry, it's actually zofia kowalczyk", "yes please"],
         "zofia kowalczyk"),
        # another language's thanks or goodbye said later is no name (dev calls booked
        # "merci" and "dziekuje")
        (["Sophie Laurent", "yes, merci"], "Sophie Laurent"),
        (["Ewa Nowak", "yeah, all good", "dziekuje, bye"], "Ewa Nowak"),
        (["Marta Silva.", "obrigada, tchau, adios"], "Marta Silva"),
        # a surname spelled out again keeps the first name said before (a dev call booked
        # "Aziz" for Tariq Aziz)
        (["Tariq Aziz", "no, Aziz, A Z I Z, not Hafiz"], "Tariq Aziz"),
        # a title is no part of the name, nor a day in the plural (train calls booked
        # "Mrs Gloria Fontaine" and "Wednesdays")
        (["yes, Mrs Gloria Fontaine"], "Gloria Fontaine"),
        (["he's with me on Wednesdays", "Leo Castellanos"], "Leo Castellanos"),
    ],
)  # fmt: skip
def test_the_best_guess_is_the_callers_name(lines: list[str], best: str) -> None:
    found = name_phrases(lines, CLOSED)
    assert found is not None and found[0] == best, found


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("Precious Ndlovu", ["Precious Ndlovu"]),  # a dev call reserved under "Ndlovu"
        ("Grace Okafor, please", ["Grace Okafor"]),
        ("Will Okafor here", ["Will Okafor"]),
        ("Yes Ndlovu", ["Ndlovu"]),  # an answer word is no first name
        ("Book Ndlovu in please", ["Ndlovu"]),  # the pair must end its phrase
        ("Great. Ndlovu", ["Ndlovu"]),  # not across a sentence break
    ],
)
def test_a_first_name_that_is_also_a_word_opens_a_sentence_before_a_surname(
    line: str, found: list[str]
) -> None:
    assert name_phrases([line], CLOSED) == found


@pytest.mark.parametrize(
    ("lines", "best"),
    [
        (["grace kim"], "grace kim"),  # train calls cancelled for "kim", booked "rachel"
        (["it's rachel green"], "rachel green"),
        (["maria gonzalez"], "maria gonzalez"),
        (["yes, grace kim"], "grace kim"),
        (["Zofia Lund", "nah ta, bye"], "Zofia Lund"),  # "nah ta" was read back as a name
        (["Zofia Lund", "mm-hmm, yes"], "Zofia Lund"),
        (["kofi here"], "kofi"),  # "here" is a cue, not a surname
    ],
)  # fmt: skip
def test_a_short_line_that_is_only_a_name_keeps_its_common_words(
    lines: list[str], best: str
) -> None:
    found = name_phrases(lines, CLOSED)
    assert found is not None and found[0] == best, found
    assert name_phrases(["tomorrow at two please"], CLOSED) is None
    assert name_phrases(["can i get the kids helmet"], CLOSED) is None


def test_a_common_word_name_after_a_strong_cue_offers_both_lengths() -> None:
    assert name_phrases(["put it under will smith"], CLOSED) == ["will", "will smith"]
    assert name_phrases(["it's will smith"], CLOSED) is None  # "it's fine": not strong


@pytest.mark.parametrize(
    "lines",
    [
        ["yes please", "tomorrow at ten is fine"],
        ["go with 5.30pm", "um, hmm, yeah"],
        ["it's for tomorrow", "I'm sure it'll be fine", "this is great"],
    ],
)
def test_nothing_is_a_name_when_nothing_looks_like_one(lines: list[str]) -> None:
    assert name_phrases(lines, CLOSED) is None


@pytest.mark.parametrize(
    ("lines", "best"),
    [
        (["It's Sofia.", "Brompton."], "Sofia"),  # a cue beats a word alone in its phrase
        (["I am Sofia", "Hi, is this Halfords?"], "Sofia"),
        (["Um, it'll, I mean, be Dagny Lund."], "Dagny Lund"),
    ],
)
def test_a_cue_outranks_a_lone_unknown_word(lines: list[str], best: str) -> None:
    found = name_phrases(lines, CLOSED)
    assert found is not None and found[0] == best, found


def test_a_function_word_after_a_strong_cue_is_no_name() -> None:
    assert name_phrases(["can you put it under my name?"], CLOSED) is None


def test_a_cued_name_beats_a_stray_unknown_word_said_later() -> None:
    lines = ["under Dagny Lund please", "do you have knobbly tyres"]
    assert name_phrases(lines, CLOSED) == ["Dagny Lund"]
    assert name_phrases(lines[1:], CLOSED) == ["knobbly"]  # with no cue, any unknown word


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


def test_the_name_slot_copies_the_name_whatever_the_weights(tok: TextTokenizer) -> None:
    """Random weights pulled towards `<call>`: the name can only come from grounding."""
    prompt = (f"{Special.CALLER} hi, a tune-up tomorrow at 10 please, my name is "
              "ngozi adeyemi, and thanks a lot")  # fmt: skip
    assert {a["name"] for a in calls(tok, "book_service", prompt, seeds=4)} == {"ngozi adeyemi"}


def test_a_name_said_before_the_prompt_window_is_still_found(tok: TextTokenizer) -> None:
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS)
    slot = next(s for s in grammar.slots["book_service"] if s.key == "name")
    prompt = tuple(tok.encode(f"{Special.BOS}{Special.CALLER} yes, do it{Special.AGENT}"))
    window_only = grounded_plan(grammar, prompt, 96)
    assert "ngozi adeyemi" not in window_only.said[slot].candidate_values
    lines = ("it's ngozi adeyemi", "tomorrow", "yes, do it")
    whole_call = grounded_plan(grammar, prompt, 96, CallSources(caller_lines=lines))
    assert whole_call.said[slot].candidate_values == ("ngozi adeyemi",)


def test_a_broken_word_list_says_how_to_rebuild_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "common_words.txt.gz"
    broken.write_bytes(b"not gzip")
    monkeypatch.setattr(names, "COMMON_WORDS_PATH", broken)
    names.common_words.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="make_common_words"):
            names.common_words()
    finally:
        names.common_words.cache_clear()


def test_the_word_list_keeps_lower_case_words_only_and_is_reproducible(tmp_path: Path) -> None:
    source = tmp_path / "dict"
    source.write_text("apple\nAnna\nwill\nWill\nit's\nbanana\nDubois\n")
    out = [tmp_path / "a.gz", tmp_path / "b.gz"]
    for path in out:
        subprocess.run([sys.executable, str(ROOT / "scripts/make_common_words.py"), str(source),
                        "--out", str(path)], check=True, capture_output=True)  # fmt: skip
    assert out[0].read_bytes() == out[1].read_bytes()
    assert gzip.decompress(out[0].read_bytes()).decode().split() == ["apple", "banana", "will"]
    missing = subprocess.run([sys.executable, str(ROOT / "scripts/make_common_words.py"),
                              str(tmp_path / "nope"), "--out", str(tmp_path / "c.gz")],
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode != 0 and "cannot read" in missing.stderr


def test_the_shipped_word_list_knows_common_words_but_not_rare_names() -> None:
    words = names.common_words()
    assert {"the", "wondering", "tyre", "grace", "smith"} <= words
    assert not {"rahul", "dubois", "okonkwo", "it's"} & words
