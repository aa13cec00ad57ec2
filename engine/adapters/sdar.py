"""SDAR (`JetLM/SDAR-*`): block diffusion with a block-causal KV cache, via `trust_remote_code`.

A row is a `DynamicCache` and its length (`SDARBackend`). A step with fresh tokens first
writes them to the cache with one `store_kv=True` forward (SDAR's API has no way to fold
the write into the canvas's forward, so a finished block costs one extra model call:
`Generation.forwards` from `ModelAdapter.generate` counts model calls); the canvas is then
forwarded with `store_kv=False`, attending to the whole cache and bidirectionally to
itself. Fresh tokens are written block-causally in groups of the block length (the prompt
as SDAR's reference prefills it; a finished block as one group).

Blocks are the core's: the first starts right after the prompt rather than at SDAR's
absolute multiple of the block length (the reference lets the prompt's tail share the
first block). The attention pattern a block sees (all earlier tokens, itself fully) is
the one SDAR trains on; only the grouping of the prompt's last tokens differs.

Mask id 151669 (`<|MASK|>`), EOS `<|endoftext|>` 151643 and `<|im_end|>` 151645 unless
the checkpoint's configs say otherwise; blocks of 4 as in the released chat models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.adapters.base import (
    CACHED,
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

SDAR_MASK_ID = 151669
SDAR_EOS_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
SDAR_BLOCK_LENGTH = 4


@dataclass(slots=True)
class SDARRow:
    cache: Any
    length: int = 0


class SDARBackend(RowBackend):
    def __init__(
        self, model: Any, ids: DecodeIds, block_size: int, max_seq_len: int, vocab: int, rows: int
    ) -> None:
        self.model = model
        super().__init__(ids, block_size, max_seq_len, vocab, rows)

    def new_row(self) -> SDARRow:
        return SDARRow(transformers().DynamicCache())

    def forward_row(self, row: SDARRow, fresh: list[int], canvas: Tensor) -> Tensor:
        if fresh:
            groups = torch.arange(len(fresh)) // self.block_size
            self._call(row, fresh, groups[:, None] >= groups[None, :], store=True)
            row.length += len(fresh)
        whole = torch.ones(len(canvas), len(canvas), dtype=torch.bool)
        return self._call(row, canvas.tolist(), whole, store=False)

    def _call(self, row: SDARRow, x: list[int], own: Tensor, store: bool) -> Tensor:
        """Logits (len(x), vocab) of `x` after the row's cache; `own` (len, len) is who in
        `x` sees whom."""
        n, start = len(x), row.length
        mask = torch.cat([torch.ones(n, start, dtype=torch.bool), own], 1)[None, None]
        device = self.model.device
        self.model_calls += 1
        out = self.model(
            torch.tensor([x], device=device),
            attention_mask=mask.to(device),
            position_ids=torch.arange(start, start + n, device=device)[None],
            past_key_values=row.cache,
            use_cache=True,
            store_kv=store,
        )
        logits: Tensor = out.logits[0]
        return logits


def load_sdar(
    path: str | Path,
    block_length: int = SDAR_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> ModelAdapter:
    """SDAR from a local directory (config, weights, modelling code, tokenizer), on
    `device`."""
    if block_length < 1:
        raise ValueError(f"block_length must be positive, got {block_length}")
    directory = checkpoint_dir(path)
    model = transformers().AutoModelForCausalLM.from_pretrained(
        directory, trust_remote_code=True, local_files_only=True, dtype=dtype or torch.float32
    )
    model = model.to(device).eval()
    config = model.config
    value = getattr(config, "mask_token_id", None)
    mask = int(value) if isinstance(value, int) else SDAR_MASK_ID
    tokenizer = load_tokenizer(directory, True)
    turn = turn_tokenizer_of(directory, tokenizer, mask)
    eos_ids = eos_ids_from(directory, config, SDAR_EOS_IDS if turn is None else ())
    pad = getattr(config, "pad_token_id", None)
    never = frozenset({pad} - eos_ids) if isinstance(pad, int) else frozenset()
    ids = decode_ids(mask, eos_ids, never, turn)
    vocab = min(int(config.vocab_size), len(tokenizer.inner))
    seq = max_positions(config)

    def backend(rows: int) -> SDARBackend:
        return SDARBackend(model, ids, block_length, seq, vocab, rows)

    return ModelAdapter("sdar", tokenizer, turn, ids, mask, eos_ids, block_length, CACHED,
                        backend)  # fmt: skip
