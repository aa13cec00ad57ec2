"""DiffusionGemma, natively through `transformers` (`DiffusionGemmaForBlockDiffusion`, 5.13+).

Its canvas rules differ from the masked models': there is no mask token. A canvas of
`config.canvas_length` tokens (256 for the released model) starts as uniform random
tokens; each step the decoder reads the canvas plus the previous step's logits
(self-conditioning) against the encoder's KV cache, and positions not yet accepted are
re-drawn at random ("renoised"). A finished canvas is encoded into the cache by the
next canvas's first forward (`input_ids` and `decoder_input_ids` in one call), so writing
the cache costs no extra forward.

Mapping onto the decode core (`DiffusionGemmaBackend`): the core marks undecided canvas
positions with a mask id (an id past the vocabulary, or the tokenizer's `<mask>` when it
has the turn format's tokens); before each forward the backend puts fresh random tokens
there (the renoising) and passes the row's previous logits for self-conditioning, reset
when a new canvas starts. Acceptance is the core's threshold rule on greedy confidence
(not the reference entropy-bound sampler with its temperature schedule), so decoding is
deterministic given `seed`; EOS ids come from the configs (Gemma's `<eos>` 1 and
`<end_of_turn>` 106 by default); deadlines force the rest of a canvas in one step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.adapters.base import (
    CACHED,
    AdapterError,
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

GEMMA_EOS_IDS = (1, 106)  # <eos>, <end_of_turn>
MODEL_CLASS = "DiffusionGemmaForBlockDiffusion"


@dataclass(slots=True)
class GemmaRow:
    cache: Any
    rng: torch.Generator
    self_cond: Tensor | None = None
    """The previous step's logits on this canvas (None at a canvas's first step)."""


class DiffusionGemmaBackend(RowBackend):
    def __init__(
        self, model: Any, seed: int, ids: DecodeIds, max_seq_len: int, vocab: int, rows: int
    ) -> None:
        self.model, self.seed = model, seed
        self.noise_vocab = int(model.config.text_config.vocab_size)
        super().__init__(ids, int(model.config.canvas_length), max_seq_len, vocab, rows)

    def new_row(self) -> GemmaRow:
        config = self.model.config.get_text_config(decoder=True)
        cache = transformers().DynamicCache(config=config)
        return GemmaRow(cache, torch.Generator().manual_seed(self.seed))

    def forward_row(self, row: GemmaRow, fresh: list[int], canvas: Tensor) -> Tensor:
        if fresh:
            row.self_cond = None  # a new canvas
        noise = torch.randint(self.noise_vocab, canvas.shape, generator=row.rng)
        noisy = torch.where(canvas == self.ids.mask, noise, canvas)  # (canvas,)
        device = self.model.device
        self.model_calls += 1
        out = self.model(
            input_ids=torch.tensor([fresh], device=device) if fresh else None,
            cache=row.cache,
            decoder_input_ids=noisy[None].to(device),
            self_conditioning_logits=row.self_cond,
        )
        row.self_cond = out.logits.to(self.model.dtype)
        logits: Tensor = out.logits[0]
        return logits


def load_diffusion_gemma(
    path: str | Path, dtype: torch.dtype | None = None, seed: int = 0, device: str = "cpu"
) -> ModelAdapter:
    """DiffusionGemma from a local directory, on `device`; raises AdapterError if
    transformers lacks it."""
    directory = checkpoint_dir(path)
    tf = transformers()
    cls = getattr(tf, MODEL_CLASS, None)
    if cls is None:
        raise AdapterError(
            f"transformers {tf.__version__} has no {MODEL_CLASS} (added in 5.13); "
            'upgrade with pip install -e ".[adapters]"'
        )
    model = cls.from_pretrained(directory, local_files_only=True, dtype=dtype or torch.float32)
    model = model.to(device).eval()
    text = model.config.text_config
    tokenizer = load_tokenizer(directory, False)
    turn = turn_tokenizer_of(directory, tokenizer, None)
    eos_ids = eos_ids_from(directory, text, GEMMA_EOS_IDS if turn is None else ())
    vocab = min(int(text.vocab_size), len(tokenizer.inner))
    mask = turn.ids.mask if turn is not None else vocab  # past the vocabulary: never scored
    ids = decode_ids(mask, eos_ids, _never(text, eos_ids), turn)
    seq = max_positions(text)

    def backend(rows: int) -> DiffusionGemmaBackend:
        return DiffusionGemmaBackend(model, seed, ids, seq, vocab, rows)

    return ModelAdapter("diffusion_gemma", tokenizer, turn, ids, None, eos_ids,
                        int(model.config.canvas_length), CACHED, backend)  # fmt: skip


def _never(text_config: Any, eos_ids: frozenset[int]) -> frozenset[int]:
    ids = (getattr(text_config, "pad_token_id", None), getattr(text_config, "bos_token_id", None))
    return frozenset(i for i in ids if isinstance(i, int) and i not in eos_ids)
