"""Schema-constrained tool calls: every call decoded with random weights validates."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal

import pytest
import torch
from pydantic import BaseModel, Field
from torch import Tensor

from engine.batching import Engine
from engine.config import ModelConfig
from engine.constraints import CallGrammar, Fixed
from engine.generate import FinishReason, Generation, Request, generate
from engine.model import DiffusionLM
from engine.schedule import Schedule
from engine.tokenizer import Special, TextTokenizer
from tests.grounded import grounded_plan
from voice_agent.brain.synthetic import TOOLS, OrderStatus, make_examples
from voice_agent.grounding import ground
from voice_agent.grounding.said import said_as_words


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    texts = [e.prompt + e.answer for e in make_examples(400, seed=5)]
    return TextTokenizer.train(texts, vocab_size=400)


@pytest.fixture(scope="module")
def grammar(tok: TextTokenizer) -> CallGrammar:
    return CallGrammar(tok, TOOLS)


class CallBiased(torch.nn.Module):
    """Random weights, with a strong pull towards `<call>` everywhere it is allowed."""

    def __init__(self, inner: DiffusionLM, call_id: int, bias: float = 30.0) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config
        self.call_id, self.bias = call_id, bias

    def forward(self, *args: object) -> Tensor:
        logits: Tensor = self.inner(*args)
        logits[..., self.call_id] += self.bias
        return logits


def random_model(tok: TextTokenizer, seed: int, block_size: int = 8) -> DiffusionLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(tok.vocab_size, d_model=32, n_layers=2, n_heads=4, d_ff=64,
                      max_seq_len=256, block_size=block_size)  # fmt: skip
    return DiffusionLM(cfg).eval()


def decode(model: torch.nn.Module, tok: TextTokenizer, prompt: str, **kw: object) -> Generation:
    if kw.get("grammar") is not None:
        kw.setdefault("grounder", ground)  # as the agent grounds its calls
    request = Request(tuple(tok.encode(prompt)), Schedule(threshold=0.5, max_new_tokens=80), **kw)  # type: ignore[arg-type]
    return generate(model, tok.ids, request, time.monotonic)  # type: ignore[arg-type]


def call_ids(tok: TextTokenizer, g: Generation) -> list[int]:
    ids = list(g.token_ids)
    assert tok.ids.call in ids, tok.decode(ids)
    return ids[ids.index(tok.ids.call) + 1 :]


def test_encode_then_parse_round_trips_and_decodes_to_plain_json(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    args = {"service": "brake check", "day": "friday", "time": "14:30", "name": "lena"}
    ids = grammar.encode("book_service", args)
    call = grammar.parse(ids)
    assert call.name == "book_service" and call.arguments.model_dump() == args
    assert tok.ids.gap in ids  # slots are gap-padded to a fixed width
    text = tok.decode(i for i in ids if i != tok.ids.gap)
    assert text == json.dumps({"name": "book_service", "arguments": args})
    # The layout is fixed by the tool alone: same length for any values.
    other = grammar.encode("book_service", {**args, "name": "bob", "service": "tune-up"})
    assert len(other) == len(ids)


def test_bad_calls_are_clear_errors(grammar: CallGrammar) -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        grammar.encode("launch_rocket", {})
    with pytest.raises(ValueError):  # pydantic: not digits
        grammar.encode("order_status", {"order_number": "12a4"})
    with pytest.raises(ValueError, match="slot has"):
        grammar.encode("book_service", {"service": "tune-up", "day": "monday",
                                        "time": "09:00", "name": "maximiliana-theodora"})  # fmt: skip
    with pytest.raises(ValueError, match="invalid tool call"):
        grammar.parse(grammar.tok.encode('{"name": "order_status", "arguments": {}}'))


@pytest.mark.parametrize("block", [8, 32])  # 32: the tool's layout lands in the name's block
@pytest.mark.parametrize("seed", range(6))
def test_random_weights_still_emit_schema_valid_calls(
    tok: TextTokenizer, grammar: CallGrammar, seed: int, block: int
) -> None:
    model = CallBiased(random_model(tok, seed, block_size=block), tok.ids.call)
    prompt = f"{Special.BOS}{Special.CALLER} hi it's nina, order 4 1 7 2 please{Special.AGENT}"
    g = decode(model, tok, prompt, grammar=grammar)
    assert g.finish_reason is FinishReason.EOS
    call = grammar.parse(call_ids(tok, g))  # raises if invalid
    assert call.name in TOOLS
    for key, value in call.arguments.model_dump().items():
        if key in ("order_number", "name"):  # grounded: copied from the prompt only
            assert all(tok.decode([t]) in prompt for t in tok.encode(value)), value
        if key == "order_number":
            assert set(value) <= set("4172") and len(value) >= 4


def test_without_the_grammar_the_same_weights_write_invalid_calls(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    prompt = f"{Special.BOS}{Special.CALLER} where is order 5 5 1 0{Special.AGENT}"
    failures = 0
    for seed in range(4):
        g = decode(CallBiased(random_model(tok, seed), tok.ids.call, bias=3.0), tok, prompt)
        ids = list(g.token_ids)
        try:
            grammar.parse(ids[ids.index(tok.ids.call) + 1 :] if tok.ids.call in ids else ids)
        except ValueError:
            failures += 1
    assert failures == 4  # the test above would be vacuous if random text parsed


def test_scaffold_tokens_are_not_counted_as_decided(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    model = CallBiased(random_model(tok, 1), tok.ids.call)
    prompt = f"{Special.BOS}{Special.CALLER} are you open on monday{Special.AGENT}"
    g = decode(model, tok, prompt, grammar=grammar)
    layout = grammar.tool_layout(grammar.parse(call_ids(tok, g)).name)
    fixed = len(grammar.prefix) + sum(isinstance(c, Fixed) for c in layout) + 1  # + EOS
    assert 0 < g.decided_tokens <= len(g.token_ids) + 1 - fixed


def test_a_call_is_only_begun_where_it_can_end_within_the_limit(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    model = CallBiased(random_model(tok, 2, block_size=4), tok.ids.call)
    prompt = tuple(tok.encode(f"{Special.BOS}{Special.CALLER} cancel kim's booking{Special.AGENT}"))
    room = grammar.max_call_tokens + 1
    for limit, calls in ((room - room % 4 - 4, False), (room - room % 4 + 8, True)):
        request = Request(
            prompt, Schedule(threshold=0.5, max_new_tokens=limit), grammar=grammar, grounder=ground
        )
        g = generate(model, tok.ids, request, time.monotonic)  # type: ignore[arg-type]
        assert len(g.token_ids) <= limit
        assert (tok.ids.call in g.token_ids) is calls
        if calls:
            grammar.parse(call_ids(tok, g))


def test_a_call_begun_before_the_deadline_is_finished(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    model = CallBiased(random_model(tok, 3, block_size=4), tok.ids.call)
    prompt = f"{Special.BOS}{Special.CALLER} order 9 9 0 1{Special.AGENT}"
    ticks = iter(range(10_000))
    request = Request(tuple(tok.encode(prompt)), Schedule(threshold=0.99, max_new_tokens=64),
                      deadline_s=2.5, grammar=grammar)  # fmt: skip
    g = generate(model, tok.ids, request, lambda: float(next(ticks)))  # type: ignore[arg-type]
    assert g.deadline_forced
    assert g.finish_reason is FinishReason.EOS
    grammar.parse(call_ids(tok, g))


class Ticket(BaseModel):
    priority: Literal["low", "high"]
    seats: int = Field(ge=1, le=99)
    note: str = Field(min_length=1, json_schema_extra={"max_tokens": 3})


def test_int_and_free_text_fields_validate(tok: TextTokenizer) -> None:
    grammar = CallGrammar(tok, {"open_ticket": Ticket, "order_status": OrderStatus})
    ok = 0
    for seed in range(4):
        model = CallBiased(random_model(tok, 10 + seed), tok.ids.call)
        prompt = f"{Special.BOS}{Special.CALLER} two seats please{Special.AGENT}"
        g = decode(model, tok, prompt, grammar=grammar)
        try:
            call = grammar.parse(call_ids(tok, g))
        except ValueError as exc:  # only range checks may fail: the layout is always valid
            assert "less than or equal" in str(exc) or "greater than" in str(exc), exc
            continue
        ok += 1
        assert call.name == "open_ticket"  # no number in the prompt to look up
    assert ok >= 1


async def test_batched_constrained_requests_equal_unbatched(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    # Grammar state lives per request: requests sharing forwards decode as they do alone.
    model = CallBiased(random_model(tok, 4), tok.ids.call)
    prompts = [f"{Special.BOS}{Special.CALLER} order 1 2 3 4{Special.AGENT}",
               f"{Special.BOS}{Special.CALLER} hello{Special.AGENT}",
               f"{Special.BOS}{Special.CALLER} book bob a tune-up{Special.AGENT}"]  # fmt: skip
    alone = [decode(model, tok, p, grammar=grammar).token_ids for p in prompts]
    schedule = Schedule(threshold=0.5, max_new_tokens=80)
    async with Engine(model, tok.ids, max_batch=4) as engine:  # type: ignore[arg-type]
        together = await asyncio.gather(
            *(
                engine.generate(
                    Request(tuple(tok.encode(p)), schedule, grammar=grammar, grounder=ground)
                )
                for p in prompts
            )
        )
    assert [g.token_ids for g in together] == alone
    assert max(engine.batch_sizes) == 3


def test_instant_effort_never_reasons(tok: TextTokenizer) -> None:
    from engine.schedule import Effort

    prompt = tuple(tok.encode(f"{Special.BOS}{Special.CALLER} hello{Special.AGENT}"))
    model = CallBiased(random_model(tok, 7), tok.ids.think, bias=30.0)  # loves <think>
    for effort, thinks in ((Effort.LOW, True), (Effort.INSTANT, False)):
        schedule = Schedule(threshold=0.5, max_new_tokens=16, effort=effort)
        g = generate(model, tok.ids, Request(prompt, schedule), time.monotonic)  # type: ignore[arg-type]
        assert (tok.ids.think in g.token_ids) is thinks


def test_a_grounded_enum_takes_the_value_the_caller_said(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    prompt = f"{Special.BOS}{Special.CALLER} is saturday ok for kim at noon{Special.AGENT}"
    days = []
    for seed in range(6):
        g = decode(CallBiased(random_model(tok, 20 + seed), tok.ids.call), tok, prompt,
                   grammar=grammar)  # fmt: skip
        args = grammar.parse(call_ids(tok, g)).arguments.model_dump()
        if "day" in args:
            days.append(args["day"])
    assert days and set(days) == {"saturday"}


def test_a_grounded_number_is_copied_whole_from_the_prompt(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    prompt = f"{Special.BOS}{Special.CALLER} order 4-1-7-2, or maybe 9, 0, 2, 1, 5{Special.AGENT}"
    numbers = set()
    for seed in range(8):
        g = decode(CallBiased(random_model(tok, 40 + seed), tok.ids.call), tok, prompt,
                   grammar=grammar)  # fmt: skip
        args = grammar.parse(call_ids(tok, g)).arguments.model_dump()
        if "order_number" in args:
            numbers.add(args["order_number"])
    assert numbers and numbers <= {"4172", "90215"}


def test_values_the_agent_said_itself_are_not_grounds(
    tok: TextTokenizer, grammar: CallGrammar
) -> None:
    prompt = (f"{Special.BOS}{Special.CALLER} where is my order{Special.AGENT}{Special.SAY} "
              f"is it 5 5 1 0?{Special.CALLER} yes{Special.AGENT}")  # fmt: skip
    plan = grounded_plan(grammar, tuple(tok.encode(prompt)), 80)
    assert "order_status" not in plan.feasible  # only the agent said a number
    heard = prompt.replace(" yes", " yes 5 5 1 0")
    assert "order_status" in grounded_plan(grammar, tuple(tok.encode(heard)), 80).feasible


def test_an_enum_value_is_heard_in_any_case_and_with_or_without_its_hyphen() -> None:
    tune_up = said_as_words("tune-up")
    for heard in ("a Tune up tomorrow", "TUNE-UP", "my tuneup", "tune  -  up"):
        assert tune_up.search(heard), heard
    assert not tune_up.search("tune the bike up") and not tune_up.search("fortune-upper")
    assert said_as_words("e-bike check").search("an E-bike check please")
