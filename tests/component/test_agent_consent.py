"""The agent's consent rule on irreversible tools, with the real sentence encoder reading
the caller's line (`tools.bike_shop.pack.CONSENT`): a transfer, hang-up or cancellation
the caller's words did not ask for is not run, and the model answers again without that
tool; one the caller asked for runs. A write runs only right after the caller said yes to
its read-back, with the values read back. The engine is the scripted test double of
tests/unit/test_agent.py (what a model would decide is not under test here)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.tokenizer import TextTokenizer
from tests.unit.test_agent import (
    BOOKING,
    MONDAY_10AM,
    WEDNESDAY,
    ScriptedEngine,
    bookings,
    call,
    run,
    say,
)
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import CONSENT, PACK, call_tool
from tools.bike_shop.readbacks import CONFIRM_BOOKING, CONFIRM_CANCEL, CONFIRM_RESERVE
from tools.bike_shop.shop import open_shop
from voice_agent.agent import Agent, DegradeKind, ReplyKind
from voice_agent.agent.agent import closing_parts
from voice_agent.dialogue.format import AgentSay
from voice_agent.dialogue.hints import CallerHints

TOKENIZER = Path(__file__).resolve().parents[2] / "engine/checkpoints/brain-dlm/tokenizer.json"


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.load(TOKENIZER)


@pytest.fixture(scope="module")
def hints() -> CallerHints:
    return CallerHints.load()


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[ShopContext]:
    db = open_shop(tmp_path / "shop.sqlite", MONDAY_10AM.date())
    yield ShopContext(db, lambda: MONDAY_10AM)
    db.close()


def test_a_transfer_nobody_asked_for_is_not_run_and_the_model_answers_without_it(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    engine = ScriptedEngine(
        tok, call(tok, "transfer_to_human", reason="could not help"), say(tok, "What day suits?")
    )
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    reply = run(agent.respond("there's a horrible grinding noise when i brake going downhill"))
    assert reply.kind is ReplyKind.SAY and reply.text == "What day suits?"
    assert reply.tool_calls == ()
    assert [d.kind for d in reply.degrades] == [DegradeKind.NOT_ASKED]
    first, again = engine.requests
    assert first.grammar is not None and "transfer_to_human" in first.grammar.tools
    assert again.grammar is not None and "transfer_to_human" not in again.grammar.tools
    assert "end_call" in again.grammar.tools  # only the refused tool is left out


def test_a_hang_up_needs_a_goodbye_and_a_transfer_a_request_for_a_person(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    engine = ScriptedEngine(
        tok, call(tok, "end_call"), say(tok, "Anything else?"), call(tok, "transfer_to_human",
        reason="caller asked"),
    )  # fmt: skip
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    unasked = run(agent.respond("hmm and how long does a tune-up take"))
    assert unasked.kind is ReplyKind.SAY and unasked.text == "Anything else?"
    asked = run(agent.respond("could i talk to an actual person please"))
    assert asked.kind is ReplyKind.TRANSFER and not asked.degrades


def test_a_hang_up_needs_a_goodbye_in_the_callers_words(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """A dev line the hint reader takes for a goodbye, after an offer to hold a lock: the
    caller only declined the offer (the pack's `said` for `end_call`)."""
    line = "hmm, no, I think I'll leave it for now"
    assert hints.hint(line) in CONSENT["end_call"]
    engine = ScriptedEngine(tok, call(tok, "end_call"), say(tok, "Anything else?"))
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    reply = run(agent.respond(line))
    assert reply.kind is ReplyKind.SAY and reply.text == "Anything else?"
    assert [d.kind for d in reply.degrades] == [DegradeKind.NOT_ASKED]


@pytest.mark.parametrize(
    ("line", "runs"),
    [
        ("ok sorry. my e-bike motor's making a horrible grinding noise", False),
        ("yous fitted a chain last week and it's snapped already", True),
    ],
)
def test_a_transfer_needs_a_person_or_a_complaint_in_the_callers_words(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints, line: str, runs: bool
) -> None:
    """Both lines read as complaints to the hint reader; a train call's symptom was
    handed over. The pack's `said` for `transfer_to_human`: a person, a complaint, a
    refund or a warranty said (a chain snapped a week after the shop fitted it is one)."""
    assert hints.hint(line) in CONSENT["transfer_to_human"]
    engine = ScriptedEngine(tok, call(tok, "transfer_to_human", reason="complaint"),
                            say(tok, "What day suits?"))  # fmt: skip
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    reply = run(agent.respond(line))
    if runs:
        assert reply.kind is ReplyKind.TRANSFER and not reply.degrades
    else:
        assert (reply.kind, reply.text) == (ReplyKind.SAY, "What day suits?")
        assert "do not ask for it" in reply.degrades[0].detail


def test_a_transfer_from_a_lines_last_clause_needs_a_person_asked_for(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """A train call: the last clause of a symptom reads as a complaint to the hint reader,
    but nobody was asked for (the pack's `closing_said`): no transfer."""
    line = "hello, I've got a buckled back wheel, it's started clipping the frame when I ride"
    assert hints.hint(closing_parts(line)[-1]) in CONSENT["transfer_to_human"]
    engine = ScriptedEngine(
        tok, call(tok, "transfer_to_human", reason="complaint"), say(tok, "What day suits?")
    )
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    reply = run(agent.respond(line))
    assert reply.kind is ReplyKind.SAY and [d.kind for d in reply.degrades] == [
        DegradeKind.NOT_ASKED
    ]


def test_a_goodbye_ends_the_call(tok: TextTokenizer, shop: ShopContext, hints: CallerHints) -> None:
    agent = Agent(
        ScriptedEngine(tok, call(tok, "end_call")), tok, PACK, shop, hints=hints, consent=CONSENT
    )
    reply = run(agent.respond("no that's everything, cheers, bye"))
    assert reply.kind is ReplyKind.HANG_UP and not reply.degrades


def test_without_hints_there_is_no_consent_rule(tok: TextTokenizer, shop: ShopContext) -> None:
    """A checkpoint trained without caller hints has no reading of the line to go by: the
    rule is off rather than refusing every hand-off."""
    agent = Agent(ScriptedEngine(tok, call(tok, "end_call")), tok, PACK, shop, consent=CONSENT)
    assert run(agent.respond("tell me about brakes")).kind is ReplyKind.HANG_UP


def test_a_booking_without_its_read_back_is_read_back_instead_of_written(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """The caller's yes answered a question, not a read-back (seen in a dev call: "yes
    please" after "Sorry, could you say that again?" booked a brake check at nine nobody
    asked for): the booking is read back, nothing is written until the caller agrees."""
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), call(tok, "book_service",
                            **BOOKING), say(tok, "You're booked."))  # fmt: skip
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    agent.turns.append(AgentSay("Sorry, could you say that again?"))
    first = run(agent.respond("yes please"))
    assert first.kind is ReplyKind.SAY and first.text == CONFIRM_BOOKING.render(BOOKING)
    assert first.tool_calls == () and bookings(shop) == []
    assert [d.kind for d in first.degrades] == [DegradeKind.NOT_READ_BACK]
    second = run(agent.respond("yes that's right"))
    assert second.text == "You're booked." and not second.degrades
    assert bookings(shop) == [("2025-06-04", "10:00", "brake check")]


def test_a_booking_after_its_read_back_runs_with_the_values_read_back(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """The model's call after the yes names another time and name than the read-back (a
    dev call booked the name "merci" from "yes, merci"): what runs is what the caller
    heard and accepted."""
    wrong = {**BOOKING, "name": "Merci", "time": "11:00"}
    engine = ScriptedEngine(tok, call(tok, "book_service", **wrong), say(tok, "You're booked."))
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    agent.turns.append(AgentSay(CONFIRM_BOOKING.render(BOOKING)))
    reply = run(agent.respond("yes, merci"))
    assert [d.kind for d in reply.degrades] == [DegradeKind.READ_BACK_VALUES]
    assert bookings(shop) == [("2025-06-04", "10:00", "brake check")]
    assert bookings(shop, "Merci") == []
    (record,) = reply.tool_calls
    assert record.arguments == BOOKING


@pytest.mark.parametrize(
    ("line", "tool", "kind"),
    [
        ("delivered? oh, it must be with the neighbours then. right, thanks, bye", "end_call",
         ReplyKind.HANG_UP),
        ("shipped? it's been nearly two weeks, this is ridiculous. can I talk to someone "
         "about it please", "transfer_to_human", ReplyKind.TRANSFER),
    ],
)  # fmt: skip
def test_a_goodbye_or_a_request_for_a_person_at_the_end_of_a_line_counts(
    line: str, tool: str, kind: ReplyKind, tok: TextTokenizer, shop: ShopContext,
    hints: CallerHints,
) -> None:  # fmt: skip
    """The whole line reads as an order question; its closing words ask for the hand-off
    (dev calls whose callers were kept on the line)."""
    assert hints.hint(line) not in CONSENT[tool]
    args = {"reason": "caller asked"} if tool == "transfer_to_human" else {}
    agent = Agent(ScriptedEngine(tok, call(tok, tool, **args)), tok, PACK, shop, hints=hints,
                  consent=CONSENT)  # fmt: skip
    reply = run(agent.respond(line))
    assert reply.kind is kind and not reply.degrades


def test_a_write_needs_the_whole_line_to_be_a_yes(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """ "perfect" at the end of "yes, two sets, perfect" reads as a yes, but the line
    answers another question than the booking read back: no booking."""
    engine = ScriptedEngine(tok, call(tok, "book_service", **BOOKING), say(tok, "Two sets?"))
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    agent.turns.append(AgentSay(CONFIRM_BOOKING.render(BOOKING)))
    reply = run(agent.respond("yes, two sets, perfect"))
    assert [d.kind for d in reply.degrades] == [DegradeKind.NOT_ASKED]
    assert bookings(shop) == []


def holds(ctx: ShopContext) -> list[tuple[str, int, str]]:
    with ctx.db.read() as conn:
        rows = conn.execute("SELECT product_id, quantity, name FROM reservations").fetchall()
    return [(r[0], int(r[1]), r[2]) for r in rows]


TWO_TUBES = {"product_id": "101", "quantity": 2, "name": "Precious Ndlovu"}


def test_a_reservation_runs_with_the_count_read_back_and_a_doubtful_relay_is_the_tools_line(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """After the read-back of two city inner tubes for Precious Ndlovu, the model's call
    says three for "Umar" (dev calls): two are put aside for Precious Ndlovu. The model's
    answer after the tool is unsure: the caller hears the tool's own line, not "say that
    again" about a reservation already made."""
    wrong = {**TWO_TUBES, "quantity": 3, "name": "Umar"}
    engine = ScriptedEngine(tok, call(tok, "reserve_product", **wrong),
                            (say(tok, "Three for Umar, done."), 0.2))  # fmt: skip
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    (wording,) = [t for t in CONFIRM_RESERVE if t.fits(TWO_TUBES) and t.pieces[0] == "Two "]
    agent.turns.append(AgentSay(wording.render({k: str(v) for k, v in TWO_TUBES.items()})))
    reply = run(agent.respond("yep, that's right"))
    assert holds(shop) == [("101", 2, "Precious Ndlovu")]
    assert [d.kind for d in reply.degrades] == [
        DegradeKind.READ_BACK_VALUES,
        DegradeKind.LOW_CONFIDENCE,
    ]
    assert reply.kind is ReplyKind.FALLBACK
    assert reply.text.startswith("I've put two city inner tubes aside for you, Precious Ndlovu")


def test_a_corrected_cancellation_is_read_back_again_and_runs_after_the_yes(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints
) -> None:
    """A dev call: after the read-back of Monday's cancellation the caller says "it's
    friday, not monday" and the model cancels Friday's. Not run (no yes), nor dropped (the
    model went on to offer a wheel true): Friday's cancellation is read back, and runs
    after the yes. The same call again after a plain no is left out."""
    shop = replace(shop, caller="+15550100")  # the caller whose bookings these are
    for day in ("wednesday", "friday"):
        call_tool("book_service", {**BOOKING, "day": day}, shop)
    monday = {"name": "Ann Lee", "day": "wednesday"}
    friday = {"name": "Ann Lee", "day": "friday"}
    engine = ScriptedEngine(
        tok, call(tok, "cancel_booking", **friday), call(tok, "cancel_booking", **friday),
        say(tok, "Done."), call(tok, "cancel_booking", **friday), say(tok, "Fine."),
    )  # fmt: skip
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    agent.turns.append(AgentSay(CONFIRM_CANCEL.render(monday)))
    corrected = run(agent.respond("oh sorry, my mistake, it's friday, not wednesday"))
    assert corrected.text == CONFIRM_CANCEL.render(friday) and corrected.tool_calls == ()
    assert [d.kind for d in corrected.degrades] == [DegradeKind.NOT_ASKED]
    assert len(bookings(shop)) == 2
    done = run(agent.respond("yes, that's the one"))
    assert done.text == "Done." and bookings(shop) == [(WEDNESDAY, "10:00", "brake check")]
    agent.turns.append(AgentSay(CONFIRM_CANCEL.render(friday)))
    declined = run(agent.respond("no, leave it actually"))
    assert declined.text == "Fine." and declined.tool_calls == ()


@pytest.mark.parametrize(
    "line", ["hmm, actually no, don't cancel it, I'll find a way to get there", "hang on, wait"]
)
def test_a_write_is_never_run_on_a_line_that_holds_it_back(
    tok: TextTokenizer, shop: ShopContext, hints: CallerHints, line: str
) -> None:
    """A dev call: "hmm, actually no, don't cancel it" after a cancellation's read-back
    was read as a yes, and the model cancelled. The pack's `held_back` words stop it
    whatever the line reads as; the model answers again without the tool."""
    shop = replace(shop, caller="+15550100")
    call_tool("book_service", {**BOOKING, "day": "friday"}, shop)
    friday = {"name": "Ann Lee", "day": "friday"}
    engine = ScriptedEngine(tok, call(tok, "cancel_booking", **friday), say(tok, "Kept."))
    agent = Agent(engine, tok, PACK, shop, hints=hints, consent=CONSENT)
    agent.greet()
    agent.turns.append(AgentSay(CONFIRM_CANCEL.render(friday)))
    reply = run(agent.respond(line))
    assert (reply.text, reply.tool_calls) == ("Kept.", ())
    assert [d.kind for d in reply.degrades] == [DegradeKind.NOT_ASKED]
    assert "hold it back" in reply.degrades[0].detail
    assert len(bookings(shop)) == 1
