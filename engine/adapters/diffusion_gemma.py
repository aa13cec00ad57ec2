"""DiffusionGemma, natively through `transformers` (`DiffusionGemmaForBlockDiffusion`, 5.13+).

Its canvas rules differ from the masked models': there is no mask token. A canvas of
`config.canvas_length` tokens (256 for the released model) starts as uniform random
tokens; each step the decoder reads the canvas plus the previous step's logits
(self-conditioning) against the encoder's KV cache, and positions not yet accepted are
re-drawn at random ("renoised"). A finished canvas is encoded into the cache by the
next canvas's first forward (`input_ids` and `decoder_input_ids` in one call), so writing
the cache costs no extra forward.

Mapping onto the engine: acceptance uses the engine's threshold rule on greedy
confidence (not the reference entropy-bound sampler with its temperature schedule), so
decoding is deterministic given `seed`; EOS ids come from the configs (Gemma's `<eos>` 1
and `<end_of_turn>` 106 by default); deadlines force the rest of a canvas in one step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from engine.adapters.base import (
    CACHED,
    AdapterError,
    Supports,
    TextCodec,
    checkpoint_dir,
    eos_ids_from,
    load_tokenizer,
    transformers,
)
from engine.adapters.steps import Pacer, banned_ids, close_after_eos, commit, end_block
from engine.generate import FinishReason, Generation
from engine.schedule import Schedule

GEMMA_EOS_IDS = (1, 106)  # <eos>, <end_of_turn>
MODEL_CLASS = "DiffusionGemmaForBlockDiffusion"


@dataclass(slots=True)
class DiffusionGemmaAdapter:
    name: str
    tokenizer: TextCodec
    model: Any
    eos_ids: frozenset[int]
    never: frozenset[int]
    seed: int = 0
    """Seeds the random canvas and renoising, so equal requests decode equally."""
    mask_id: None = None
    supports: Supports = CACHED

    @property
    def block_length(self) -> int:
        return int(self.model.config.canvas_length)

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: list[int],
        schedule: Schedule,
        deadline_s: float | None,
        clock: Callable[[], float],
    ) -> Generation:
        if not prompt_ids:
            raise ValueError("empty prompt")
        start_s = clock()
        model, n = self.model, self.block_length
        vocab = int(model.config.text_config.vocab_size)
        device = model.device
        rng = torch.Generator().manual_seed(self.seed)
        cache = transformers().DynamicCache(config=model.config.get_text_config(decoder=True))
        fresh: Tensor | None = torch.tensor([prompt_ids])  # (1, new) tokens not yet encoded
        pacer = Pacer(deadline_s)
        answer: list[int] = []
        forwards = decided = 0
        finish = FinishReason.LENGTH
        while True:
            canvas = torch.randint(vocab, (n,), generator=rng)  # (canvas,)
            open_ = torch.ones(n, dtype=torch.bool)
            self_cond: Tensor | None = None
            steps = 0
            while bool(open_.any()):
                t0 = clock()
                forced = pacer.before_step(t0)
                out = model(
                    input_ids=None if fresh is None else fresh.to(device),
                    cache=cache,
                    decoder_input_ids=canvas[None].to(device),
                    self_conditioning_logits=self_cond,
                )
                fresh, self_cond = None, out.logits.to(model.dtype)
                logits = out.logits[0].float().cpu()  # (canvas, vocab)
                forwards, steps = forwards + 1, steps + 1
                banned = banned_ids(n, vocab, self.never, self.eos_ids, 0 if not answer else None)
                commit_all = forced or steps >= schedule.max_steps_per_block
                canvas, chosen = commit(logits, canvas, open_, banned, schedule, commit_all)
                open_ &= ~chosen
                decided += int(chosen.sum())
                close_after_eos(canvas, open_, self.eos_ids)
                noise = torch.randint(vocab, (n,), generator=rng)
                canvas = torch.where(open_, noise, canvas)  # renoise what is not accepted
                pacer.after_step(clock() - t0)
            stop = end_block(answer, canvas.tolist(), self.eos_ids, schedule, pacer, clock())
            if stop is not None:
                finish = stop
                break
            fresh = canvas[None]
        return Generation(tuple(answer), finish, pacer.forced, forwards, decided, clock() - start_s)


def load_diffusion_gemma(
    path: str | Path, dtype: torch.dtype | None = None, seed: int = 0, device: str = "cpu"
) -> DiffusionGemmaAdapter:
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
    text = model.config.text_config
    eos_ids = eos_ids_from(directory, text, GEMMA_EOS_IDS)
    return DiffusionGemmaAdapter(
        "diffusion_gemma",
        load_tokenizer(directory, False),
        model.to(device).eval(),
        eos_ids,
        _never(text, eos_ids),
        seed,
    )


def _never(text_config: Any, eos_ids: frozenset[int]) -> frozenset[int]:
    ids = (getattr(text_config, "pad_token_id", None), getattr(text_config, "bos_token_id", None))
    return frozenset(i for i in ids if isinstance(i, int) and i not in eos_ids)
