"""What every adapter offers, and the one place that imports `transformers`.

An adapter maps a third-party diffusion LM onto the decode core: its ids (mask, ends,
never-emitted), its tokenizer, and a backend (engine/backend.py) that forwards a block
after what a row holds. `generate` runs one request through the core; the batching
engine takes `adapter.backend(rows)`. Loading is always from a
local directory (`local_files_only=True`): no code path here downloads weights.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import torch
from torch import Tensor

from engine.backend import BlockBackend, DecodeIds
from engine.generate import Generation, Request, generate
from engine.schedule import Schedule
from engine.tokenizer import TextTokenizer

INSTALL_HINT = 'pip install -e ".[adapters]"'


class AdapterError(RuntimeError):
    """A checkpoint cannot be served by the adapter asked for (missing file, wrong family)."""


@dataclass(frozen=True, slots=True)
class Supports:
    """How an adapter's model runs under the decode core (which gives every adapter
    constraints, deadlines, effort and step-level batching)."""

    kv_cache: bool
    """Committed blocks are encoded once; a step forwards only the current block."""
    shared_forward: bool
    """The rows of a step share one forward; otherwise each row is its own forward
    within the step (requests still join and leave the batch at step boundaries)."""


CACHED = Supports(kv_cache=True, shared_forward=False)
UNCACHED = Supports(kv_cache=False, shared_forward=False)


class TextCodec(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...


class Adapter(Protocol):
    """A third-party diffusion LM behind the decode core."""

    @property
    def name(self) -> str: ...
    @property
    def tokenizer(self) -> TextCodec: ...
    @property
    def turn_tokenizer(self) -> TextTokenizer | None:
        """The checkpoint's tokenizer as the agent's `TextTokenizer` when it carries the
        turn format's tokens (a checkpoint fine-tuned for the agent), else None."""
        ...

    @property
    def ids(self) -> DecodeIds: ...
    @property
    def mask_id(self) -> int | None:
        """The model's mask token id, or None for a model whose canvas starts as noise."""
        ...

    @property
    def eos_ids(self) -> frozenset[int]: ...
    @property
    def block_length(self) -> int:
        """Tokens per block (canvas); answers end at block boundaries on length/deadline."""
        ...

    @property
    def supports(self) -> Supports: ...

    def backend(self, rows: int) -> BlockBackend:
        """A fresh backend with `rows` rows, for `engine.batching.Engine` or `generate`."""
        ...

    def generate(
        self,
        prompt_ids: list[int],
        schedule: Schedule,
        deadline_s: float | None,
        clock: Callable[[], float],
    ) -> Generation:
        """Decode one answer through the core; `deadline_s` is on `clock`. Never returns
        an empty answer. Raises ValueError for an empty prompt."""
        ...


@dataclass(slots=True)
class ModelAdapter:
    """What every family's loader returns: the model's ids and tokenizers, and how to make
    a backend (a family's row state and forward) over its loaded model."""

    name: str
    tokenizer: TextCodec
    turn_tokenizer: TextTokenizer | None
    ids: DecodeIds
    mask_id: int | None
    eos_ids: frozenset[int]
    block_length: int
    supports: Supports
    make_backend: Callable[[int], RowBackend]

    def backend(self, rows: int) -> RowBackend:
        return self.make_backend(rows)

    def generate(
        self,
        prompt_ids: list[int],
        schedule: Schedule,
        deadline_s: float | None,
        clock: Callable[[], float],
    ) -> Generation:
        backend = self.backend(1)
        request = Request(tuple(prompt_ids), schedule, deadline_s)
        gen = generate(backend, None, request, clock)
        # A model that writes its cache in a forward of its own (SDAR) spends more
        # forwards than decode steps: report what the model ran.
        return replace(gen, forwards=backend.model_calls)


class RowBackend:
    """The part of an adapter's backend every family shares: ids, sizes, the pool of row
    states, the model-call count and the logits trimmed to the tokenizer's vocabulary
    (ids past it cannot be decoded, and a call grammar's masks are that size). A family
    gives a row's initial state (`new_row`) and one row's forward (`forward_row`)."""

    def __init__(
        self, ids: DecodeIds, block_size: int, max_seq_len: int, vocab: int, rows: int
    ) -> None:
        if rows < 1:
            raise ValueError(f"a backend needs at least one row, not {rows}")
        self.ids, self.block_size, self.max_seq_len = ids, block_size, max_seq_len
        self.vocab = vocab
        self.model_calls = 0
        self.state: list[Any] = [self.new_row() for _ in range(rows)]

    @property
    def rows(self) -> int:
        return len(self.state)

    def new_row(self) -> Any:
        raise NotImplementedError

    def forward_row(self, row: Any, fresh: list[int], canvas: Tensor) -> Tensor:
        """(block, vocab) logits of `canvas` (block,) after `fresh` joins `row`."""
        raise NotImplementedError

    def forward(self, fresh: list[list[int]], canvas: Tensor) -> Tensor:
        out = [self.forward_row(self.state[b], fresh[b], canvas[b]) for b in range(len(fresh))]
        return torch.stack(out)[..., : self.vocab].float().cpu()

    def clear(self, row: int) -> None:
        self.state[row] = self.new_row()

    def move(self, src: int, dst: int) -> None:
        self.state[dst] = self.state[src]


class HFTokenizer:
    """A `transformers` tokenizer as a `TextCodec` (no special tokens added on encode)."""

    def __init__(self, tokenizer: Any) -> None:
        self.inner = tokenizer

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self.inner.encode(text, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.inner.decode(list(ids), skip_special_tokens=True))


def transformers() -> ModuleType:
    """The `transformers` module, imported on first use with an install hint on failure."""
    try:
        return importlib.import_module("transformers")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"the model adapters need transformers: {INSTALL_HINT}") from exc


def checkpoint_dir(path: str | Path) -> Path:
    """A local checkpoint directory holding `config.json`; raises AdapterError otherwise."""
    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise AdapterError(
            f"{directory} is not a local checkpoint directory (no config.json); adapters "
            "load only from disk and never download"
        )
    return directory


def load_tokenizer(directory: Path, trust_remote_code: bool) -> HFTokenizer:
    tok = transformers().AutoTokenizer.from_pretrained(
        directory, local_files_only=True, trust_remote_code=trust_remote_code
    )
    return HFTokenizer(tok)


def eos_ids_from(directory: Path, config: Any, defaults: Iterable[int] = ()) -> frozenset[int]:
    """EOS ids named by the config and `generation_config.json`, plus the family defaults
    that fit this model: inside its vocabulary and not its pad or BOS id. (A checkpoint
    whose tokenizer has the turn format's tokens gets no family defaults: its own ids
    are its vocabulary's, not the family's.)
    """
    ids: set[int] = set()
    sources: list[Any] = [config]
    if (directory / "generation_config.json").is_file():
        sources.append(
            transformers().GenerationConfig.from_pretrained(directory, local_files_only=True)
        )
    for source in sources:
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    vocab = getattr(config, "vocab_size", None)
    taken = {getattr(config, "pad_token_id", None), getattr(config, "bos_token_id", None)}
    ids.update(i for i in defaults if i not in taken and (not isinstance(vocab, int) or i < vocab))
    if not ids:
        raise AdapterError(f"{directory}: no eos_token_id in config or generation config")
    return frozenset(ids)


def decode_ids(
    mask_id: int,
    eos_ids: frozenset[int],
    never: frozenset[int],
    turn: TextTokenizer | None,
) -> DecodeIds:
    """The core's ids for a model: the turn format's `<eos>` ends first when the tokenizer
    has the turn tokens (and `<gap>`, `<bos>`, `<pad>` are then never emitted either)."""
    ends = sorted(eos_ids)
    pad = min(never | {mask_id})
    if turn is None:
        return DecodeIds(mask_id, tuple(ends), never | {mask_id}, pad)
    t = turn.ids
    ends = [t.eos, *(i for i in ends if i != t.eos)]
    never = never | {mask_id, t.pad, t.bos}
    return DecodeIds(mask_id, tuple(ends), frozenset(never), t.pad, t)


def turn_tokenizer_of(
    directory: Path, tokenizer: HFTokenizer, mask_id: int | None
) -> TextTokenizer | None:
    """The checkpoint's tokenizer as a `TextTokenizer` when it has every turn-format token
    (engine/tokenizer.py `Special`), else None. Raises AdapterError when it has them but
    its `<mask>` is not the model's mask id (the call grammar marks open positions with
    it)."""
    inner = getattr(tokenizer.inner, "backend_tokenizer", None)
    if inner is None:
        return None
    try:
        turn = TextTokenizer(inner)
    except ValueError:
        return None
    if mask_id is not None and turn.ids.mask != mask_id:
        raise AdapterError(
            f"{directory}: the tokenizer's <mask> is id {turn.ids.mask} but the model's mask "
            f"id is {mask_id}; a checkpoint for the agent must use one for both"
        )
    return turn


def max_positions(config: Any, default: int = 4096) -> int:
    """The longest sequence a config says its model takes (`default` when it says none)."""
    for name in ("max_position_embeddings", "max_sequence_length", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return default
