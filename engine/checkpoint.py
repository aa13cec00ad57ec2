"""Checkpoints: a folder with `model.safetensors`, `tokenizer.json` and `model_card.json`.

The model card records the config, what kind of decoder the weights were trained for
(`diffusion` or `autoregressive`), a hash of the training data and the metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import load_model, save_model

from engine.config import ModelConfig
from engine.model import DiffusionLM
from engine.tokenizer import TextTokenizer

WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
CARD = "model_card.json"
CARD_VERSION = 1

Kind = Literal["diffusion", "autoregressive"]


@dataclass(slots=True)
class ModelCard:
    config: ModelConfig
    kind: Kind
    data_sha256: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": CARD_VERSION,
            "kind": self.kind,
            "config": self.config.to_dict(),
            "tokenizer": TOKENIZER,
            "data_sha256": self.data_sha256,
            "metrics": self.metrics,
            "notes": self.notes,
        }


@dataclass(frozen=True, slots=True)
class Checkpoint:
    model: DiffusionLM
    tokenizer: TextTokenizer
    card: ModelCard


def save(directory: Path, model: DiffusionLM, tokenizer: TextTokenizer, card: ModelCard) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    save_model(model, str(directory / WEIGHTS))
    tokenizer.save(directory / TOKENIZER)
    (directory / CARD).write_text(json.dumps(card.to_json(), indent=2) + "\n")


def load(directory: Path, device: str = "cpu") -> Checkpoint:
    """Load a checkpoint folder; raises FileNotFoundError/ValueError saying what is wrong."""
    for name in (WEIGHTS, TOKENIZER, CARD):
        if not (directory / name).is_file():
            raise FileNotFoundError(f"checkpoint {directory} lacks {name}")
    try:
        raw = json.loads((directory / CARD).read_text())
        config = ModelConfig.from_dict(raw["config"])
        card = ModelCard(
            config,
            raw["kind"],
            raw.get("data_sha256", ""),
            raw.get("metrics", {}),
            raw.get("notes", ""),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{directory / CARD} is not a valid model card: {exc}") from None
    if card.kind not in ("diffusion", "autoregressive"):
        raise ValueError(f"{directory / CARD}: unknown kind {card.kind!r}")
    tokenizer = TextTokenizer.load(directory / TOKENIZER)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} tokens, model expects {config.vocab_size}"
        )
    model = DiffusionLM(config)
    load_model(model, str(directory / WEIGHTS), device=device)
    return Checkpoint(model.to(torch.device(device)).eval(), tokenizer, card)
