"""The block-diffusion decoding loop, batched over requests, on any backend.

Per block: forward the masked block after what the request has committed, take each
position's confidence, commit every position above the threshold (at least one), repeat
until the block is full or ends. The finished block goes to the backend as "fresh"
tokens with the *next* block's first forward (engine/backend.py): the shipped model
writes their cache entries in that same forward, so writing the cache costs no extra
forward; the prompt rides along with the first block likewise.

The same loop drives the shipped model (`NativeBackend`) and the open dLLM adapters
(engine/adapters/): the rules (engine/rules.py), deadlines, effort and step-level
batching (engine/batching.py) work for every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import Tensor

from engine.backend import BlockBackend, DecodeIds, NativeBackend
from engine.constraints import CallGrammar, CallPlan, Grounder
from engine.model import DiffusionLM
from engine.pacing import StepTimer
from engine.rules import StepRule
from engine.schedule import Schedule, confidence, positions_to_commit, without_adjacent_twins
from engine.tokenizer import SpecialIds
from engine.turn_rules import NeverEmpty, TurnFormat


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
    rules: list[StepRule] = field(default_factory=list)
    """Applied in order every step (engine/rules.py): the turn format, then the call
    grammar's plan when the request has a grammar."""


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


def new_state(request: Request, block_size: int, ids: DecodeIds | SpecialIds) -> DecodeState:
    """A request's state before its first step. The turn rules apply when the tokenizer
    has the turn format's tokens (`DecodeIds.turn`), a call grammar only then."""
    if not request.prompt_ids:
        raise ValueError("empty prompt")
    ids = _decode_ids(ids)
    rules: list[StepRule] = [NeverEmpty(ids.ends)]
    if ids.turn is not None:
        rules.append(TurnFormat(ids.turn, request.schedule.effort))
    grammar, grounder = request.grammar, request.grounder
    if grammar is not None:
        if ids.turn is None:
            raise ValueError("a call grammar needs a tokenizer with the turn format's tokens")
        grounding = None
        if grounder is not None:
            grounding = grounder(grammar, grammar.tok.decode(request.prompt_ids))
        rules.append(CallPlan(grammar, answer_capacity(request, block_size), grounding))
    canvas = torch.full((block_size,), ids.mask)
    return DecodeState(request, canvas, list(request.prompt_ids), rules=rules)


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
    backend: BlockBackend,  # rows 0..n-1 belong to `states`, in order
    states: list[DecodeState],
    now_s: float,
    step_estimate_s: float,
) -> list[BlockDone]:
    """One forward for every state; commits tokens and returns the blocks that finished."""
    n, bs, ids = len(states), backend.block_size, backend.ids
    canvas = torch.stack([s.canvas for s in states])  # (n, block)
    logits = backend.forward([s.fresh for s in states], canvas)  # (n, block, vocab)

    banned = torch.zeros(n, bs, logits.shape[-1], dtype=torch.bool)  # (n, block, vocab)
    banned[:, :, [i for i in ids.never if i < logits.shape[-1]]] = True
    for b, s in enumerate(states):
        deadline = s.request.deadline_s
        s.forced |= deadline is not None and now_s + step_estimate_s > deadline
        for rule in s.rules:  # may place tokens (a settled choice) on s.canvas
            s.decided += rule.ban(s.answer, s.canvas, logits[b], banned[b])
    conf, pred = confidence(logits, banned)  # (n, block) each
    canvas = torch.stack([s.canvas for s in states])  # rules may have placed tokens
    masked = canvas == ids.mask
    schedules = [s.request.schedule for s in states]
    commit_all = torch.tensor(
        [
            s.forced or s.steps_in_block + 1 >= c.max_steps_per_block
            for s, c in zip(states, schedules, strict=True)
        ]
    )
    threshold = torch.tensor([c.threshold for c in schedules])
    chosen = positions_to_commit(conf, masked, threshold, commit_all)  # (n, block) bool
    chosen = without_adjacent_twins(chosen, pred, commit_all, ids.repeating())
    canvas = torch.where(chosen, pred, canvas)

    done: list[BlockDone] = []
    for b, s in enumerate(states):
        committed = canvas[b].clone()
        taken = torch.zeros(bs, dtype=torch.bool)
        for rule in s.rules:
            taken |= rule.take_back(s.answer, canvas[b])
        _count(s, chosen[b], taken, canvas[b] == committed, conf[b], ~masked[b])
        s.canvas, s.fresh = canvas[b].clone(), []
        s.forwards += 1
        s.steps_in_block += 1
        block = _finished_block(s, ids)
        if block is not None:
            done.append(BlockDone(s, tuple(block)))
            _next_block(s, block, ids, now_s + step_estimate_s)
    return done


def _count(
    s: DecodeState, chosen: Tensor, taken: Tensor, stayed: Tensor, conf: Tensor, was_set: Tensor
) -> None:
    """The one place a step's commits are counted, all (block,): `chosen` by the model
    this step, `taken` back by a rule, `stayed` as committed, `was_set` before the commit
    (earlier steps' commits and tokens a rule placed). A taken-back token is not decided;
    one committed in an earlier step and taken back now is no longer."""
    s.decided += int((chosen & ~taken).sum()) - int((taken & was_set).sum())
    s.chosen = (chosen if s.chosen is None else s.chosen | chosen) & stayed
    kept = chosen & stayed
    if kept.any():
        s.min_confidence = min(s.min_confidence, float(conf[kept].min()))


def _finished_block(s: DecodeState, ids: DecodeIds) -> list[int] | None:
    """The block's answer tokens once it is complete, else None. Fills after an end."""
    canvas = s.canvas.tolist()
    e = next((i for i, t in enumerate(canvas) if t in ids.ends), None)
    if e is not None:
        if ids.mask in canvas[:e]:
            s.canvas[e:] = ids.eos  # nothing after EOS matters; stop denoising it
            return None
        s.finish = FinishReason.EOS
        if s.chosen is not None:  # committed past the EOS: thrown away, not decided
            s.decided -= int(s.chosen[e + 1 :].sum())
        return canvas[:e]
    return None if ids.mask in canvas else canvas


def _next_block(s: DecodeState, block: list[int], ids: DecodeIds, next_step_end_s: float) -> None:
    s.answer += block
    if s.finish is not None:
        return
    deadline = s.request.deadline_s
    call_open = any(rule.open(len(s.answer)) for rule in s.rules)
    if len(s.answer) >= s.request.schedule.max_new_tokens and not call_open:
        s.finish = FinishReason.LENGTH
    elif s.forced and deadline is not None and next_step_end_s > deadline and not call_open:
        s.finish = FinishReason.DEADLINE
    else:
        s.fresh, s.steps_in_block, s.chosen = block, 0, None
        s.canvas = torch.full_like(s.canvas, ids.mask)
        for rule in s.rules:
            rule.fill_block(s.answer, s.canvas)


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


def _decode_ids(ids: DecodeIds | SpecialIds) -> DecodeIds:
    return ids if isinstance(ids, DecodeIds) else DecodeIds.of(ids)


def single_backend(model: DiffusionLM, ids: SpecialIds, request: Request) -> NativeBackend:
    """A one-row backend for the shipped model, its cache sized to the request."""
    cfg = model.config
    capacity = len(request.prompt_ids) + answer_capacity(request, cfg.block_size) + cfg.block_size
    return NativeBackend(model, ids, rows=1, capacity=capacity)


def stream(
    model: DiffusionLM | BlockBackend,
    ids: SpecialIds | None,
    request: Request,
    clock: Callable[[], float],
) -> Iterator[BlockDone]:
    """Decode one request, yielding each block as it is committed. `model` is the shipped
    model (with its tokenizer's `ids`) or a backend (which knows its ids: pass None)."""
    if isinstance(model, torch.nn.Module):  # the shipped model (or a test's wrapper of it)
        if ids is None:
            raise ValueError("the shipped model needs its tokenizer's special ids")
        backend: BlockBackend = single_backend(model, ids, request)
    else:
        backend = model
    check_capacity(request, backend.block_size, backend.max_seq_len)
    backend.clear(0)
    state = new_state(request, backend.block_size, backend.ids)
    timer = StepTimer()
    while state.finish is None:
        t0 = clock()
        blocks = decode_step(backend, [state], t0, timer.estimate_s)
        timer.add(clock() - t0)
        yield from blocks


def generate(
    model: DiffusionLM | BlockBackend,
    ids: SpecialIds | None,
    request: Request,
    clock: Callable[[], float],
) -> Generation:
    """Decode one request to completion (`stream` says what `model` and `ids` are)."""
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
