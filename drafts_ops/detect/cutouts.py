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

Each channel is normalised (median, MAD) over the window first; each image is returned
with zero mean and unit standard deviation, float32. Samples outside ``data`` are padded
with the channel median. :func:`cutout_span` gives the raw samples a caller must read.

Both images are computed in one pass over the window, a chunk of channels at a time, each
channel read only as far as its own largest delay: the images equal the window
dedispersed at every sample and then averaged over ``factor`` samples, but only the
samples the decimation keeps are formed (from running ``factor``-sample sums), so the cost
does not grow with ``factor`` and no float copy of the whole window exists.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import delay_table
from drafts_ops.detect.cutout_kernels import (
    dedispersed_means,
    normalised_phased_sums,
    rebin_rows_into,
    strided_dedisperse,
    strided_shift,
)
from drafts_ops.detect.preprocess import channel_location_scale
from drafts_ops.io.transpose import transpose_into

#: Samples per channel (the start of the window) from which a cutout's median and IQR are
#: taken.
CUTOUT_STATS_SAMPLES = 1024
#: Image side of FETCH candidates (pixels).
CUTOUT_SIZE = 256


def time_decimation_factor(width_samples: int) -> int:
    """FETCH's time-decimation factor for a boxcar of ``width_samples``: ``max(1, w // 2)``."""
    return max(1, int(width_samples) // 2)


@dataclass(frozen=True)
class ChannelBand:
    """The part of a window ``[nchan, nsamples]`` that a candidate's measurements read:
    each channel's samples along the dispersed sweep, without the rest of the window (at
    4096 channels a high-DM candidate's window is GBs, its band ~100 MB).

    ``rows[c, j]`` is the window's sample ``base[c] + j`` of channel ``c`` (every sample
    a reader of channel ``c`` asks for inside the window lies in its row); ``head`` is the
    window's first :data:`CUTOUT_STATS_SAMPLES` samples (or all, if fewer) of every
    channel, whose statistics normalise the channels. :func:`band_span` says which
    samples a band must hold; :func:`freq_time_cutout` reads a band as it reads the window.
    """

    rows: np.ndarray
    base: np.ndarray
    nsamples: int
    head: np.ndarray

    def shifted(self, first: np.ndarray, channels: np.ndarray | None = None) -> np.ndarray:
        """Window samples ``first`` of each channel (of ``channels``, all by default) as
        indices into the channels' rows (int64)."""
        base = self.base if channels is None else self.base[channels]
        return np.asarray(first, np.int64) - base


def band_span(  # noqa: PLR0917 (FETCH-style positional signature)
    freqs_mhz: np.ndarray, tsamp: float, dm: float, sample: int, width_samples: int,
    nsamples: int, *, margin: int = 0, size: int = CUTOUT_SIZE,
) -> tuple[np.ndarray, int]:  # fmt: skip
    """``(base [nchan], length)`` of the :class:`ChannelBand` of a window of ``nsamples``
    that :func:`freq_time_cutout` reads for a candidate at ``sample`` (window samples): its
    ``size * factor`` samples shifted by each channel's delay at ``dm``, ``margin``
    samples more each side, held inside the window (a row then ends, or starts, where
    the window does: reads clipped there stay clipped alike)."""
    _, nwin, start = _frame(sample, width_samples, size)
    delays = delay_table(np.array([float(dm)]), np.asarray(freqs_mhz, np.float64), tsamp)[0]
    length = min(nwin + 2 * int(margin), int(nsamples))
    first = start + delays.astype(np.int64) - int(margin)
    return np.clip(first, 0, max(int(nsamples) - length, 0)), length


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
    _, nwin, start, delays = _window_delays(freqs_mhz, tsamp, dm, sample, width_samples, size)
    return start, start + nwin + int(delays.max())


def channel_read_stops(  # noqa: PLR0917 (FETCH-style positional signature)
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
) -> np.ndarray:
    """Per channel, the sample (exclusive, int64 ``[nchan]``) up to which both cutouts of
    a candidate read data that start at sample 0: its window plus its own delay at ``2 *
    dm`` (rounded up to the time decimation), and at least the first
    :data:`CUTOUT_STATS_SAMPLES` of the window (its statistics). Within
    :func:`cutout_span`; the high channels need much less than the low ones."""
    factor, nwin, start, delays = _window_delays(freqs_mhz, tsamp, dm, sample, width_samples,
                                                 size)  # fmt: skip
    lengths = _read_lengths(delays, nwin, factor)
    return np.maximum(start + lengths, max(start, 0) + CUTOUT_STATS_SAMPLES)


def _window_delays(  # noqa: PLR0917
    freqs_mhz: np.ndarray, tsamp: float, dm: float, sample: int, width_samples: int, size: int
) -> tuple[int, int, int, np.ndarray]:
    """``(factor, nwin, start, delays)`` of a candidate's window (:func:`_frame`) and each
    channel's delay at ``2 * dm`` (samples, the top of the DM-time image), arguments
    checked."""
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    factor, nwin, start = _frame(sample, width_samples, size)
    freqs = np.asarray(freqs_mhz, np.float64)
    return factor, nwin, start, delay_table(np.array([2.0 * float(dm)]), freqs, tsamp)[0]


def _read_lengths(max_delays: np.ndarray, nwin: int, factor: int) -> np.ndarray:
    """Samples each channel's cutouts read from the window's start: the window plus the
    channel's largest delay, rounded up to a multiple of ``factor`` (int64)."""
    return -(-(nwin + max_delays.astype(np.int64)) // factor) * factor


def freq_time_cutout(  # noqa: PLR0917
    data: np.ndarray | ChannelBand,
    freqs_mhz: np.ndarray,
    tsamp: float,
    dm: float,
    sample: int,
    width_samples: int,
    size: int = CUTOUT_SIZE,
    *,
    chan_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Dedispersed waterfall around a candidate, ``[size (time), size (frequency)]`` float32.

    Parameters
    ----------
    data : ndarray [nchan, nt] or ChannelBand
        Filterbank samples (raw or normalised), channels in the order of ``freqs_mhz``;
        or the band of such a window that :func:`band_span` gives (the same cutout).
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
    """
    band = data if isinstance(data, ChannelBand) else None
    data, freqs = _checked(data if band is None else band.rows, freqs_mhz, tsamp, dm,
                           width_samples, size)  # fmt: skip
    factor, nwin, start = _frame(sample, width_samples, size)
    delays = delay_table(np.array([float(dm)]), freqs, tsamp)[0].astype(np.int64)
    stop = start + nwin + int(delays.max())
    if band is None:
        offset, weight = _channel_scaling(data, start, stop, chan_mask)
    else:  # the band's rows hold each channel's reads: indices shifted into them
        _check_band(band, start + delays, nwin)
        offset, weight = _channel_scaling(band.head, start, stop, chan_mask, nt=band.nsamples)
        delays = band.shifted(delays)
    waterfall = np.empty((freqs.size, size), np.float32)
    dedispersed_means(data, start, delays, factor, offset, weight, waterfall)
    return _freq_time_image(waterfall, freqs, size)


def _check_band(band: ChannelBand, first: np.ndarray, length: int) -> None:
    """Raise unless each channel's window samples ``first[c] .. + length`` that lie in the
    window lie in its row of ``band``."""
    lo = np.clip(first, 0, band.nsamples)
    hi = np.clip(first + length, 0, band.nsamples)
    inside = (lo >= band.base) & (hi <= band.base + band.rows.shape[1])
    if not np.all(inside | (hi <= lo)):
        raise ParameterError("cutout: the channel band does not hold the samples it reads")


def _freq_time_image(waterfall: np.ndarray, freqs: np.ndarray, size: int) -> np.ndarray:
    """The waterfall ``[nchan, size]`` rebinned to ``size`` channels, highest frequency
    first, transposed to ``[size (time), size (frequency)]`` and standardised."""
    order = np.argsort(-freqs, kind="stable")  # highest frequency first
    first, weights = _rebin_weights(freqs.size, size)
    rebinned = np.empty((size, waterfall.shape[1]), np.float32)  # [size freq, size time]
    rebin_rows_into(waterfall, order, first, weights, rebinned)
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
) -> np.ndarray:
    """Band-summed series at ``ndm`` DMs from 0 to ``2 * dm``: ``[ndm, size]`` float32.

    Arguments as in :func:`freq_time_cutout`. Row ``i`` is DM ``2 * dm * i / (ndm - 1)``; the
    candidate sits near row ``ndm // 2`` and column ``size // 2``.
    """
    if ndm < 2:
        raise ParameterError(f"a DM-time cutout needs at least 2 DM rows, got {ndm}")
    return _cutouts(data, freqs_mhz, tsamp, dm, sample, width_samples, size, ndm, chan_mask)[1]


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
    """Both FETCH cutouts ``(freq_time, dm_time)`` of one candidate from one pass over the
    data window (arguments as :func:`freq_time_cutout`)."""
    return _cutouts(data, freqs_mhz, tsamp, dm, sample, width_samples, size, size, chan_mask)


#: Floats of normalised window one chunk of channels of :func:`_cutouts` holds at a time
#: (64 MiB). A chunk of the file's time-major spectra is transposed as one, so wider chunks
#: read each spectrum's cache lines fewer times: a FAST raw candidate at DM 2989 (4096
#: channels, a 9 s triangle of samples) takes 2.4 s with 2 Mi floats, 1.3 s with 16 Mi.
CHUNK_FLOATS = 16 * 1024**2


def _cutouts(  # noqa: PLR0917
    data: np.ndarray, freqs_mhz: np.ndarray, tsamp: float, dm: float, sample: int,
    width_samples: int, size: int, ndm: int, chan_mask: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """``(freq_time, dm_time or None)``, the DM-time image only when ``ndm > 0``.

    ``data`` ``[nchan, nt]`` may be channel-major or a transposed view of time-major
    spectra (the file's layout), whose chunks are then transposed only as far as their
    channels need. Each channel is read only as far as its own largest delay needs, a
    chunk of channels at a time: normalised, each sample replaced by the sum of the
    ``factor`` samples from it on (phase-major,
    :func:`~drafts_ops.detect.kernels.normalised_phased_sums`), then shifted by its delay at
    every DM row and added up only at the ``size`` decimated samples the image keeps
    (:func:`~drafts_ops.detect.kernels.strided_dedisperse`): the dedispersed series
    averaged over ``factor`` samples, exactly, at a ``factor``-th of the cost and without a
    float copy of the whole window.
    """
    data, freqs = _checked(data, freqs_mhz, tsamp, dm, width_samples, size)
    factor, nwin, start = _frame(sample, width_samples, size)
    ft_delays = delay_table(np.array([float(dm)]), freqs, tsamp)[0]
    dm_rows = np.linspace(0.0, 2.0 * float(dm), ndm) if ndm else np.array([float(dm)])
    dt_delays = delay_table(dm_rows, freqs, tsamp)
    lengths = _read_lengths(dt_delays.max(axis=0), nwin, factor)
    offset, weight = _channel_scaling(data, start, start + nwin + int(dt_delays.max()), chan_mask)
    lo = max(start, 0)
    piece = data[:, lo : max(min(start + int(lengths.max()), data.shape[1]), lo)]
    nchan = freqs.size
    waterfall = np.empty((nchan, size), np.float32)
    dm_time = np.zeros((ndm, size), np.float32)
    scratch = np.empty(max(CHUNK_FLOATS, int(lengths.max())), np.float32)
    chunks = _chunks(lengths, scratch.size)
    time_major = piece.strides[0] < piece.strides[1]
    if time_major:  # the file's layout: each chunk's channels transposed, only as far as needed
        size_max = max((c1 - c0) * int(lengths[c0:c1].max()) for c0, c1 in chunks)
        transposed = np.empty(size_max, piece.dtype)
    for c0, c1 in chunks:
        rows = np.concatenate([[0], np.cumsum(lengths[c0:c1])])
        part = piece[c0:c1]
        if time_major:
            part = part[:, : max(min(start + int(lengths[c0:c1].max()) - lo, part.shape[1]), 0)]
            out = transposed[: part.size].reshape(part.shape)
            transpose_into(out, part.T)
            part = out
        normalised_phased_sums(part, lo - start, offset[c0:c1], weight[c0:c1], factor, rows,
                               scratch)  # fmt: skip
        strided_shift(scratch, rows, ft_delays[c0:c1], factor, waterfall[c0:c1])
        if ndm:
            strided_dedisperse(scratch, rows, dt_delays[:, c0:c1], factor, dm_time)
    return _freq_time_image(waterfall, freqs, size), (_standardise(dm_time) if ndm else None)


def _chunks(lengths: np.ndarray, capacity: int) -> list[tuple[int, int]]:
    """Consecutive channel ranges whose ``lengths`` add up to at most ``capacity`` (one
    channel at least)."""
    ends = np.cumsum(lengths)
    chunks, c0 = [], 0
    while c0 < len(lengths):
        base = ends[c0 - 1] if c0 else 0
        c1 = max(int(np.searchsorted(ends, base + capacity, side="right")), c0 + 1)
        chunks.append((c0, c1))
        c0 = c1
    return chunks


def _frame(sample: int, width_samples: int, size: int) -> tuple[int, int, int]:
    """Decimation factor, raw window length and first raw sample of a candidate's cutout."""
    factor = time_decimation_factor(width_samples)
    nwin = size * factor
    return factor, nwin, int(sample) - nwin // 2


def _checked(data, freqs_mhz, tsamp: float, dm: float, width_samples: int,  # noqa: PLR0917
             size: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(data, freqs)`` as arrays, the arguments of a cutout checked."""
    _check(freqs_mhz, tsamp, dm, width_samples, size)
    data = np.asarray(data)
    if data.ndim != 2:
        raise ParameterError(f"cutouts need data [nchan, nt], got shape {data.shape}")
    return data, np.asarray(freqs_mhz, dtype=np.float64)


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


def _channel_scaling(
    data: np.ndarray, start: int, stop: int, chan_mask: np.ndarray | None, *,
    nt: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per-channel ``(offset, weight)`` that normalise the window ``[start, stop)``: median
    and 1 / MAD-sigma from the first :data:`CUTOUT_STATS_SAMPLES` samples of it that exist,
    read in the data's own dtype; weight 0 for masked or constant channels (padding equals
    the median, 0). ``nt``: the samples of a window of which ``data`` holds the first
    (a :class:`ChannelBand`'s head)."""
    nchan, held = data.shape
    nt = held if nt is None else int(nt)
    if max(start, 0) > 0 and held < nt:
        raise ParameterError("cutout: a window's head holds no samples after its start")
    mask = np.zeros(nchan, bool) if chan_mask is None else np.asarray(chan_mask, dtype=bool)
    if mask.shape != (nchan,):
        raise ParameterError(f"channel mask of shape {mask.shape} does not fit {nchan} channels")
    lo = max(start, 0)
    view = data[:, lo : max(lo, min(lo + CUTOUT_STATS_SAMPLES, stop, nt))]
    head = np.empty(view.shape, view.dtype)  # a transposed view of the file's spectra: 10x
    transpose_into(head, view.T)  # faster than numpy's copy
    if head.shape[1] == 0:
        return np.zeros(nchan), np.zeros(nchan)
    if head.dtype not in (np.uint8, np.uint16, np.float32):
        head = head.astype(np.float32)
    stats = channel_location_scale(head, head.shape[1], "mad")
    bad = mask | (stats[:, 1] <= 0)
    return stats[:, 0], np.where(bad, 0.0, 1.0 / np.maximum(stats[:, 1], 1e-30))


@functools.lru_cache(maxsize=8)
def _rebin_weights(nin: int, nout: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights averaging ``nin`` bins onto ``nout`` by overlap (anti-aliased), sparse: output
    bin ``k`` is ``sum_j weights[k, j] * in[first[k] + j]`` (float32, zero-padded;
    read-only, built once per shape)."""
    edges_in = np.linspace(0.0, 1.0, nin + 1)
    edges_out = np.linspace(0.0, 1.0, nout + 1)
    lo = np.maximum(edges_out[:-1, None], edges_in[None, :-1])
    hi = np.minimum(edges_out[1:, None], edges_in[None, 1:])
    dense = np.clip(hi - lo, 0.0, None)
    dense /= dense.sum(axis=1, keepdims=True)
    first = np.argmax(dense > 0, axis=1)
    width = int((dense > 0).sum(axis=1).max())
    weights = np.zeros((nout, width), np.float32)
    for k in range(nout):
        row = dense[k, first[k] : first[k] + width]
        weights[k, : row.size] = row
    first = first.astype(np.int64)
    first.flags.writeable = weights.flags.writeable = False
    return first, weights


def _standardise(image: np.ndarray) -> np.ndarray:
    """Zero mean, unit standard deviation (unchanged scale for a constant image), float32."""
    image = image - image.mean()
    std = image.std()
    return (image / std if std > 0 else image).astype(np.float32)
