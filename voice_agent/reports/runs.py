"""Runs: the turn records of one JSON-lines file, under a label."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from voice_agent.turn_record import TurnRecord, read_jsonl


@dataclass(frozen=True, slots=True)
class Run:
    label: str
    records: tuple[TurnRecord, ...]
    path: Path | None = None

    @property
    def calls(self) -> int:
        return len({r.call_id for r in self.records})


def load_runs(paths: Sequence[Path], labels: Sequence[str] | None = None) -> list[Run]:
    """One run per file, labelled by `labels` (default: the file names without suffix).
    Raises ValueError for a label count that does not match, a duplicate label, an
    unreadable line (naming it) or a file without records; OSError for a missing file."""
    if labels and len(labels) != len(paths):
        raise ValueError(f"{len(labels)} labels for {len(paths)} record files")
    names = list(labels) if labels else [p.stem for p in paths]
    if len(set(names)) != len(names):
        raise ValueError(f"run labels must differ: {names} (use --label)")
    runs = []
    for name, path in zip(names, paths, strict=True):
        records = read_jsonl(path)
        if not records:
            raise ValueError(f"{path}: no turn records")
        runs.append(Run(name, tuple(records), path))
    return runs
