"""Write a validation report as ``validation.json``, ``validation.md`` and ``validation.html``.

The Markdown and HTML documents are rendered from one list of blocks (headings,
paragraphs, tables, verdict lists, figures), so they show the same numbers. The HTML is
self-contained: inline CSS, figures as ``data:`` URIs, no external references. Every file
is written atomically.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_json_atomic, write_text_atomic
from drafts_ops.validation.runner import BASELINE
from drafts_ops.validation.stages import FileResult, ValidationReport

FILENAMES = {"html": "validation.html", "md": "validation.md", "json": "validation.json"}
#: Unmatched candidates listed per path.
MAX_LISTED = 10

Block = tuple[Any, ...]


def _g(value: float | None, fmt: str = ".3g") -> str:
    return "-" if value is None else format(value, fmt)


def _status(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def report_blocks(report: ValidationReport) -> list[Block]:
    """The report as blocks: ``("h", level, text)``, ``("p", text)``, ``("table", headers,
    rows)``, ``("verdict", lines)``, ``("img", uri, caption)``."""
    p = report.platform
    gpu = p.get("gpu") or {}
    t = report.config["thresholds"]
    blocks: list[Block] = [
        ("h", 1, f"drafts-ops validation: {_status(report.passed)}"),
        ("p", f"Prototype (direct-launched kernel) against every production algorithm, "
              f"{len(report.files)} file(s), created {report.created_utc}."),
        ("p", f"Machine: {p.get('cpu')} ({p.get('machine')}), {p.get('cores')} cores, SIMD "
              f"{p.get('simd')}, Numba {p.get('numba_version')} with {p.get('numba_threads')} "
              f"threads ({p.get('threading_layer')}), GPU: {gpu.get('name', 'none')}; backend "
              f"{report.config['backend']}."),
        ("p", f"Thresholds: exact algorithms max rel diff <= {t['exact_max_rel_diff']:g}; "
              f"approximate algorithms S/N loss <= {100 * t['fast_max_snr_loss']:g}%; every "
              f"candidate with S/N >= {t['match_snr']:g} matched within {t['time_tol_s']:g} s "
              f"and max({t['dm_tol']:g} pc cm^-3, {t['dm_tol_trials']:g} DM trials)."),
    ]  # fmt: skip
    for f in report.files:
        blocks += _file_blocks(f)
    return blocks


def _file_blocks(f: FileResult) -> list[Block]:
    h, pl = f.header, f.plan
    nblocks = f.performance[0]["nblocks"] if f.performance else 0
    out: list[Block] = [
        ("h", 2, f"{Path(f.file).name}{f.label[len(f.file):]}: {_status(f.passed)}"),
        ("p", f"{f.label}: {h['nchans']} channels, {h['nsamples']} samples of "
              f"{1e3 * h['tsamp_s']:.5g} ms ({h['tobs_s']:.3f} s), fch1 {h['fch1_mhz']:g} MHz, "
              f"foff {h['foff_mhz']:g} MHz, {h['nbits']}-bit. DM plan: {pl['ndm']} trials "
              f"{pl['dm_min']:.2f}-{pl['dm_max']:.2f} pc cm^-3, maximum delay "
              f"{pl['max_delay_samples']} samples. Streamed in {nblocks} block(s) of "
              f"{f.block_size} samples + overlap {f.overlap}."),
        ("h", 3, "Verdict"),
        ("verdict", f.verdict),
        ("h", 3, "Numerical parity (DM-time output against the prototype)"),
        _parity_table(f),
    ]  # fmt: skip
    if f.localisation:
        out += [("h", 3, "Where the outputs differ"), _localisation_table(f)]
    out += [("h", 3, "S/N at bursts"), ("p", _BURST_NOTE), _burst_table(f)]
    out += [("h", 3, "Candidate agreement")]
    out += _agreement_blocks(f)
    out += [("h", 3, "Performance"), _performance_table(f)]
    captions = {
        "dm_time": "DM-time around the burst: each path (top) and its difference from the "
        "prototype (bottom).",
        "snr_dm": "S/N against DM at the burst, per path.",
        "differences": "Largest |path - prototype| per DM trial.",
        "throughput": "Dedispersion throughput per path; labels: speed-up over the prototype.",
    }
    if f.plots:
        out.append(("h", 3, "Figures"))
        out += [("img", f.plots[k], c) for k, c in captions.items() if k in f.plots]
    return out


def _parity_table(f: FileResult) -> Block:
    probe = {p.path: p for p in f.probe}
    rows = []
    for p in f.parity:
        q = probe.get(p.path)
        rows.append([
            p.path, _g(p.max_abs_diff), _g(p.max_rel_diff), f"{100 * p.frac_identical:.3f}%",
            f"{p.n_differing_rows} / {len(p.row_max_abs)}",
            "-" if p.max_abs_diff == 0 else
            f"DM {p.worst_dm:.2f} (#{p.worst_dm_index}), t {p.worst_time_s:.4f} s",
            "-" if q is None else f"{_g(q.max_abs_diff)} ({100 * q.frac_identical:.2f}% identical)",
        ])  # fmt: skip
    headers = ["path", "max abs diff", "max rel diff", "identical values",
               "DM trials differing", "largest difference at", "random-data probe"]  # fmt: skip
    return ("table", headers, rows)


def _localisation_table(f: FileResult) -> Block:
    rows = []
    for loc in f.localisation:
        for x in loc.faults:
            shift = "not a pure delay shift" if x.shift is None else f"{x.shift:+d} sample(s)"
            rows.append([loc.path, str(x.dm_index), f"{x.dm:.3f}", str(x.channel),
                         f"{x.freq_mhz:.3f}", str(x.delay_expected), shift])  # fmt: skip
        if not loc.faults:
            rows.append([loc.path, ", ".join(map(str, loc.differing_rows[:20])), "-", "-", "-",
                         "-", "no single channel isolated"])  # fmt: skip
    headers = ["path", "DM index", "DM", "channel", "frequency (MHz)", "expected delay",
               "delay error"]  # fmt: skip
    return ("table", headers, rows)


_BURST_NOTE = (
    "In the data: best boxcar S/N near each burst (within the matching tolerances) and its "
    "loss against the prototype; for an approximate algorithm this differs by noise too "
    "(about sqrt(2)/S/N, as it sums partly different samples). Noise-free replica: the "
    "same burst simulated without noise and dedispersed by both paths, searched over the "
    "whole DM grid; this deterministic loss is the one the verdict bounds."
)


def _burst_table(f: FileResult) -> Block:
    paths = f.paths
    rows = []
    for b in f.bursts:
        row = [b["source"], f"{b['dm']:.2f}", f"{b['t_s']:.4f}", f"{1e3 * b['width_s']:.3g}",
               _g(b.get("truth_snr"), ".1f")]  # fmt: skip
        for p in paths:
            s = b["snr"].get(p)
            cell = "-" if s is None else f"{s['snr']:.2f} @ DM {s['dm']:.1f}"
            if b["loss"].get(p) is not None:
                cell += f" (loss {100 * b['loss'][p]:+.2f}%)"
            row.append(cell)
        row += [f"{100 * b['replica_loss'][p]:+.2f}%" for p in paths if p != BASELINE]
        rows.append(row)
    replica = [f"noise-free loss {p}" for p in paths if p != BASELINE]
    headers = ["burst", "DM", "t (s)", "width (ms)", "truth S/N", *paths, *replica]
    if not rows:
        rows.append(["no burst in the validated range", *([""] * (len(headers) - 1))])
    return ("table", headers, rows)


def _agreement_blocks(f: FileResult) -> list[Block]:
    rows = [[a.path, str(f.candidates[BASELINE]), str(f.candidates[a.path]), str(len(a.matched)),
             str(len(a.prototype_only)), str(len(a.production_only)),
             str(a.unmatched_significant)] for a in f.agreement]  # fmt: skip
    headers = ["path", "prototype candidates", "production candidates", "matched",
               "prototype only", "production only", "unmatched above match S/N"]  # fmt: skip
    out: list[Block] = [("table", headers, rows)]
    unmatched = []
    for a in f.agreement:
        for side, cands in (("prototype only", a.prototype_only),
                            ("production only", a.production_only)):  # fmt: skip
            for c in sorted(cands, key=lambda c: -c["snr"])[:MAX_LISTED]:
                unmatched.append([a.path, side, f"{c['tcand_s']:.4f}", f"{c['dm']:.2f}",
                                  f"{c['snr']:.2f}", str(c["width_samples"])])  # fmt: skip
    if unmatched:
        out.append(("table", ["path", "found by", "t (s)", "DM", "S/N", "width (samples)"],
                    unmatched))  # fmt: skip
    return out


def _performance_table(f: FileResult) -> Block:
    rows = [[r["path"], str(r["nblocks"]), f"{r['warmup_s']:.3f}", f"{r['read_s']:.4f}",
             f"{r['dedisperse_s']:.4f}", f"{r['detect_s']:.4f}",
             f"{r['cells_per_s'] / 1e9:.3f}", f"{r['realtime_factor']:.1f}",
             _g(r["realtime_factor_total"], ".1f"), f"{r['peak_mib']:.1f}",
             f"{r['speedup_vs_prototype']:.2f}x"] for r in f.performance]  # fmt: skip
    headers = ["path", "blocks", "warm-up (s)", "read (s)", "dedisperse (s)", "detect (s)",
               "G cells/s", "real-time x (dedisp)", "real-time x (all stages)",
               "peak extra MiB", "speed-up"]  # fmt: skip
    return ("table", headers, rows)


# -- renderers ---------------------------------------------------------------------------


def to_markdown(report: ValidationReport) -> str:
    """The report as Markdown (figures are in the HTML report)."""
    lines: list[str] = []
    for block in report_blocks(report):
        kind = block[0]
        if kind == "h":
            lines += ["#" * block[1] + " " + block[2], ""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "verdict":
            lines += [f"- **{_status(v.passed)}** `{v.path}` {v.check}: {v.text}"
                      for v in block[1]] + [""]  # fmt: skip
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines.append("| " + " | ".join(headers) + " |")
            lines.append("|" + "---|" * len(headers))
            lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
            lines.append("")
        elif kind == "img" and not any(line.startswith("_Figures") for line in lines[-3:]):
            lines += ["_Figures: see validation.html._", ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;
color:#1d2430;max-width:1400px}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:2px solid #d0d7de;padding-bottom:4px}
h3{margin-top:1.2em;font-size:1.05em}
table{border-collapse:collapse;margin:6px 0 12px;font-size:0.88em}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right}
th{background:#f1f4f8}td:first-child,th:first-child{text-align:left}
ul.verdict{list-style:none;padding-left:0}ul.verdict li{margin:3px 0}
.badge{display:inline-block;min-width:3.2em;text-align:center;font-weight:bold;
border-radius:4px;padding:1px 6px;margin-right:6px;color:#fff}
.pass{background:#1a7f37}.fail{background:#cf222e}
figure{display:inline-block;margin:8px 16px 8px 0;vertical-align:top}
figcaption{font-size:0.85em;color:#57606a}img{max-width:100%;border:1px solid #eee}
code{background:#f1f4f8;padding:0 3px}
"""


def to_html(report: ValidationReport) -> str:
    """The report as one self-contained HTML page."""
    e = html.escape
    title = f"drafts-ops validation: {_status(report.passed)}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"]  # fmt: skip
    for block in report_blocks(report):
        kind = block[0]
        if kind == "h":
            text = e(block[2])
            for word in ("PASS", "FAIL"):
                badge = f'<span class="badge {word.lower()}">{word}</span>'
                text = text.replace(f": {word}", f" {badge}")
            parts.append(f"<h{block[1]}>{text}</h{block[1]}>")
        elif kind == "p":
            parts.append(f"<p>{e(block[1])}</p>")
        elif kind == "verdict":
            items = "".join(
                f'<li><span class="badge {_status(v.passed).lower()}">{_status(v.passed)}</span>'
                f"<code>{e(v.path)}</code> {e(v.check)}: {e(v.text)}</li>"
                for v in block[1]
            )
            parts.append(f'<ul class="verdict">{items}</ul>')
        elif kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                           for r in block[2])  # fmt: skip
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "img":
            parts.append(f'<figure><img src="{e(block[1])}" alt="{e(block[2])}">'
                         f"<figcaption>{e(block[2])}</figcaption></figure>")  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: ValidationReport, out_dir: str | Path) -> dict[str, Path]:
    """Write ``validation.html``, ``validation.md`` and ``validation.json`` atomically."""
    out = Path(out_dir)
    return {
        "json": write_json_atomic(out / FILENAMES["json"], report.to_dict()),
        "md": write_text_atomic(out / FILENAMES["md"], to_markdown(report)),
        "html": write_text_atomic(out / FILENAMES["html"], to_html(report)),
    }
