"""``index.html``: a survey's page, readable from the file system without a server.

It counts the files by state (searched, quarantined, unusable, failed, running or
interrupted, waiting to settle), lists every candidate of every searched file and beam
in one table (sortable by any column; filtered by S/N, DM, classifier probability, beam
and file as one types) with links to its file's report and its PNG, then the files and
the beam groups.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.detect.writers import arrival_key, products_by_arrival, read_csv
from drafts_ops.search.report import REPORT_FILE, html_page
from drafts_ops.survey.beams import beam_of
from drafts_ops.survey.files import file_out_dir

INDEX_FILE = "index.html"
#: The states counted at the top of the page, in order, and how they are named there.
STATE_NAMES = {"done": "searched", "quarantined": "quarantined", "unusable": "unusable",
               "failed": "failed", "running": "running or interrupted"}  # fmt: skip

#: Filters of the candidates table: (input id, label, column index, test).
_FILTERS = (("snr", "S/N ≥", 3, "min"), ("dmlo", "DM ≥", 2, "min"), ("dmhi", "DM ≤", 2, "max"),
            ("prob", "P(burst) ≥", 5, "min"), ("beam", "beam", 1, "text"),
            ("file", "file contains", 0, "text"))  # fmt: skip

_FILTER_JS = """
function drafts_filter(){
  var tests = [%s];
  document.querySelectorAll('#candidates tbody tr').forEach(function(row){
    var show = tests.every(function(t){
      var v = document.getElementById(t[0]).value.trim(); if (v === '') return true;
      var cell = row.cells[t[1]], x = cell.dataset.v || cell.textContent;
      if (t[2] === 'text') return x.toLowerCase().indexOf(v.toLowerCase()) >= 0;
      var p = parseFloat(x), q = parseFloat(v); if (isNaN(q)) return true;
      if (isNaN(p)) return false;
      return t[2] === 'min' ? p >= q : p <= q;
    });
    row.style.display = show ? '' : 'none';
  });
  var shown = document.querySelectorAll('#candidates tbody tr:not([style*="none"])').length;
  document.getElementById('shown').textContent = shown;
}
document.querySelectorAll('.filters input').forEach(function(i){
  i.addEventListener('input', drafts_filter);
});
"""


def write_survey_index(
    out: Path, ledger: Any, groups: Sequence[Mapping[str, Any]], *,
    waiting: Sequence[str] = (), beam_pattern: str | None = None,
) -> Path:  # fmt: skip
    """``out/index.html`` for the survey in ``out``: ``ledger``'s files, their candidates,
    the beam ``groups``, and the ``waiting`` files (not yet settled)."""
    rows = candidate_rows(out, ledger, beam_pattern)
    body = (f"<h1>Survey</h1>{_state_counts(ledger, waiting)}"
            f"<h2>Candidates (<span id='shown'>{len(rows)}</span> of {len(rows)} shown)</h2>"
            f"{_filters()}{_candidates_table(rows)}<h2>Files</h2>{_files_table(out, ledger)}"
            f"{_groups_table(groups)}<script>{_filter_script()}</script>")  # fmt: skip
    return write_text_atomic(out / INDEX_FILE, html_page("drafts-ops survey", body))


def candidate_rows(out: Path, ledger: Any, beam_pattern: str | None = None) -> list[dict]:
    """Every candidate of the survey's searched files, with its file, beam and links
    (relative to ``out``)."""
    rows = []
    for key, entry in sorted(ledger.entries.items()):
        if entry.status != "done" or not entry.candidates_file:
            continue
        path = out / entry.candidates_file
        if not path.exists():
            continue
        folder = file_out_dir(out, key)
        pngs = products_by_arrival(folder / "plots", ".png")
        beam = beam_of(key, beam_pattern) if beam_pattern else beam_of(key)
        for cand in read_csv(path):
            png = pngs.get(arrival_key(cand))
            rows.append({"file": key, "beam": "" if beam is None else str(beam), "cand": cand,
                         "report": _relative(folder / REPORT_FILE, out),
                         "png": _relative(png, out) if png else None})  # fmt: skip
    rows.sort(key=lambda r: -r["cand"].snr)
    return rows


def _relative(path: Path | None, out: Path) -> str | None:
    if path is None or not path.exists():
        return None
    return path.relative_to(out).as_posix()


def _state_counts(ledger: Any, waiting: Sequence[str]) -> str:
    counts = dict.fromkeys(STATE_NAMES, 0)
    for entry in ledger.entries.values():
        counts[entry.status] = counts.get(entry.status, 0) + 1
    parts = [f"<b>{counts[s]}</b> {name}" for s, name in STATE_NAMES.items()]
    parts.append(f"<b>{len(waiting)}</b> waiting to settle")
    return f"<p class='counts'>{len(ledger.entries)} files in the ledger: {', '.join(parts)}.</p>"


def _filters() -> str:
    inputs = "".join(f"<label>{html.escape(label)} <input id='{name}' size='8'></label> "
                     for name, label, _, _ in _FILTERS)  # fmt: skip
    return f"<p class='filters'>{inputs}</p>"


def _filter_script() -> str:
    tests = ",".join(f"['{name}',{column},'{kind}']" for name, _, column, kind in _FILTERS)
    return _FILTER_JS % tests


def _candidates_table(rows: list[dict]) -> str:
    heads = ("file", "beam", "DM", "S/N", "t (s)", "P(burst)", "width (ms)", "links")
    body = []
    for r in rows:
        c = r["cand"]
        prob = "" if c.classifier_prob is None else f"{c.classifier_prob:.3f}"
        links = [f'<a href="{html.escape(r["report"])}">report</a>'] if r["report"] else []
        if r["png"]:
            links.append(f'<a href="{html.escape(r["png"])}">plot</a>')
        body.append(
            f"<tr class='{'burst' if c.is_burst else 'other'}'>"
            f"<td style='text-align:left'>{html.escape(r['file'])}</td><td>{r['beam']}</td>"
            f"<td data-v='{c.dm:.3f}'>{c.dm:.1f}</td><td data-v='{c.snr:.3f}'>{c.snr:.1f}</td>"
            f"<td data-v='{c.tcand_s:.6f}'>{c.tcand_s:.4f}</td><td>{prob}</td>"
            f"<td>{c.width_s * 1e3:.2f}</td><td>{' '.join(links)}</td></tr>"
        )
    return ("<table id='candidates' class='sortable'><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in heads)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")  # fmt: skip


def _files_table(out: Path, ledger: Any) -> str:
    rows = []
    for key, entry in sorted(ledger.entries.items()):
        report = _relative(file_out_dir(out, key) / REPORT_FILE, out)
        link = f'<a href="{html.escape(report)}">report</a>' if report else ""
        state = STATE_NAMES.get(entry.status, entry.status)
        rows.append(f"<tr><td style='text-align:left'>{html.escape(key)}</td>"
                    f"<td>{html.escape(state)}</td><td>{entry.candidates}</td>"
                    f"<td>{html.escape(entry.error or '')}</td><td>{link}</td></tr>")  # fmt: skip
    return ("<table class='sortable'><thead><tr><th>file</th><th>state</th><th>candidates</th>"
            "<th>error</th><th>report</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")  # fmt: skip


def _groups_table(groups: Sequence[Mapping[str, Any]]) -> str:
    if not groups:
        return ""
    heads = ("group", "beams", "missing", "candidates", "after coincidence", "flagged RFI")
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(str(g['group']))}</td>"
        f"<td>{len(g['beams'])}</td><td>{html.escape(str(g['missing_beams']))}</td>"
        f"<td>{g['candidates_before']}</td><td>{g['candidates_after']}</td>"
        f"<td>{g['rfi_flagged']}</td></tr>"
        for g in groups
    )
    return ("<h2>Beam groups</h2><table class='sortable'><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in heads)
            + "</tr></thead><tbody>" + rows + "</tbody></table>")  # fmt: skip
