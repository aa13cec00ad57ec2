"""Generate simulated bike-shop phone calls as JSON lines (one dialogue per line).

    python scripts/make_dialogues.py --seed 1 --dialogues 2000 --split train --out data/train.jsonl

Each line: id, split, the shop clock `now`, intents, turns, the caller frames and values
used, and `examples` (one per agent action: step, intent, effort, reasoning, rendered
prompt, answer text, call). Prints counts per intent, tool and tool-error kind to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from voice_agent.brain.dialogues import Dialogue
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate
from voice_agent.dialogue.format import AgentCall, AgentSay, ToolResultTurn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--dialogues", type=int, required=True, help="how many calls (> 0)")
    parser.add_argument("--split", choices=[s.value for s in Split], required=True)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines file to write")
    args = parser.parse_args(argv)
    if args.dialogues <= 0:
        parser.error(f"--dialogues must be positive, got {args.dialogues}")
    if args.out.exists() and args.out.is_dir():
        parser.error(f"--out {args.out} is a directory")
    return args


def summarize(dialogues: list[Dialogue]) -> dict[str, Counter[str]]:
    """Counts per intent, tool called, tool error kind and action kind."""
    counts: dict[str, Counter[str]] = {k: Counter() for k in ("intents", "tools", "errors",
                                                               "actions")}  # fmt: skip
    for d in dialogues:
        counts["intents"].update(i.value for i in d.intents)
        for turn in d.turns:
            if isinstance(turn, AgentCall):
                counts["tools"][turn.tool] += 1
            elif isinstance(turn, ToolResultTurn) and turn.error:
                counts["errors"][turn.error] += 1
        for ex in d.examples:
            counts["actions"]["call" if isinstance(ex.action, AgentCall) else "say"] += 1
            counts["actions"][f"effort {ex.effort.value}"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    dialogues: list[Dialogue] = []
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as f:  # opened first: a bad path fails before the work
            for d in generate(args.seed, args.dialogues, Split(args.split)):
                dialogues.append(d)
                f.write(json.dumps(d.to_json()) + "\n")
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    examples = [ex for d in dialogues for ex in d.examples]
    prompt_chars = sum(len(ex.prompt()) for ex in examples) / len(examples)
    answer_chars = sum(len(ex.answer().full_text) for ex in examples) / len(examples)
    says = sum(isinstance(ex.action, AgentSay) for ex in examples)
    print(f"{len(dialogues)} dialogues, {len(examples)} examples ({says} say) -> {args.out} "
          f"in {time.monotonic() - started:.1f} s")  # fmt: skip
    print(f"mean prompt {prompt_chars:.0f} chars, mean answer {answer_chars:.0f} chars")
    for name, counter in summarize(dialogues).items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
