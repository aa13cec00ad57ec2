"""Check independent caller data against the label format (data/callers/LABELS.md).

    .venv/bin/python scripts/check_callers.py data/callers/train/*.jsonl

Prints a JSON tally per act and exits 0, or prints the first bad record (file:line and
why) and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from voice_agent.brain.independent import CaseError, read_cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        cases = read_cases(args.files)
    except CaseError as exc:
        print(f"check_callers: {exc}", file=sys.stderr)
        return 2
    acts = Counter(case.act.value for case in cases.lines)
    firsts = sum(case.after is None for case in cases.lines)
    tally = {
        "lines": len(cases.lines),
        "first_lines": firsts,
        "calls": len(cases.calls),
        "call_turns": sum(len(c.turns) for c in cases.calls),
        "acts": dict(acts.most_common()),
    }
    print(json.dumps(tally, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
