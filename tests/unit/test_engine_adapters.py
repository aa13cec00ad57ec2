"""The model adapters on tiny local checkpoints: scripted remote-code models and a random
native DiffusionGemma. Nothing is downloaded."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from engine.adapters import (
    Adapter,
    AdapterError,
    family_of,
    load_adapter,
    load_diffusion_gemma,
    load_dream,
    load_llada,
    load_sdar,
)
from engine.adapters.base import transformers
from engine.generate import FinishReason
from engine.schedule import Schedule
from tests.unit.adapter_checkpoints import (
    EOS,
    MASK,
    SECOND,
    SPAN,
    TOP,
    gemma_checkpoint,
    remote_code_checkpoint,
)

PROMPT = [4, 5, 6, 7, 8, 9]  # six tokens: not a whole number of 4-token blocks
BLOCK = 4
Loader = Callable[..., Adapter]
CANVAS_LOADERS = [load_llada, load_dream]
REMOTE_LOADERS = [load_llada, load_dream, load_sdar]


def scripted(position: int) -> int:
    return TOP + position % SPAN


def frozen_clock() -> float:
    return 0.0


class TickClock:
    """Every reading advances the time by `tick_s`: steps take time, nothing sleeps."""

    def __init__(self, tick_s: float = 1.0) -> None:
        self.now_s, self.tick_s = 0.0, tick_s

    def __call__(self) -> float:
        self.now_s += self.tick_s
        return self.now_s


@pytest.fixture(scope="module")
def eos_at_17(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return remote_code_checkpoint(tmp_path_factory.mktemp("eos17"), eos_position=17)


@pytest.fixture(scope="module")
def eos_first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """EOS is the top choice at the answer's first position (6) and after it, for Dream too
    (whose position 6 reads output 5)."""
    return remote_code_checkpoint(tmp_path_factory.mktemp("eos5"), eos_position=len(PROMPT) - 1)


@pytest.fixture(scope="module")
def mask_heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mask id is the model's top choice at every third position."""
    return remote_code_checkpoint(tmp_path_factory.mktemp("mask"), mask_every=3, mask_phase=0)


@pytest.fixture(scope="module")
def unsure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Low confidence everywhere: one token per step unless the deadline forces more."""
    return remote_code_checkpoint(tmp_path_factory.mktemp("unsure"), margin=1.0)


def test_llada_reads_logits_at_their_position_and_stops_at_eos(eos_at_17: Path) -> None:
    adapter = load_llada(eos_at_17, block_length=BLOCK)
    gen = adapter.generate(PROMPT, Schedule(max_new_tokens=32), None, frozen_clock)
    assert gen.token_ids == tuple(scripted(i) for i in range(len(PROMPT), 17))
    assert gen.finish_reason is FinishReason.EOS
    # LLaDA's default EOS ids (126081, 126348) lie outside this vocabulary: not added.
    assert (adapter.mask_id, adapter.eos_ids) == (MASK, frozenset({EOS}))
    assert not adapter.supports.kv_cache


def test_dream_shifts_logits_by_one(eos_at_17: Path) -> None:
    gen = load_dream(eos_at_17, block_length=BLOCK).generate(
        PROMPT, Schedule(max_new_tokens=32), None, frozen_clock
    )
    # Position i reads the output at i - 1: the answer starts one scripted token earlier
    # and EOS (output 17) lands at position 18.
    assert gen.token_ids == tuple(scripted(i - 1) for i in range(len(PROMPT), 18))
    assert gen.finish_reason is FinishReason.EOS


def test_sdar_writes_the_prompt_and_each_finished_block_once(eos_at_17: Path) -> None:
    # The scripted model raises unless every cached call continues the cache exactly.
    adapter = load_sdar(eos_at_17, block_length=BLOCK)
    gen = adapter.generate(PROMPT, Schedule(max_new_tokens=32), None, frozen_clock)
    assert gen.token_ids == tuple(scripted(i) for i in range(len(PROMPT), 17))
    assert gen.finish_reason is FinishReason.EOS
    # Blocks follow the prompt: [6, 10), [10, 14), [14, 18) with EOS at 17. Model calls:
    # the prompt's write, then per block one step, and a write before each next block.
    assert gen.forwards == 1 + 1 + (1 + 1) + (1 + 1)
    assert gen.decided_tokens == 4 + 4 + 4  # the last block's EOS included
    assert adapter.supports.kv_cache


@pytest.mark.parametrize("load", REMOTE_LOADERS, ids=lambda f: f.__name__)
def test_eos_is_never_the_first_answer_token(load: Loader, eos_first: Path) -> None:
    gen = load(eos_first, block_length=BLOCK).generate(
        PROMPT, Schedule(max_new_tokens=16), None, frozen_clock
    )
    assert gen.token_ids[0] == SECOND  # the runner-up, since EOS is banned there
    assert gen.finish_reason is FinishReason.EOS
    assert EOS not in gen.token_ids


@pytest.mark.parametrize("load", REMOTE_LOADERS, ids=lambda f: f.__name__)
def test_the_mask_id_is_never_emitted(load: Loader, mask_heavy: Path) -> None:
    adapter = load(mask_heavy, block_length=BLOCK)
    gen = adapter.generate(PROMPT, Schedule(max_new_tokens=12), None, frozen_clock)
    assert MASK not in gen.token_ids
    assert SECOND in gen.token_ids  # where the mask was the top choice
    assert gen.finish_reason is FinishReason.LENGTH
    assert len(gen.token_ids) >= 12


@pytest.mark.parametrize("load", REMOTE_LOADERS, ids=lambda f: f.__name__)
def test_deadline_forces_whole_blocks_and_returns_on_time(load: Loader, unsure: Path) -> None:
    adapter = load(unsure, block_length=BLOCK)
    schedule = Schedule(max_new_tokens=24)
    free = adapter.generate(PROMPT, schedule, None, TickClock())
    assert not free.deadline_forced
    assert free.forwards >= free.decided_tokens  # unsure: one token per step

    clock, deadline_s = TickClock(), 12.0
    gen = adapter.generate(PROMPT, schedule, deadline_s, clock)
    assert gen.deadline_forced
    assert gen.finish_reason is FinishReason.DEADLINE
    assert 0 < len(gen.token_ids) < len(free.token_ids)
    assert gen.token_ids == free.token_ids[: len(gen.token_ids)]
    # The forced step may end past the deadline by its own length; each clock reading
    # here costs a tick, so allow it and the readings around it. A free run takes ~60.
    assert clock.now_s <= deadline_s + 4 * clock.tick_s


def test_tokenizer_round_trip(eos_at_17: Path) -> None:
    tok = load_llada(eos_at_17).tokenizer
    assert tok.encode("t7 t8 t9") == [7, 8, 9]
    assert tok.decode([7, 8, 9]) == "t7 t8 t9"


def test_loading_needs_a_local_directory_and_never_downloads(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="never download"):
        load_llada("GSAI-ML/LLaDA-8B-Instruct")
    with pytest.raises(AdapterError, match=r"config\.json"):
        load_diffusion_gemma(tmp_path)


def test_missing_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=r"\.\[adapters\]"):
        transformers()


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random DiffusionGemma built from transformers' own config classes."""
    return gemma_checkpoint(tmp_path_factory.mktemp("gemma"))


def test_diffusion_gemma_native_decodes_canvases(tiny_gemma: Path) -> None:
    adapter = load_diffusion_gemma(tiny_gemma)
    assert adapter.mask_id is None and adapter.block_length == 8
    assert adapter.eos_ids == frozenset({EOS})
    gen = adapter.generate(PROMPT, Schedule(max_new_tokens=16), None, frozen_clock)
    assert gen.token_ids and gen.finish_reason in (FinishReason.EOS, FinishReason.LENGTH)
    assert not {0, 1, EOS} & set(gen.token_ids)  # pad, bos and EOS never in the answer
    assert gen == adapter.generate(PROMPT, Schedule(max_new_tokens=16), None, frozen_clock)
    # Threshold 0 accepts a whole canvas per step; the cache write rides along with the
    # next canvas's first forward, so forwards == canvases.
    eager = adapter.generate(PROMPT, Schedule(threshold=0.0, max_new_tokens=16), None, frozen_clock)
    canvases = -(-len(eager.token_ids) // 8) if eager.finish_reason is FinishReason.LENGTH else 1
    assert eager.forwards == canvases
    assert eager.decided_tokens == 8 * eager.forwards


def test_diffusion_gemma_deadline_stops_after_one_forced_canvas(tiny_gemma: Path) -> None:
    adapter = load_diffusion_gemma(tiny_gemma)
    gen = adapter.generate(PROMPT, Schedule(max_new_tokens=32), -1.0, TickClock())
    assert gen.deadline_forced and gen.forwards == 1
    assert gen.finish_reason in (FinishReason.DEADLINE, FinishReason.EOS)
    assert 0 < len(gen.token_ids) <= 8


@pytest.mark.parametrize(
    ("architecture", "family", "loader"),
    [("LLaDAModelLM", "llada", load_llada), ("DreamModel", "dream", load_dream),
     ("SDARForCausalLM", "sdar", load_sdar)],
)  # fmt: skip
def test_the_adapter_is_picked_from_the_checkpoints_own_config(
    tmp_path: Path, architecture: str, family: str, loader: Loader
) -> None:
    directory = remote_code_checkpoint(tmp_path / family, eos_position=17)
    config = json.loads((directory / "config.json").read_text())
    config["architectures"] = [architecture]  # as the family's own checkpoints name it
    (directory / "config.json").write_text(json.dumps(config))
    assert family_of(directory) == family
    picked = load_adapter(directory, device="cpu")
    assert picked.name == family
    schedule = Schedule(max_new_tokens=8)
    assert picked.generate(PROMPT, schedule, None, frozen_clock) == loader(directory).generate(
        PROMPT, schedule, None, frozen_clock
    )


def test_a_checkpoint_of_no_known_family_is_named_as_such(
    tmp_path: Path, eos_at_17: Path, tiny_gemma: Path
) -> None:
    assert family_of(tiny_gemma) == "diffusiongemma"
    with pytest.raises(AdapterError, match=r"'tiny_dlm'.*name no adapter family"):
        family_of(eos_at_17)
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(AdapterError, match="cannot be read"):
        load_adapter(tmp_path)
