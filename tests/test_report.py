"""report.html of a search and index.html of a survey: self-contained, readable."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from drafts_ops.core.resources import resource_path
from drafts_ops.search import SearchConfig, run_search


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags, self.images, self.links, self.rows = set(), [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag in ("a", "link", "script") and (attrs.get("href") or attrs.get("src")):
            self.links.append(attrs.get("href") or attrs.get("src"))
        if tag == "tr":
            self.rows += 1


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = run_search(resource_path("data", "demo.fil"), out,
                        SearchConfig(dm_max=1000.0, max_outputs=3))  # fmt: skip
    return out, result


def test_search_report_is_self_contained(demo_report):
    out, result = demo_report
    path = result.outputs["report"]
    assert path == out / "report.html"
    page = _Tags()
    page.feed(path.read_text())
    assert {"html", "table", "img", "script", "th"} <= page.tags
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    assert not [u for u in page.links if "://" in u]  # nothing external
    thumbs = [u for u in page.links if u.startswith("plots/")]
    assert thumbs and all((out / u).exists() for u in thumbs)  # thumbnails link to PNGs
    assert page.rows >= len(result.candidates) + 1
    assert "report.html" in (out / "DONE.json").read_text()


def test_writing_the_report_is_timed_as_a_stage_of_the_search(demo_report):
    """The page is part of what a search costs: perf.json's last stage, in the total wall
    and real-time factor; the page itself shows the stages before it."""
    import json

    out, _ = demo_report
    doc = json.loads((out / "perf.json").read_text())
    names = [s["name"] for s in doc["stages"]]
    assert names[-1] == "report" and doc["stages"][-1]["wall_s"] > 0
    assert doc["total"]["wall_s"] == pytest.approx(sum(s["wall_s"] for s in doc["stages"]))
    assert "wall before this page" in (out / "report.html").read_text()


def test_report_renders_in_chromium(demo_report, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    out, _ = demo_report
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--window-size=1200,1600", f"--screenshot={shot}",
         (out / "report.html").as_uri()],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "Uncaught" in line or "Error" in line], console
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1200) and pixels[..., :3].std() > 0.05


def test_survey_index_lists_files_and_links_reports(prefect_harness, tmp_path):
    import numpy as np
    from flowdata import SEARCH, write_observation

    from drafts_ops.search.config import SearchOptions
    from drafts_ops.survey.options import SurveyOptions
    from flows.survey import survey_flow

    incoming = tmp_path / "in"
    incoming.mkdir()
    write_observation(incoming / "a.fil", np.random.default_rng(1), dm=100.0, t_s=2.0)
    summary = survey_flow(str(incoming), str(tmp_path / "out"),
                          SurveyOptions(settle_s=0), SearchOptions(**SEARCH))  # fmt: skip
    index = Path(summary["index"])
    page = _Tags()
    page.feed(index.read_text())
    assert "a.fil" in index.read_text() and "files/a.fil/report.html" in page.links
    assert (index.parent / "files" / "a.fil" / "report.html").exists()


def test_masked_channels_figure_puts_masked_channels_at_their_frequencies():
    """Descending channels (as most files store them), the top 20 % masked: the fill
    lies in the right-hand part of the axes only, over the masked frequencies."""
    import base64
    import io

    import matplotlib.image
    import numpy as np

    from drafts_ops.search.report import channel_edges, masked_channels_figure

    freqs = 1500.0 - np.arange(1024) * (500.0 / 1024)
    masked = np.where(freqs > 1400.0, 1.0, 0.0)
    uri = masked_channels_figure(masked, freqs)
    png = base64.b64decode(uri.split(",", 1)[1])
    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    fill = np.all(np.abs(rgb - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.05, axis=2)
    columns = np.flatnonzero(fill.any(axis=0))
    assert columns.size > 0
    # axes from x = 0.08 to 0.98 of the width over 1000-1500 MHz (+ matplotlib's margins)
    width = rgb.shape[1]
    left_edge_mhz = 1000.0 + (columns.min() / width - 0.08) / 0.9 * 500.0
    assert 1350.0 < left_edge_mhz < 1420.0
    np.testing.assert_allclose(channel_edges(np.array([1000.0, 1001.0, 1003.0])),
                               [999.5, 1000.5, 1002.0, 1004.0])  # fmt: skip
