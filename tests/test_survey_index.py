"""The survey's ``index.html``: state counts, every candidate of every file and beam with
its links, sorting and filtering in Chromium from the file system."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from flowdata import SEARCH, write_observation

from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.options import SurveyOptions
from drafts_ops.survey.sequence import SerialSurveyRunner, run_survey


class _Page(HTMLParser):
    """Links and the candidates table's rows (cells' text) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links, self.rows, self.hidden = [], [], []
        self._table = self._row = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "table":
            self._table = attrs.get("id")
        if tag == "tr" and self._table == "candidates":
            self._row = []
            self.hidden.append("none" in (attrs.get("style") or ""))
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None:
            if self._row:
                self.rows.append(self._row)
            else:
                self.hidden.pop()  # the header row
            self._row = None
        if tag == "table":
            self._table = None


@pytest.fixture(scope="module")
def survey(tmp_path_factory):
    """Two beams of one pointing with a burst each, and a broken file."""
    tmp = tmp_path_factory.mktemp("survey")
    incoming = tmp / "incoming"
    incoming.mkdir()
    rng = np.random.default_rng(4)
    write_observation(incoming / "obs_M01_0001.fil", rng, dm=120.0, t_s=2.0)
    write_observation(incoming / "obs_M02_0001.fil", rng, dm=200.0, t_s=3.5)
    (incoming / "obs_M03_0001.fil").write_bytes(b"HEADER_START broken")
    out = tmp / "out"
    search = SearchOptions(**{**SEARCH, "write_plots": True, "classify": False})
    summary = run_survey(incoming, out, SurveyOptions(settle_s=0), search,
                         runner=SerialSurveyRunner())  # fmt: skip
    return out, summary


def test_the_page_counts_states_and_lists_every_candidate_with_links(survey):
    out, summary = survey
    text = (out / "index.html").read_text()
    page = _Page()
    page.feed(text)
    assert "<b>2</b> searched" in text and "<b>1</b> quarantined" in text
    assert summary["searched"] == 2 and len(summary["quarantined"]) == 1
    files = {row[0] for row in page.rows}
    beams = {row[1] for row in page.rows}
    assert files == {"obs_M01_0001.fil", "obs_M02_0001.fil"} and beams == {"1", "2"}
    assert len(page.rows) == summary["candidates_total"]
    assert [float(r[3]) for r in page.rows] == sorted((float(r[3]) for r in page.rows),
                                                      reverse=True)  # fmt: skip
    assert page.links and all((out / link).exists() for link in page.links)
    assert any(link.endswith(".png") for link in page.links)


def _chromium_dom(page: Path, script: str) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000",
         "--dump-dom", probe.as_uri()],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    probe.unlink()
    return done.stdout


def test_sorting_and_filtering_work_in_chromium(survey):
    out, _ = survey
    # click S/N once (ascending), then keep DM >= 150 only
    dom = _chromium_dom(
        out / "index.html",
        """
        var th = document.querySelectorAll('#candidates th')[3]; th.click();
        var dm = document.getElementById('dmlo'); dm.value = '150';
        dm.dispatchEvent(new Event('input'));""",
    )
    page = _Page()
    page.feed(dom)
    snrs = [float(r[3]) for r in page.rows]
    assert snrs == sorted(snrs)  # ascending after one click
    shown = [r for r, hidden in zip(page.rows, page.hidden, strict=True) if not hidden]
    assert shown and all(float(r[2]) >= 150 for r in shown)
    assert len(shown) < len(page.rows)
    count = re.search(r"<span id=\"shown\">(\d+)</span>", dom)
    assert count and int(count.group(1)) == len(shown)
