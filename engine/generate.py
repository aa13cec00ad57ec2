"""The block-diffusion decoding loop, batched over requests, against an exact KV cache.

Per block: forward the masked block against the cache, take each position's confidence,
commit every position above the threshold (at least one), repeat until the block is
full or ends in EOS. The finished block's keys and values are written to the cache in
the *next* block's first forward (it rides along as "fresh" clean tokens), so writing
the cache costs no extra forward; the prompt rides along with the first block likewise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import Tensor

from engine.constraints import CallGrammar, CallPlan, Grounder
from engine.masks import PROMPT_BLOCK, block_diffusion_mask, with_self
from engine.model import DiffusionLM, KVCache
from engine.schedule import (
    Effort,
    Schedule,
    confidence,
    positions_to_commit,
    without_adjacent_twins,
)
from engine.tokenizer import SpecialIds

STEP_TIME_SMOOTHING = 0.3
"""Weight of the newest step in the running estimate of a step's duration."""


class FinishReason(Enum):
    EOS = "eos"
    LENGTH = "length"
    """`max_new_tokens` reached; the answer ends at a block boundary."""
    DEADLINE = "deadline"
    """The deadline left no time for another block; the answer ends at a block boundary."""


@dataclass(frozen=True, slots=True)
class Request:
    prompt_ids: tuple[int, ...]
    schedule: Schedule = field(default_factory=Schedule)
    deadline_s: float | None = None
    """On the engine's clock; None = no deadline."""
    grammar: CallGrammar | None = None
    """Constrain tool calls to the tools' layouts (see engine/constraints.py)."""
    grounder: Grounder | None = None
    """Works out the grounded slots' values from the grammar and the prompt's text, on the
    engine's thread when the request starts (voice_agent.grounding.grounder). None:
    nothing is grounded."""


@dataclass(eq=False, slots=True)
class DecodeState:
    """One request in flight. `canvas` is the block being denoised (mask id = undecided)."""

    request: Request
    canvas: Tensor  # (block,) int64
    fresh: list[int]  # clean tokens whose keys/values the next forward writes
    answer: list[int] = field(default_factory=list)
    forwards: int = 0
    decided: int = 0
    """Tokens chosen by the model (not placed by a scaffold; none after the EOS)."""
    chosen: Tensor | None = None
    """(block,) bool: positions of the current block the threshold rule committed."""
    min_confidence: float = 1.0
    """Lowest confidence of any token the model committed (forced commits included):
    how unsure the answer is."""
    steps_in_block: int = 0
    forced: bool = False
    finish: FinishReason | None = None
    plan: CallPlan | None = None


class CommittedBlock(tuple[int, ...]):
    """A committed block's answer token ids (a tuple), with `min_confidence`: the lowest
    confidence committed in the answer so far, this block included. A reader that streams
    the answer can hold back text the model was unsure of."""

    min_confidence: float

    def __new__(cls, tokens: tuple[int, ...], min_confidence: float) -> CommittedBlock:
        block = super().__new__(cls, tokens)
        block.min_confidence = min_confidence
        return block


@dataclass(frozen=True, slots=True)
class BlockDone:
    """A committed block of answer tokens (EOS and what follows it removed)."""

    state: DecodeState
    tokens: tuple[int, ...]


def new_state(request: Request, block_size: int, ids: SpecialIds) -> DecodeState:
    if not request.prompt_ids:
        raise ValueError("empty prompt")
    limit = answer_capacity(request, block_size)
    grammar, grounder = request.grammar, request.grounder
    plan = None
    if grammar is not None:
        prompt = grammar.tok.decode(request.prompt_ids) if grounder is not None else ""
        plan = CallPlan(grammar, limit, grounder(grammar, prompt) if grounder else None)
    canvas = torch.full((block_size,), ids.mask)
    return DecodeState(request, canvas, list(request.prompt_ids), plan=plan)


def answer_capacity(request: Request, block_size: int) -> int:
    """Most answer tokens the request can take: `max_new_tokens` rounded up to whole
    blocks. A constrained call is never begun where it could not end within it."""
    return -(-request.schedule.max_new_tokens // block_size) * block_size


def check_capacity(request: Request, block_size: int, max_seq_len: int) -> None:
    """Raise ValueError when the prompt plus the longest answer does not fit the model."""
    answer = answer_capacity(request, block_size)
    if len(request.prompt_ids) + answer > max_seq_len:
        raise ValueError(
            f"prompt of {len(request.prompt_ids)} tokens + {answer} answer tokens "
            f"exceeds the model's {max_seq_len}-token window"
        )


@torch.inference_mode()
def decode_step(
    model: DiffusionLM,
    cache: KVCache,  # rows 0..n-1 belong to `states`, in order
    states: list[DecodeState],
    ids: SpecialIds,
    now_s: float,
    step_estimate_s: float,
) -> list[BlockDone]:
    """One forward for every state; commits tokens and returns the blocks that finished."""
    n, bs = len(states), model.config.block_size
    device = cache.lengths.device
    tokens, positions, mask, write, past_len = _step_inputs(states, cache.lengths[:n], ids, bs)
    view = KVCache([k[:n] for k in cache.keys], [v[:n] for v in cache.values], cache.lengths[:n])
    logits = model(
        tokens.to(device), positions.to(device), mask.to(device), view, past_len, write.to(device)
    )
    logits = logits[:, -bs:].float().cpu()  # (n, block, vocab)

    for s in states:
        deadline = s.request.deadline_s
        s.forced |= deadline is not None and now_s + step_estimate_s > deadline
    banned = _banned(states, ids, bs, logits.shape[-1])
    for b, s in enumerate(states):
        if s.plan is not None:
            s.decided += s.plan.before_commit(s.canvas, len(s.answer), logits[b], banned[b])
    conf, pred = confidence(logits, banned)
    canvas = torch.stack([s.canvas for s in states])
    masked = canvas == ids.mask
    commit_all = torch.tensor(
        [s.forced or s.steps_in_block + 1 >= s.request.schedule.max_steps_per_block for s in states]
    )
    threshold = torch.tensor([s.request.schedule.threshold for s in states])
    chosen = positions_to_commit(conf, masked, threshold, commit_all)
    chosen = without_adjacent_twins(chosen, pred, commit_all, _repeating(ids))
    canvas = torch.where(chosen, pred, canvas)
    for b, s in enumerate(states):
        early = _early_eos(s, canvas[b], ids) | _second_actions(s, canvas[b], ids)
        canvas[b, early], chosen[b, early] = ids.mask, False
        before = early & (s.canvas != ids.mask)  # committed in an earlier step
        if bool(before.any()):
            s.decided -= int(before.sum())
            if s.chosen is not None:
                s.chosen &= ~before

    done: list[BlockDone] = []
    for b, s in enumerate(states):
        s.canvas, s.fresh = canvas[b].clone(), []
        s.forwards += 1
        s.steps_in_block += 1
        s.decided += int(chosen[b].sum())
        s.chosen = chosen[b] if s.chosen is None else s.chosen | chosen[b]
        kept = chosen[b]
        if s.plan is not None:
            committed = s.canvas.clone()
            s.decided -= s.plan.after_commit(s.canvas, len(s.answer))
            stayed = s.canvas == committed  # not taken back or replaced by a layout
            s.chosen &= stayed
            kept = kept & stayed
        if kept.any():
            s.min_confidence = min(s.min_confidence, float(conf[b][kept].min()))
        block = _finished_block(s, ids)
        if block is not None:
            done.append(BlockDone(s, tuple(block)))
            _next_block(s, block, ids, now_s + step_estimate_s)
    return done


def _step_inputs(
    states: list[DecodeState], lengths: Tensor, ids: SpecialIds, bs: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """Rows of [fresh clean tokens, padded | the canvas]; positions; mask; write flags."""
    n = len(states)
    f = max(len(s.fresh) for s in states)
    fresh_len = torch.tensor([len(s.fresh) for s in states])
    tokens = torch.full((n, f + bs), ids.pad, dtype=torch.long)
    for b, s in enumerate(states):
        tokens[b, : len(s.fresh)] = torch.tensor(s.fresh, dtype=torch.long)
        tokens[b, f:] = s.canvas
    lengths = lengths.cpu()
    write = torch.arange(f)[None] < fresh_len[:, None]  # (n, f)
    offsets = torch.cat([torch.arange(f).expand(n, f), fresh_len[:, None] + torch.arange(bs)], 1)
    positions = lengths[:, None] + offsets
    past_len = int(lengths.max())
    # Cached tokens are clean and earlier than everything here; fresh tokens are the
    # clean block 0 of this step and the canvas its noisy block 1.
    block_q = torch.cat(
        [torch.zeros(n, f, dtype=torch.long), torch.ones(n, bs, dtype=torch.long)], 1
    )
    noisy_q = torch.cat(
        [torch.zeros(n, f, dtype=torch.bool), torch.ones(n, bs, dtype=torch.bool)], 1
    )
    valid_q = torch.cat([write, torch.ones(n, bs, dtype=torch.bool)], 1)
    block_k = torch.cat([torch.full((n, past_len), PROMPT_BLOCK), block_q], 1)
    noisy_k = torch.cat([torch.zeros(n, past_len, dtype=torch.bool), noisy_q], 1)
    valid_k = torch.cat([torch.arange(past_len)[None] < lengths[:, None], valid_q], 1)
    mask = with_self(block_diffusion_mask(block_q, noisy_q, block_k, noisy_k, valid_k), past_len)
    return tokens, positions, mask, write, past_len


def _banned(states: list[DecodeState], ids: SpecialIds, bs: int, vocab: int) -> Tensor:
    banned = torch.zeros(len(states), bs, vocab, dtype=torch.bool)
    banned[:, :, list(ids.never_generated())] = True
    for b, s in enumerate(states):
        if not s.answer:
            banned[b, 0, ids.eos] = True  # an answer is never empty
        if s.request.schedule.effort is Effort.INSTANT:
            banned[b, :, ids.think] = True  # act at once: no reasoning segment
        _reasoning_ends_in_an_action(s, ids, banned[b])
        _one_action(s, ids, banned[b])
    return banned


def _reasoning_open(s: DecodeState, canvas: Tensor, ids: SpecialIds) -> int | None:
    """For an answer in the brain's turn format (prompts/FORMAT.md: it opens with
    `<think>`) whose reasoning has not yet reached `<say>` or `<call>`: the block position
    of the first action marker on `canvas`, or the block's length when there is none (the
    EOS may not come before it). None for any other answer."""
    first = s.answer[0] if s.answer else int(canvas[0])
    if first != ids.think or ids.say in s.answer or ids.call in s.answer:
        return None
    marks = torch.nonzero((canvas == ids.say) | (canvas == ids.call))
    return int(marks[0, 0]) if len(marks) else len(canvas)


def _early_eos(s: DecodeState, canvas: Tensor, ids: SpecialIds) -> Tensor:
    """(block,) bool: EOS positions of `canvas` (just committed) that would end reasoning
    before any action; they are taken back. The ban in `_reasoning_ends_in_an_action` cannot
    see them in the step that commits an answer's `<think>` itself."""
    out = torch.zeros_like(canvas, dtype=torch.bool)
    upto = _reasoning_open(s, canvas, ids)
    if upto is not None:
        out[:upto] = canvas[:upto] == ids.eos
    return out


def _reasoning_ends_in_an_action(s: DecodeState, ids: SpecialIds, banned: Tensor) -> None:
    """Reasoning must lead to `<say>` or `<call>`: until one is committed the EOS is banned
    before it, and once the reasoning has outrun its effort's budget (the data never
    reasons longer) the next block must open with one of them. Without this a small
    model's reasoning can run on to the EOS or the length limit, an answer with no action."""
    upto = _reasoning_open(s, s.canvas, ids)
    if upto is None:
        return
    banned[:upto, ids.eos] = True
    budget = s.request.schedule.effort.reasoning_budget_tokens
    no_action_yet = upto == len(s.canvas)
    if s.answer and len(s.answer) > budget and int(s.canvas[0]) == ids.mask and no_action_yet:
        keep = banned[0].clone()
        banned[0] = True
        banned[0, [ids.say, ids.call]] = keep[[ids.say, ids.call]]


def _first_action(s: DecodeState, canvas: Tensor, ids: SpecialIds) -> int | None:
    """Block position of the answer's `<say>`/`<call>`: -1 when an earlier block holds it,
    else the first one on `canvas`; None when there is none yet."""
    if ids.say in s.answer or ids.call in s.answer:
        return -1
    marks = torch.nonzero((canvas == ids.say) | (canvas == ids.call))
    return int(marks[0, 0]) if len(marks) else None


def _one_action(s: DecodeState, ids: SpecialIds, banned: Tensor) -> None:
    """An answer holds one action (prompts/FORMAT.md): once a `<say>` or `<call>` stands
    in it, no later position may take either (a second marker, "<say>.<call>...", makes
    the answer unparseable). An earlier position still may: the marker the model commits
    first is not always its choice, and an earlier one takes over (`_second_actions`)."""
    first = _first_action(s, s.canvas, ids)
    if first is None:
        return
    banned[first + 1 :, ids.say] = True
    banned[first + 1 :, ids.call] = True


def _second_actions(s: DecodeState, canvas: Tensor, ids: SpecialIds) -> Tensor:
    """(block,) bool: `<say>`/`<call>` on `canvas` (just committed) after the answer's
    first; they are taken back (two committed in one step, or an earlier one committed
    after a later one)."""
    out = (canvas == ids.say) | (canvas == ids.call)
    first = _first_action(s, canvas, ids)
    if first is not None and first >= 0:
        out[first] = False
    return out


def _repeating(ids: SpecialIds) -> Tensor:
    """Ids that legitimately stand side by side in one step: EOS fill, gap padding."""
    return torch.tensor([ids.eos, ids.gap, ids.pad])


def _finished_block(s: DecodeState, ids: SpecialIds) -> list[int] | None:
    """The block's answer tokens once it is complete, else None. Fills after EOS."""
    canvas = s.canvas.tolist()
    if ids.eos in canvas:
        e = canvas.index(ids.eos)
        if ids.mask in canvas[:e]:
            s.canvas[e:] = ids.eos  # nothing after EOS matters; stop denoising it
            return None
        s.finish = FinishReason.EOS
        if s.chosen is not None:  # committed past the EOS: thrown away, not decided
            s.decided -= int(s.chosen[e + 1 :].sum())
        return canvas[:e]
    return None if ids.mask in canvas else canvas


def _next_block(s: DecodeState, block: list[int], ids: SpecialIds, next_step_end_s: float) -> None:
    s.answer += block
    if s.finish is not None:
        return
    deadline = s.request.deadline_s
    call_open = s.plan is not None and s.plan.open(len(s.answer))
    if len(s.answer) >= s.request.schedule.max_new_tokens and not call_open:
        s.finish = FinishReason.LENGTH
    elif s.forced and deadline is not None and next_step_end_s > deadline and not call_open:
        s.finish = FinishReason.DEADLINE
    else:
        s.fresh, s.steps_in_block, s.chosen = block, 0, None
        s.canvas = torch.full_like(s.canvas, ids.mask)
        if s.plan is not None:
            s.plan.fill_block(s.canvas, len(s.answer))


@dataclass(frozen=True, slots=True)
class Generation:
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    deadline_forced: bool
    forwards: int
    decided_tokens: int
    latency_s: float
    min_confidence: float = 1.0
    """Lowest confidence among the tokens the model committed (1.0 when unknown)."""

    @property
    def tokens_per_forward(self) -> float:
        """Model-decided tokens per forward (scaffold and post-EOS fill excluded)."""
        return self.decided_tokens / max(1, self.forwards)


def stream(
    model: DiffusionLM, ids: SpecialIds, request: Request, clock: Callable[[], float]
) -> Iterator[BlockDone]:
    """Decode one request, yielding each block as it is committed."""
    cfg = model.config
    check_capacity(request, cfg.block_size, cfg.max_seq_len)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    capacity = len(request.prompt_ids) + answer_capacity(request, cfg.block_size) + cfg.block_size
    cache = KVCache.empty(cfg, 1, capacity, device, dtype)
    state = new_state(request, cfg.block_size, ids)
    estimate_s = 0.0
    while state.finish is None:
        t0 = clock()
        blocks = decode_step(model, cache, [state], ids, t0, estimate_s)
        took = clock() - t0
        estimate_s = (
            took
            if not estimate_s
            else (1 - STEP_TIME_SMOOTHING) * estimate_s + STEP_TIME_SMOOTHING * took
        )
        yield from blocks


def generate(
    model: DiffusionLM, ids: SpecialIds, request: Request, clock: Callable[[], float]
) -> Generation:
    """Decode one request to completion."""
    start = clock()
    blocks = list(stream(model, ids, request, clock))
    state = blocks[-1].state
    assert state.finish is not None
    return Generation(
        tuple(state.answer),
        state.finish,
        state.forced,
        state.forwards,
        state.decided,
        clock() - start,
        state.min_confidence,
    )
