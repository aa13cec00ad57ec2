"""Training objectives: block masked diffusion (one pass over [prompt | clean | noisy])
and next-token prediction for the autoregressive twin. Pure functions over a batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.masks import PROMPT_BLOCK, block_diffusion_mask, causal_mask
from engine.model import DiffusionLM
from engine.tokenizer import SpecialIds

MIN_MASK_RATE = 1e-3
"""t ~ U(MIN_MASK_RATE, 1): keeps the 1/t weight finite."""


@dataclass(frozen=True, slots=True)
class Example:
    prompt: list[int]
    answer: list[int]
    """Without EOS; the collator appends EOS and pads the last block with EOS."""


@dataclass(frozen=True, slots=True)
class Batch:
    prompt: Tensor  # (batch, P) right-padded with pad
    prompt_len: Tensor  # (batch,)
    answer: Tensor  # (batch, A) answer + EOS fill to a block multiple, then pad
    answer_len: Tensor  # (batch,) tokens that carry loss (through the EOS-filled block)


def collate(examples: list[Example], ids: SpecialIds, block_size: int) -> Batch:
    p_max = max(len(e.prompt) for e in examples)
    lens = [-(-(len(e.answer) + 1) // block_size) * block_size for e in examples]
    a_max = max(lens)
    prompt = torch.full((len(examples), p_max), ids.pad)
    answer = torch.full((len(examples), a_max), ids.pad)
    for i, e in enumerate(examples):
        prompt[i, : len(e.prompt)] = torch.tensor(e.prompt)
        filled = e.answer + [ids.eos] * (lens[i] - len(e.answer))
        answer[i, : lens[i]] = torch.tensor(filled)
    return Batch(
        prompt,
        torch.tensor([len(e.prompt) for e in examples]),
        answer,
        torch.tensor(lens),
    )


def diffusion_loss(
    model: DiffusionLM, batch: Batch, ids: SpecialIds, generator: torch.Generator | None = None
) -> Tensor:
    """Masked-diffusion loss with block-causal attention, every block in one pass.

    Each answer block draws its own mask rate t; masked tokens are predicted from the
    prompt, the clean earlier blocks and the block's unmasked tokens; cross-entropy is
    weighted by 1/t and averaged over answer tokens. The prompt is never masked.
    """
    bs = model.config.block_size
    n, p_max = batch.prompt.shape
    a_max = batch.answer.shape[1]
    device = batch.prompt.device
    a_idx = torch.arange(a_max, device=device)
    answer_valid = a_idx[None] < batch.answer_len[:, None]
    block_of = (a_idx // bs)[None].expand(n, a_max)
    t = (
        torch.rand(n, a_max // bs, generator=generator, device=device) * (1 - MIN_MASK_RATE)
        + MIN_MASK_RATE
    )
    t_tok = t.gather(1, block_of)  # (n, A)
    masked = (torch.rand(n, a_max, generator=generator, device=device) < t_tok) & answer_valid
    noisy = torch.where(masked, torch.full_like(batch.answer, ids.mask), batch.answer)

    tokens = torch.cat([batch.prompt, batch.answer, noisy], 1)
    p_idx = torch.arange(p_max, device=device)[None].expand(n, p_max)
    a_pos = batch.prompt_len[:, None] + a_idx[None]
    positions = torch.cat([p_idx, a_pos, a_pos], 1).clamp(max=model.config.max_seq_len - 1)
    prompt_valid = p_idx < batch.prompt_len[:, None]
    valid = torch.cat([prompt_valid, answer_valid, answer_valid], 1)
    blocks = torch.cat([torch.full_like(p_idx, PROMPT_BLOCK), block_of, block_of], 1)
    is_noisy = torch.cat(
        [torch.zeros_like(prompt_valid), torch.zeros_like(answer_valid), answer_valid], 1
    )
    mask = block_diffusion_mask(blocks, is_noisy, blocks, is_noisy, valid)
    mask |= torch.eye(tokens.shape[1], dtype=torch.bool, device=device)[None, None]

    logits = model(tokens, positions, mask, tail=a_max)  # (n, A, vocab): the noisy copy
    ce = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), batch.answer.reshape(-1), reduction="none"
    )
    weighted = (ce.view(n, a_max) / t_tok) * masked
    return weighted.sum() / answer_valid.sum().clamp(min=1)


def autoregressive_loss(model: DiffusionLM, batch: Batch, ids: SpecialIds) -> Tensor:
    """Next-token cross-entropy on the answer (through its first EOS), causal mask."""
    n, p_max = batch.prompt.shape
    a_max = batch.answer.shape[1]
    device = batch.prompt.device
    # Pack each row as prompt + answer with no gap: gather answer tokens after the prompt.
    seq = p_max + a_max
    tokens = torch.full((n, seq), ids.pad, device=device)
    targets = torch.full((n, seq), -100, device=device)
    first_eos = (batch.answer == ids.eos).float().argmax(1)  # answer always has an EOS
    for i in range(n):
        p, a = int(batch.prompt_len[i]), int(first_eos[i]) + 1
        tokens[i, :p] = batch.prompt[i, :p]
        tokens[i, p : p + a] = batch.answer[i, :a]
        targets[i, p - 1 : p + a - 1] = batch.answer[i, :a]
    valid = tokens != ids.pad
    positions = (
        torch.arange(seq, device=device)[None]
        .expand(n, seq)
        .clamp(max=model.config.max_seq_len - 1)
    )
    logits = model(tokens, positions, causal_mask(valid))
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
    )
