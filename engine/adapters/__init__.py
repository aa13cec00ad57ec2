"""Larger open diffusion LMs behind the engine's request/response interface.

Every adapter runs through the engine's one decode core (engine/generate.py) as a backend
(engine/backend.py): `adapter.backend(rows)` for the batching engine, `adapter.generate`
for one request. So constraints (a call grammar when the checkpoint's tokenizer carries
the turn format's tokens), deadlines, effort, the no-empty-answer rule and step-level
batching work for each. Weights load only from a local directory
(`local_files_only=True`); nothing is downloaded. `transformers` is imported lazily:
`pip install -e ".[adapters]"`. `load_adapter` picks the family from the checkpoint's own
config; every loader takes `device` and `dtype` (bfloat16 suits a GPU).

Per family (cache / how the rows of a step run):

* DiffusionGemma: native `transformers` (`DiffusionGemmaForBlockDiffusion`, 5.13+).
  Cache yes (encoder KV cache; the finished canvas is encoded by the next canvas's first
  forward) / one forward per row. No mask token: undecided positions are noise, renoised
  every step, with self-conditioning on the previous step's logits.
* LLaDA: `trust_remote_code`. Cache no (a step forwards the row's ids and the canvas) /
  one forward per row. Mask 126336; logits read at their position.
* Dream: `trust_remote_code`. As LLaDA, with mask 151666 and logits shifted by one (the
  output at i predicts token i + 1).
* SDAR: `trust_remote_code`. Cache yes (`store_kv` block-causal cache; one extra model
  call per finished block to write it) / one forward per row. Mask 151669, blocks of 4.

"One forward per row": requests join and leave the batch at step boundaries as with the
shipped model, but the step runs each row's forward in turn (rows of different lengths
share a forward only where a model takes per-row cache lengths, as the shipped one does).
Mask and EOS ids named in a checkpoint's configs take precedence over these defaults.
"""

import json
from collections.abc import Callable
from pathlib import Path

import torch

from engine.adapters.base import (
    Adapter,
    AdapterError,
    ModelAdapter,
    Supports,
    TextCodec,
    checkpoint_dir,
)
from engine.adapters.diffusion_gemma import load_diffusion_gemma
from engine.adapters.masked import load_dream, load_llada
from engine.adapters.sdar import load_sdar

FAMILIES: dict[str, Callable[..., ModelAdapter]] = {
    "diffusiongemma": load_diffusion_gemma,
    "llada": load_llada,
    "dream": load_dream,
    "sdar": load_sdar,
}
"""A family's name as it appears in a checkpoint's `model_type` or `architectures`
(lower case, underscores dropped), and its loader."""


def family_of(path: str | Path) -> str:
    """The adapter family of a local checkpoint, from its own `config.json` (`model_type`,
    then `architectures`). Raises AdapterError naming what the config says when no
    family matches."""
    directory = checkpoint_dir(path)
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdapterError(f"{directory}/config.json cannot be read: {exc}") from None
    if not isinstance(config, dict):
        raise AdapterError(f"{directory}/config.json is not a JSON object")
    architectures = config.get("architectures")
    names = [config.get("model_type"), *(architectures if isinstance(architectures, list) else [])]
    for name in names:
        key = str(name).lower().replace("_", "")
        for family in FAMILIES:
            if family in key:
                return family
    raise AdapterError(
        f"{directory}: model_type {config.get('model_type')!r}, architectures "
        f"{architectures!r} name no adapter family ({', '.join(FAMILIES)})"
    )


def load_adapter(
    path: str | Path, *, device: str = "cpu", dtype: torch.dtype | None = None
) -> ModelAdapter:
    """The adapter for a local checkpoint, picked from its own config (`family_of`), its
    model on `device` in `dtype` (float32 when None; bfloat16 suits a GPU)."""
    return FAMILIES[family_of(path)](path, dtype=dtype, device=device)


__all__ = [
    "FAMILIES",
    "Adapter",
    "AdapterError",
    "ModelAdapter",
    "Supports",
    "TextCodec",
    "family_of",
    "load_adapter",
    "load_diffusion_gemma",
    "load_dream",
    "load_llada",
    "load_sdar",
]
