"""Checkpoints: a folder with `model.safetensors`, `tokenizer.json` and `model_card.json`.

The model card records the config, what kind of decoder the weights were trained for
(`diffusion` or `autoregressive`), a hash of the training data and the metrics.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import load_file, save_model

from engine.config import ModelConfig
from engine.model import DiffusionLM
from engine.runtime import prepare
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
    prompt_hints: str = ""
    """The caller-hint scheme the model was trained with (voice_agent/dialogue/hints.py's
    HINTS_VERSION), or "" for none: whoever builds its prompts must add the same hints."""

    @property
    def prompt_tokens(self) -> int | None:
        """The longest prompt the model was trained on (`metrics["prompt_tokens"]`, written
        by scripts/train_brain.py), or None when the card does not say. Prompts for the
        model belong within it: a longer one puts the answer at positions training never
        filled, and the answer degrades (a relayed tool result came out as garbled reasoning
        with no `<say>` at 152 prompt tokens from a model trained on 128)."""
        value = self.metrics.get("prompt_tokens")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"metrics.prompt_tokens must be a positive integer, not {value!r}")
        if value >= self.config.max_seq_len:
            raise ValueError(
                f"metrics.prompt_tokens {value} leaves no room for an answer in the "
                f"model's {self.config.max_seq_len}-token window"
            )
        return value

    def to_json(self) -> dict[str, Any]:
        return {
            "version": CARD_VERSION,
            "kind": self.kind,
            "config": self.config.to_dict(),
            "tokenizer": TOKENIZER,
            "data_sha256": self.data_sha256,
            "metrics": self.metrics,
            "notes": self.notes,
            **({"prompt_hints": self.prompt_hints} if self.prompt_hints else {}),
        }


@dataclass(frozen=True, slots=True)
class Checkpoint:
    model: DiffusionLM
    tokenizer: TextTokenizer
    card: ModelCard


def save(
    directory: Path,
    model: DiffusionLM,
    tokenizer: TextTokenizer,
    card: ModelCard,
    dtype: torch.dtype | None = None,
) -> None:
    """Write the folder; `dtype` (e.g. float16 for a shipped copy) converts the weights
    stored, not `model`."""
    directory.mkdir(parents=True, exist_ok=True)
    stored = model if dtype is None else copy.deepcopy(model).to(dtype)
    save_model(stored, str(directory / WEIGHTS))
    tokenizer.save(directory / TOKENIZER)
    (directory / CARD).write_text(json.dumps(card.to_json(), indent=2) + "\n")


def load(directory: Path, device: str = "cpu", compile: bool = False) -> Checkpoint:
    """Load a checkpoint folder onto `device` in its runtime dtype (engine/runtime.py);
    raises FileNotFoundError/ValueError saying what is wrong."""
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
            str(raw.get("prompt_hints", "")),
        )
        card.prompt_tokens  # noqa: B018 -- checked here, so a bad card fails at load
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
    state = load_file(str(directory / WEIGHTS))
    if "embed.weight" in state:
        state.setdefault("lm_head.weight", state["embed.weight"])  # tied: stored once
    try:
        model.load_state_dict({k: v.float() for k, v in state.items()})
    except RuntimeError as exc:
        raise ValueError(f"{directory / WEIGHTS} does not fit the card's config: {exc}") from None
    return Checkpoint(prepare(model, device, compile=compile), tokenizer, card)
