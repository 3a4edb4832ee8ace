"""A candidate's window of searched samples: its FETCH cutouts, computed once at the
searched resolution and shared by the classifier, the ``.h5`` writer and the PNG, and the
measurements of its pulse that the merge needs (emitting band, width, S/N in and out of
a band).

The window is read through the search's own reader path
(:func:`~drafts_ops.search.samples.read_searched`): raw samples, averaged to the searched
time and frequency resolution before any float copy, so a 4096-channel file searched at x8
x2 decimation costs 16 times less than its raw resolution would; a decimating search's
kept samples are read as a view of their file; without decimation, a view of the file's
own time-major layout, of which the cutouts transpose each chunk of channels only as far
as its delays need. Both images are computed a chunk of channels at a time, each channel
only as far as its own delay needs, and the DM-time image only at the decimated samples it
keeps (:mod:`drafts_ops.detect.cutouts`).

A candidate of a time-averaging DM range (:mod:`drafts_ops.dedisp.ddplan`) has its pulse
measured at the searched resolution, like any other: the narrow windows the merge reads
resolve what the range's averaging blurred (on the FAST-like bench, with measurements at
the range's resolution the merge kept 11 pieces of a drifting RFI trace: 35 candidates
instead of 24, every burst found in both). Its cutouts are made at the range's
resolution, from samples averaged as the file is read: they decimate the window by the
range's factor anyway (FETCH's ``width // 2``), and averaging first is 1.75x cheaper at
4096 channels (FAST raw bench: 20 s against 35 s for 49 candidates).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.cutout_kernels import standardised_profile
from drafts_ops.detect.cutouts import (
    CUTOUT_STATS_SAMPLES,
    ChannelBand,
    band_span,
    channel_read_stops,
    cutout_pair,
    cutout_span,
    freq_time_cutout,
)
from drafts_ops.detect.preprocess import (
    auto_mask,
    decimate_mask,
    robust_location_scale,
    static_mask,
)
from drafts_ops.detect.pulse import SPECTRUM_CLIP_SIGMA, PulseShape, emitting_band, pulse_width
from drafts_ops.io.reader import ObservationReader
from drafts_ops.search.plan import SearchPlan
from drafts_ops.search.samples import (
    SearchedSamples,
    read_averaged,
    read_band,
    read_searched,
    read_window,
)

#: Share of the memory budget up to which the merge reads a candidate's window as a view
#: of the file (mapped whole while measured); a larger window is read as its channel band.
WINDOW_VIEW_SHARE = 0.25


def pulse_span(width_samples: int) -> int:
    """Samples either side of a pulse of ``width_samples`` over which the merge's band S/N
    (:meth:`CutoutMaker.snr_outside`) standardises each channel: 8 boxcars, at least 64."""
    return 8 * max(int(width_samples), 8)


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
        #: The last channel band read and its candidate's position (its measurements
        #: follow one another: the pulse, then the S/N outside and inside its band).
        self._last_band: tuple[tuple[int, float, int], ChannelBand] | None = None

    def cutouts(self, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
        """FETCH cutouts ``(freq_time [256, 256], dm_time [256, 256])`` of ``cand``."""
        *args, mask = self._window(cand, averaged=True)
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
            data, freqs, tsamp, dm, sample, width, mask = self._window(cand, band=True)
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

        data, freqs, tsamp, dm, sample, width, mask = self._window(cand, band=True)
        channels = chosen(freqs) & ~mask
        if not channels.any():
            self._release()
            return 0.0
        width = max(int(width), 1)
        span = pulse_span(width)
        delays = np.round(dispersion_delay_s(dm, freqs[channels], freqs.max()) / tsamp)
        starts = sample - span + delays.astype(np.int64)
        if isinstance(data, ChannelBand):  # each channel's samples from its row
            data, starts = data.rows, data.shifted(starts, channels)
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

    def _window(self, cand: Candidate, *, averaged: bool = False, band: bool = False) -> tuple:
        """The searched samples around ``cand`` (``[nchan, n]``; a view of the searched
        samples a decimating search kept) and the arguments of its cutouts; ``averaged``:
        at its DM range's resolution where that range averages samples; ``band``: only
        what the merge's measurements read (:class:`ChannelBand`, its sweep ``+-``
        :func:`pulse_span`), read a chunk at a time so that the window is never resident
        whole (at 4096 channels a high-DM window of 32-bit samples is GBs), where the
        file's spectra are views of it."""

        header, cfg = self.plan.header, self.plan.config
        freqs = header.chan_freqs
        sample = cand.sample + self.origin
        factor = self.plan.factor_of(cand.dm_index)
        if averaged and factor > 1:  # a time-averaging DM range's candidate's cutouts
            return self._coarse_window(cand, sample, factor)
        start, stop = cutout_span(freqs, header.tsamp, cand.dm, sample, cand.width_samples)
        lo, hi = max(start, 0), max(min(stop, header.nsamples), max(start, 0) + 1)
        data = self._band(cand, lo, hi) if band and self.searched is None else None
        if data is not None:
            head = data.head
        elif self.searched is not None:  # each channel only as far as the cutouts read it
            stops = channel_read_stops(freqs, header.tsamp, cand.dm, sample, cand.width_samples)
            data = head = self.searched.read(lo, hi, row_stops=stops)
        else:  # undecimated: the file's own layout, no copy; the cutouts transpose what they use
            data = head = read_searched(self.reader, self.plan, lo, hi, file_layout=True)
        mask = self.static_mask.copy()
        if cfg.auto_mask and hi - lo > 1:  # channel statistics near the candidate
            head = np.ascontiguousarray(head[:, :CUTOUT_STATS_SAMPLES])
            mask |= auto_mask(head, cfg.mask_threshold)
        return data, freqs, header.tsamp, cand.dm, sample - lo, cand.width_samples, mask

    def _band(self, cand: Candidate, lo: int, hi: int) -> ChannelBand | None:
        """The :class:`ChannelBand` of ``cand``'s window ``[lo, hi)`` (samples) that
        :meth:`pulse_shape` and :meth:`snr_outside` read; ``None`` for a window within
        :data:`WINDOW_VIEW_SHARE` of the memory budget (read as a view of the file, the
        measurements cost less than the band's copy: on the FAST-like bench, whose
        windows are ~70 MB, 1.2 against 1.7-2.5 s of merge) or where it cannot be read so
        (:func:`read_band`)."""
        header, raw, cfg = self.plan.header, self.plan.raw_header, self.plan.config
        window_mib = (hi - lo) * raw.nchans * max(raw.nbits, 8) / 8 / 1024**2
        if window_mib <= WINDOW_VIEW_SHARE * cfg.memory_budget_mib:
            return None
        key = (cand.sample, cand.dm, cand.width_samples)
        if self._last_band is not None and self._last_band[0] == key:
            return self._last_band[1]
        base, length = band_span(header.chan_freqs, header.tsamp, cand.dm,
                                 cand.sample + self.origin - lo, cand.width_samples, hi - lo,
                                 margin=pulse_span(cand.width_samples) + 2)  # fmt: skip
        band = read_band(self.reader, self.plan, lo, hi, base=base, length=length)
        self._last_band = None if band is None else (key, band)
        return band

    def _coarse_window(self, cand: Candidate, sample: int, factor: int) -> tuple:
        """:meth:`_window` of the cutouts of a candidate found by a DM range averaging
        ``factor`` searched samples: the window at that range's resolution, the sample,
        width and sample time in its units (a cutout costs ``factor`` times less): each
        channel only as far as the cutouts read it, uint16 sums of ``factor`` samples of an
        8-bit file or float32 averages of wider ones (:func:`read_window`); else float32
        averages of the whole window."""
        header, cfg = self.plan.header, self.plan.config
        freqs, tsamp = header.chan_freqs, header.tsamp * factor
        coarse = sample // factor
        width = max(1, round(cand.width_samples / factor))
        start, stop = cutout_span(freqs, tsamp, cand.dm, coarse, width)
        lo, hi = max(start, 0), max(min(stop, header.nsamples // factor), max(start, 0) + 1)
        stops = channel_read_stops(freqs, tsamp, cand.dm, coarse, width)
        data = read_window(self.reader, self.plan, lo, hi, factor, row_stops=stops)
        if data is None:
            data = read_averaged(self.reader, self.plan, lo, hi, factor)
        mask = self.static_mask.copy()
        if cfg.auto_mask and data.shape[1] > 1:
            mask |= auto_mask(np.ascontiguousarray(data[:, :CUTOUT_STATS_SAMPLES]),
                              cfg.mask_threshold)  # fmt: skip
        return data, freqs, tsamp, cand.dm, coarse - lo, width, mask
