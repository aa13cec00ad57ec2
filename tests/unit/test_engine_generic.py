"""The engine knows no business and no caller English: no file under engine/ names a
shop word (a service, a product, a day word, the shop itself) or carries the caller
word lists the grounder uses (voice_agent/grounding)."""

from __future__ import annotations

import re
from pathlib import Path

from tools.bike_shop.catalogue import PRODUCTS, SERVICES
from voice_agent.grounding import names, said
from voice_agent.grounding.ground import NUMBER_WORDS

ENGINE = Path(__file__).resolve().parents[2] / "engine"
SHOP_WORDS = {
    "bike", "shop", "tyre", "tire", "workshop", "tomorrow", "booking",
    *(s.name for s in SERVICES), *(p.name for p in PRODUCTS),
}  # fmt: skip


def engine_text() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8").lower() for p in sorted(ENGINE.rglob("*.py"))}


def test_no_engine_file_names_a_shop_word() -> None:
    found = {
        f"{path.relative_to(ENGINE)}: {word}"
        for path, text in engine_text().items()
        for word in SHOP_WORDS
        if re.search(rf"\b{re.escape(word.lower())}\b", text)
    }
    assert not found


def test_the_caller_word_lists_live_with_the_grounder() -> None:
    lists = {
        "NUMBER_WORDS": NUMBER_WORDS,
        "FRAME_WORDS": said.FRAME_WORDS,
        "COUNT_WORDS": frozenset(said.COUNT_WORDS),
        "NOT_NAMES": names.NOT_NAMES,
        "FUNCTION_WORDS": names.FUNCTION_WORDS,
    }
    for path, text in engine_text().items():
        for name, words in lists.items():
            assert name.lower() not in text, f"{path}: {name}"
            # a word list copied under another name: most of its words in one file
            quoted = {w for w in words if f'"{w}"' in text}
            assert len(quoted) < len(words) / 2, f"{path} copies {name}: {sorted(quoted)[:8]}"
    assert not (ENGINE / "lexicon").exists()
