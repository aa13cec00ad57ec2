"""The baselines the benchmark compares against decode what they claim to decode."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.baselines import CausalStepper, autoregressive, autoregressive_batch, plain_diffusion
from engine.constraints import CallGrammar
from engine.generate import FinishReason, Request, generate
from engine.schedule import Schedule
from engine.tokenizer import Special, TextTokenizer
from tests.unit.test_engine_constraints import CallBiased, random_model
from tests.unit.test_engine_decode import IDS, tiny_model
from tools.bike_shop import schemas
from voice_agent.grounding import ground


def test_batched_autoregressive_equals_one_request_at_a_time() -> None:
    model = tiny_model(seed=3, block_size=1)
    prompts = [[2, 10, 11, 12], [2, 20], [2, 30, 31, 32, 33, 34, 35]]
    alone = [autoregressive(model, IDS, p, 12, time.monotonic) for p in prompts]
    together = autoregressive_batch(model, IDS, prompts, 12, time.monotonic)
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    assert [g.finish_reason for g in together] == [g.finish_reason for g in alone]
    assert [g.forwards for g in together] == [g.forwards for g in alone]


def test_autoregressive_never_answers_empty_and_stops_at_the_limit() -> None:
    eos_loving = CallBiased(tiny_model(seed=4, block_size=1), IDS.eos, bias=50.0)
    g = autoregressive(eos_loving, IDS, [2, 9, 9], 8, time.monotonic)  # type: ignore[arg-type]
    assert len(g.token_ids) == 1 and g.finish_reason is FinishReason.EOS
    long = autoregressive(tiny_model(seed=5, block_size=1), IDS, [2, 9], 5, time.monotonic)
    assert len(long.token_ids) <= 5


def test_plain_diffusion_commits_a_fixed_number_per_forward() -> None:
    model = tiny_model(seed=6, block_size=4)
    g = plain_diffusion(model, IDS, [2, 10, 11], 8, steps_per_block=2, clock=time.monotonic)
    assert g.decided_tokens == 2 * g.forwards
    assert g.forwards in (2, 4)  # one or two blocks of two steps each
    assert all(t not in IDS.never_generated() for t in g.token_ids)


def test_the_ar_twin_behind_the_engine_decoder_decodes_as_plain_greedy() -> None:
    """`CausalStepper` under `engine.generate` (no grammar) writes exactly what the KV-cached
    greedy decoder writes, token for token."""
    model = tiny_model(seed=7, block_size=1)
    for prompt in ([2, 10, 11, 12], [2, 20], [2, 30, 31, 32, 33, 34, 35]):
        plain = autoregressive(model, IDS, prompt, 12, time.monotonic)
        request = Request(tuple(prompt), Schedule(threshold=0.9, max_new_tokens=12))
        stepped = generate(CausalStepper(model), IDS, request, time.monotonic)  # type: ignore[arg-type]
        assert stepped.token_ids == plain.token_ids
        assert stepped.finish_reason is plain.finish_reason


def test_the_ar_twin_decodes_under_the_call_grammar_and_grounding() -> None:
    """The same `CallPlan` governs the AR twin's calls: a random twin pulled towards
    `<call>` writes a valid opening_hours call whose day is the one the caller said."""
    root = Path(__file__).resolve().parents[2]
    tok = TextTokenizer.load(root / "engine/checkpoints/brain-dlm/tokenizer.json")
    grammar = CallGrammar(tok, {"opening_hours": schemas.ARGUMENT_MODELS["opening_hours"]})
    prompt = f"{Special.BOS}{Special.CALLER} are you open friday next week{Special.AGENT}"
    for seed in range(3):
        twin = CallBiased(CausalStepper(random_model(tok, seed, block_size=1)), tok.ids.call)
        request = Request(
            tuple(tok.encode(prompt)), Schedule(max_new_tokens=64), grammar=grammar, grounder=ground
        )
        ids = list(generate(twin, tok.ids, request, time.monotonic).token_ids)  # type: ignore[arg-type]
        assert tok.ids.call in ids, tok.decode(ids)
        call = grammar.parse(ids[ids.index(tok.ids.call) + 1 :])
        assert (call.name, call.arguments.model_dump()) == (
            "opening_hours",
            {"day": "friday next week"},
        )


def test_the_stepper_takes_only_an_ar_twin() -> None:
    with pytest.raises(ValueError, match="block size 4"):
        CausalStepper(tiny_model(seed=1, block_size=4))
