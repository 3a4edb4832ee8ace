"""``index.html``: a survey's page over its files and beam groups."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.search.report import REPORT_FILE, html_page
from drafts_ops.survey.files import file_out_dir

INDEX_FILE = "index.html"


def write_survey_index(out: Path, ledger: Any, groups: Sequence[Mapping[str, Any]]) -> Path:
    """``out/index.html``: every file of a survey with its state, candidates and report,
    and every beam group with its counts before and after coincidence."""
    rows = []
    for key, entry in sorted(ledger.entries.items()):
        report = file_out_dir(out, key) / REPORT_FILE
        link = (f'<a href="{report.relative_to(out).as_posix()}">report</a>'
                if report.exists() else "")  # fmt: skip
        rows.append(f"<tr><td style='text-align:left'>{html.escape(key)}</td>"
                    f"<td>{html.escape(entry.status)}</td><td>{entry.candidates}</td>"
                    f"<td>{html.escape(entry.error or '')}</td><td>{link}</td></tr>")  # fmt: skip
    group_rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(str(g['group']))}</td>"
        f"<td>{len(g['beams'])}</td><td>{html.escape(str(g['missing_beams']))}</td>"
        f"<td>{g['candidates_before']}</td><td>{g['candidates_after']}</td>"
        f"<td>{g['rfi_flagged']}</td></tr>"
        for g in groups
    )
    body = ("<h1>Survey</h1><h2>Files</h2><table class='sortable'><thead><tr><th>file</th>"
            "<th>state</th><th>candidates</th><th>error</th><th>report</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")  # fmt: skip
    if groups:
        heads = ("group", "beams", "missing", "candidates", "after coincidence", "flagged RFI")
        body += ("<h2>Beam groups</h2><table class='sortable'><thead><tr>"
                 + "".join(f"<th>{h}</th>" for h in heads)
                 + "</tr></thead><tbody>" + group_rows + "</tbody></table>")  # fmt: skip
    return write_text_atomic(out / INDEX_FILE, html_page("drafts-ops survey", body))
