"""The report document as one self-contained HTML page: figures inline as base64 PNGs,
styles inline, no external resource. Each figure's `<img>` has the id `fig-<name>`
(`fig-waterfall`, ...)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import PurePath

from voice_agent.reports.document import Block, Heading, Paragraph, Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 0.9em; }
"""


def figure_id(name: str) -> str:
    return f"fig-{PurePath(name).stem}"


def render(blocks: Sequence[Block], images: Mapping[str, bytes]) -> str:
    """`images`: each figure's PNG bytes by its name. Raises KeyError for a figure
    without one."""
    title = next((b.text for b in blocks if isinstance(b, Heading)), "Report")
    body = "\n".join(_block(b, images) for b in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _block(block: Block, images: Mapping[str, bytes]) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{escape(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{escape(block.text)}</p>"
    if isinstance(block, Table):
        head = "".join(f"<th>{escape(h)}</th>" for h in block.headers)
        rows = "".join(
            "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in block.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    data = base64.b64encode(images[block.name]).decode("ascii")
    return (
        f'<figure><img id="{figure_id(block.name)}" alt="{escape(block.caption)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{escape(block.caption)}'
        "</figcaption></figure>"
    )
