"""The architecture page names real files: every path in backticks exists, so a rename
that forgets docs/architecture.md fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:voice_agent|engine|tools|scripts|tests|data|deploy|docs)/[^`\s]*)`")


def test_every_path_the_architecture_page_names_exists() -> None:
    named = {match.group(1) for match in PATH.finditer(PAGE.read_text(encoding="utf-8"))}
    assert len(named) > 40  # the page is a map of the code
    missing = sorted(p for p in named if not (ROOT / p.split(" ")[0]).exists())
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_readme_points_to_the_page_in_this_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme and "../shared/" not in readme
