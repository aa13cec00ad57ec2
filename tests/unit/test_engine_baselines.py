"""The baselines the benchmark compares against decode what they claim to decode."""

from __future__ import annotations

import time

from engine.baselines import autoregressive, autoregressive_batch, plain_diffusion
from engine.generate import FinishReason
from tests.unit.test_engine_constraints import CallBiased
from tests.unit.test_engine_decode import IDS, tiny_model


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
