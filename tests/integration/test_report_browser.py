"""The HTML report in a real browser (headless Chromium, Debian `chromium`): every
figure decodes to an image of its drawn size, and a screenshot shows the plots."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from voice_agent.reports.html import figure_id
from voice_agent.reports.plots import FIGURES
from voice_agent.reports.report import write_report
from voice_agent.reports.runs import load_runs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_TIMEOUT_S = 60
WIDTH, HEIGHT = 1200, 6000
PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.querySelectorAll("img")) {
    img.setAttribute("data-natural", img.complete ? img.naturalWidth + "x" + img.naturalHeight
                                                  : "incomplete");
  }
});
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S,
                          check=True)  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    runs = load_runs([FIXTURES / "tiny-en.jsonl", FIXTURES / "base.jsonl"], ["tiny.en", "base"])
    return write_report(runs, tmp_path_factory.mktemp("report")).html


def test_every_figure_loads_in_the_browser_at_its_drawn_size(report: Path) -> None:
    probed = report.with_name("probed.html")
    probed.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", probed.as_uri()).stdout
    for name, _, _ in FIGURES:
        tag = re.search(rf'<img[^>]*id="{figure_id(name)}"[^>]*>', dom)
        assert tag is not None, name
        natural = re.search(r'data-natural="(\d+)x(\d+)"', tag.group(0))
        assert natural is not None, tag.group(0)[:200]
        with (report.parent / name).open("rb") as png:
            header = png.read(24)
        drawn = (int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big"))
        assert (int(natural.group(1)), int(natural.group(2))) == drawn, name


def test_a_screenshot_shows_the_plots(report: Path) -> None:
    from PIL import Image

    shot = report.with_name("screenshot.png")
    chromium(f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", report.as_uri())
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # Plot colours are saturated; the page itself is black, grey and white.
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    colored_rows = np.flatnonzero((saturation > 80).sum(axis=1) > 20)
    assert colored_rows.size > 600  # hundreds of rows of coloured bars and histograms
    # ...spread over the page, not one stray strip: three figures, one under another.
    assert colored_rows.max() - colored_rows.min() > 1500
