"""`[models] llm`: the brain a process answers calls with, whichever model it is.

`embedded` is the shipped brain (engine/checkpoints/brain-dlm, or the synthetic stand-in
when it is absent). Any other value is a local folder: a checkpoint of the engine's own
model (`model_card.json`, `model.safetensors`, `tokenizer.json`) or an open diffusion LM
that `engine.adapters.load_adapter` knows from its own `config.json` (LLaDA, Dream, SDAR,
DiffusionGemma; `pip install -e ".[adapters]"`). Either way the engine decodes it through
the same core, so the call grammar, deadlines and batching hold for both. An open dLLM
answers calls only when its tokenizer carries the turn format's tokens (prompts/FORMAT.md):
that is, when it was fine-tuned for the agent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from engine.backend import BlockBackend
from engine.checkpoint import CARD, load
from engine.model import DiffusionLM
from engine.runtime import runtime_dtype
from engine.tokenizer import Special, SpecialIds, TextTokenizer
from voice_agent.agent import prompt_budget
from voice_agent.dialogue.format import MAX_PROMPT_TOKENS

log = logging.getLogger(__name__)

CHECKPOINTS_DIR = Path(__file__).resolve().parents[2] / "engine" / "checkpoints"
BRAIN_CHECKPOINT = CHECKPOINTS_DIR / "brain-dlm"
STAND_IN_CHECKPOINT = CHECKPOINTS_DIR / "synthetic-dlm"
"""Used when the brain checkpoint is not there yet (it is trained separately)."""
EMBEDDED = "embedded"


def resolve_checkpoint(llm: str) -> Path:
    """`[models] llm`: "embedded" is the shipped brain (or the synthetic stand-in when the
    brain is absent); anything else is a checkpoint folder."""
    if llm != EMBEDDED:
        return Path(llm)
    if BRAIN_CHECKPOINT.is_dir():
        return BRAIN_CHECKPOINT
    log.warning("no brain checkpoint at %s; using %s", BRAIN_CHECKPOINT, STAND_IN_CHECKPOINT)
    return STAND_IN_CHECKPOINT


@dataclass(frozen=True, slots=True)
class Brain:
    """What the engine and the agents need of a loaded brain."""

    model: DiffusionLM | BlockBackend
    """`engine.batching.Engine`'s first argument."""
    ids: SpecialIds | None
    """The shipped model's special ids (None for a backend, which knows its own)."""
    tokenizer: TextTokenizer
    prompt_hints: str
    """The caller-hint scheme it was trained with ("" for none)."""
    prompt_budget: int
    """The longest prompt the agent gives it."""
    kind: str
    """"engine" or the adapter family, for the log and /healthz."""


def load_brain(path: Path, device: str, rows: int) -> Brain:
    """Load `path` onto `device` with room for `rows` requests at once. Raises
    FileNotFoundError/ValueError saying what is wrong with the folder, AdapterError for
    an open dLLM that cannot be served."""
    if (path / CARD).is_file() or not (path / "config.json").is_file():
        ckpt = load(path, device)
        card = ckpt.card
        return Brain(ckpt.model, ckpt.tokenizer.ids, ckpt.tokenizer, card.prompt_hints,
                     prompt_budget(card), "engine")  # fmt: skip
    from engine.adapters import AdapterError, load_adapter  # needs the [adapters] extra

    adapter = load_adapter(path, device=device, dtype=runtime_dtype(device))
    if adapter.turn_tokenizer is None:
        raise AdapterError(
            f"{path}: the {adapter.name} checkpoint's tokenizer lacks the turn format's "
            f"tokens ({' '.join(Special.ALL)}); the agent's prompts and call grammar need "
            "a checkpoint fine-tuned with them (prompts/FORMAT.md)"
        )
    backend = adapter.backend(rows)
    budget = min(MAX_PROMPT_TOKENS, backend.max_seq_len // 2)
    return Brain(backend, None, adapter.turn_tokenizer, "", budget, adapter.name)
