"""LLaDA and Dream: full-attention masked-diffusion models from a local checkpoint directory.

Both ship their modelling code with the weights (`trust_remote_code`) and have no cache:
a row keeps its committed ids, and a step forwards them with the canvas after them, all
positions seeing all (`FullAttentionBackend`). Blocks are the core's, starting right
after the prompt, denoised left to right; unlike LLaDA's reference sampler no masks for
the rest of the answer budget stand after the canvas (a step forwards prompt + answer so
far + one block, which keeps a step's cost down and deadlines honest).

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
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.adapters.base import (
    UNCACHED,
    ModelAdapter,
    RowBackend,
    checkpoint_dir,
    decode_ids,
    eos_ids_from,
    load_tokenizer,
    max_positions,
    transformers,
    turn_tokenizer_of,
)
from engine.backend import DecodeIds

LLADA_MASK_ID = 126336
LLADA_EOS_IDS = (126081, 126348)  # <|endoftext|>, <|eot_id|>
DREAM_MASK_ID = 151666
DREAM_EOS_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
DEFAULT_BLOCK_LENGTH = 32
"""LLaDA's reference block length for semi-autoregressive decoding."""


Forward = Callable[[Tensor], Tensor]
"""(1, seq) int64 token ids → (1, seq, vocab) logits, full bidirectional attention."""


class FullAttentionBackend(RowBackend):
    """A row is its committed ids; each step forwards them and the canvas, uncached."""

    def __init__(
        self,
        forward: Forward,
        shift: bool,
        ids: DecodeIds,
        block_size: int,
        max_seq_len: int,
        vocab: int,
        rows: int,
    ) -> None:
        self.model_forward, self.shift = forward, shift
        super().__init__(ids, block_size, max_seq_len, vocab, rows)

    def new_row(self) -> list[int]:
        return []

    def forward_row(self, row: list[int], fresh: list[int], canvas: Tensor) -> Tensor:
        row += fresh
        x = torch.cat([torch.tensor(row, dtype=torch.long), canvas])[None]  # (1, seq)
        self.model_calls += 1
        logits = self.model_forward(x)[0]  # (seq, vocab)
        n, bs = x.shape[1], canvas.shape[0]
        if self.shift:  # the output at i - 1 scores position i
            return logits[n - bs - 1 : n - 1]
        return logits[n - bs :]


def load_llada(
    path: str | Path,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> ModelAdapter:
    """LLaDA from a local directory (config, weights, modelling code, tokenizer), on
    `device`."""
    directory, model = _load(path, "AutoModel", dtype, device)

    def forward(x: Tensor) -> Tensor:
        logits: Tensor = model(x.to(model.device)).logits
        return logits

    return _adapter("llada", directory, model, forward, False, block_length, LLADA_EOS_IDS,
                    LLADA_MASK_ID)  # fmt: skip


def load_dream(
    path: str | Path,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> ModelAdapter:
    """Dream from a local directory, on `device`; its logits are shifted by one position."""
    directory, model = _load(path, "AutoModel", dtype, device)

    def forward(x: Tensor) -> Tensor:
        # "full": no padding, every position attends to every other (Dream's own convention).
        logits: Tensor = model(x.to(model.device), "full", None).logits
        return logits

    return _adapter("dream", directory, model, forward, True, block_length, DREAM_EOS_IDS,
                    DREAM_MASK_ID)  # fmt: skip


def _adapter(
    name: str,
    directory: Path,
    model: Any,
    forward: Forward,
    shift: bool,
    block_length: int,
    default_eos: tuple[int, ...],
    default_mask: int,
) -> ModelAdapter:
    if block_length < 1:
        raise ValueError(f"block_length must be positive, got {block_length}")
    config = model.config
    mask = _config_id(config, "mask_token_id", default_mask)
    tokenizer = load_tokenizer(directory, True)
    turn = turn_tokenizer_of(directory, tokenizer, mask)
    eos_ids = eos_ids_from(directory, config, default_eos if turn is None else ())
    if mask in eos_ids:
        raise ValueError(f"{directory}: the mask id {mask} is also an EOS id")
    ids = decode_ids(mask, eos_ids, _pad_bos(config, eos_ids), turn)
    vocab = min(int(config.vocab_size), len(tokenizer.inner))
    seq = max_positions(config)

    def backend(rows: int) -> FullAttentionBackend:
        return FullAttentionBackend(forward, shift, ids, block_length, seq, vocab, rows)

    return ModelAdapter(name, tokenizer, turn, ids, mask, eos_ids, block_length, UNCACHED,
                        backend)  # fmt: skip


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
