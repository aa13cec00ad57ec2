"""Building the caller-hint banks (voice_agent/dialogue/hints.py) from the training data.

A bank is the simulator's training frames (voice_agent/brain/callers.py, slots filled
with fixed sample values) labelled with their dialogue acts, plus, from scheme /2 on, the
independently written training lines (`data/callers/train`, labelled by
`independent.hint_label`). Held-out frames and dev/test lines are never in it. The banks
are committed as files (`hints.bank_path`) so a running agent never imports the
simulator; after changing the training data, write them again:

    python -m voice_agent.brain.hint_bank        # rewrites data/hints/*.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from voice_agent.brain import callers
from voice_agent.brain.independent import hint_label, read_cases
from voice_agent.brain.phrasing import Pool
from voice_agent.dialogue.hints import BANKS, HINTS_V1, SCHEMES, bank_path

INDEPENDENT_TRAIN = Path(__file__).resolve().parents[2] / "data" / "callers" / "train"

SAMPLE_VALUES = {
    "svc": "a tune-up",
    "day": "friday",
    "time": "three pm",
    "vague": "in the morning",
    "name": "sam lee",
    "order": "4 5 1 2",
    "product": "a bike light",
    "pname": "city light",
    "qty": "two",
    "item": "1 1 0",
}
"""Slot values of the bank's frames: the act is what the hint is about, not the values."""

EDGE_POOLS = frozenset({"OPENERS", "CLOSERS"})
"""Greetings and politeness words composed around frames, not acts."""


def frames() -> list[tuple[str, str]]:
    """(training frame with sample values, act label) for every act pool in callers.py."""
    out: list[tuple[str, str]] = []
    for name, value in vars(callers).items():
        if name in EDGE_POOLS:
            continue
        if isinstance(value, Pool):
            out += [(with_sample_values(t), _label(name)) for t in value.train]
        elif isinstance(value, dict):
            for key, p in value.items():
                if isinstance(p, Pool):
                    # TRANSFER is keyed by the reason the call takes; BOOK etc. by slots
                    extra = key if isinstance(key, str) else ""
                    out += [(with_sample_values(t), _label(name, extra)) for t in p.train]
    return out


def independent_lines(directory: Path = INDEPENDENT_TRAIN) -> list[tuple[str, str]]:
    """(caller line, act label) for every independent training line whose act the
    simulator knows (`independent.hint_label`); none when the folder is absent."""
    cases = read_cases(sorted(directory.glob("*.jsonl"))) if directory.is_dir() else None
    out = [(c.line, label) for c in cases.lines if (label := hint_label(c))] if cases else []
    return sorted(set(out))


def with_sample_values(template: str) -> str:
    """`template` with SAMPLE_VALUES in its slots; KeyError naming an unknown slot."""

    def value(m: re.Match[str]) -> str:
        if m.group(1) not in SAMPLE_VALUES:
            raise KeyError(f"no sample value for slot {{{m.group(1)}}} in {template!r}")
        return SAMPLE_VALUES[m.group(1)]

    return re.sub(r"\{(\w+)\}", value, template)


def _label(name: str, extra: str = "") -> str:
    return " ".join((name.lower().replace("_", " "), extra)).strip()


def build_bank(scheme: str) -> list[tuple[str, str]]:
    """The bank of `scheme` (one of `hints.SCHEMES`) as the training data gives it."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown caller-hint scheme {scheme!r}; this code makes {SCHEMES}")
    return frames() + (independent_lines() if scheme != HINTS_V1 else [])


def write_bank(scheme: str, directory: Path = BANKS) -> Path:
    path = bank_path(scheme, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = (json.dumps({"text": t, "act": a}, ensure_ascii=False) for t, a in build_bank(scheme))
    path.write_text("".join(f"{row}\n" for row in rows), encoding="utf-8")
    return path


def main() -> int:
    for scheme in SCHEMES:
        print(write_bank(scheme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
