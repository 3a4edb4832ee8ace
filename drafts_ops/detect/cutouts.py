"""Candidate cutouts in the FETCH layout: the inputs of the classifier, the .h5 and the PNG.

Both images are centred on the candidate's arrival at the top of the band and use the
FETCH recipe (``your_candmaker``): the raw window holds ``size * factor`` samples with the
time-decimation factor ``factor = max(1, width_samples // 2)``, so a candidate of any width
fills a few pixels of a ``size``-pixel time axis.

* :func:`freq_time_cutout` → ``[size (time), size (frequency)]``, the data dedispersed at
  the candidate DM, frequency rebinned to ``size`` channels, highest frequency first (the
  layout of FETCH's ``data_freq_time``, dimension labels ``time, frequency``).
* :func:`dm_time_cutout` → ``[ndm (DM), size (time)]``, the band-summed series at ``ndm``
  DMs from 0 to ``2 * dm`` (FETCH's ``data_dm_time``, labels ``dm, time``).

Each channel is normalised (median, IQR) over the window first; each image is returned
with zero mean and unit standard deviation, float32. Samples outside ``data`` are padded
with the channel median. :func:`cutout_span` gives the raw samples a caller must read.
"""

from __future__ import annotations

import numpy as np

from drafts_ops.dedisp.operator import dedisperse
from drafts_ops.dedisp.plan import DMPlan, delay_table
from drafts_ops.detect.kernels import normalise_into
from drafts_ops.detect.preprocess import channel_location_scale
from drafts_ops.errors import ParameterError

#: Samples per channel (the start of the window) from which a cutout's median and IQR are
#: taken.
CUTOUT_STATS_SAMPLES = 1024
#: Image side of FETCH candidates (pixels).
CUTOUT_SIZE = 256


def time_decimation_factor(width_samples: int) -> int:
    """FETCH's time-decimation factor for a boxcar of ``width_samples``: ``max(1, w // 2)``."""
    return max(1, int(width_samples) // 2)


def cutout_span(  # noqa: PLR0917 (FETCH-style positional signature)
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
) -> tuple[int, int]:
    """Raw samples ``[start, stop)`` that both cutouts of a candidate read.

    ``sample`` is the candidate's arrival at the top of the band (samples); the span covers
    the window plus the largest delay at ``2 * dm`` (the top of the DM–time image).
    """
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    _, nwin, start = _frame(sample, width_samples, size)
    max_delay = int(delay_table(np.array([2.0 * dm]), freqs_mhz, tsamp).max())
    return start, start + nwin + max_delay


def freq_time_cutout(  # noqa: PLR0917
    data: np.ndarray,
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
    *,
    chan_mask: np.ndarray | None = None,
    normalised: bool = False,
) -> np.ndarray:
    """Dedispersed waterfall around a candidate, ``[size (time), size (frequency)]`` float32.

    Parameters
    ----------
    data : ndarray [nchan, nt]
        Filterbank samples (raw or normalised), channels in the order of ``freqs_mhz``.
    freqs_mhz : ndarray [nchan]
        Channel centre frequencies, MHz (either order).
    tsamp : float
        Sampling interval of ``data``, s.
    dm : float
        Candidate DM, pc cm^-3.
    sample : int
        Index in ``data`` of the arrival at the highest frequency.
    width_samples : int
        Boxcar width of the candidate, samples (sets the time decimation).
    size : int
        Pixels on each axis.
    chan_mask : ndarray [nchan] of bool, optional
        True for channels to blank (set to zero after normalisation).
    normalised : bool
        ``data`` is already the normalised window starting at the cutout's first sample
        (as :func:`cutout_pair` passes it).
    """
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    factor, nwin, start = _frame(sample, width_samples, size)
    delays = delay_table(np.array([float(dm)]), freqs, tsamp)[0]
    chunk = data if normalised else _window(data, start, nwin + int(delays.max()), chan_mask)
    index = delays[:, None].astype(np.int64) + np.arange(nwin)[None, :]
    dedispersed = np.take_along_axis(chunk, index, axis=1)  # [nchan, nwin]
    decimated = dedispersed.reshape(dedispersed.shape[0], size, factor).mean(axis=2)
    order = np.argsort(-freqs, kind="stable")  # highest frequency first
    rebinned = _rebin_matrix(freqs.size, size) @ decimated[order]  # [size freq, size time]
    return _standardise(rebinned.T)


def dm_time_cutout(  # noqa: PLR0917
    data: np.ndarray,
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
    *,
    ndm: int = CUTOUT_SIZE,
    chan_mask: np.ndarray | None = None,
    normalised: bool = False,
) -> np.ndarray:
    """Band-summed series at ``ndm`` DMs from 0 to ``2 * dm``: ``[ndm, size]`` float32.

    Arguments as in :func:`freq_time_cutout`. Row ``i`` is DM ``2 * dm * i / (ndm - 1)``; the
    candidate sits near row ``ndm // 2`` and column ``size // 2``.
    """
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    if ndm < 2:
        raise ParameterError(f"a DM-time cutout needs at least 2 DM rows, got {ndm}")
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    factor, nwin, start = _frame(sample, width_samples, size)
    plan = DMPlan.build(np.linspace(0.0, 2.0 * float(dm), ndm), freqs, tsamp)
    if normalised:
        chunk = np.ascontiguousarray(data[:, : nwin + plan.max_delay], dtype=np.float32)
    else:
        chunk = _window(data, start, nwin + plan.max_delay, chan_mask)
    series = dedisperse(chunk, plan, mode="production")[:, :nwin]  # [ndm, nwin]
    return _standardise(series.reshape(ndm, size, factor).mean(axis=2))


def cutout_pair(  # noqa: PLR0917
    data: np.ndarray,
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
    *,
    chan_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Both FETCH cutouts ``(freq_time, dm_time)`` of one candidate, the data window read
    and normalised once (arguments as :func:`freq_time_cutout`)."""
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    _, nwin, start = _frame(sample, width_samples, size)
    span = nwin + int(delay_table(np.array([2.0 * dm]), freqs, tsamp).max())
    window = _window(data, start, span, chan_mask)
    offset = nwin // 2  # the candidate's sample inside the window
    return (
        freq_time_cutout(window, freqs, tsamp, dm, offset, width_samples, size, normalised=True),
        dm_time_cutout(window, freqs, tsamp, dm, offset, width_samples, size, normalised=True),
    )


def _frame(sample: int, width_samples: int, size: int) -> tuple[int, int, int]:
    """Decimation factor, raw window length and first raw sample of a candidate's cutout."""
    factor = time_decimation_factor(width_samples)
    nwin = size * factor
    return factor, nwin, int(sample) - nwin // 2


def _check(freqs_mhz, tsamp: float, dm: float, width_samples: int, size: int) -> None:
    if np.asarray(freqs_mhz).ndim != 1 or np.asarray(freqs_mhz).size == 0:
        raise ParameterError("cutouts need a 1-D array of channel frequencies (MHz)")
    if not tsamp > 0:
        raise ParameterError(f"tsamp = {tsamp} s must be positive")
    if not (np.isfinite(dm) and dm >= 0):
        raise ParameterError(f"candidate DM = {dm} pc cm^-3 must be finite and >= 0")
    if int(width_samples) < 1:
        raise ParameterError(f"candidate width = {width_samples} samples must be >= 1")
    if int(size) < 2:
        raise ParameterError(f"cutout size = {size} must be >= 2")


def _window(data: np.ndarray, start: int, length: int, chan_mask: np.ndarray | None) -> np.ndarray:
    """``data[:, start:start + length]`` as float32, per channel normalised; pads with 0.

    Median and MAD-sigma per channel from the first :data:`CUTOUT_STATS_SAMPLES` samples of the
    window (contiguous: cheap on a long window), read in the data's own dtype; masked
    channels become 0; padding equals the channel median (0).
    """
    data = np.asarray(data)
    if data.ndim != 2:
        raise ParameterError(f"cutouts need data [nchan, nt], got shape {data.shape}")
    nchan, nt = data.shape
    mask = np.zeros(nchan, bool) if chan_mask is None else np.asarray(chan_mask, dtype=bool)
    if mask.shape != (nchan,):
        raise ParameterError(f"channel mask of shape {mask.shape} does not fit {nchan} channels")
    lo, hi = max(start, 0), min(start + length, nt)
    out = np.empty((nchan, length), dtype=np.float32)
    out[:, : max(lo - start, 0)] = 0.0
    out[:, max(hi - start, 0) :] = 0.0
    if hi > lo:
        piece = data[:, lo:hi]
        if piece.dtype not in (np.uint8, np.uint16, np.float32):
            piece = piece.astype(np.float32)
        head = np.ascontiguousarray(piece[:, :CUTOUT_STATS_SAMPLES])
        stats = channel_location_scale(head, head.shape[1], "mad")
        weight = np.where(mask | (stats[:, 1] <= 0), 0.0, 1.0 / np.maximum(stats[:, 1], 1e-30))
        normalise_into(piece, hi - lo, stats[:, 0], weight, out[:, lo - start : hi - start])
    return out


def _rebin_matrix(nin: int, nout: int) -> np.ndarray:
    """``[nout, nin]`` weights averaging ``nin`` bins onto ``nout`` by overlap (anti-aliased)."""
    edges_in = np.linspace(0.0, 1.0, nin + 1)
    edges_out = np.linspace(0.0, 1.0, nout + 1)
    lo = np.maximum(edges_out[:-1, None], edges_in[None, :-1])
    hi = np.minimum(edges_out[1:, None], edges_in[None, 1:])
    weights = np.clip(hi - lo, 0.0, None)
    return weights / weights.sum(axis=1, keepdims=True)


def _standardise(image: np.ndarray) -> np.ndarray:
    """Zero mean, unit standard deviation (unchanged scale for a constant image), float32."""
    image = image - image.mean()
    std = image.std()
    return (image / std if std > 0 else image).astype(np.float32)
