"""Candidate products: each candidate's FETCH cutouts, computed once at the searched
resolution and shared by the classifier, the ``.h5`` writer and the PNG.

The window is read through the search's own reader path
(:func:`drafts_ops.pipeline.read_searched`): raw samples, averaged to the searched time and
frequency resolution before any float copy, so a 4096-channel file searched at x8 x2
decimation costs 16 times less than its raw resolution would; a decimating search's kept
samples are read as a view of their file; without decimation, a view of the file's own
time-major layout, of which the cutouts transpose each chunk of channels only as far as
its delays need. Both images are computed a chunk of channels at a time, each channel only
as far as its own delay needs, and the DM-time image only at the decimated samples it
keeps (:mod:`drafts_ops.detect.cutouts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.cluster import PulseShape
from drafts_ops.detect.cutouts import (
    CUTOUT_STATS_SAMPLES,
    channel_read_stops,
    cutout_pair,
    cutout_span,
    freq_time_cutout,
    time_decimation_factor,
)
from drafts_ops.detect.kernels import averages_to_sums_into, standardised_profile
from drafts_ops.detect.preprocess import (
    MAD_TO_STD,
    auto_mask,
    decimate_mask,
    robust_location_scale,
    static_mask,
)
from drafts_ops.errors import ParameterError
from drafts_ops.io.reader import advise_mapping

if TYPE_CHECKING:
    from collections.abc import Callable

    from drafts_ops.io.reader import ObservationReader
    from drafts_ops.pipeline import SearchPlan


#: Channels copied at a time when a window spans several kept files.
READ_CHANNEL_CHUNK = 64
#: Name pattern of the searched-resolution copies a decimating search keeps for cutouts.
SEARCHED_PATTERN = "searched_*.npy"


class SearchedSamples:
    """The searched (decimated) samples a decimating search kept, for its cutouts.

    A decimating pass keeps each sample its blocks read once, from its first block's
    start on, in files named by their first sample (``work/searched_<sample>.npy``,
    ``[nchan, n]``: uint16 sums of 8-bit data, else float32 averages;
    :class:`~drafts_ops.pipeline.DecimatedReader`); this reads any span back as ``[nchan,
    n]``, across files. A 4096-channel 8-bit file searched at x8 x2 keeps 1/8 of its
    volume (1/16 of the samples at 2 bytes each).
    """

    def __init__(self, files: list[tuple[int, Path]], factor: int = 1) -> None:
        self.parts = sorted((start, np.load(path, mmap_mode="r")) for start, path in files)
        #: Raw samples averaged per searched sample (the uint16 parts hold their sums).
        self.factor = int(factor)

    @classmethod
    def find(cls, work_dir: Path, plan: SearchPlan) -> SearchedSamples | None:
        """The samples a decimating search of ``plan`` kept in ``work_dir`` (or ``None``)."""
        files = [(int(path.stem.split("_")[1]), path)  # named by their first sample
                 for path in Path(work_dir).glob(SEARCHED_PATTERN)]  # fmt: skip
        return cls(files, plan.config.decimation_factor) if files else None

    @staticmethod
    def disk_bytes(plan: SearchPlan) -> int:
        """Bytes a search of ``plan`` keeps (0 without decimation): each searched sample
        once, as uint16 sums of 8-bit data, else float32 (what :meth:`save` writes)."""
        cfg = plan.config
        if not cfg.decimates or not plan.blocks:
            return 0
        sums = plan.raw_header.nbits <= 8 and 255 * cfg.decimation_factor <= 65535
        samples = plan.blocks[-1].stop - plan.blocks[0].start
        return plan.header.nchans * samples * (2 if sums else 4)

    @staticmethod
    def save(path: Path, samples: np.ndarray, factor: int = 1) -> Path:
        """Write searched samples ``[nchan, n]`` (float32 averages of ``factor`` raw
        samples) to ``path`` (a ``.npy`` file of their own): written, not mapped, so that
        the process's memory does not grow with the file (a mapped file of the whole search
        kept every block's pages resident: +57 MiB per FAST raw block at x8 t x2 f).

        Averages of integer samples (8-bit data) are kept as their uint16 sums, which give
        them back exactly: half the bytes to write (FAST raw x8 t x2 f keeps 1/8 of the
        file's volume instead of 1/4). Other data keep their float32 averages.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        samples = np.asarray(samples, dtype=np.float32)
        if factor > 1 and samples.size:
            sums = np.empty(samples.shape, np.uint16)
            if averages_to_sums_into(samples, factor, sums):
                np.save(path, sums)
                return path
        np.save(path, np.ascontiguousarray(samples))
        return path

    def release(self) -> None:
        """Drop the kept files' mapped pages from this process (madvise): the pages of every
        window read stay resident until then, so a search's memory would grow with its
        candidates (FAST raw x8 t x2 f, 120 s, 23 candidates: 1206 -> 1960 MiB)."""
        for _, array in self.parts:
            advise_mapping(array, "MADV_DONTNEED")

    def read_averages_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """The averages of samples ``[start, stop)``, exactly as they were kept, into
        ``out[:, : stop - start]`` (float32); the pages read are released."""
        part = self.read(start, stop)
        if part.shape[1] != stop - start:
            raise ParameterError(f"kept samples hold {part.shape[1]} of [{start}, {stop})")
        np.multiply(part, self._to_averages(part), out=out[:, : stop - start])
        self.release()

    def _to_averages(self, part: np.ndarray) -> np.float32:
        """What ``part``'s samples are multiplied by to give the float32 averages, bit for
        bit: ``1 / factor`` for the uint16 sums, 1 for float32 averages."""
        return np.float32(1.0 / self.factor if part.dtype == np.uint16 else 1.0)

    def read(self, start: int, stop: int, *, row_stops: np.ndarray | None = None) -> np.ndarray:
        """Samples ``[start, stop)`` ``[nchan, n]`` as kept (uint16 sums or float32
        averages, :meth:`save`: the cutouts normalise each channel, so the scale does not
        matter), clipped to what exists: a read-only view of the mapped file where one part
        holds them all, else a copy (float32 where the parts' dtypes differ). With
        ``row_stops`` (a sample per channel, :func:`channel_read_stops`) a copy holds each
        channel only up to its stop, a chunk of channels at a time, and zeros beyond (pages
        never written, never resident): at DM 3000 about half the window."""
        for first, array in self.parts:
            if first <= start and stop <= first + array.shape[1]:
                return array[:, start - first : stop - first]
        nchan = self.parts[0][1].shape[0]
        dtypes = {array.dtype for _, array in self.parts}
        mixed = len(dtypes) > 1  # some blocks' averages were not sums: all as averages
        out = np.zeros((nchan, max(stop - start, 0)), np.float32 if mixed else dtypes.pop())
        stops = np.full(nchan, stop) if row_stops is None else np.minimum(row_stops, stop)
        for c0 in range(0, nchan, READ_CHANNEL_CHUNK):
            c1 = min(c0 + READ_CHANNEL_CHUNK, nchan)
            chunk_stop = int(stops[c0:c1].max())
            for first, array in self.parts:
                a, b = max(start, first), min(chunk_stop, first + array.shape[1])
                if b > a:
                    part = array[c0:c1, a - first : b - first]
                    if mixed:
                        part = part * self._to_averages(part)
                    out[c0:c1, a - start : b - start] = part
        ends = [min(stop, first + array.shape[1]) for first, array in self.parts
                if first < stop and first + array.shape[1] > start]  # fmt: skip
        return out[:, : max(ends, default=start) - start]


class CutoutMaker:
    """Makes ``(freq_time, dm_time)`` cutouts of candidates of one search plan.

    ``made`` counts the candidates processed (tests check that a search makes each
    candidate's cutouts once).
    """

    def __init__(
        self, reader: ObservationReader, plan: SearchPlan, searched: SearchedSamples | None = None,
        *, origin: int | None = None,
    ) -> None:  # fmt: skip
        self.reader = reader
        self.plan = plan
        self.searched = searched
        #: Sample of the stream where candidate sample 0 lies (default: the plan's origin).
        self.origin = plan.origin if origin is None else int(origin)
        cfg = plan.config
        mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
        if cfg.freq_decimation > 1:
            mask = decimate_mask(mask, cfg.freq_decimation)
        self.static_mask = mask
        self.made = 0
        self._shapes: dict[tuple[int, int, int, int], PulseShape] = {}

    def cutouts(self, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
        """FETCH cutouts ``(freq_time [256, 256], dm_time [256, 256])`` of ``cand``."""
        *args, mask = self._window(cand)
        self.made += 1
        pair = cutout_pair(*args, chan_mask=mask)
        self._release()
        return pair

    def pulse_shape(self, cand: Candidate) -> PulseShape:
        """``cand``'s pulse from its dedispersed waterfall: emitting band
        (:func:`emitting_band`), width and S/N at that width (:func:`pulse_width`).
        Measured once per position (arrival, DM trial, boxcar, band)."""
        key = (cand.sample, cand.dm_index, cand.width_samples, cand.subband or 0)
        if key not in self._shapes:
            data, freqs, tsamp, dm, sample, width, mask = self._window(cand)
            ft = freq_time_cutout(data, freqs, tsamp, dm, sample, width, chan_mask=mask)
            self._release()
            pulse, gain = pulse_width(ft, width)
            f_lo, f_hi = emitting_band(ft, freqs, width, pulse)
            self._shapes[key] = PulseShape(f_lo, f_hi, pulse, cand.snr * gain)
        return self._shapes[key]

    def snr_outside(self, cand: Candidate, f_lo_mhz: float, f_hi_mhz: float) -> float:
        """S/N of ``cand``'s pulse (its boxcar, at its DM) summed over the unmasked channels
        outside ``f_lo_mhz..f_hi_mhz``: each channel dedispersed over +-8 boxcars around
        the pulse only, standardised by its mean and standard deviation there (pixels then
        clipped to :data:`SPECTRUM_CLIP_SIGMA`); the summed profile's boxcar at the pulse
        over the profile's robust scatter (white noise assumed). 0 when no channel lies
        outside."""
        return self._channels_snr(cand, lambda f: (f < f_lo_mhz) | (f > f_hi_mhz))

    def snr_within(self, cand: Candidate, f_lo_mhz: float, f_hi_mhz: float) -> float:
        """S/N of ``cand``'s pulse summed over the unmasked channels within ``f_lo_mhz..
        f_hi_mhz`` (as :meth:`snr_outside`); 0 when no channel lies there."""
        return self._channels_snr(cand, lambda f: (f >= f_lo_mhz) & (f <= f_hi_mhz))

    def _channels_snr(self, cand: Candidate, chosen: Callable[[np.ndarray], np.ndarray]) -> float:
        """S/N of ``cand``'s pulse over the unmasked channels whose frequencies (MHz) are
        ``chosen`` (see :meth:`snr_outside`)."""
        from drafts_ops.dedisp.plan import dispersion_delay_s

        data, freqs, tsamp, dm, sample, width, mask = self._window(cand)
        channels = chosen(freqs) & ~mask
        if not channels.any():
            self._release()
            return 0.0
        width = max(int(width), 1)
        span = 8 * max(width, 8)
        delays = np.round(dispersion_delay_s(dm, freqs[channels], freqs.max()) / tsamp)
        starts = sample - span + delays.astype(np.int64)
        profile = standardised_profile(data, np.flatnonzero(channels), starts, 2 * span + 1,
                                       SPECTRUM_CLIP_SIGMA)  # fmt: skip
        self._release()
        first = span - width // 2
        on = profile[first : first + width].sum()
        off = np.r_[profile[: max(first - width, 1)], profile[first + 2 * width :]]
        location, noise = robust_location_scale(off, dtype=np.float64)
        return float((on - width * location) / (noise * np.sqrt(width))) if noise > 0 else 0.0

    def _release(self) -> None:
        """Drop the pages a candidate's window mapped (the file's and the kept samples')."""
        self.reader.release(self.plan.raw_header.nsamples)
        if self.searched is not None:
            self.searched.release()

    def _window(self, cand: Candidate) -> tuple:
        """The searched samples around ``cand`` (``[nchan, n]``; a view of the searched
        samples a decimating search kept) and the arguments of its cutouts."""
        from drafts_ops.pipeline import read_searched

        header, cfg = self.plan.header, self.plan.config
        freqs = header.chan_freqs
        sample = cand.sample + self.origin
        start, stop = cutout_span(freqs, header.tsamp, cand.dm, sample, cand.width_samples)
        lo, hi = max(start, 0), min(stop, header.nsamples)
        if self.searched is not None:  # each channel only as far as the cutouts read it
            stops = channel_read_stops(freqs, header.tsamp, cand.dm, sample, cand.width_samples)
            data = self.searched.read(lo, max(hi, lo + 1), row_stops=stops)
        else:  # undecimated: the file's own layout, no copy; the cutouts transpose what they use
            data = read_searched(self.reader, self.plan, lo, max(hi, lo + 1), file_layout=True)
        mask = self.static_mask.copy()
        if cfg.auto_mask and data.shape[1] > 1:  # channel statistics near the candidate
            head = np.ascontiguousarray(data[:, :CUTOUT_STATS_SAMPLES])
            mask |= auto_mask(head, cfg.mask_threshold)
        return data, freqs, header.tsamp, cand.dm, sample - lo, cand.width_samples, mask


#: Sub-bands (fraction of the band) over which :func:`emitting_band` smooths a spectrum.
SPECTRUM_SMOOTHING = 0.1
#: Pixels of a waterfall beyond this many times its noise are clipped in a spectrum: RFI
#: that crosses the pulse in a few pixels then weighs no more than the burst.
SPECTRUM_CLIP_SIGMA = 5.0


def emitting_band(
    freq_time: np.ndarray, freqs_mhz: np.ndarray, width_samples: int,
    pulse_samples: float | None = None,
) -> tuple[float, float]:  # fmt: skip
    """Band (MHz) where a candidate's pulse emits, from its FETCH waterfall
    ``[time, frequency]`` (highest frequency first, centred on the pulse; made for a
    boxcar of ``width_samples``).

    The spectrum is the sum over the pulse's columns (``pulse_samples`` wide, default the
    boxcar's width) less each channel's median off the pulse, each pixel clipped to
    :data:`SPECTRUM_CLIP_SIGMA` times the noise, smoothed over
    :data:`SPECTRUM_SMOOTHING` of the band; the band is the contiguous run around its
    peak above half the peak.
    """
    ntime, nfreq = freq_time.shape
    factor = time_decimation_factor(int(width_samples))
    pulse = width_samples if pulse_samples is None else pulse_samples
    half = max(1, int(np.ceil(pulse / factor / 2)))
    centre = ntime // 2
    on = slice(max(centre - half, 0), centre + half + 1)
    off = np.r_[0 : max(centre - 2 * half, 1), min(centre + 2 * half + 1, ntime - 1) : ntime]
    deviation = freq_time[off]
    baseline = np.median(deviation, axis=0)  # a channel's RFI or offset off the pulse
    deviation -= baseline
    sigma = MAD_TO_STD * np.median(np.abs(deviation)) or 1.0
    clip = SPECTRUM_CLIP_SIGMA * sigma  # RFI crossing the pulse in a few pixels
    spectrum = np.clip(freq_time[on] - baseline, -clip, clip).sum(axis=0)
    k = max(1, round(SPECTRUM_SMOOTHING * nfreq))
    smooth = np.convolve(spectrum, np.ones(k) / k, mode="same")
    peak = int(np.argmax(smooth))
    above = smooth > 0.5 * smooth[peak]
    lo = peak
    while lo > 0 and above[lo - 1]:
        lo -= 1
    hi = peak
    while hi < nfreq - 1 and above[hi + 1]:
        hi += 1
    f_top, f_bottom = float(np.max(freqs_mhz)), float(np.min(freqs_mhz))
    step = (f_top - f_bottom) / nfreq
    return f_top - (hi + 1) * step, f_top - lo * step


#: Widest pulse :func:`pulse_width` looks for, in waterfall columns (of the 256).
MAX_PULSE_COLUMNS = 32
#: S/N a profile must show at the candidate's own width for :func:`pulse_width` to measure.
PULSE_MIN_SNR = 5.0


def pulse_width(freq_time: np.ndarray, width_samples: int) -> tuple[float, float]:
    """Width (samples) of a candidate's pulse and its S/N gain over the candidate's boxcar,
    from its FETCH waterfall ``[time, frequency]`` (centred on the pulse; each column
    averages ``time_decimation_factor(width_samples)`` samples).

    The band-summed profile, less its median, is searched with boxcars of 1 to
    :data:`MAX_PULSE_COLUMNS` columns that overlap the centre; S/N is ``sum / (sigma
    sqrt(columns))`` with ``sigma`` the profile's robust noise (white noise assumed). The
    best boxcar's width and S/N over the one at the candidate's own width give the result;
    width ``width_samples`` and gain 1 when the profile shows no pulse of S/N >=
    :data:`PULSE_MIN_SNR` there.
    """
    factor = time_decimation_factor(int(width_samples))
    profile = np.asarray(freq_time, np.float64).sum(axis=1)
    median, sigma = robust_location_scale(profile, dtype=np.float64)
    profile -= median
    sigma = float(sigma) or 1.0
    own = max(1, round(width_samples / factor))
    widths = np.unique(np.r_[own, np.round(2.0 ** np.arange(0, 5.5, 0.5)).astype(int)])
    widths = widths[widths <= min(MAX_PULSE_COLUMNS, profile.size // 4)]
    centre = profile.size // 2
    cumulative = np.r_[0.0, np.cumsum(profile)]
    snr = {}
    for n in widths:
        starts = np.arange(max(centre - n + 1, 0), min(centre, profile.size - n) + 1)
        snr[n] = float(np.max(cumulative[starts + n] - cumulative[starts])) / (sigma * np.sqrt(n))
    if snr.get(own, 0.0) < PULSE_MIN_SNR:
        return float(width_samples), 1.0
    n = max(snr, key=snr.get)
    return float(max(n * factor, width_samples)), max(snr[n] / snr[own], 1.0)
