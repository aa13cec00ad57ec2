"""SDAR (`JetLM/SDAR-*`): block diffusion with a block-causal KV cache, via `trust_remote_code`.

Canvas rules (those of SDAR's reference `block_diffusion_generate`):

* blocks are aligned to absolute positions 0, L, 2L, ... (L = `block_length`, 4 for the
  released chat models); the prompt's whole blocks are prefilled into the cache with one
  `store_kv=True` forward, and the prompt's tail shares the first decoded block;
* a step forwards only the current block (`store_kv=False`), which attends to the cache
  and to itself bidirectionally; logits are read at the position they fill;
* a finished block is written to the cache by one more `store_kv=True` forward (SDAR's
  API has no way to fold it into the next block's first step), counted in `forwards`;
* mask id 151669 (`<|MASK|>`), EOS `<|endoftext|>` 151643 and `<|im_end|>` 151645 unless
  the checkpoint's configs say otherwise.
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

SDAR_MASK_ID = 151669
SDAR_EOS_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
SDAR_BLOCK_LENGTH = 4


@dataclass(slots=True)
class SDARAdapter:
    name: str
    tokenizer: TextCodec
    model: Any
    mask_id: int
    eos_ids: frozenset[int]
    never: frozenset[int]
    block_length: int = SDAR_BLOCK_LENGTH
    supports: Supports = CACHED

    def _forward(self, x: list[int], start: int, cache: Any, store: bool) -> Tensor:
        """Logits (len(x), vocab) of tokens at positions start.. against the cache."""
        n = len(x)
        # Whole prompt blocks see earlier blocks and their own; a decoded block sees all.
        blocks = torch.arange(start, start + n) // self.block_length
        past = torch.ones(n, start, dtype=torch.bool)
        mask = torch.cat([past, blocks[:, None] >= blocks[None, :]], 1)[None, None]
        device = self.model.device
        out = self.model(
            torch.tensor([x], device=device),
            attention_mask=mask.to(device),
            position_ids=torch.arange(start, start + n, device=device)[None],
            past_key_values=cache,
            use_cache=True,
            store_kv=store,
        )
        logits: Tensor = out.logits[0].float().cpu()
        return logits

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
        bl = self.block_length
        cache = transformers().DynamicCache()
        whole = len(prompt_ids) // bl * bl
        forwards = decided = 0
        if whole:
            self._forward(prompt_ids[:whole], 0, cache, store=True)
            forwards += 1
        tail, pos = prompt_ids[whole:], whole
        never = self.never | {self.mask_id}
        pacer = Pacer(deadline_s)
        answer: list[int] = []
        finish = FinishReason.LENGTH
        while True:
            block = torch.tensor(tail + [self.mask_id] * (bl - len(tail)))  # (block,)
            open_ = torch.arange(bl) >= len(tail)
            steps = 0
            while bool(open_.any()):
                t0 = clock()
                forced = pacer.before_step(t0)
                logits = self._forward(block.tolist(), pos, cache, store=False)
                forwards, steps = forwards + 1, steps + 1
                first = len(tail) if not answer else None
                banned = banned_ids(bl, logits.shape[-1], never, self.eos_ids, first)
                commit_all = forced or steps >= schedule.max_steps_per_block
                block, chosen = commit(logits, block, open_, banned, schedule, commit_all)
                open_ &= ~chosen
                decided += int(chosen.sum())
                close_after_eos(block, open_, self.eos_ids)
                pacer.after_step(clock() - t0)
            produced = block.tolist()[len(tail) :]
            stop = end_block(answer, produced, self.eos_ids, schedule, pacer, clock())
            if stop is not None:
                finish = stop
                break
            self._forward(block.tolist(), pos, cache, store=True)
            forwards += 1
            tail, pos = [], pos + bl
        return Generation(tuple(answer), finish, pacer.forced, forwards, decided, clock() - start_s)


def load_sdar(
    path: str | Path,
    block_length: int = SDAR_BLOCK_LENGTH,
    dtype: torch.dtype | None = None,
    device: str = "cpu",
) -> SDARAdapter:
    """SDAR from a local directory (config, weights, modelling code, tokenizer), on
    `device`."""
    directory = checkpoint_dir(path)
    model = transformers().AutoModelForCausalLM.from_pretrained(
        directory, trust_remote_code=True, local_files_only=True, dtype=dtype or torch.float32
    )
    config = model.config
    mask = getattr(config, "mask_token_id", None)
    eos_ids = eos_ids_from(directory, config, SDAR_EOS_IDS)
    pad = getattr(config, "pad_token_id", None)
    return SDARAdapter(
        name="sdar",
        tokenizer=load_tokenizer(directory, True),
        model=model.to(device).eval(),
        mask_id=int(mask) if isinstance(mask, int) else SDAR_MASK_ID,
        eos_ids=eos_ids,
        never=frozenset({pad} - eos_ids) if isinstance(pad, int) else frozenset(),
        block_length=block_length,
    )
