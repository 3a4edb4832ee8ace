"""Report figures as PNG ``data:`` URIs (self-contained HTML; matplotlib Agg, no pyplot).

* DM–time images of every path side by side, with their differences from the prototype
* S/N against DM at the brightest burst, per path
* dedispersion throughput per path, with the speed-up over the prototype
* largest difference per DM trial (where a production path departs from the prototype)
"""

from __future__ import annotations

import base64
import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from drafts_ops.validation.runner import BASELINE, PathRun

#: Samples shown either side of the burst in the DM–time images.
HALF_WINDOW = 192


def _figure(width: float, height: float, **margins: float):
    """A figure with fixed margins (constrained layout costs seconds per figure)."""

    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(**{"left": 0.12, "right": 0.97, "bottom": 0.16, "top": 0.89, **margins})
    return fig


def png_data_uri(fig) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (no software metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _centre(result, base: np.ndarray) -> int:
    if result.snr_vs_dm is not None:
        return round(result.snr_vs_dm["burst"]["t_s"] / result.plan["tsamp_s"])
    return int(np.unravel_index(int(np.argmax(base)), base.shape)[1])


def dm_time_figure(runs: dict[str, PathRun], result) -> str:
    """DM–time images (top row) and differences from the prototype (bottom row)."""
    base = runs[BASELINE].load()
    nout = base.shape[1]
    centre = min(max(_centre(result, base), 0), nout - 1)
    lo, hi = max(centre - HALF_WINDOW, 0), min(centre + HALF_WINDOW + 1, nout)
    tsamp, dms = result.plan["tsamp_s"], result.dms
    extent = (lo * tsamp, hi * tsamp, -0.5, len(dms) - 0.5)  # rows are trials (non-uniform)
    ticks = np.unique(np.linspace(0, len(dms) - 1, 6).round().astype(int))
    ref = np.asarray(base[:, lo:hi])
    level = np.median(ref, axis=1, keepdims=True)  # display only: flatten each DM row
    vmin, vmax = np.percentile(ref - level, [1.0, 99.9])
    names = list(runs)
    fig = _figure(3.2 * len(names), 5.6, left=0.3 / len(names), bottom=0.09, top=0.92,
                  wspace=0.45, hspace=0.5)  # fmt: skip
    axes = fig.subplots(2, len(names), squeeze=False)
    style = {"aspect": "auto", "origin": "lower", "extent": extent, "interpolation": "nearest"}
    for ax in axes.flat:
        ax.set_yticks(ticks, [f"{dms[k]:.0f}" for k in ticks])
    for i, name in enumerate(names):
        img = ref if name == BASELINE else np.asarray(runs[name].load()[:, lo:hi])
        ax = axes[0, i]
        ax.imshow(img - level, cmap="viridis", vmin=vmin, vmax=vmax, **style)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("DM (pc cm$^{-3}$)")
        ax = axes[1, i]
        if name == BASELINE:
            ax.axis("off")
            ax.text(0.5, 0.5, "bottom row:\npath - prototype\n(same window)", ha="center",
                    va="center", transform=ax.transAxes)  # fmt: skip
            continue
        diff = img - ref
        scale = float(np.abs(diff).max()) or 1.0
        im = ax.imshow(diff, cmap="RdBu_r", vmin=-scale, vmax=scale, **style)
        ax.set_title(f"{name} - prototype\nmax |diff| {np.abs(diff).max():.3g}", fontsize=9)
        ax.set_xlabel("time (s)")
        fig.colorbar(im, ax=ax, shrink=0.8, pad=0.03)
    return png_data_uri(fig)


def snr_dm_figure(result) -> str | None:
    """S/N against DM trial at the first burst, one line per path."""
    curves = result.snr_vs_dm
    if curves is None:
        return None
    fig = _figure(6.4, 3.4)
    ax = fig.subplots()
    dms = np.asarray(curves["dms"])
    for name, snr in curves["snr"].items():
        if snr is not None:
            ax.plot(dms, np.maximum(np.asarray(snr), 0), label=name,
                    lw=2.2 if name == BASELINE else 1.2)  # fmt: skip
    burst = curves["burst"]
    ax.axvline(burst["dm"], color="grey", ls=":", lw=1)
    ax.set_xlabel("DM (pc cm$^{-3}$)")
    ax.set_ylabel("best boxcar S/N")
    ax.set_title(f"S/N vs DM at t = {burst['t_s']:.4f} s ({burst['source']} burst)", fontsize=10)
    ax.legend(fontsize=8)
    return png_data_uri(fig)


def throughput_figure(result) -> str:
    """Dedispersion throughput (G channel-sample-DM per s) per path, speed-up labelled."""
    rows = result.performance
    fig = _figure(6.4, 3.0)
    ax = fig.subplots()
    names = [r["path"] for r in rows]
    values = [r["cells_per_s"] / 1e9 for r in rows]
    bars = ax.bar(names, values, color=["#777777"] + ["#2a7ab9"] * (len(rows) - 1))
    for bar, r in zip(bars, rows, strict=True):
        ax.annotate(f"{r['speedup_vs_prototype']:.2f}x", (bar.get_x() + bar.get_width() / 2,
                    bar.get_height()), ha="center", va="bottom", fontsize=9)  # fmt: skip
    ax.set_ylabel("G cells / s")
    ax.set_title("dedispersion throughput (cells = channel x sample x DM)", fontsize=10)
    return png_data_uri(fig)


def difference_figure(result) -> str | None:
    """Largest absolute difference from the prototype per DM trial (when any)."""
    parities = [p for p in result.parity if p.max_abs_diff > 0]
    if not parities:
        return None
    fig = _figure(6.4, 3.0)
    ax = fig.subplots()
    dms = np.asarray(result.dms)
    for p in parities:
        rows = np.asarray(p.row_max_abs)
        shown = np.where(rows > 0, rows, np.nan)  # identical rows leave gaps
        ax.semilogy(dms, shown, ".-", label=p.path, lw=1.2, ms=4)
        ax.axhline(p.row_tolerance, color="grey", ls=":", lw=1)
    ax.set_xlabel("DM (pc cm$^{-3}$)")
    ax.set_ylabel("max |path - prototype|")
    ax.set_title("where the outputs differ (gaps: identical; dotted: exact tolerance)", fontsize=10)
    ax.legend(fontsize=8)
    return png_data_uri(fig)


def file_plots(runs: dict[str, PathRun], result) -> dict[str, str]:
    """All figures of one file, by name (``dm_time``, ``snr_dm``, ``throughput``, ...)."""
    made = {
        "dm_time": dm_time_figure(runs, result),
        "snr_dm": snr_dm_figure(result),
        "throughput": throughput_figure(result),
        "differences": difference_figure(result),
    }
    return {k: v for k, v in made.items() if v is not None}
