"""A candidate's pulse measured on its FETCH waterfall: the band where it emits and its
width (for the merge's sidelobe and hidden-burst rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.detect.cutouts import (
    time_decimation_factor,
)
from drafts_ops.detect.preprocess import (
    MAD_TO_STD,
    robust_location_scale,
)

if TYPE_CHECKING:
    pass


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


@dataclass(frozen=True)
class PulseShape:
    """A candidate's pulse as its dedispersed waterfall shows it: the band where it emits
    (MHz), its width (samples, may exceed the search's widest boxcar) and its S/N at that
    width."""

    f_lo_mhz: float
    f_hi_mhz: float
    width_samples: float
    snr: float
