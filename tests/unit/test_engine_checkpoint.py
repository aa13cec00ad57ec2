"""Checkpoints round-trip (also as a float16 shipped copy); devices and dtypes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from engine.checkpoint import ModelCard, load, save
from engine.config import ModelConfig
from engine.generate import Request, generate
from engine.model import DiffusionLM
from engine.runtime import prepare
from engine.schedule import Schedule
from engine.tokenizer import TextTokenizer
from voice_agent.brain.synthetic import make_examples


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.train([e.prompt + e.answer for e in make_examples(200, 3)], 320)


def small(tok: TextTokenizer) -> DiffusionLM:
    torch.manual_seed(0)
    cfg = ModelConfig(tok.vocab_size, d_model=32, n_layers=2, n_heads=4, d_ff=64,
                      max_seq_len=128, block_size=4)  # fmt: skip
    return DiffusionLM(cfg).eval()


def answer(model: DiffusionLM, tok: TextTokenizer) -> tuple[int, ...]:
    prompt = tuple(tok.encode(make_examples(1, 9)[0].prompt))
    request = Request(prompt, Schedule(threshold=0.5, max_new_tokens=16))
    return generate(model, tok.ids, request, time.monotonic).token_ids


def test_round_trip_keeps_weights_card_and_answers(tmp_path: Path, tok: TextTokenizer) -> None:
    model = small(tok)
    card = ModelCard(model.config, "diffusion", "abc", {"heldout_accuracy": 0.5})
    save(tmp_path / "ck", model, tok, card)
    back = load(tmp_path / "ck")
    assert back.card.metrics == {"heldout_accuracy": 0.5} and back.card.config == model.config
    assert torch.equal(back.model.embed.weight, model.embed.weight)
    assert back.model.lm_head.weight is back.model.embed.weight  # still tied
    assert answer(back.model, back.tokenizer) == answer(model, tok)


def test_float16_copy_is_half_the_size_and_loads_as_float32(
    tmp_path: Path, tok: TextTokenizer
) -> None:
    model = small(tok)
    card = ModelCard(model.config, "diffusion")
    save(tmp_path / "full", model, tok, card)
    save(tmp_path / "half", model, tok, card, dtype=torch.float16)
    full = (tmp_path / "full" / "model.safetensors").stat().st_size
    half = (tmp_path / "half" / "model.safetensors").stat().st_size
    assert half < 0.6 * full
    back = load(tmp_path / "half")
    assert back.model.embed.weight.dtype == torch.float32
    assert torch.allclose(back.model.embed.weight, model.embed.weight, atol=1e-3)
    assert model.embed.weight.dtype == torch.float32  # saving did not convert the original


def test_bad_checkpoints_are_clear_errors(tmp_path: Path, tok: TextTokenizer) -> None:
    with pytest.raises(FileNotFoundError, match=r"lacks model\.safetensors"):
        load(tmp_path)
    model = small(tok)
    save(tmp_path / "ck", model, tok, ModelCard(model.config, "diffusion"))
    card = json.loads((tmp_path / "ck" / "model_card.json").read_text())
    card["config"]["n_layers"] = 3
    (tmp_path / "ck" / "model_card.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="does not fit"):
        load(tmp_path / "ck")
    (tmp_path / "ck" / "model_card.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid model card"):
        load(tmp_path / "ck")


def test_bfloat16_decodes_with_the_same_code(tok: TextTokenizer) -> None:
    # The CUDA dtype, exercised on CPU: same loop, same cache code, a valid answer.
    model = prepare(small(tok), "cpu", dtype=torch.bfloat16)
    assert model.embed.weight.dtype == torch.bfloat16
    tokens = answer(model, tok)
    assert tokens and tok.ids.mask not in tokens


def test_device_options_fail_clearly(tok: TextTokenizer) -> None:
    with pytest.raises(ValueError, match="CUDA option"):
        prepare(small(tok), "cpu", compile=True)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no GPU"):
            prepare(small(tok), "cuda")


def test_the_card_says_how_long_a_prompt_the_model_was_trained_on(
    tmp_path: Path, tok: TextTokenizer
) -> None:
    model = small(tok)  # a 128-token window
    assert ModelCard(model.config, "diffusion").prompt_tokens is None
    save(
        tmp_path / "ck",
        model,
        tok,
        ModelCard(model.config, "diffusion", metrics={"prompt_tokens": 96}),
    )
    assert load(tmp_path / "ck").card.prompt_tokens == 96
    path = tmp_path / "ck" / "model_card.json"
    for bad, why in (("96", "positive integer"), (0, "positive integer"), (True, "positive integer"),
                     (128, "no room for an answer")):  # fmt: skip
        card = json.loads(path.read_text())
        card["metrics"]["prompt_tokens"] = bad
        path.write_text(json.dumps(card))
        with pytest.raises(ValueError, match=why):
            load(tmp_path / "ck")
