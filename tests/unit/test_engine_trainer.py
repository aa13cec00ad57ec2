"""The shared training loop lowers the loss, for both objectives, and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.config import ModelConfig
from engine.constraints import CallGrammar
from engine.model import DiffusionLM
from engine.tokenizer import TextTokenizer
from engine.train import Example, autoregressive_loss, collate, diffusion_loss
from engine.trainer import TrainSettings, seed_state, train
from voice_agent.brain.synthetic import TOOLS, make_examples


@pytest.fixture(scope="module")
def data() -> tuple[TextTokenizer, list[Example]]:
    raw = make_examples(300, seed=11)
    tok = TextTokenizer.train([e.prompt + e.answer for e in raw], vocab_size=320)
    grammar = CallGrammar(tok, TOOLS)
    return tok, [Example(tok.encode(e.prompt), e.answer_ids(tok, grammar)) for e in raw]


def model_for(tok: TextTokenizer, block: int) -> DiffusionLM:
    torch.manual_seed(0)
    return DiffusionLM(ModelConfig(tok.vocab_size, d_model=48, n_layers=2, n_heads=4, d_ff=96,
                                   max_seq_len=256, block_size=block))  # fmt: skip


def held_loss(model: DiffusionLM, tok: TextTokenizer, examples: list[Example], kind: str) -> float:
    batch = collate(examples[:64], tok.ids, model.config.block_size)
    with torch.no_grad():
        if kind == "diffusion":
            return diffusion_loss(model, batch, tok.ids, torch.Generator().manual_seed(0)).item()
        return autoregressive_loss(model, batch, tok.ids).item()


@pytest.mark.parametrize(("kind", "block"), [("diffusion", 8), ("autoregressive", 1)])
def test_training_lowers_the_loss(
    tmp_path: Path, data: tuple[TextTokenizer, list[Example]], kind: str, block: int
) -> None:
    tok, examples = data
    model = model_for(tok, block)
    before = held_loss(model, tok, examples, kind)
    settings = TrainSettings(kind, 5.0, batch=8, lr=3e-3, max_steps=25, warmup_steps=1)  # type: ignore[arg-type]
    result = train(model, examples, tok.ids, tmp_path, settings, log=lambda _: None)
    assert result.steps == 25
    assert held_loss(model, tok, examples, kind) < 0.85 * before


def test_a_run_resumes_where_it_stopped(
    tmp_path: Path, data: tuple[TextTokenizer, list[Example]]
) -> None:
    tok, examples = data
    first = model_for(tok, 8)
    train(first, examples, tok.ids, tmp_path, TrainSettings("diffusion", 5.0, 8, max_steps=5),
          log=lambda _: None)  # fmt: skip
    lines: list[str] = []
    second = model_for(tok, 8)  # fresh weights: the state file must restore them
    result = train(second, examples, tok.ids, tmp_path,
                   TrainSettings("diffusion", 5.0, 8, max_steps=7), log=lines.append)  # fmt: skip
    assert json.loads(lines[0])["resumed_at_step"] == 5
    assert result.steps == 7
    with pytest.raises(ValueError, match="no training examples"):
        train(second, [], tok.ids, tmp_path, TrainSettings("diffusion", 1.0))


def test_a_run_continues_from_weights_alone(
    tmp_path: Path, data: tuple[TextTokenizer, list[Example]]
) -> None:
    """`seed_state` turns shipped weights (float16 here) into a train state: training goes
    on from them, at their step, with a fresh optimizer, and lowers the loss further."""
    tok, examples = data
    trained = model_for(tok, 8)
    train(trained, examples, tok.ids, tmp_path / "a",
          TrainSettings("diffusion", 5.0, 8, lr=3e-3, max_steps=20, warmup_steps=1),
          log=lambda _: None)  # fmt: skip
    shipped = trained.half()
    seed_state(tmp_path / "b", shipped, step=20, elapsed_s=30.0)
    with pytest.raises(FileExistsError, match="resumes from it"):
        seed_state(tmp_path / "b", shipped, step=20, elapsed_s=30.0)
    with pytest.raises(ValueError, match="must not be negative"):
        seed_state(tmp_path / "c", shipped, step=-1, elapsed_s=0.0)
    go_on = model_for(tok, 8)  # fresh weights: the seeded state must restore them
    lines: list[str] = []
    train(go_on, examples, tok.ids, tmp_path / "b",
          TrainSettings("diffusion", 5.0, 8, lr=3e-3, max_steps=20, warmup_steps=1),
          log=lines.append)  # fmt: skip
    first = json.loads(lines[0])
    assert (first["resumed_at_step"], first["optimizer"]) == (20, "fresh")
    assert held_loss(go_on, tok, examples, "diffusion") == pytest.approx(
        held_loss(trained.float(), tok, examples, "diffusion"), rel=0.02
    )  # max_steps reached: no step taken, the weights are the shipped ones
    result = train(go_on, examples, tok.ids, tmp_path / "b",
                   TrainSettings("diffusion", 5.0, 8, lr=3e-3, max_steps=45, warmup_steps=1),
                   log=lambda _: None)  # fmt: skip
    assert result.steps == 45
    assert held_loss(go_on, tok, examples, "diffusion") < held_loss(
        trained.float(), tok, examples, "diffusion"
    )
