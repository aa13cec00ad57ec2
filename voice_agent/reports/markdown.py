"""The report document as Markdown (figures linked as PNG files beside it)."""

from __future__ import annotations

from collections.abc import Sequence

from voice_agent.reports.document import Block, Figure, Heading, Paragraph, Table


def render(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Table):
            out.append(_table(block))
        elif isinstance(block, Figure):
            out.append(f"![{block.caption}]({block.name})\n\n*{block.caption}*")
    return "\n\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(table: Table) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in table.headers) + " |"]
    lines.append("|" + "|".join(" --- " for _ in table.headers) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)
