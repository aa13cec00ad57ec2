"""Every adapter through the engine's one decode core: a call grammar, deadlines, effort
and step-level batching on tiny local checkpoints of each family (LLaDA, Dream and SDAR
as scripted remote-code models speaking each family's calling convention; DiffusionGemma
as a random model of transformers' own class), carrying the project's tokenizer with the
turn format's tokens, as a checkpoint fine-tuned for the agent would."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")
import torch
from torch import Tensor

from engine.adapters import AdapterError, ModelAdapter, family_of, load_adapter
from engine.backend import BlockBackend
from engine.batching import Engine
from engine.constraints import CallGrammar
from engine.generate import FinishReason, Request, generate
from engine.schedule import Effort, Schedule
from engine.tokenizer import Special, TextTokenizer
from tests.unit.adapter_checkpoints import gemma_checkpoint, remote_code_checkpoint
from voice_agent.brain.synthetic import TOOLS, make_examples
from voice_agent.grounding import ground

DEVICE = os.environ.get("ADAPTER_TEST_DEVICE", "cpu")
"""scripts/gpu_check.sh runs these tests on CUDA (bfloat16) with ADAPTER_TEST_DEVICE=cuda."""
DTYPE = torch.bfloat16 if DEVICE == "cuda" else None
ARCHITECTURES = {"llada": "LLaDAModelLM", "dream": "DreamModel", "sdar": "SDARForCausalLM"}
FAMILIES = [*ARCHITECTURES, "diffusiongemma"]
PROMPT = f"{Special.BOS}{Special.CALLER} hi it's nina, order 4 1 7 2 please{Special.AGENT}"


class TickClock:
    """Every reading advances the time by `tick_s`: steps take time, nothing sleeps."""

    def __init__(self, tick_s: float = 1.0) -> None:
        self.now_s, self.tick_s = 0.0, tick_s

    def __call__(self) -> float:
        self.now_s += self.tick_s
        return self.now_s


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    texts = [e.prompt + e.answer for e in make_examples(400, seed=5)]
    return TextTokenizer.train(texts, vocab_size=400)


def checkpoint(root: Path, family: str, tok: TextTokenizer, **config: object) -> Path:
    if family == "diffusiongemma":
        return gemma_checkpoint(root / family, tok)
    directory = remote_code_checkpoint(root / family, tok, **config)
    fields = json.loads((directory / "config.json").read_text())
    fields["architectures"] = [ARCHITECTURES[family]]  # as the family's checkpoints name it
    (directory / "config.json").write_text(json.dumps(fields))
    return directory


@pytest.fixture(scope="module")
def adapters(
    tmp_path_factory: pytest.TempPathFactory, tok: TextTokenizer
) -> dict[str, ModelAdapter]:
    root = tmp_path_factory.mktemp("turn")
    loaded = {}
    for family in FAMILIES:
        directory = checkpoint(root, family, tok)
        assert family_of(directory) == family
        loaded[family] = load_adapter(directory, device=DEVICE, dtype=DTYPE)
    return loaded


@pytest.fixture(scope="module")
def unsure(tmp_path_factory: pytest.TempPathFactory, tok: TextTokenizer) -> dict[str, ModelAdapter]:
    """Scripted models with low confidence everywhere: one token per step unless forced."""
    root = tmp_path_factory.mktemp("unsure")
    return {
        f: load_adapter(checkpoint(root, f, tok, margin=1.0), device=DEVICE, dtype=DTYPE)
        for f in ARCHITECTURES
    }


def call_biased(backend: BlockBackend, call_id: int, bias: float = 30.0) -> BlockBackend:
    """The backend with a strong pull towards `<call>`: a model that wants to call a tool.
    What the call then says is the grammar's business."""
    forward = backend.forward

    def biased(fresh: list[list[int]], canvas: Tensor) -> Tensor:
        logits = forward(fresh, canvas)
        logits[..., call_id] += bias
        return logits

    backend.forward = biased  # type: ignore[method-assign]
    return backend


@pytest.mark.parametrize("family", FAMILIES)
def test_the_turn_tokens_make_the_checkpoint_an_agent_brain(
    adapters: dict[str, ModelAdapter], tok: TextTokenizer, family: str
) -> None:
    adapter = adapters[family]
    assert adapter.turn_tokenizer is not None
    assert adapter.ids.turn == tok.ids
    assert adapter.ids.eos == tok.ids.eos and adapter.ids.mask == tok.ids.mask


@pytest.mark.parametrize("family", FAMILIES)
def test_constrained_calls_are_schema_valid(
    adapters: dict[str, ModelAdapter], tok: TextTokenizer, family: str
) -> None:
    adapter = adapters[family]
    turn = adapter.turn_tokenizer
    assert turn is not None
    grammar = CallGrammar(turn, TOOLS)
    backend = call_biased(adapter.backend(1), turn.ids.call)
    request = Request(tuple(turn.encode(PROMPT)), Schedule(threshold=0.5, max_new_tokens=80),
                      grammar=grammar, grounder=ground)  # fmt: skip
    gen = generate(backend, None, request, TickClock(0.001))
    ids = list(gen.token_ids)
    assert gen.finish_reason is FinishReason.EOS
    assert ids[0] == turn.ids.call, turn.decode(ids)
    call = grammar.parse(ids[1:])  # raises unless it is one of the tools, arguments valid
    assert call.name in TOOLS
    for key, value in call.arguments.model_dump().items():
        if key == "order_number":  # grounded: only the digits the caller said
            assert set(value) <= set("4172"), value


@pytest.mark.parametrize("family", FAMILIES)
def test_without_the_grammar_the_same_pull_writes_no_valid_call(
    adapters: dict[str, ModelAdapter], tok: TextTokenizer, family: str
) -> None:
    """The test above would be vacuous if the biased models wrote valid calls unaided."""
    adapter = adapters[family]
    turn = adapter.turn_tokenizer
    assert turn is not None
    backend = call_biased(adapter.backend(1), turn.ids.call, bias=3.0)
    request = Request(tuple(turn.encode(PROMPT)), Schedule(threshold=0.5, max_new_tokens=40))
    ids = list(generate(backend, None, request, TickClock(0.001)).token_ids)
    after = ids[ids.index(turn.ids.call) + 1 :] if turn.ids.call in ids else ids
    with pytest.raises(ValueError):
        CallGrammar(turn, TOOLS).parse(after)


@pytest.mark.parametrize("family", FAMILIES)
def test_instant_effort_never_reasons(adapters: dict[str, ModelAdapter], family: str) -> None:
    adapter = adapters[family]
    turn = adapter.turn_tokenizer
    assert turn is not None
    backend = call_biased(adapter.backend(1), turn.ids.think, bias=50.0)  # wants to think
    prompt = tuple(turn.encode(PROMPT))
    thinks = generate(backend, None, Request(prompt, Schedule(max_new_tokens=16)), TickClock())
    instant = Schedule(max_new_tokens=16, effort=Effort.INSTANT)
    gen = generate(backend, None, Request(prompt, instant), TickClock())
    assert turn.ids.think in thinks.token_ids  # the pull is real
    assert gen.token_ids and turn.ids.think not in gen.token_ids


@pytest.mark.parametrize("family", list(ARCHITECTURES))
def test_a_deadline_is_honoured(unsure: dict[str, ModelAdapter], family: str) -> None:
    adapter = unsure[family]
    schedule = Schedule(max_new_tokens=3 * adapter.block_length)
    free = adapter.generate([5, 6, 7, 8, 9, 10], schedule, None, TickClock())
    assert not free.deadline_forced and free.decided_tokens >= 8
    clock, deadline_s = TickClock(), 8.0
    gen = adapter.generate([5, 6, 7, 8, 9, 10], schedule, deadline_s, clock)
    assert gen.deadline_forced and gen.finish_reason is FinishReason.DEADLINE
    assert 0 < len(gen.token_ids) < len(free.token_ids)
    assert gen.token_ids == free.token_ids[: len(gen.token_ids)]
    # The forced step may end past the deadline by its own length; each clock reading
    # costs a tick here, so allow it and the readings around it.
    assert clock.now_s <= deadline_s + 4 * clock.tick_s


def test_a_deadline_is_honoured_by_diffusion_gemma(adapters: dict[str, ModelAdapter]) -> None:
    adapter = adapters["diffusiongemma"]
    gen = adapter.generate([5, 6, 7], Schedule(max_new_tokens=32), -1.0, TickClock())
    assert gen.deadline_forced and gen.forwards == 1
    assert 0 < len(gen.token_ids) <= adapter.block_length


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_equals_unbatched(adapters: dict[str, ModelAdapter], family: str) -> None:
    adapter = adapters[family]
    turn = adapter.turn_tokenizer
    assert turn is not None
    lines = ["hi it's nina", "where is order 5 5 1 0", "are you open on sunday", "bye"]
    requests = [
        Request(
            tuple(turn.encode(f"{Special.BOS}{Special.CALLER} {line}{Special.AGENT}")),
            Schedule(threshold=0.5, max_new_tokens=16 + 8 * i),
        )
        for i, line in enumerate(lines)
    ]
    singles = [generate(adapter.backend(1), None, r, TickClock(0.001)) for r in requests]

    async def batched() -> list[tuple[int, ...]]:
        # Three rows for four requests: one waits, joins when a row is free, and rows
        # move when an earlier request leaves.
        async with Engine(adapter.backend(3), max_batch=3, clock=TickClock(0.001)) as engine:
            gens = await asyncio.gather(*(engine.generate(r) for r in requests))
            assert max(engine.batch_sizes) == 3
        return [g.token_ids for g in gens]

    assert asyncio.run(batched()) == [g.token_ids for g in singles]


def test_a_grammar_needs_the_turn_tokens(tmp_path: Path) -> None:
    directory = remote_code_checkpoint(tmp_path / "plain")
    fields = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(fields | {"architectures": ["LLaDA"]}))
    adapter = load_adapter(directory)
    assert adapter.turn_tokenizer is None and adapter.ids.turn is None
    gen = adapter.generate([5, 6, 7], Schedule(max_new_tokens=8), None, TickClock())
    assert gen.token_ids  # plain decoding works without them
    grammar = object.__new__(CallGrammar)
    with pytest.raises(ValueError, match="turn format's tokens"):
        generate(adapter.backend(1), None, Request((5, 6), grammar=grammar), TickClock())


def test_a_turn_tokenizer_whose_mask_is_not_the_models_is_refused(
    tmp_path: Path, tok: TextTokenizer
) -> None:
    directory = checkpoint(tmp_path, "llada", tok, mask_token_id=tok.ids.gap)
    with pytest.raises(AdapterError, match=r"<mask> is id .* model's mask id"):
        load_adapter(directory)
