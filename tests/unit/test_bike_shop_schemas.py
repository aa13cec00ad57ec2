"""The bike shop's argument models lay out under the engine's call grammar, round trip."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from engine.constraints import CallGrammar, SlotKind
from engine.tokenizer import TextTokenizer
from tests.grounded import grounded_plan
from tools.bike_shop import catalogue, schemas
from tools.bike_shop.pack import TOOLS
from tools.bike_shop.timewords import resolve_day

VALID_CALLS: dict[str, dict[str, Any]] = {
    "check_availability": {"day": "next friday", "service": "brake check"},
    "book_service": {"name": "maria lopez", "day": "tomorrow", "time": "15:30",
                     "service": "tune-up"},
    "cancel_booking": {"name": "ken adams", "day": "thursday"},
    "order_status": {"order_number": "40213"},
    "search_products": {"query": "a front light"},
    "reserve_product": {"product_id": "108", "quantity": 2, "name": "sam okafor"},
    "opening_hours": {"day": "sunday"},
    "transfer_to_human": {"reason": "warranty claim"},
    "end_call": {},
}  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    values = [str(v) for args in VALID_CALLS.values() for v in args.values()]
    literals = [*get_args(schemas.Day), *get_args(schemas.Service), *get_args(schemas.SlotTime)]
    lines = [f"caller: {v} please, order {i:05d}" for i, v in enumerate(values + literals)]
    return TextTokenizer.train(lines * 4, vocab_size=512)


@pytest.fixture(scope="module")
def grammar(tok: TextTokenizer) -> CallGrammar:
    return CallGrammar(tok, schemas.ARGUMENT_MODELS)


def test_every_tool_has_a_valid_call_and_a_registry_entry() -> None:
    assert set(VALID_CALLS) == set(schemas.ARGUMENT_MODELS) == set(TOOLS)
    for name, spec in TOOLS.items():
        assert spec.args_model is schemas.ARGUMENT_MODELS[name]
        assert spec.timeout_s > 0 and spec.description


@pytest.mark.parametrize("tool", list(VALID_CALLS))
def test_call_round_trips_through_the_grammar(grammar: CallGrammar, tool: str) -> None:
    ids = grammar.encode(tool, VALID_CALLS[tool])
    call = grammar.parse(ids)
    assert call.name == tool
    assert call.arguments.model_dump() == VALID_CALLS[tool]
    # the encoded call has exactly the tool's laid-out length (name slot + layout)
    assert len(ids) == len(grammar.name_layout()) + len(grammar.tool_layout(tool))


def test_every_literal_value_encodes(grammar: CallGrammar) -> None:
    for day in get_args(schemas.Day):
        for time in get_args(schemas.SlotTime):
            args = {"name": "maria lopez", "day": day, "time": time, "service": "wheel true"}
            assert (
                grammar.parse(grammar.encode("book_service", args)).arguments.model_dump() == args
            )
    for reason in get_args(schemas.TransferReason):
        grammar.encode("transfer_to_human", {"reason": reason})


def test_slot_kinds_follow_the_schema(grammar: CallGrammar) -> None:
    slots = {(tool, s.key): s for tool, layout in grammar.slots.items() for s in layout}
    order = slots["order_status", "order_number"]
    assert (order.kind, order.grounded, order.min_tokens, order.width) == (
        SlotKind.DIGITS,
        True,
        4,
        6,
    )
    product = slots["reserve_product", "product_id"]
    assert (product.kind, product.grounded, product.width) == (SlotKind.DIGITS, True, 3)
    quantity = slots["reserve_product", "quantity"]
    assert (quantity.kind, quantity.quoted, quantity.width) == (SlotKind.DIGITS, False, 1)
    for key in (("book_service", "name"), ("cancel_booking", "name"), ("search_products", "query")):
        assert (
            slots[key].kind is SlotKind.TEXT and slots[key].grounded and slots[key].min_tokens == 1
        )
    for key in (("book_service", "day"), ("book_service", "time"), ("book_service", "service")):
        assert slots[key].kind is SlotKind.ENUM
    assert grammar.slots["end_call"] == []


def test_grounded_tools_are_infeasible_without_values_in_the_prompt(
    grammar: CallGrammar, tok: TextTokenizer
) -> None:
    silent = grounded_plan(grammar, tuple(tok.encode("where is my order please")), 96).feasible
    said = grounded_plan(grammar, tuple(tok.encode("where is order 4 0 2 1 3 please")), 96).feasible
    assert "order_status" not in silent
    assert "order_status" in said
    assert "opening_hours" in silent  # enum-only: always feasible


def test_a_value_longer_than_its_token_budget_is_refused(grammar: CallGrammar) -> None:
    long_query = "front light rear light light set d lock cable lock road helmet city helmet"
    with pytest.raises(ValueError, match="slot has"):
        grammar.encode("search_products", {"query": long_query})


def test_models_are_frozen_and_reject_unknown_keys() -> None:
    args = schemas.OrderStatus(order_number="40213")
    with pytest.raises(ValidationError):
        args.order_number = "1"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        schemas.OrderStatus.model_validate({"order_number": "40213", "extra": 1})


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("order_status", {"order_number": "4021a"}),
        ("order_status", {"order_number": "123"}),
        ("order_status", {"order_number": "1234567"}),
        ("reserve_product", {"product_id": "108", "quantity": 0, "name": "sam"}),
        ("reserve_product", {"product_id": "108", "quantity": 10, "name": "sam"}),
        ("reserve_product", {"product_id": "1080", "quantity": 1, "name": "sam"}),
        ("book_service", {"name": "", "day": "today", "time": "10:00", "service": "tune-up"}),
        ("book_service", {"name": "sam", "day": "someday", "time": "10:00", "service": "tune-up"}),
        ("book_service", {"name": "sam", "day": "today", "time": "10:15", "service": "tune-up"}),
        ("book_service", {"name": "sam", "day": "today", "time": "10:00", "service": "paint job"}),
        ("transfer_to_human", {"reason": "i just feel like it"}),
    ],
)
def test_invalid_arguments_are_rejected(tool: str, args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        schemas.ARGUMENT_MODELS[tool].model_validate(args)


def test_literals_match_the_shop_data() -> None:
    assert set(get_args(schemas.Service)) == {s.name for s in catalogue.SERVICES}
    hours = [h for h in catalogue.OPENING_HOURS.values() if h is not None]
    first = datetime.combine(datetime.min, min(h[0] for h in hours))
    last = datetime.combine(datetime.min, max(h[1] for h in hours))
    step = timedelta(minutes=catalogue.SLOT_MINUTES)
    grid = [(first + i * step).strftime("%H:%M") for i in range((last - first) // step)]
    assert list(get_args(schemas.SlotTime)) == grid
    weekdays = set(catalogue.WEEKDAYS)
    assert set(get_args(schemas.Day)) == {"today", "tomorrow"} | weekdays | {
        f"next {d}" for d in weekdays
    } | {f"{d} next week" for d in weekdays}
    assert set(schemas.DAY_SAID_AS) == {f"{d} next week" for d in weekdays}
    for offset in range(7):  # every day word means a date, said on any day of the week
        today = date(2025, 6, 2) + timedelta(days=offset)
        for day in get_args(schemas.Day):
            assert 0 <= (resolve_day(day, today) - today).days < 14, (day, today)
