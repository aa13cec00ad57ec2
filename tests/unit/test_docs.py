"""The pages in docs/ name real files: every path in backticks exists, so a rename that
forgets a page fails here; the README links every page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_path_a_page_names_exists_and_the_readme_links_it(page: Path) -> None:
    named = {match.group(1) for match in PATH.finditer(page.read_text(encoding="utf-8"))}
    missing = sorted(p for p in named if not _exists(p))
    assert missing == [], f"{page.name} names paths or tests that do not exist: {missing}"
    assert f"docs/{page.name}" in (ROOT / "README.md").read_text(encoding="utf-8")


def _exists(named: str) -> bool:
    """A path exists; a `file.py::test_name` is a test defined in that file."""
    path, _, test = named.split(" ")[0].partition("::")
    if not (ROOT / path).exists():
        return False
    return not test or f"def {test}(" in (ROOT / path).read_text(encoding="utf-8")
