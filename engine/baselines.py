"""Baselines every speed claim is measured against, in the same run:

* `plain_diffusion`: the reference masked-diffusion sampler (LLaDA's algorithm): no
  cache, every step forwards the whole sequence, a fixed number of tokens committed per
  step (the most confident), semi-autoregressive over blocks;
* `autoregressive`: the AR twin (same weights class, causal mask) with a KV cache, one
  token per forward;
* `CausalStepper`: the AR twin behind the engine's own decoder (`engine.generate`, blocks of
  one token), so it decodes under the same call grammar and grounding as the diffusion
  model: the like-for-like comparison of the two with the engine's constraints.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

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


@torch.inference_mode()
def autoregressive_batch(
    model: DiffusionLM,
    ids: SpecialIds,
    prompts: list[list[int]],
    max_new_tokens: int,
    clock: Callable[[], float],
) -> list[Generation]:
    """Greedy decoding of a static batch on the AR twin: one batched prefill, then one
    batched forward per token until every row has ended (rows that ended ride along).
    Each Generation's latency runs from the call to the step that ended its row."""
    start = clock()
    cfg, n = model.config, len(prompts)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    p_max = max(len(p) for p in prompts)
    cache = KVCache.empty(cfg, n, p_max + max_new_tokens + 1, device, dtype)
    tokens = torch.full((n, p_max), ids.pad, device=device)
    for b, p in enumerate(prompts):
        tokens[b, : len(p)] = torch.tensor(p, device=device)
    valid = tokens != ids.pad
    positions = torch.arange(p_max, device=device)[None].expand(n, p_max)
    logits = model(tokens, positions, causal_mask(valid), cache, 0, valid)
    last = logits[torch.arange(n), valid.sum(1) - 1].float()  # (n, vocab)
    answers: list[list[int]] = [[] for _ in prompts]
    ended: list[float | None] = [None] * n
    row_forwards = [0] * n
    finish = [FinishReason.LENGTH] * n
    forwards = 1
    banned = list(ids.never_generated())
    while True:
        last[:, banned] = float("-inf")
        for b in range(n):
            if not answers[b]:
                last[b, ids.eos] = float("-inf")
        picks = last.argmax(-1).tolist()
        for b, token in enumerate(picks):
            if ended[b] is not None:
                continue
            row_forwards[b] = forwards
            if token == ids.eos:
                finish[b], ended[b] = FinishReason.EOS, clock() - start
            else:
                answers[b].append(token)
                if len(answers[b]) >= max_new_tokens:
                    ended[b] = clock() - start
        if all(e is not None for e in ended):
            break
        past = int(cache.lengths.max())
        step = torch.tensor(picks, device=device)[:, None]  # (n, 1)
        keys = torch.arange(past, device=device)[None] < cache.lengths[:, None]
        mask = torch.cat([keys, torch.ones(n, 1, dtype=torch.bool, device=device)], 1)
        logits = model(step, cache.lengths[:, None], mask[:, None, None], cache, past,
                       torch.ones_like(step, dtype=torch.bool))  # fmt: skip
        last = logits[:, -1].float()
        forwards += 1
    return [
        Generation(tuple(a), f, False, r, len(a) + (f is FinishReason.EOS), e or 0.0)
        for a, f, e, r in zip(answers, finish, ended, row_forwards, strict=True)
    ]


class CausalStepper(nn.Module):
    """The AR twin as the engine's decoder expects a model: each forward writes the fresh
    committed tokens to the cache under a causal mask and returns, as the logits of the
    one-token canvas, the next-token prediction of the last of them (or of the last ones
    seen, when a step brings none). With block size 1 and at least one token committed per
    step, `engine.generate` then decodes greedily, and a `CallPlan` places and restricts
    tokens exactly as it does for the diffusion model (an enum slot is chosen from the
    logits of its first token). One request at a time."""

    def __init__(self, model: DiffusionLM) -> None:
        if model.config.block_size != 1:
            raise ValueError(f"not an AR twin: block size {model.config.block_size}, not 1")
        super().__init__()
        self.model = model
        self.config = model.config
        self._last: Tensor | None = None

    def forward(
        self,
        tokens: Tensor,
        positions: Tensor,
        mask: Tensor,
        cache: KVCache | None = None,
        past_len: int = 0,
        write: Tensor | None = None,
    ) -> Tensor:
        if tokens.shape[0] != 1 or cache is None or write is None:
            raise ValueError("CausalStepper decodes one request at a time, with a cache")
        fresh = int(write[0].sum())
        if fresh:
            past = int(cache.lengths[0])
            seen = torch.ones(fresh, past, dtype=torch.bool, device=tokens.device)
            causal = torch.ones(fresh, fresh, dtype=torch.bool, device=tokens.device).tril()
            logits = self.model(
                tokens[:, :fresh],
                positions[:, :fresh],
                torch.cat([seen, causal], 1)[None, None],
                cache,
                past,
                write[:, :fresh],
            )
            self._last = logits[:, -1:]
        if self._last is None:
            raise ValueError("the first forward of a request must bring its prompt")
        return self._last.clone()  # callers may edit logits in place
