"""One diagnostic PNG per candidate: DM–time image, dedispersed waterfall, pulse profile.

Uses matplotlib's object API with the Agg canvas (no pyplot state), so it is safe in
worker threads and processes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drafts_ops.atomic import atomic_path
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.cutouts import time_decimation_factor


def plot_candidate(
    candidate: Candidate,
    freq_time: np.ndarray,
    dm_time: np.ndarray,
    *,
    tsamp: float,
    fmax_mhz: float,
    fmin_mhz: float,
    path: str | Path,
) -> Path:
    """Write the candidate's diagnostic PNG to ``path`` atomically.

    ``freq_time`` ``[time, frequency]`` (highest frequency first) and ``dm_time`` ``[dm,
    time]`` (DM 0 to ``2 * dm``) are the cutouts of :mod:`drafts_ops.detect.cutouts`;
    ``tsamp`` (s) is the file's sampling time, ``fmax_mhz``/``fmin_mhz`` the band edges.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    c = candidate
    ntime = freq_time.shape[0]
    dt_pix = tsamp * time_decimation_factor(c.width_samples)
    t0 = c.tcand_s - (ntime // 2) * dt_pix
    t1 = t0 + ntime * dt_pix
    profile = freq_time.mean(axis=1)
    times = t0 + (np.arange(ntime) + 0.5) * dt_pix

    fig = Figure(figsize=(6.5, 8.0))
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.07, top=0.9, hspace=0.08)
    FigureCanvasAgg(fig)
    ax_prof, ax_ft, ax_dm = fig.subplots(3, 1, sharex=True, height_ratios=(1, 2.5, 2.5))
    ax_prof.plot(times, profile, color="k", lw=1)
    ax_prof.set_ylabel("flux (norm.)")
    ax_ft.imshow(
        freq_time.T,
        aspect="auto",
        origin="upper",
        extent=(t0, t1, fmin_mhz, fmax_mhz),
        cmap="viridis",
        interpolation="nearest",
    )
    ax_ft.set_ylabel("frequency (MHz)")
    dm_lo, dm_hi = _dm_extent(c.dm)
    ax_dm.imshow(
        dm_time,
        aspect="auto",
        origin="lower",
        extent=(t0, t1, dm_lo, dm_hi),
        cmap="magma",
        interpolation="nearest",
    )
    ax_dm.plot([c.tcand_s], [c.dm], marker="o", mfc="none", mec="cyan", ms=14, mew=1.5)
    if c.dm == 0:
        ax_dm.set_yticks([0.0])
    ax_dm.set_ylabel("DM (pc cm$^{-3}$)")
    ax_dm.set_xlabel("time (s, top of band)")
    prob = "n/a" if c.classifier_prob is None else f"{c.classifier_prob:.2f}"
    fig.suptitle(
        f"DM {c.dm:.1f} pc cm$^{{-3}}$   t {c.tcand_s:.4f} s   S/N {c.snr:.1f}\n"
        f"width {c.width_s * 1e3:.2f} ms ({c.width_samples} samp)   P(burst) {prob}"
        + (f"   {Path(c.file).name}" if c.file else "")
    )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80, pil_kwargs={"compress_level": 1})
    return Path(path)


def _dm_extent(dm: float) -> tuple[float, float]:
    """Vertical extent of the DM-time image, pc cm^-3: rows span DM 0 to ``2 * dm``.

    At DM 0 (zero-DM RFI) every row is DM 0; the image is drawn as one band of height 1
    around 0 so the axis is not degenerate.
    """
    return (0.0, 2.0 * dm) if dm > 0 else (-0.5, 0.5)
