"""Larger open diffusion LMs behind the engine's request/response interface.

Every adapter takes prompt ids, a `Schedule` (threshold, steps per block, max new
tokens) and a deadline on a caller's clock, and returns the engine's `Generation`
(tokens, finish reason, whether the deadline forced it, forwards, decided tokens,
latency). All share the engine's commit rule (`engine.schedule`), its deadline forcing
and its no-empty-answer rule (EOS is banned at the answer's first position). Weights
load only from a local directory (`local_files_only=True`); nothing is downloaded.
`transformers` is imported lazily: `pip install -e ".[adapters]"`.

Support matrix (KV cache / constraints / batching, then the canvas rules):

* DiffusionGemma: native `transformers` (`DiffusionGemmaForBlockDiffusion`, 5.13+).
  Cache yes (encoder KV cache; writing a finished canvas folds into the next canvas's
  first forward) / constraints no / batching no. No mask token: the canvas
  (`config.canvas_length`, 256 released) starts as random tokens and unaccepted
  positions are renoised each step; self-conditioning on the previous step's logits.
* LLaDA: `trust_remote_code`. Cache no (every step forwards prompt + whole canvas) /
  constraints no / batching no. Mask 126336; the whole answer budget is laid down as
  masks and denoised in blocks of 32, left to right; logits read at their position.
* Dream: `trust_remote_code`. As LLaDA, with mask 151666 and logits shifted by one (the
  output at i predicts token i + 1).
* SDAR: `trust_remote_code`. Cache yes (`store_kv` block-causal cache; one extra
  forward per finished block to write it) / constraints no / batching no. Mask 151669;
  blocks of 4 aligned to position 0, the prompt's tail sharing the first block.

"constraints: no" means the schema scaffold of `engine/constraints.py` is not wired to
them yet (each loop already commits through a banned-token mask, where it would go);
"batching: no" means one request per call (no step-level batching across requests).
Mask and EOS ids named in a checkpoint's configs take precedence over these defaults.
"""

import json
from collections.abc import Callable
from pathlib import Path

import torch

from engine.adapters.base import Adapter, AdapterError, Supports, TextCodec, checkpoint_dir
from engine.adapters.diffusion_gemma import load_diffusion_gemma
from engine.adapters.masked import load_dream, load_llada
from engine.adapters.sdar import load_sdar

FAMILIES: dict[str, Callable[..., Adapter]] = {
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
) -> Adapter:
    """The adapter for a local checkpoint, picked from its own config (`family_of`), its
    model on `device` in `dtype` (float32 when None; bfloat16 suits a GPU)."""
    return FAMILIES[family_of(path)](path, dtype=dtype, device=device)


__all__ = [
    "FAMILIES",
    "Adapter",
    "AdapterError",
    "Supports",
    "TextCodec",
    "family_of",
    "load_adapter",
    "load_diffusion_gemma",
    "load_dream",
    "load_llada",
    "load_sdar",
]
