"""Fixed phrases the agent says word for word, from prompts/phrases.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
PHRASES_FILE = PROMPTS_DIR / "phrases.toml"


@dataclass(frozen=True, slots=True)
class Phrases:
    greeting: str
    one_moment: str
    say_again: str
    goodbye: str
    anything_else: str
    out_of_scope: str
    transfer: str
    tool_failed: str

    def all(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


def load_phrases(path: Path = PHRASES_FILE) -> Phrases:
    """Read `[phrases]` from `path`. Raises ValueError naming a missing or extra key."""
    try:
        table = tomllib.loads(path.read_text())["phrases"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise ValueError(f"cannot read [phrases] from {path}: {exc}") from None
    names = {f.name for f in fields(Phrases)}
    if set(table) != names:
        raise ValueError(
            f"{path}: missing {sorted(names - set(table))}, unknown {sorted(set(table) - names)}"
        )
    return Phrases(**{k: str(v) for k, v in table.items()})


@cache
def phrases() -> Phrases:
    """The shipped phrases (read once)."""
    return load_phrases()
