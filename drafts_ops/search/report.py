"""``report.html``: a self-contained page a person wants to look at after a search.

One file, no external URL: the candidate table (sortable by a click on a column), a
thumbnail of each candidate's DM-time cutout (linking to its PNG where one was drawn), a
time-DM scatter of all candidates sized by S/N, the channels the search masked, and the
stage timings of ``perf.json``. Images are inline PNG ``data:`` URIs.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.hardware import KERNELS_COMPILING
from drafts_ops.detect.candidates import Candidate
from drafts_ops.search.stages import load_cutouts

REPORT_FILE = "report.html"

_STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:right}th{background:#eee;cursor:pointer}tr.burst{background:#eef8ee}
img.thumb{width:64px;height:64px;image-rendering:pixelated}.note{color:#555}
"""

_SORT = """
document.querySelectorAll('table.sortable th').forEach(function(th){
  var i = th.cellIndex;
  th.addEventListener('click', function(){
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var up = th.dataset.up !== '1'; th.dataset.up = up ? '1' : '0';
    rows.sort(function(a, b){
      var x = a.cells[i].dataset.v || a.cells[i].textContent,
          y = b.cells[i].dataset.v || b.cells[i].textContent;
      var p = parseFloat(x), q = parseFloat(y);
      var c = (isNaN(p) || isNaN(q)) ? x.localeCompare(y) : p - q;
      return up ? c : -c;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float, height: float):
    # matplotlib is imported when a page is drawn, not with the search (~0.5 s)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=80)
    FigureCanvasAgg(fig)
    return fig


def thumbnail(image: np.ndarray, size: int = 64) -> str:
    """A small grey-scale PNG ``data:`` URI of a 2-D image (block-averaged to ``size``)."""
    import matplotlib.image  # lazy: see _figure

    a = np.asarray(image, np.float32)
    fy, fx = max(1, a.shape[0] // size), max(1, a.shape[1] // size)
    a = a[: a.shape[0] // fy * fy, : a.shape[1] // fx * fx]
    a = a.reshape(a.shape[0] // fy, fy, a.shape[1] // fx, fx).mean(axis=(1, 3))
    lo, hi = np.percentile(a, [1, 99.5]) if a.size else (0, 1)
    buf = io.BytesIO()
    matplotlib.image.imsave(buf, np.clip((a - lo) / max(hi - lo, 1e-9), 0, 1), cmap="magma",
                            format="png", origin="lower")  # fmt: skip
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def scatter(candidates: Sequence[Candidate], tobs_s: float, dm_max: float) -> str:
    """Time-DM scatter of candidates, marker area by S/N, bursts in colour."""
    fig = _figure(9, 3.4)
    ax = fig.add_axes((0.08, 0.16, 0.9, 0.76))
    if candidates:
        t = np.array([c.tcand_s for c in candidates])
        dm = np.array([c.dm for c in candidates])
        snr = np.array([c.snr for c in candidates])
        burst = np.array([bool(c.is_burst) for c in candidates])
        ax.scatter(t[~burst], dm[~burst], s=4 * snr[~burst], c="0.6", label="other")
        ax.scatter(t[burst], dm[burst], s=4 * snr[burst], c="C3", label="burst (classifier)")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xlim(0, tobs_s)
    ax.set_ylim(0, dm_max * 1.02 + 1)
    ax.set_xlabel("time (s, top of band)")
    ax.set_ylabel("DM (pc cm$^{-3}$)")
    return _png(fig)


def masked_channels_figure(masked: np.ndarray, freqs_mhz: np.ndarray) -> str:
    """Fraction of blocks in which each channel was masked, against frequency (MHz).

    Drawn as one filled step outline over the channels' edges: a bar per channel costs
    matplotlib a patch each (1.2-1.6 s for 1024 channels, more than the rest of the
    report)."""
    fig = _figure(9, 1.8)
    ax = fig.add_axes((0.08, 0.3, 0.9, 0.6))
    order = np.argsort(freqs_mhz)
    freqs = np.asarray(freqs_mhz, np.float64)[order]
    ax.stairs(np.asarray(masked, np.float64)[order], channel_edges(freqs), fill=True,
              color="C0")  # fmt: skip
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("frequency (MHz)")
    ax.set_ylabel("masked")
    return _png(fig)


def channel_edges(freqs_mhz: np.ndarray) -> np.ndarray:
    """Edges (MHz) of channels centred on increasing ``freqs_mhz``: midway between
    neighbours, the outer ones half a neighbour spacing out (1 MHz wide for one channel)."""
    f = np.asarray(freqs_mhz, np.float64)
    if f.size == 1:
        return np.array([f[0] - 0.5, f[0] + 0.5])
    inner = 0.5 * (f[1:] + f[:-1])
    return np.concatenate([[f[0] - (inner[0] - f[0])], inner, [f[-1] + (f[-1] - inner[-1])]])


def _cell(value: Any, shown: str | None = None) -> str:
    text = html.escape(shown if shown is not None else str(value))
    return f'<td data-v="{html.escape(str(value))}">{text}</td>'


def write_search_report(
    out: Path,
    plan: Any,
    *,
    candidates: Sequence[Candidate],
    outputs: Mapping[str, Path],
    perf: Any,
    cutouts: Path | None = None,
    masked: np.ndarray | None = None,
) -> Path:
    """Write ``out/report.html`` for a finished search (see the module docstring)."""

    _, dm_time = load_cutouts(cutouts)
    header = plan.header
    pngs = {int(k.split(":")[1]): Path(v) for k, v in outputs.items() if k.startswith("png:")}
    rows = []
    for i, c in enumerate(candidates):
        thumb = ""
        if i < dm_time.shape[0]:
            img = f'<img class="thumb" src="{thumbnail(dm_time[i])}" alt="DM-time {i}">'
            link = pngs.get(i)
            thumb = f'<a href="{link.relative_to(out).as_posix()}">{img}</a>' if link else img
        prob = "" if c.classifier_prob is None else f"{c.classifier_prob:.2f}"
        cells = [_cell(i), _cell(c.tcand_s, f"{c.tcand_s:.4f}"), _cell(c.dm, f"{c.dm:.1f}"),
                 _cell(c.snr, f"{c.snr:.1f}"), _cell(c.width_s, f"{c.width_s * 1e3:.2f}"),
                 _cell(c.members), _cell(prob), _cell(c.is_burst if c.is_burst is not None else ""),
                 f"<td>{thumb}</td>"]  # fmt: skip
        rows.append(f'<tr class="{"burst" if c.is_burst else ""}">{"".join(cells)}</tr>')
    heads = ["#", "time (s)", "DM", "S/N", "width (ms)", "members", "P(burst)", "burst",
             "DM-time"]  # fmt: skip
    table = ('<table class="sortable"><thead><tr>' + "".join(f"<th>{h}</th>" for h in heads)
             + "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table>")  # fmt: skip
    perf_rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(s.name)}</td><td>{s.wall_s:.2f}</td>"
        f"<td>{s.cpu_s:.2f}</td><td>{s.peak_rss_mib:.0f}</td></tr>"
        for s in perf.stages
    )
    bursts = sum(bool(c.is_burst) for c in candidates)
    masked_html = ""
    if masked is not None and masked.size:
        names = np.flatnonzero(masked > 0)
        masked_html = (f"<h2>Masked channels ({names.size} of {masked.size})</h2>"
                       f'<img src="{masked_channels_figure(masked, header.chan_freqs)}" '
                       f'alt="masked channels">')  # fmt: skip
    run_notes = list(perf.run.get("notes", plan.notes)) if hasattr(perf, "run") else plan.notes
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in run_notes)
    compiling = " including the kernels' first compilation (see the note)" if any(
        n == KERNELS_COMPILING for n in run_notes) else ""  # fmt: skip
    body = f"""<h1>Search of {html.escape(Path(plan.path).name)}</h1>
<p>{header.nchans} channels, {header.fmin:.1f}-{header.fmax:.1f} MHz, {header.tsamp * 1e6:.3f} us,
{header.tobs:.2f} s searched; DM {plan.dms[0]:g}-{plan.dms[-1]:.0f} pc cm<sup>-3</sup>
({len(plan.dms)} trials); {len(candidates)} candidates, {bursts} bursts by the classifier;
{perf.wall_s:.1f} s wall before this page (real-time x{perf.realtime_factor or 0:.2f}{compiling}).
</p>{notes}
<h2>Candidates over the observation</h2>
<img src="{scatter(candidates, header.tobs, plan.dms[-1])}" alt="time-DM scatter">
<h2>Candidates (click a column to sort)</h2>{table}{masked_html}
<h2>Performance</h2><table><tr><th>stage</th><th>wall s</th><th>CPU s</th><th>peak RSS MiB</th>
</tr>{perf_rows}</table>"""
    return write_text_atomic(
        out / REPORT_FILE, html_page(f"drafts-ops: {Path(plan.path).name}", body)
    )


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page (the reports' style and table sorting inline)."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{_STYLE}</style></head><body>{body}<script>{_SORT}</script>"
            "</body></html>\n")  # fmt: skip


def markdown_summary(candidates: Sequence[Candidate], path: str, top: int = 10) -> str:
    """The report's summary as Markdown (for a Prefect artifact): the brightest ``top``."""
    lines = [f"# Search of `{Path(path).name}`", "",
             f"{len(candidates)} candidates, {sum(bool(c.is_burst) for c in candidates)} bursts "
             "by the classifier.", "", "| time (s) | DM | S/N | width (ms) | P(burst) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for c in list(candidates)[:top]:
        prob = "" if c.classifier_prob is None else f"{c.classifier_prob:.2f}"
        lines.append(f"| {c.tcand_s:.4f} | {c.dm:.1f} | {c.snr:.1f} | {c.width_s * 1e3:.2f} "
                     f"| {prob} |")  # fmt: skip
    return "\n".join(lines) + "\n"
