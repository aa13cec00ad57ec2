"""Read-backs and relayed tool results laid out by the engine (engine/readback.py and
`CallPlan.after_commit`).

The models here have random weights, pushed only to open their answer with a scripted
few tokens; every word after that opening comes from the layout, so a test that passes
shows the layout, not a trained model, chose it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import get_args

import pytest
import torch
from torch import Tensor

from engine.constraints import CallGrammar, _first_word_tokens
from engine.generate import Request, generate
from engine.model import DiffusionLM
from engine.readback import SayTemplate, Spoken
from engine.schedule import Schedule
from engine.tokenizer import Special, TextTokenizer
from tests.unit.test_engine_constraints import random_model
from tools.bike_shop import readbacks, schemas
from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.readbacks import CONFIRM_BOOKING, CONFIRM_RESERVE, READBACKS
from voice_agent.brain import lines
from voice_agent.dialogue.format import parse_answer
from voice_agent.grounding import ground

TOKENIZER = Path(__file__).resolve().parents[2] / "engine/checkpoints/brain-dlm/tokenizer.json"
C, A = Special.CALLER, Special.AGENT


class Opening(torch.nn.Module):
    """Random weights that strongly prefer `script` at the answer's first positions."""

    def __init__(self, inner: DiffusionLM, prompt_len: int, script: list[int]) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config
        self.prompt_len, self.script = prompt_len, script

    def forward(self, tokens: Tensor, positions: Tensor, *rest: object) -> Tensor:
        logits: Tensor = self.inner(tokens, positions, *rest)
        for i, token in enumerate(self.script):
            logits[positions == self.prompt_len + i, token] += 40.0
        return logits


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


def answer(tok: TextTokenizer, prompt: str, opening: str, seed: int, block: int = 8) -> str:
    grammar = CallGrammar(tok, schemas.ARGUMENT_MODELS, READBACKS)
    ids = tuple(tok.encode(f"{Special.BOS}{prompt}{A}"))
    model = Opening(random_model(tok, seed, block_size=block), len(ids), tok.encode(opening))
    request = Request(
        ids, Schedule(threshold=0.5, max_new_tokens=96), grammar=grammar, grounder=ground
    )
    g = generate(model, tok.ids, request, time.monotonic)  # type: ignore[arg-type]
    return tok.decode(g.token_ids)


@pytest.mark.parametrize("block", [8, 16])
def test_a_booking_read_back_speaks_only_what_the_caller_said(
    tok: TextTokenizer, block: int
) -> None:
    prompt = f"{C} a tune up next friday at half past two please, my name is ngozi adeyemi"
    want = lines.confirm_booking("tune-up", "next friday", "14:30", "ngozi adeyemi")
    for seed in range(3):
        said = parse_answer(answer(tok, prompt, f"{Special.SAY} So a", seed, block)).action
        assert getattr(said, "text", None) == want


def test_a_cancellation_read_back_takes_the_latest_day(tok: TextTokenizer) -> None:
    prompt = (
        f"{C} cancel my booking on monday, it's for ngozi{A}{Special.SAY} Sure.{C} sorry, tuesday"
    )
    for seed in range(3):
        said = parse_answer(answer(tok, prompt, f"{Special.SAY} Cancel your booking", seed)).action
        assert getattr(said, "text", None) == lines.confirm_cancel("tuesday", "ngozi")


def test_without_a_name_said_the_read_back_is_the_models(tok: TextTokenizer) -> None:
    """Nothing to copy a name from: no layout, so the random model's own words follow."""
    prompt = f"{C} a tune up tomorrow at ten please"
    text = answer(tok, prompt, f"{Special.SAY} So a", seed=0)
    assert "Shall I book that?" not in text


def test_a_tool_result_is_relayed_word_for_word_once_begun(tok: TextTokenizer) -> None:
    result = "You're booked in for a tune-up tomorrow at ten o'clock; your reference is one zero zero four."
    prompt = (f"{C} yes please{A}{Special.CALL}{{}}{Special.TOOL_RESULT} {result} "
              "[101 road tyre]")  # fmt: skip
    for seed in range(3):
        said = parse_answer(answer(tok, prompt, f"{Special.SAY} You're", seed)).action
        assert getattr(said, "text", "").startswith(result)
    refusal = (
        f"{C} yes{A}{Special.CALL}{{}}{Special.TOOL_RESULT} error slot_taken: Sorry, ten is taken."
    )
    said = parse_answer(answer(tok, refusal, f"{Special.SAY} Sorry,", seed=0)).action
    assert getattr(said, "text", "").startswith("Sorry, ten is taken.")


def test_the_templates_write_the_training_read_backs() -> None:
    assert lines.confirm_booking("brake check", "friday", "09:00", "Anna") == (
        "So a brake check on friday at nine o'clock for Anna. Shall I book that?"
    )
    assert (
        CONFIRM_BOOKING.render(
            {"service": "tune-up", "day": "tomorrow", "time": "12:00", "name": "bo"}
        )
        == "So a tune-up tomorrow at noon for bo. Shall I book that?"
    )


def test_a_template_must_open_with_words_and_speak_real_arguments(tok: TextTokenizer) -> None:
    with pytest.raises(ValueError, match="open with fixed words"):
        SayTemplate("book_service", (Spoken("name"), " booked"))
    with pytest.raises(ValueError, match="colour"):
        CallGrammar(
            tok, schemas.ARGUMENT_MODELS, [SayTemplate("book_service", ("A ", Spoken("colour")))]
        )


def test_a_relay_opens_on_a_whole_word_up_to_an_apostrophe(tok: TextTokenizer) -> None:
    def opening(text: str) -> str:
        ids = tuple(tok.encode(text))
        return tok.decode(list(ids[: _first_word_tokens(tok, ids)]))

    assert opening(" Booked in for Monday") == " Booked"  # never a bare " B"
    assert opening(" Cancelled your booking") == " Cancelled"  # never " Can"
    assert opening(" You're booked in") == " You"
    assert opening(" Sorry, ten is taken") == " Sorry"


def test_a_spoken_read_back_reads_back_into_its_arguments() -> None:
    """`SayTemplate.read` inverts `render`: enum values by how they are spoken, a name as
    the words said; anything else (another sentence, a value outside the enum) is None."""
    options = {"day": get_args(schemas.Day), "time": get_args(schemas.SlotTime),
               "service": get_args(schemas.Service)}  # fmt: skip
    args = {"service": "tune-up", "day": "saturday next week", "time": "12:30",
            "name": "Niamh Byrne"}  # fmt: skip
    spoken = CONFIRM_BOOKING.render(args)
    assert CONFIRM_BOOKING.read(spoken, options) == args
    assert CONFIRM_BOOKING.read(spoken.upper().replace(" ", "  "), options) == {
        **args, "name": "NIAMH BYRNE"}  # fmt: skip
    assert CONFIRM_BOOKING.read("Sorry, could you say that again?", options) is None
    assert CONFIRM_BOOKING.read(spoken.replace("tune-up", "spa day"), options) is None
    assert CONFIRM_BOOKING.read(spoken.replace("Niamh Byrne", ""), options) is None


def test_the_reservation_wordings_speak_every_product_at_every_count() -> None:
    """One wording per count (and "Item ..." for a product asked for by number): the
    training data's read-backs are rendered from these templates (voice_agent/brain/lines.py),
    so the words the model learned are the ones the engine lays out."""
    names = {p.product_id: p.name for p in PRODUCTS}
    spoken = 0
    for template in CONFIRM_RESERVE:
        n = int(dict(template.fixed)["quantity"])
        for pid in names:
            args = {"product_id": pid, "quantity": str(n), "name": "Ana Li"}
            if not template.fits(args):
                continue
            text = template.render(args)
            assert template.read(text, {}) == args
            spoken += 1
    assert spoken == len(names) * (schemas.MAX_QUANTITY + 1)  # every product, every count
    tubes = next(pid for pid, name in names.items() if name == "city inner tube")
    assert lines.confirm_reserve(2, tubes, "Ana Li") == (
        "Two city inner tubes for Ana Li, shall I put them aside?"
    )
    assert lines.confirm_reserve(1, tubes, "Ana Li") == (
        "A city inner tube for Ana Li, shall I put it aside?"
    )
    assert lines.confirm_item("142", "Ana Li") == (
        "Item one four two for Ana Li, shall I put it aside?"
    )  # a number the shop lacks
    with pytest.raises(ValueError, match="no reservation read-back for 12"):
        readbacks.confirm_reserve(tubes, 12, "Ana Li")


INNER_TUBES = (
    f"{C} have you got inner tubes{A}{Special.CALL}{{}}{Special.TOOL_RESULT} We have the kids "
    "bike inner tube at six dollars and the city inner tube at seven dollars fifty. "
    f"[103 kids bike inner tube; 101 city inner tube]{A}{Special.SAY} We have the kids bike "
    "inner tube and the city inner tube. Shall I put it aside for you?"
)


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("the city ones please, I need two, under Precious Ndlovu",
         "Two city inner tubes for Precious Ndlovu, shall I put them aside?"),
        # a count nobody said is one
        ("the kids one please, under Precious Ndlovu",
         "A kids bike inner tube for Precious Ndlovu, shall I put it aside?"),
    ],
)  # fmt: skip
def test_a_reservation_read_back_speaks_the_count_the_caller_said(
    tok: TextTokenizer, line: str, want: str
) -> None:
    """The model opens with a count nobody said ("Three", seen in dev calls for a caller
    who asked for two): the opening is the engine's to change while it is in the block,
    and the wording of the count said is laid out instead."""
    for seed in range(2):
        text = answer(tok, f"{INNER_TUBES}{C} {line}", f"{Special.SAY} Three", seed)
        said = parse_answer(text).action
        assert getattr(said, "text", None) == want
