"""One diagnostic PNG per candidate: DM–time image, dedispersed waterfall, pulse profile.

Drawn so that a faint burst can be judged by eye (:func:`display_images`): the waterfall
in sub-bands, each holding about :data:`SUBBAND_SNR` of a full-band burst's S/N, smoothed
to the burst's width and shown in units of its own noise (colour bar in sigma); the
DM–time image smoothed to the width, also in sigma; the profile in S/N units; the
candidate marked by ticks beside its peak, not over it.

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
from drafts_ops.detect.preprocess import robust_location_scale

#: S/N of a full-band burst that each plotted sub-band should hold (the number of
#: sub-bands follows the candidate's S/N: a faint burst gets few, wide ones).
SUBBAND_SNR = 3.0
#: Fewest and most sub-bands of the plotted waterfall.
SUBBANDS = (4, 64)
#: Colour range of the images, sigma of their noise (upper end: at least this, or the peak).
COLOUR_RANGE = (-2.0, 5.0)


def subband_count(snr: float, nchan: int) -> int:
    """Sub-bands of a waterfall plot: about ``(snr / SUBBAND_SNR)^2`` (each then holds
    :data:`SUBBAND_SNR` of a full-band burst), a power of two within :data:`SUBBANDS` that
    divides ``nchan`` (all channels when it cannot)."""
    wanted = (max(snr, 0.0) / SUBBAND_SNR) ** 2
    count = 2 ** int(np.clip(np.floor(np.log2(max(wanted, 1.0))), *np.log2(SUBBANDS)))
    while count > 1 and nchan % count:
        count //= 2
    return min(count, nchan) if count > 1 else nchan


def _sigma_units(image: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``image`` minus its median over ``axis``, over its robust standard deviation there."""
    flat = image if axis is not None else image.reshape(1, -1)
    loc, scale = robust_location_scale(flat, axis=-1 if axis is None else axis, keepdims=True,
                                       dtype=np.float64)  # fmt: skip
    scale = np.where(scale > 0, scale, 1.0)
    if axis is None:
        loc, scale = loc.reshape(()), scale.reshape(())
    return ((image - loc) / scale).astype(np.float32)


def _smooth(image: np.ndarray, width: int) -> np.ndarray:
    """Running sum over ``width`` pixels along the last axis, over ``sqrt(width)`` (white
    noise keeps unit variance; a pulse of that width gains ``sqrt(width)``)."""
    if width <= 1:
        return image.astype(np.float32)
    kernel = np.ones(width) / np.sqrt(width)
    pad = [(0, 0)] * (image.ndim - 1) + [(width // 2, width - 1 - width // 2)]
    padded = np.pad(image.astype(np.float64), pad, mode="edge")
    out = np.apply_along_axis(lambda row: np.convolve(row, kernel, mode="valid"), -1, padded)
    return out.astype(np.float32)


def display_images(
    freq_time: np.ndarray, dm_time: np.ndarray, *, snr: float, width_pixels: int,
    subbands: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """What a candidate's PNG shows: ``(waterfall [sub-band, time], profile [time],
    dm_image [dm, time])``, each in units of its own noise (sigma; the profile in S/N).

    ``freq_time`` ``[time, frequency]`` and ``dm_time`` ``[dm, time]`` are the cutouts;
    channels are put in units of their noise, averaged into :func:`subband_count` sub-bands
    and smoothed over the burst's ``width_pixels``; the DM–time image is smoothed alike.
    Channels without variance (masked: zeros) are left out of the sub-bands' averages.
    ``subbands`` (a divisor of the channels) replaces the count chosen from ``snr``.
    """
    channels = np.asarray(freq_time, np.float32).T  # [frequency, time]
    live = channels.std(axis=1) > 0
    standard = np.where(live[:, None], _sigma_units(channels, axis=1), 0.0)
    nsub = subband_count(snr, channels.shape[0])
    if subbands and channels.shape[0] % subbands == 0:
        nsub = subbands
    groups = standard.reshape(nsub, -1, standard.shape[1]).sum(axis=1)
    counts = live.reshape(nsub, -1).sum(axis=1)[:, None]
    subbands = np.where(counts > 0, groups / np.sqrt(np.maximum(counts, 1)), 0.0)
    width = max(int(width_pixels), 1)
    waterfall = _sigma_units(_smooth(subbands, width))
    profile = _sigma_units(_smooth(standard.sum(axis=0, keepdims=True), width))[0]
    dm_image = _sigma_units(_smooth(np.asarray(dm_time, np.float32), width))
    return waterfall, profile, dm_image


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
        fig.subplots_adjust(left=0.13, right=0.86, bottom=0.07, top=0.9, hspace=0.08)
        FigureCanvasAgg(fig)
        self.ax_prof, self.ax_ft, self.ax_dm = fig.subplots(
            3, 1, sharex=True, height_ratios=(1, 2.5, 2.5)
        )
        blank = np.zeros((2, 2), np.float32)
        (self.profile,) = self.ax_prof.plot([0.0, 1.0], [0.0, 0.0], color="k", lw=1)
        self.ax_prof.set_ylabel("S/N")
        self.waterfall = self.ax_ft.imshow(blank, aspect="auto", origin="upper",
                                           cmap="viridis", interpolation="nearest")  # fmt: skip
        self.ax_ft.set_ylabel("frequency (MHz)")
        self.dm_image = self.ax_dm.imshow(blank, aspect="auto", origin="lower",
                                          cmap="magma", interpolation="nearest")  # fmt: skip
        for ax, image in ((self.ax_ft, self.waterfall), (self.ax_dm, self.dm_image)):
            bar = fig.colorbar(image, cax=ax.inset_axes((1.02, 0.0, 0.035, 1.0)))
            bar.set_label("sigma")
        # ticks left and right of the candidate, leaving its peak in view
        (self.marker,) = self.ax_dm.plot([0.0, 0.0], [0.0, 0.0], ls="none", color="cyan",
                                         marker="|", ms=14, mew=2)  # fmt: skip
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
        pixels = self.pixels(candidate, freq_time, dm_time)
        if len(self._pending) >= MAX_PENDING_PNGS:
            self._pending.pop(0).result()
        self._writer = self._writer or ThreadPoolExecutor(1, thread_name_prefix="png")
        self._pending.append(self._writer.submit(_write_png, pixels, Path(path)))
        self.drawn["here"] += 1
        return Path(path)

    def pixels(
        self, candidate: Candidate, freq_time: np.ndarray, dm_time: np.ndarray, *,
        subbands: int | None = None, smooth: int | None = None,
    ) -> np.ndarray:  # fmt: skip
        """The candidate's figure as RGBA pixels (a copy): :func:`display_images` with
        ``subbands`` sub-bands and ``smooth`` pixels of smoothing when given."""
        from matplotlib.ticker import AutoLocator

        c = candidate
        ntime = freq_time.shape[0]
        dt_pix = self.tsamp * time_decimation_factor(c.width_samples)
        t0 = c.tcand_s - (ntime // 2) * dt_pix
        t1 = t0 + ntime * dt_pix
        width = smooth or max(1, round(c.width_samples / time_decimation_factor(c.width_samples)))
        waterfall, profile, dm_image = display_images(freq_time, dm_time, snr=c.snr,
                                                      width_pixels=width,
                                                      subbands=subbands)  # fmt: skip
        self.profile.set_data(t0 + (np.arange(ntime) + 0.5) * dt_pix, profile)
        self.ax_prof.relim()
        self.ax_prof.autoscale_view()
        for image, data in ((self.waterfall, waterfall), (self.dm_image, dm_image)):
            image.set_data(data)
            image.set_clim(COLOUR_RANGE[0], max(COLOUR_RANGE[1], float(np.max(data))))
        self.waterfall.set_extent((t0, t1, self.fmin, self.fmax))
        self.dm_image.set_extent((t0, t1, *_dm_extent(c.dm)))
        beside = 8 * dt_pix + 2 * width * dt_pix  # off the peak by a few widths
        self.marker.set_data([c.tcand_s - beside, c.tcand_s + beside], [c.dm, c.dm])
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
        return np.array(self.figure.canvas.buffer_rgba())  # a copy: the next draw reuses it

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
    with atomic_path(path) as tmp:
        tmp.write_bytes(png_bytes(pixels))


def png_bytes(pixels: np.ndarray) -> bytes:
    """RGBA ``pixels`` encoded as PNG."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _dm_extent(dm: float) -> tuple[float, float]:
    """Vertical extent of the DM-time image, pc cm^-3: rows span DM 0 to ``2 * dm``.

    At DM 0 (zero-DM RFI) every row is DM 0; the image is drawn as one band of height 1
    around 0 so the axis is not degenerate.
    """
    return (0.0, 2.0 * dm) if dm > 0 else (-0.5, 0.5)
