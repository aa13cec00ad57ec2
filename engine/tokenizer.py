"""The project's byte-level BPE tokenizer (the `tokenizers` library), digits split.

Special tokens are named, never numbered, in code: `tok.ids.mask`, `tok.ids.eos`, ...
Digits are always single tokens, so an order number is copied digit by digit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


class Special:
    """The special tokens and their roles in the turn format (see prompts/FORMAT.md)."""

    PAD = "<pad>"
    MASK = "<mask>"
    BOS = "<bos>"
    EOS = "<eos>"
    GAP = "<gap>"
    """Fills the unused tail of a fixed-width value slot in a tool call (engine/constraints.py)."""
    SYSTEM = "<system>"
    CALLER = "<caller>"
    AGENT = "<agent>"
    TOOL_RESULT = "<result>"
    THINK = "<think>"
    SAY = "<say>"
    CALL = "<call>"
    EFFORT_INSTANT = "<effort:instant>"
    EFFORT_LOW = "<effort:low>"
    EFFORT_MEDIUM = "<effort:medium>"

    ALL = (
        PAD, MASK, BOS, EOS, GAP, SYSTEM, CALLER, AGENT, TOOL_RESULT, THINK, SAY, CALL,
        EFFORT_INSTANT, EFFORT_LOW, EFFORT_MEDIUM,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpecialIds:
    pad: int
    mask: int
    bos: int
    eos: int
    gap: int
    think: int
    say: int
    call: int

    def never_generated(self) -> tuple[int, ...]:
        """Ids the decoder must never commit into an answer."""
        return (self.pad, self.mask, self.bos)


class TextTokenizer:
    """Wraps a trained `tokenizers.Tokenizer` with named special ids."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        missing = [t for t in Special.ALL if tokenizer.token_to_id(t) is None]
        if missing:
            raise ValueError(f"tokenizer lacks special tokens {missing}")
        self.ids = SpecialIds(
            pad=self.id(Special.PAD),
            mask=self.id(Special.MASK),
            bos=self.id(Special.BOS),
            eos=self.id(Special.EOS),
            gap=self.id(Special.GAP),
            think=self.id(Special.THINK),
            say=self.id(Special.SAY),
            call=self.id(Special.CALL),
        )

    def id(self, token: str) -> int:
        value = self.tokenizer.token_to_id(token)
        if value is None:
            raise KeyError(f"unknown token {token!r}")
        return int(value)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=skip_special))

    def save(self, path: Path) -> None:
        self.tokenizer.save(str(path))

    @classmethod
    def load(cls, path: Path) -> TextTokenizer:
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 1024) -> TextTokenizer:
        """Train a byte-level BPE on `texts` with the special tokens reserved first."""
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(
                    pattern="|".join(_escape(t) for t in Special.ALL), behavior="isolated"
                ),
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(Special.ALL),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)


def _escape(token: str) -> str:
    return "".join("\\" + c if c in r"\.^$*+?{}[]|()" else c for c in token)
