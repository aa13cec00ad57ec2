"""What every adapter offers, and the one place that imports `transformers`.

An adapter maps a third-party diffusion LM onto the engine's request/response shape:
prompt ids, a `Schedule` and a deadline in; a `Generation` out. Loading is always from a
local directory (`local_files_only=True`): no code path here downloads weights.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from engine.generate import Generation
from engine.schedule import Schedule

INSTALL_HINT = 'pip install -e ".[adapters]"'


class AdapterError(RuntimeError):
    """A checkpoint cannot be served by the adapter asked for (missing file, wrong family)."""


@dataclass(frozen=True, slots=True)
class Supports:
    """What an adapter can do beyond plain decoding, as the engine may rely on it."""

    kv_cache: bool
    """Committed blocks are encoded once; a step forwards only the current block."""
    constraints: bool
    """Banned-token masks (schema scaffolds, enums) can be applied to its logits."""
    batching: bool
    """Several requests can share one forward (step-level batching)."""


CACHED = Supports(kv_cache=True, constraints=False, batching=False)
UNCACHED = Supports(kv_cache=False, constraints=False, batching=False)


class TextCodec(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...


class Adapter(Protocol):
    """A diffusion LM behind the engine's request/response interface."""

    @property
    def name(self) -> str: ...
    @property
    def tokenizer(self) -> TextCodec: ...
    @property
    def mask_id(self) -> int | None:
        """The mask token id, or None for a model whose canvas starts as noise, not masks."""
        ...

    @property
    def eos_ids(self) -> frozenset[int]: ...
    @property
    def block_length(self) -> int:
        """Tokens per block (canvas); answers end at block boundaries on length/deadline."""
        ...

    @property
    def supports(self) -> Supports: ...

    def generate(
        self,
        prompt_ids: list[int],
        schedule: Schedule,
        deadline_s: float | None,
        clock: Callable[[], float],
    ) -> Generation:
        """Decode one answer; `deadline_s` is on `clock`. Never returns an empty answer.

        Raises ValueError for an empty prompt.
        """
        ...


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
    that fit this model: inside its vocabulary and not its pad or BOS id.
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
