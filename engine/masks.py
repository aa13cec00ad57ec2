"""Attention masks: who may see whom, for training and for cached decoding.

Every token carries three labels: a block index (the prompt is block -1), whether it
is in the noisy stream (a block being denoised) or the clean stream (prompt and
committed blocks), and whether it is real or padding. One rule covers everything:

* a clean token sees clean tokens of its own and earlier blocks;
* a noisy token sees clean tokens of earlier blocks and noisy tokens of its own block.

So the prompt is encoded bidirectionally, committed blocks are block-causal, and the
block being denoised is bidirectional over itself. During decoding the KV cache holds
exactly the clean tokens, which is why the cache is exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

PROMPT_BLOCK = -1


def block_diffusion_mask(
    block_q: Tensor,  # (batch, q) int64
    noisy_q: Tensor,  # (batch, q) bool
    block_k: Tensor,  # (batch, k) int64
    noisy_k: Tensor,  # (batch, k) bool
    valid_k: Tensor,  # (batch, k) bool
) -> Tensor:
    """(batch, 1, q, k) bool, True where the query may attend to the key."""
    bq, nq = block_q[:, :, None], noisy_q[:, :, None]
    bk, nk = block_k[:, None, :], noisy_k[:, None, :]
    clean_key = ~nk & ((bk < bq) | ((bk == bq) & ~nq))
    noisy_key = nk & nq & (bk == bq)
    return ((clean_key | noisy_key) & valid_k[:, None, :])[:, None]


def causal_mask(valid: Tensor) -> Tensor:
    """(batch, 1, seq, seq) lower-triangular mask over valid keys (the AR twin)."""
    seq = valid.shape[1]
    tril = torch.ones(seq, seq, dtype=torch.bool, device=valid.device).tril()
    mask = tril[None] & valid[:, None, :]
    # Padding queries see themselves, so no row of the softmax is empty.
    mask |= torch.eye(seq, dtype=torch.bool, device=valid.device)[None]
    return mask[:, None]


def with_self(mask: Tensor, past_len: int) -> Tensor:
    """Let every query see its own key (columns past_len + i), so padding rows never
    produce an empty softmax. Real queries already see themselves under both rules."""
    q = mask.shape[2]
    eye = torch.eye(q, dtype=torch.bool, device=mask.device)
    mask = mask.clone()
    mask[..., past_len : past_len + q] |= eye
    return mask
