"""`voice-agent report`: turn records in, a latency budget report out.

    write_report(load_runs([Path("out/demo-turns.jsonl")]), Path("out/report"))

writes `report.md` (figures linked), `report.html` (self-contained) and one PNG per
figure into the folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from voice_agent.reports import document, html, markdown, plots
from voice_agent.reports.runs import Run

MARKDOWN = "report.md"
HTML = "report.html"


@dataclass(frozen=True, slots=True)
class ReportFiles:
    markdown: Path
    html: Path
    figures: tuple[Path, ...]


def write_report(runs: Sequence[Run], out_dir: Path) -> ReportFiles:
    """Raises ValueError without runs, OSError when the folder cannot be written,
    ImportError (naming the extra) without matplotlib."""
    if not runs:
        raise ValueError("no runs to report")
    out_dir.mkdir(parents=True, exist_ok=True)
    images = {name: draw(runs) for name, draw, _ in plots.FIGURES}
    figures = [document.Figure(name, caption) for name, _, caption in plots.FIGURES]
    blocks = document.build(runs, figures)
    paths = []
    for name, png in images.items():
        (out_dir / name).write_bytes(png)
        paths.append(out_dir / name)
    md, page = out_dir / MARKDOWN, out_dir / HTML
    md.write_text(markdown.render(blocks), encoding="utf-8")
    page.write_text(html.render(blocks, images), encoding="utf-8")
    return ReportFiles(md, page, tuple(paths))
