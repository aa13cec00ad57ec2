"""Baselines every speed claim is measured against, in the same run:

* `plain_diffusion`: the reference masked-diffusion sampler (LLaDA's algorithm): no
  cache, every step forwards the whole sequence, a fixed number of tokens committed per
  step (the most confident), semi-autoregressive over blocks;
* `autoregressive`: the AR twin (same weights class, causal mask) with a KV cache, one
  token per forward.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.generate import FinishReason, Generation
from engine.masks import PROMPT_BLOCK, block_diffusion_mask, causal_mask
from engine.model import DiffusionLM, KVCache
from engine.schedule import confidence
from engine.tokenizer import SpecialIds


@torch.inference_mode()
def plain_diffusion(
    model: DiffusionLM,
    ids: SpecialIds,
    prompt: list[int],
    max_new_tokens: int,
    steps_per_block: int,
    clock: Callable[[], float],
) -> Generation:
    """Fixed steps per block, full forward each step, no cache."""
    start = clock()
    bs = model.config.block_size
    if bs % steps_per_block:
        raise ValueError(f"steps_per_block={steps_per_block} must divide block_size={bs}")
    per_step = bs // steps_per_block
    answer: list[int] = []
    forwards = 0
    finish = FinishReason.LENGTH
    while len(answer) < max_new_tokens:
        canvas = torch.full((bs,), ids.mask)
        for _ in range(steps_per_block):
            tokens = torch.tensor(prompt + answer + canvas.tolist())[None]
            n_clean = len(prompt) + len(answer)
            blocks = torch.tensor(
                [PROMPT_BLOCK] * len(prompt)
                + [i // bs for i in range(len(answer))]
                + [len(answer) // bs] * bs
            )[None]
            noisy = (torch.arange(tokens.shape[1]) >= n_clean)[None]
            mask = block_diffusion_mask(blocks, noisy, blocks, noisy, torch.ones_like(noisy))
            logits = model(tokens, torch.arange(tokens.shape[1])[None], mask)[0, -bs:].float()
            forwards += 1
            banned = torch.zeros(bs, logits.shape[-1], dtype=torch.bool)
            banned[:, list(ids.never_generated())] = True
            if not answer:
                banned[0, ids.eos] = True
            conf, pred = confidence(logits[None], banned[None])
            masked = canvas == ids.mask
            order = conf[0].masked_fill(~masked, -1.0).argsort(descending=True)[:per_step]
            canvas[order] = pred[0, order]
        block = canvas.tolist()
        if ids.eos in block:
            answer += block[: block.index(ids.eos)]
            finish = FinishReason.EOS
            break
        answer += block
    return Generation(tuple(answer), finish, False, forwards, forwards * per_step, clock() - start)


@torch.inference_mode()
def autoregressive(
    model: DiffusionLM,
    ids: SpecialIds,
    prompt: list[int],
    max_new_tokens: int,
    clock: Callable[[], float],
) -> Generation:
    """Greedy decoding with a KV cache on a causally trained model."""
    start = clock()
    cfg = model.config
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    cache = KVCache.empty(cfg, 1, len(prompt) + max_new_tokens + 1, device, dtype)
    tokens = torch.tensor([prompt], device=device)
    valid = torch.ones_like(tokens, dtype=torch.bool)
    logits = model(
        tokens, torch.arange(len(prompt), device=device)[None], causal_mask(valid), cache, 0, valid
    )
    answer: list[int] = []
    forwards, finish = 1, FinishReason.LENGTH
    banned = list(ids.never_generated())
    while True:
        last = logits[0, -1].float()
        last[banned] = float("-inf")
        if not answer:
            last[ids.eos] = float("-inf")
        token = int(last.argmax())
        if token == ids.eos:
            finish = FinishReason.EOS
            break
        answer.append(token)
        if len(answer) >= max_new_tokens:
            break
        pos = int(cache.lengths[0])
        step = torch.tensor([[token]], device=device)
        mask = torch.ones(1, 1, 1, pos + 1, dtype=torch.bool, device=device)
        logits = model(
            step,
            torch.tensor([[pos]], device=device),
            mask,
            cache,
            pos,
            torch.ones_like(step, dtype=torch.bool),
        )
        forwards += 1
    return Generation(
        tuple(answer),
        finish,
        False,
        forwards,
        len(answer) + (finish is FinishReason.EOS),
        clock() - start,
    )
