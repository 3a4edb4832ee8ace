"""One diagnostic PNG per candidate: DM–time image, dedispersed waterfall, pulse profile.

Uses matplotlib's object API with the Agg canvas (no pyplot state), so it is safe in
worker threads and processes.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np

from drafts_ops.core.atomic import atomic_path
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
    """Write the candidate's diagnostic PNG to ``path`` atomically (one candidate; for many,
    :class:`CandidatePlotter` draws them about twice as fast).

    ``freq_time`` ``[time, frequency]`` (highest frequency first) and ``dm_time`` ``[dm,
    time]`` (DM 0 to ``2 * dm``) are the cutouts of :mod:`drafts_ops.detect.cutouts`;
    ``tsamp`` (s) is the file's sampling time, ``fmax_mhz``/``fmin_mhz`` the band edges.
    """
    with CandidatePlotter(tsamp=tsamp, fmax_mhz=fmax_mhz, fmin_mhz=fmin_mhz) as plotter:
        return plotter.plot(candidate, freq_time, dm_time, path)


#: Resolution of the PNGs, dots per inch (a 6.5 x 8 inch figure: 520 x 640 pixels).
PNG_DPI = 80
#: PNGs drawn but not yet written that :meth:`CandidatePlotter.plot` lets wait.
MAX_PENDING_PNGS = 4
#: PNGs a plotter must expect before a helper process draws some of them.
HELPER_MIN_PNGS = 4
#: PNGs handed to the helper process and not yet drawn; beyond, this process draws.
HELPER_QUEUE = 2


class CandidatePlotter:
    """Draws candidates' PNGs on one figure, updating its images, lines and labels for each
    (building a figure, its axes and ticks costs as much as drawing it).

    Arguments as :func:`plot_candidate`; :meth:`plot` draws one candidate's PNG, which a
    background thread encodes and writes while the next is drawn (PNG encoding releases
    the GIL: about a quarter of a PNG's time); :meth:`finish` (or leaving a ``with``
    block) waits for the writes and raises the first one's error.

    With ``helper=True`` (for several PNGs on a machine with a second core:
    :func:`wants_helper`) a second process draws PNGs too: each PNG goes to it while
    fewer than :data:`HELPER_QUEUE` wait there, else this process draws it (matplotlib
    holds the GIL, so a thread would not help). The helper is a fork of this process made
    at the first PNG (matplotlib already imported: it starts in milliseconds; a spawned
    one took 2 s and re-ran an unguarded main script); its PNGs are byte-identical, and
    if it cannot start or dies, this process draws its PNGs instead.
    """

    def __init__(
        self, *, tsamp: float, fmax_mhz: float, fmin_mhz: float, helper: bool = False
    ) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.tsamp, self.fmax, self.fmin = tsamp, fmax_mhz, fmin_mhz
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._helper = _start_helper(tsamp, fmax_mhz, fmin_mhz) if helper else None
        self._helper_jobs: list[tuple[Future, tuple]] = []
        #: PNGs drawn by this process and by the helper process.
        self.drawn = {"here": 0, "helper": 0}
        fig = Figure(figsize=(6.5, 8.0), dpi=PNG_DPI)
        fig.subplots_adjust(left=0.13, right=0.97, bottom=0.07, top=0.9, hspace=0.08)
        FigureCanvasAgg(fig)
        self.ax_prof, self.ax_ft, self.ax_dm = fig.subplots(
            3, 1, sharex=True, height_ratios=(1, 2.5, 2.5)
        )
        blank = np.zeros((2, 2), np.float32)
        (self.profile,) = self.ax_prof.plot([0.0, 1.0], [0.0, 0.0], color="k", lw=1)
        self.ax_prof.set_ylabel("flux (norm.)")
        self.waterfall = self.ax_ft.imshow(blank, aspect="auto", origin="upper",
                                           cmap="viridis", interpolation="nearest")  # fmt: skip
        self.ax_ft.set_ylabel("frequency (MHz)")
        self.dm_image = self.ax_dm.imshow(blank, aspect="auto", origin="lower",
                                          cmap="magma", interpolation="nearest")  # fmt: skip
        (self.marker,) = self.ax_dm.plot([0.0], [0.0], marker="o", mfc="none", mec="cyan",
                                         ms=14, mew=1.5)  # fmt: skip
        self.ax_dm.set_ylabel("DM (pc cm⁻³)")
        self.ax_dm.set_xlabel("time (s, top of band)")
        self.title = fig.suptitle("")
        self.figure = fig

    def plot(
        self, candidate: Candidate, freq_time: np.ndarray, dm_time: np.ndarray, path: str | Path
    ) -> Path:
        """Write ``candidate``'s PNG to ``path`` atomically (cutouts as :func:`plot_candidate`)."""
        job = (candidate, freq_time, dm_time, Path(path))
        if self._helper is not None and self._helper_waiting() < HELPER_QUEUE:
            try:
                self._helper_jobs.append((self._helper.submit(_helper_plot, *job), job))
                return Path(path)
            except (BrokenProcessPool, RuntimeError, OSError):  # draw here from now on
                self._helper = None
        return self._draw(*job)

    def _draw(
        self, candidate: Candidate, freq_time: np.ndarray, dm_time: np.ndarray, path: Path
    ) -> Path:
        """Draw the PNG in this process and hand it to the writer thread."""
        from matplotlib.ticker import AutoLocator

        c = candidate
        ntime = freq_time.shape[0]
        dt_pix = self.tsamp * time_decimation_factor(c.width_samples)
        t0 = c.tcand_s - (ntime // 2) * dt_pix
        t1 = t0 + ntime * dt_pix
        self.profile.set_data(t0 + (np.arange(ntime) + 0.5) * dt_pix, freq_time.mean(axis=1))
        self.ax_prof.relim()
        self.ax_prof.autoscale_view()
        self.waterfall.set_data(freq_time.T)
        self.waterfall.set_extent((t0, t1, self.fmin, self.fmax))
        self.waterfall.autoscale()  # colour scale of this candidate's image
        self.dm_image.set_data(dm_time)
        self.dm_image.set_extent((t0, t1, *_dm_extent(c.dm)))
        self.dm_image.autoscale()
        self.marker.set_data([c.tcand_s], [c.dm])
        if c.dm == 0:
            self.ax_dm.set_yticks([0.0])
        else:
            self.ax_dm.yaxis.set_major_locator(AutoLocator())
        prob = "n/a" if c.classifier_prob is None else f"{c.classifier_prob:.2f}"
        self.title.set_text(
            f"DM {c.dm:.1f} pc cm⁻³   t {c.tcand_s:.4f} s   S/N {c.snr:.1f}\n"
            f"width {c.width_s * 1e3:.2f} ms ({c.width_samples} samp)   P(burst) {prob}"
            + (f"   {Path(c.file).name}" if c.file else "")
        )
        self.figure.canvas.draw()
        pixels = np.array(self.figure.canvas.buffer_rgba())  # a copy: the next draw reuses it
        if len(self._pending) >= MAX_PENDING_PNGS:
            self._pending.pop(0).result()
        self._writer = self._writer or ThreadPoolExecutor(1, thread_name_prefix="png")
        self._pending.append(self._writer.submit(_write_png, pixels, Path(path)))
        self.drawn["here"] += 1
        return Path(path)

    def finish(self) -> None:
        """Wait until every PNG drawn is written; raise the first write's error."""
        try:
            self._finish_helper()
        finally:
            self.flush()
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None

    def flush(self) -> None:
        """Wait until the PNGs this process drew are written; raise the first error."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def _helper_waiting(self) -> int:
        """PNGs handed to the helper and not yet drawn."""
        return sum(not future.done() for future, _ in self._helper_jobs)

    def _finish_helper(self) -> None:
        """Wait for the helper's PNGs (drawing here those of a helper that died), stop it,
        then raise the first error of its writes."""
        jobs, self._helper_jobs = self._helper_jobs, []
        error = None
        for future, job in jobs:
            try:
                future.result()
                self.drawn["helper"] += 1
            except BrokenProcessPool:
                self._draw(*job)
            except Exception as exc:  # raised below, after the others
                error = error or exc
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None
        if error is not None:
            raise error

    def __enter__(self) -> CandidatePlotter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def wants_helper(png_count: int) -> bool:
    """Whether a plotter drawing ``png_count`` PNGs gains from a helper process: enough
    PNGs, a second core, a platform that forks, and a process allowed children (a
    daemonic worker, as in a process pool, is not)."""
    return (
        png_count >= HELPER_MIN_PNGS
        and (os.cpu_count() or 1) >= 2
        and "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
    )


def _start_helper(tsamp: float, fmax_mhz: float, fmin_mhz: float) -> ProcessPoolExecutor | None:
    """A one-process pool whose process draws with a :class:`CandidatePlotter` of its own
    (forked when the first PNG is handed over); ``None`` where it cannot be made."""
    try:
        return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_helper_init,
                                   initargs=(tsamp, fmax_mhz, fmin_mhz))  # fmt: skip
    except (OSError, ValueError):
        return None


_HELPER_PLOTTER: CandidatePlotter | None = None


def _helper_init(tsamp: float, fmax_mhz: float, fmin_mhz: float) -> None:
    """In the helper process: its one plotter."""
    global _HELPER_PLOTTER  # noqa: PLW0603
    _HELPER_PLOTTER = CandidatePlotter(tsamp=tsamp, fmax_mhz=fmax_mhz, fmin_mhz=fmin_mhz)


def _helper_plot(
    candidate: Candidate, freq_time: np.ndarray, dm_time: np.ndarray, path: Path
) -> Path:
    """In the helper process: draw and write one PNG (written when this returns)."""
    _HELPER_PLOTTER._draw(candidate, freq_time, dm_time, path)
    _HELPER_PLOTTER.flush()
    return path


def _write_png(pixels: np.ndarray, path: Path) -> None:
    """Encode RGBA ``pixels`` as a PNG at ``path``, atomically."""
    from PIL import Image

    with atomic_path(path) as tmp:
        Image.fromarray(pixels, "RGBA").save(tmp, format="PNG", compress_level=1)


def _dm_extent(dm: float) -> tuple[float, float]:
    """Vertical extent of the DM-time image, pc cm^-3: rows span DM 0 to ``2 * dm``.

    At DM 0 (zero-DM RFI) every row is DM 0; the image is drawn as one band of height 1
    around 0 so the axis is not degenerate.
    """
    return (0.0, 2.0 * dm) if dm > 0 else (-0.5, 0.5)
