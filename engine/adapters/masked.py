"""LLaDA and Dream: full-attention masked-diffusion models from a local checkpoint directory.

Both ship their modelling code with the weights (`trust_remote_code`) and are decoded by
the canvas sampler (`engine/adapters/canvas.py`) without a cache.

* LLaDA (`GSAI-ML/LLaDA-8B-*`): mask id 126336; EOS `<|endoftext|>` 126081 and, for the
  instruct model, `<|eot_id|>` 126348; logits are read at the position they fill.
* Dream (`Dream-org/Dream-v0-*`): mask id 151666 (`config.mask_token_id`); EOS
  `<|endoftext|>` 151643 and `<|im_end|>` 151645; logits are shifted by one (the output at
  i predicts token i + 1), and the model is called as `model(x, "full", None)`.

Ids in the checkpoint's `config.json` / `generation_config.json` take precedence over the
family defaults here; the defaults fill in what a config leaves out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.adapters.base import (
    UNCACHED,
    Supports,
    TextCodec,
    checkpoint_dir,
    eos_ids_from,
    load_tokenizer,
    transformers,
)
from engine.adapters.canvas import CanvasRules, Forward, canvas_generate
from engine.generate import Generation
from engine.schedule import Schedule

LLADA_MASK_ID = 126336
LLADA_EOS_IDS = (126081, 126348)  # <|endoftext|>, <|eot_id|>
DREAM_MASK_ID = 151666
DREAM_EOS_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
DEFAULT_BLOCK_LENGTH = 32
"""LLaDA's reference block length for semi-autoregressive decoding."""


@dataclass(slots=True)
class CanvasAdapter:
    """A masked-diffusion model decoded on a full canvas (no cache)."""

    name: str
    tokenizer: TextCodec
    rules: CanvasRules
    forward: Forward
    supports: Supports = UNCACHED

    @property
    def mask_id(self) -> int:
        return self.rules.mask_id

    @property
    def eos_ids(self) -> frozenset[int]:
        return self.rules.eos_ids

    @property
    def block_length(self) -> int:
        return self.rules.block_length

    def generate(
        self,
        prompt_ids: list[int],
        schedule: Schedule,
        deadline_s: float | None,
        clock: Callable[[], float],
    ) -> Generation:
        return canvas_generate(self.forward, self.rules, prompt_ids, schedule, deadline_s, clock)


def load_llada(
    path: str | Path,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> CanvasAdapter:
    """LLaDA from a local directory (config, weights, modelling code, tokenizer), on
    `device`."""
    directory, model = _load(path, "AutoModel", dtype, device)
    eos_ids = eos_ids_from(directory, model.config, LLADA_EOS_IDS)
    rules = CanvasRules(
        mask_id=_config_id(model.config, "mask_token_id", LLADA_MASK_ID),
        eos_ids=eos_ids,
        block_length=block_length,
        never=_pad_bos(model.config, eos_ids),
    )

    def forward(x: Tensor) -> Tensor:
        logits: Tensor = model(x.to(model.device)).logits
        return logits.float().cpu()

    return CanvasAdapter("llada", load_tokenizer(directory, True), rules, forward)


def load_dream(
    path: str | Path,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> CanvasAdapter:
    """Dream from a local directory, on `device`; its logits are shifted by one position."""
    directory, model = _load(path, "AutoModel", dtype, device)
    eos_ids = eos_ids_from(directory, model.config, DREAM_EOS_IDS)
    rules = CanvasRules(
        mask_id=_config_id(model.config, "mask_token_id", DREAM_MASK_ID),
        eos_ids=eos_ids,
        block_length=block_length,
        shift_logits=True,
        never=_pad_bos(model.config, eos_ids),
    )

    def forward(x: Tensor) -> Tensor:
        # "full": no padding, every position attends to every other (Dream's own convention).
        logits: Tensor = model(x.to(model.device), "full", None).logits
        return logits.float().cpu()

    return CanvasAdapter("dream", load_tokenizer(directory, True), rules, forward)


def _load(
    path: str | Path, auto_class: str, dtype: torch.dtype | None, device: str
) -> tuple[Path, Any]:
    directory = checkpoint_dir(path)
    cls = getattr(transformers(), auto_class)
    model = cls.from_pretrained(
        directory, trust_remote_code=True, local_files_only=True, dtype=dtype or torch.float32
    )
    return directory, model.to(device).eval()


def _config_id(config: Any, name: str, default: int) -> int:
    value = getattr(config, name, None)
    return int(value) if isinstance(value, int) else default


def _pad_bos(config: Any, eos_ids: frozenset[int]) -> frozenset[int]:
    """Pad and BOS ids, unless one doubles as an EOS id (Dream's pad is its EOS)."""
    ids = (getattr(config, "pad_token_id", None), getattr(config, "bos_token_id", None))
    return frozenset(i for i in ids if isinstance(i, int) and i not in eos_ids)
