"""Dispersed bursts: specification, noise-free signal, and the S/N that sets their amplitude.

A burst is a Gaussian of full width at half maximum ``width_s`` that arrives at the top
channel frequency ``f_ref`` at ``t_s`` and at frequency ``f`` ``dispersion_delay_s(dm, f,
f_ref)`` later. In each channel it is convolved with

* the in-channel dispersion smearing, a boxcar of ``smearing_s(dm, chan_bw, f)``,
* scattering, a one-sided exponential with ``tau(f) = scattering_s * (f / f_ref)**-4``,
* the sampling: sample ``k`` holds the mean over ``[(k - 1/2) tsamp, (k + 1/2) tsamp)``, so
  sample ``k`` is centred on ``k * tsamp`` (time 0 is the centre of the first sample).

Gaussian and boxcar are integrated exactly (closed form); the exponential is applied on a
grid 8 times finer than ``tsamp``. The spectral shape is ``(f / f_ref)**spectral_index``,
times a Gaussian envelope in frequency when ``band_centre_mhz``/``band_fwhm_mhz`` are set.

Signal values are in units of the per-channel noise rms (before quantisation).

**S/N definition.** The target S/N of a burst is the matched-filter S/N of its best
dedispersed boxcar::

    S/N = max over (start, w) of  sum_c sum_{k in box_c} s[c, k] / (sigma * sqrt(nchan * w))

where ``s`` is the noise-free signal, ``sigma`` the per-channel noise rms before
quantisation (1 in these units), and ``box_c`` the ``w`` samples from ``start +
delay_c`` with ``delay_c`` the rounded delay of :func:`~drafts_ops.dedisp.plan.delay_table`
at the burst's DM. Equivalently: normalise every channel to zero mean and unit rms,
dedisperse at the true DM, and take the best boxcar sum over ``sqrt(w)`` times the rms of
the dedispersed series (``sqrt(nchan)``) — the Heimdall / PRESTO convention of DESIGN.md.
Boxcar widths are the search's own (:func:`drafts_ops.detect.single_pulse.boxcar_widths`:
sqrt(2) apart), without the search's cap on the widest: one matched-filter S/N for the
simulator, the search, the validation report and :mod:`drafts_ops.validation.snr_loss`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import delay_table, dispersion_delay_s, smearing_s
from drafts_ops.detect.single_pulse import boxcar_widths
from drafts_ops.simulate import render_kernels

#: FWHM of a Gaussian in units of its standard deviation.
FWHM_PER_SIGMA = 2.0 * math.sqrt(2.0 * math.log(2.0))
#: The scattering tail is followed for this many scattering times (e^-10 of it is lost).
SCATTERING_TAIL = 10.0
#: Sub-samples per sample on which scattering is applied.
OVERSAMPLE = 8
#: Largest burst footprint (channels x samples) rendered, to bound memory.
MAX_FOOTPRINT = 40_000_000


@dataclass(frozen=True, kw_only=True)
class BurstSpec:
    """One injected burst.

    Attributes
    ----------
    t_s : float
        Arrival time of the Gaussian's centre at the highest channel frequency, seconds from
        the centre of the first sample (this is the truth ``tcand_s``).
    dm : float
        Dispersion measure, pc cm^-3.
    snr : float
        Target matched-filter S/N (see the module docstring); sets the amplitude.
    width_s : float
        Intrinsic width, s, as the FWHM of a Gaussian (0 gives an unresolved pulse).
    scattering_s : float
        Scattering time at the highest channel frequency, s; scales as ``f**-4``.
    spectral_index : float
        Power-law index of the spectrum, amplitude ``~ (f / f_ref)**spectral_index``.
    band_centre_mhz, band_fwhm_mhz : float or None
        Centre and FWHM (MHz) of a Gaussian spectral envelope (band-limited burst); both
        or neither.
    """

    t_s: float
    dm: float
    snr: float
    width_s: float = 1e-3
    scattering_s: float = 0.0
    spectral_index: float = 0.0
    band_centre_mhz: float | None = None
    band_fwhm_mhz: float | None = None

    def __post_init__(self) -> None:
        problems = []
        for name in ("t_s", "dm", "snr", "width_s", "scattering_s", "spectral_index"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"{name} = {value!r} must be a finite number")
        if problems:
            raise ParameterError("bad burst: " + "; ".join(problems))
        if self.t_s < 0:
            problems.append(f"t_s = {self.t_s} s must be >= 0")
        if self.dm < 0:
            problems.append(f"dm = {self.dm} pc cm^-3 must be >= 0")
        if self.snr <= 0:
            problems.append(f"snr = {self.snr} must be positive")
        if self.width_s < 0:
            problems.append(f"width_s = {self.width_s} s must be >= 0")
        if self.scattering_s < 0:
            problems.append(f"scattering_s = {self.scattering_s} s must be >= 0")
        if (self.band_centre_mhz is None) != (self.band_fwhm_mhz is None):
            problems.append("band_centre_mhz and band_fwhm_mhz go together")
        elif self.band_fwhm_mhz is not None and not self.band_fwhm_mhz > 0:
            problems.append(f"band_fwhm_mhz = {self.band_fwhm_mhz} must be positive")
        if problems:
            raise ParameterError("bad burst: " + "; ".join(problems))

    def spectrum(self, freqs_mhz: np.ndarray) -> np.ndarray:
        """Relative amplitude per channel (float64), 1 at ``f_ref`` for a power law."""
        freqs = np.asarray(freqs_mhz, dtype=np.float64)
        weight = (freqs / freqs.max()) ** self.spectral_index
        if self.band_fwhm_mhz is not None:
            sigma = self.band_fwhm_mhz / FWHM_PER_SIGMA
            weight = weight * np.exp(-0.5 * ((freqs - self.band_centre_mhz) / sigma) ** 2)
        return weight


# -- pulse shapes ------------------------------------------------------------------------
def channel_widths(freqs_mhz: np.ndarray, chan_bw_mhz: float | None) -> float:
    """Channel width (MHz, positive) given or from the spacing of ``freqs_mhz``."""
    if chan_bw_mhz is not None:
        return abs(float(chan_bw_mhz))
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    if freqs.size < 2:
        raise ParameterError("one channel: give chan_bw_mhz explicitly")
    return float(np.median(np.abs(np.diff(freqs))))


def unit_profile(
    freqs_mhz: np.ndarray, tsamp: float, burst: BurstSpec, chan_bw_mhz: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Footprint of a burst with unit fluence per channel (times its spectrum).

    Returns ``first [nchan]`` (int64 first sample of each channel's window) and ``profile
    [nchan, W]`` (float64): channel ``c`` holds ``profile[c, j]`` at sample ``first[c] + j``.
    Each row sums to the channel's spectral weight (less what lies beyond the window).
    """
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    if not tsamp > 0:
        raise ParameterError(f"tsamp = {tsamp} s must be positive")
    if freqs.ndim != 1 or freqs.size == 0 or np.any(freqs <= 0):
        raise ParameterError("channel frequencies must be positive")
    f_ref = float(freqs.max())
    chan_bw = channel_widths(freqs, chan_bw_mhz)
    centre = burst.t_s + dispersion_delay_s(burst.dm, freqs, f_ref)
    smear = smearing_s(burst.dm, chan_bw, freqs)
    tau = burst.scattering_s * (freqs / f_ref) ** -4.0
    sigma = burst.width_s / FWHM_PER_SIGMA
    reach = 6.0 * sigma + smear / 2 + tsamp
    first = np.floor((centre - reach) / tsamp + 0.5).astype(np.int64)
    last = np.floor((centre + reach + SCATTERING_TAIL * tau) / tsamp + 0.5).astype(np.int64)
    width = int((last - first).max()) + 1
    if width * freqs.size > MAX_FOOTPRINT:
        raise ParameterError(
            f"burst at DM {burst.dm} spans {width} samples in {freqs.size} channels: too "
            "large to render (reduce scattering or width, or use a coarser tsamp)"
        )
    oversample = OVERSAMPLE if burst.scattering_s > 0 else 1
    profile = np.empty((freqs.size, width), dtype=np.float64)
    step = tsamp / oversample
    chunk = max(1, 2_000_000 // (width * oversample + 1))
    grid = np.arange(width * oversample + 1) * step
    for lo in range(0, freqs.size, chunk):
        sl = slice(lo, lo + chunk)
        start = (first[sl] - 0.5) * tsamp - centre[sl]
        cdf = np.empty((start.size, grid.size), np.float64)
        render_kernels.smeared_cdf_rows(start, grid, sigma, smear[sl], 1e-6 * tsamp, cdf)
        mass = np.diff(cdf, axis=1)
        if burst.scattering_s > 0:
            render_kernels.scatter_exponential(mass, tau[sl] / step)
        profile[sl] = mass.reshape(mass.shape[0], width, oversample).sum(axis=2)
    return first, profile * burst.spectrum(freqs)[:, None]


# -- S/N --------------------------------------------------------------------------------
def dedispersed_profile(
    first: np.ndarray, profile: np.ndarray, delays: np.ndarray
) -> tuple[int, np.ndarray]:
    """Sum a footprint along integer ``delays`` (samples): ``(start_sample, series)``."""
    shifted = first - np.asarray(delays, dtype=np.int64)
    start = int(shifted.min())
    series = np.zeros(int((shifted - start).max()) + profile.shape[1], dtype=np.float64)
    for offset in np.unique(shifted - start):
        rows = (shifted - start) == offset
        series[offset : offset + profile.shape[1]] += profile[rows].sum(axis=0)
    return start, series


def best_boxcar(series: np.ndarray, nchan: int) -> tuple[float, int, int]:
    """Best boxcar of a noise-free dedispersed series whose noise rms is ``sqrt(nchan)``.

    Returns ``(snr, width_samples, start_index)``.
    """
    csum = np.concatenate([[0.0], np.cumsum(series)])
    best = (-np.inf, 1, 0)
    for w in boxcar_widths(series.size):  # the search's widths, without its cap
        sums = csum[w:] - csum[:-w]
        i = int(np.argmax(sums))
        snr = sums[i] / math.sqrt(nchan * w)
        if snr > best[0]:
            best = (float(snr), int(w), i)
    return best


def footprint_snr(first: np.ndarray, profile: np.ndarray, delays: np.ndarray) -> tuple[float, int]:
    """Matched-filter S/N (module definition) and best boxcar width (samples)."""
    _, series = dedispersed_profile(first, profile, delays)
    snr, width, _ = best_boxcar(series, profile.shape[0])
    return snr, width


@dataclass(frozen=True, eq=False)
class RenderedBurst:
    """A burst's footprint scaled to its target S/N (values in units of noise rms)."""

    spec: BurstSpec
    first: np.ndarray
    profile: np.ndarray
    amplitude: float
    boxcar_width: int

    @classmethod
    def render(
        cls,
        freqs_mhz: np.ndarray,
        tsamp: float,
        burst: BurstSpec,
        chan_bw_mhz: float | None = None,
    ) -> RenderedBurst:
        """Footprint of ``burst`` with the amplitude that gives its target S/N."""
        first, profile = unit_profile(freqs_mhz, tsamp, burst, chan_bw_mhz)
        delays = delay_table(np.array([burst.dm]), freqs_mhz, tsamp)[0]
        unit_snr, width = footprint_snr(first, profile, delays)
        if not unit_snr > 0:
            raise ParameterError(f"burst at DM {burst.dm} has no signal in this band")
        amplitude = burst.snr / unit_snr
        return cls(burst, first, (profile * amplitude).astype(np.float32), amplitude, width)

    @property
    def span(self) -> tuple[int, int]:
        """First and one-past-last sample touched."""
        return int(self.first.min()), int(self.first.max()) + self.profile.shape[1]

    def entries(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(samples, chans, values)`` of the footprint inside ``[start, stop)``."""
        lo, hi = self.span
        if hi <= start or lo >= stop:
            return _EMPTY
        samples = self.first[:, None] + np.arange(self.profile.shape[1])[None, :]
        keep = (samples >= start) & (samples < stop) & (self.profile != 0)
        chans = np.broadcast_to(np.arange(self.profile.shape[0])[:, None], samples.shape)
        return samples[keep], chans[keep], self.profile[keep]

    def dense(self, start: int, nsamp: int) -> np.ndarray:
        """The footprint as a dense ``[nchan, nsamp]`` float32 array from ``start``."""
        out = np.zeros((self.profile.shape[0], nsamp), dtype=np.float32)
        samples, chans, values = self.entries(start, start + nsamp)
        out[chans, samples - start] = values
        return out


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))


def burst_signal(
    freqs_mhz: np.ndarray,
    tsamp: float,
    burst: BurstSpec,
    start_sample: int,
    nsamp: int,
    *,
    chan_bw_mhz: float | None = None,
) -> np.ndarray:
    """Noise-free signal of ``burst``, float32 ``[nchan, nsamp]`` from ``start_sample``.

    Values are in units of the per-channel noise rms (multiply by a channel's rms to get
    file units); the amplitude gives the burst its target S/N (module docstring).
    ``freqs_mhz`` are the channel centres in file order; the channel width defaults to
    their spacing.
    """
    rendered = RenderedBurst.render(freqs_mhz, tsamp, burst, chan_bw_mhz)
    return rendered.dense(int(start_sample), int(nsamp))
