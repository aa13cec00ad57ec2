"""Write voice_agent/grounding/lexicon/common_words.txt.gz: the lower-case words of
English dictionaries.

    python scripts/make_common_words.py [DICT ...]

The default sources are the Debian word lists `wamerican` and `wbritish` (SCOWL size 50;
their copyright notice is in voice_agent/grounding/lexicon/NOTICE). A word is kept when
its dictionary entry is all lower case and alphabetic: "grace", "will" and "smith" are
common words there, "Rahul" and "Dubois" are not. A name slot uses the list to tell a caller's name
from the words around it (voice_agent/grounding/names.py). Deterministic: sorted, gzip
without a time stamp, so the same sources give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "voice_agent" / "grounding" / "lexicon" / "common_words.txt.gz"
SOURCES = (Path("/usr/share/dict/american-english"), Path("/usr/share/dict/british-english"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sources", nargs="*", type=Path, default=list(SOURCES))
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    words: set[str] = set()
    for source in args.sources:
        try:
            lines = source.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            sys.exit(f"make_common_words: cannot read {source}: {exc} "
                     "(Debian: apt-get install wamerican wbritish)")  # fmt: skip
        words |= {w for w in (line.strip() for line in lines) if w.isalpha() and w.islower()}
    if not words:
        sys.exit("make_common_words: no lower-case words in the sources")
    data = ("\n".join(sorted(words)) + "\n").encode()
    args.out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{len(words)} words -> {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
