"""The DM plan: the one home of dispersion delays in drafts-ops.

Delay of a signal at frequency ``f`` relative to the top of the band::

    dt = K * DM * (f**-2 - f_ref**-2)   seconds,  K = 4.148808e3 s MHz^2 pc^-1 cm^3

with ``f`` and ``f_ref`` in MHz and ``f_ref`` the highest channel frequency. Integer delays
are rounded to the nearest sample. DM trials follow the dedisp / Heimdall tolerance rule:
the next trial is placed where the extra smearing from the DM error raises the effective
pulse width by the factor ``dm_tol``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.io.header import Header

#: Dispersion constant, s MHz^2 pc^-1 cm^3.
DISPERSION_CONSTANT = 4.148808e3
#: In-channel smearing coefficient, s per (pc cm^-3 MHz GHz^-3).
SMEARING_COEFFICIENT = 8.3e-6
#: Default ``tolerance`` of time decimation in plans: a trial is decimated by ``2^k`` once
#: its effective width reaches ``2 * 2^k`` samples. Heimdall's 1.25 (factor 16 from
#: DM ~970 on the FAST-like band) loses up to 12 % S/N on bursts as wide as their
#: smearing; 2.0 keeps that under 5 % (measured, ``drafts_ops/dedisp/README.md``).
DECIMATION_TOL = 2.0


def dispersion_delay_s(dm: float | np.ndarray, freq_mhz, f_ref_mhz: float) -> np.ndarray:
    """Arrival delay (s) at ``freq_mhz`` relative to ``f_ref_mhz`` for DM (pc cm^-3)."""
    freq = np.asarray(freq_mhz, dtype=np.float64)
    return DISPERSION_CONSTANT * np.asarray(dm, dtype=np.float64) * (freq**-2 - f_ref_mhz**-2)


def smearing_s(dm: float | np.ndarray, chan_bw_mhz: float, freq_mhz) -> np.ndarray:
    """Dispersive smearing (s) inside one channel of width ``chan_bw_mhz`` at ``freq_mhz``."""
    f_ghz = np.asarray(freq_mhz, dtype=np.float64) / 1e3
    return SMEARING_COEFFICIENT * np.asarray(dm, dtype=np.float64) * abs(chan_bw_mhz) / f_ghz**3


def tolerance_dm_trials(
    dm_min: float,
    dm_max: float,
    *,
    tsamp: float,
    fch1: float,
    foff: float,
    nchans: int,
    pulse_width_s: float = 40e-6,
    dm_tol: float = 1.25,
) -> np.ndarray:
    """DM trials from ``dm_min`` until one reaches ``dm_max`` (dedisp's ``generate_dm_list``).

    Parameters are in seconds and MHz; ``pulse_width_s`` is the narrowest intrinsic width
    searched and ``dm_tol`` the allowed growth of the effective width between trials. As
    in dedisp (and Heimdall, which calls it), the last trial is the first one ``>= dm_max``
    and the smearing is evaluated at channel ``nchans // 2 - 0.5`` (integer division).
    """
    _check_dm_range(dm_min, dm_max)
    if not (tsamp > 0 and nchans >= 1):
        raise ParameterError(f"tsamp = {tsamp} s and nchans = {nchans} must be positive")
    if dm_tol <= 1:
        raise ParameterError(f"dm_tol = {dm_tol} must be > 1")
    if pulse_width_s < 0:
        raise ParameterError(f"pulse width {pulse_width_s} s must be >= 0")
    tsamp_us = tsamp * 1e6
    width_us = pulse_width_s * 1e6
    f_ghz = (fch1 + (nchans // 2 - 0.5) * foff) * 1e-3
    tol2 = dm_tol**2
    a2 = (8.3 * foff / f_ghz**3) ** 2
    b2 = a2 * nchans**2 / 16.0
    c = (tsamp_us**2 + width_us**2) * (tol2 - 1.0)
    trials = [float(dm_min)]
    while trials[-1] < dm_max:
        prev = trials[-1]
        k = c + tol2 * a2 * prev**2
        trials.append((b2 * prev + math.sqrt(-a2 * b2 * prev**2 + (a2 + b2) * k)) / (a2 + b2))
    return np.asarray(trials, dtype=np.float64)


def fixed_step_dm_trials(dm_min: float, dm_max: float, dm_step: float) -> np.ndarray:
    """DM trials ``dm_min, dm_min + step, ...`` up to and including ``dm_max`` (DRAFTS: step 1)."""
    _check_dm_range(dm_min, dm_max)
    if not dm_step > 0:
        raise ParameterError(f"DM step {dm_step} must be positive")
    count = math.floor((dm_max - dm_min) / dm_step + 1e-9) + 1
    return dm_min + dm_step * np.arange(count, dtype=np.float64)


def _check_dm_range(dm_min: float, dm_max: float) -> None:
    if not (math.isfinite(dm_min) and math.isfinite(dm_max)):
        raise ParameterError(f"DM range {dm_min}..{dm_max} must be finite")
    if dm_min < 0 or dm_max < dm_min:
        raise ParameterError(f"DM range {dm_min}..{dm_max} pc cm^-3 must satisfy 0 <= min <= max")


def delay_table(dms: np.ndarray, freqs_mhz: np.ndarray, tsamp: float) -> np.ndarray:
    """Integer delays (samples, rounded) ``[ndm, nchan]`` relative to the top of the band.

    The values of :func:`dispersion_delay_s` over ``tsamp``, rounded, computed in one
    parallel pass with the same operations in the same order, so the same integers
    (numpy's four passes over ``[ndm, nchan]`` float64 temporaries: 0.15 s for FAST raw's
    5326 trials x 4096 channels, against 0.04 s).
    """
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    return _delay_table_kernel(_scaled_dms(dms), _inverse_square_span(freqs), float(tsamp))


def max_delays(dms: np.ndarray, freqs_mhz: np.ndarray, tsamp: float) -> np.ndarray:
    """Each trial's largest integer delay (samples): :func:`delay_table`'s column of the
    lowest frequency, without the rest of the table."""
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    lowest = _inverse_square_span(freqs)[[int(np.argmin(freqs))]]
    return _delay_table_kernel(_scaled_dms(dms), lowest, float(tsamp))[:, 0]


def _scaled_dms(dms) -> np.ndarray:
    """``K * DM`` per trial (s MHz^2), flat."""
    return DISPERSION_CONSTANT * np.asarray(dms, dtype=np.float64).reshape(-1)


def _inverse_square_span(freqs: np.ndarray) -> np.ndarray:
    """``f^-2 - f_ref^-2`` per channel (MHz^-2), ``f_ref`` the highest frequency."""
    return freqs**-2 - float(freqs.max()) ** -2


@nb.njit(parallel=True, cache=True)
def _delay_table_kernel(scaled_dms, span, tsamp):  # pragma: no cover - compiled
    """``rint(scaled_dms[d] * span[c] / tsamp)`` as int32 ``[ndm, nchan]``."""
    out = np.empty((scaled_dms.size, span.size), np.int32)
    for d in nb.prange(scaled_dms.size):
        for c in range(span.size):
            out[d, c] = np.int32(np.rint(scaled_dms[d] * span[c] / tsamp))
    return out


def decimation_factors(
    dms: np.ndarray,
    *,
    tsamp: float,
    foff: float,
    fmin: float,
    pulse_width_s: float,
    tolerance: float = 1.25,
    max_factor: int = 16,
) -> np.ndarray:
    """Time-decimation factor per DM trial (powers of two), as Heimdall and DDplan do.

    A DM whose effective width ``sqrt(tsamp^2 + width^2 + smearing(fmin)^2)`` exceeds
    ``tolerance * 2^k * tsamp`` is searched at ``2^k`` coarser time resolution.
    """
    width = np.sqrt(tsamp**2 + pulse_width_s**2 + smearing_s(dms, foff, fmin) ** 2)
    ratio = np.maximum(width / (tolerance * tsamp), 1.0)
    factor = 2 ** np.floor(np.log2(ratio)).astype(np.int64)
    return np.minimum(factor, max_factor).astype(np.int32)


@dataclass(frozen=True, eq=False)
class DMPlan:
    """DM trials and per-channel integer delays for one band and sampling time.

    Attributes
    ----------
    dms : ndarray [ndm]
        DM trials, pc cm^-3, increasing.
    freqs : ndarray [nchan]
        Channel centre frequencies in file order, MHz.
    tsamp : float
        Sampling interval, seconds.
    delays : ndarray [ndm, nchan] int32
        Delay of each channel in samples, rounded, relative to the highest frequency.
    decimation : ndarray [ndm] int32
        Time-decimation factor of each trial (all ones when no decimation is planned).
    """

    dms: np.ndarray
    freqs: np.ndarray
    tsamp: float
    delays: np.ndarray = field(repr=False)
    decimation: np.ndarray = field(repr=False)

    @classmethod
    def build(
        cls,
        dms: np.ndarray,
        freqs: np.ndarray,
        tsamp: float,
        decimation: np.ndarray | None = None,
    ) -> DMPlan:
        """A plan for explicit DM trials."""
        dms = np.asarray(dms, dtype=np.float64)
        freqs = np.asarray(freqs, dtype=np.float64)
        if dms.ndim != 1 or dms.size == 0:
            raise ParameterError("a DM plan needs at least one DM trial")
        if freqs.ndim != 1 or freqs.size == 0 or np.any(freqs <= 0):
            raise ParameterError("a DM plan needs positive channel frequencies")
        if not tsamp > 0:
            raise ParameterError(f"tsamp = {tsamp} s must be positive")
        if np.any(dms < 0):
            raise ParameterError("DM trials must be >= 0")
        factors = np.ones(dms.size, np.int32) if decimation is None else np.asarray(decimation)
        return cls(
            dms, freqs, float(tsamp), delay_table(dms, freqs, tsamp), factors.astype(np.int32)
        )

    @classmethod
    def from_header(
        cls,
        header: Header,
        dm_min: float,
        dm_max: float,
        dm_step: float | None = None,
        *,
        dm_tol: float = 1.25,
        pulse_width_s: float = 40e-6,
        decimate: bool = False,
        decimation_tol: float = DECIMATION_TOL,
    ) -> DMPlan:
        """Plan for an observation: fixed ``dm_step`` if given, else the tolerance rule.

        ``decimate`` adds :func:`decimation_factors` with ``tolerance=decimation_tol``.
        """
        if dm_step is not None:
            dms = fixed_step_dm_trials(dm_min, dm_max, dm_step)
        else:
            dms = tolerance_dm_trials(
                dm_min,
                dm_max,
                tsamp=header.tsamp,
                fch1=header.fch1,
                foff=header.foff,
                nchans=header.nchans,
                pulse_width_s=pulse_width_s,
                dm_tol=dm_tol,
            )
        factors = None
        if decimate:
            factors = decimation_factors(
                dms,
                tsamp=header.tsamp,
                foff=header.foff,
                fmin=header.fmin,
                pulse_width_s=pulse_width_s,
                tolerance=decimation_tol,
            )
        return cls.build(dms, header.chan_freqs, header.tsamp, factors)

    @property
    def ndm(self) -> int:
        return int(self.dms.size)

    @property
    def nchan(self) -> int:
        return int(self.freqs.size)

    @property
    def f_ref(self) -> float:
        """Reference (highest) frequency, MHz."""
        return float(self.freqs.max())

    @property
    def max_delay(self) -> int:
        """Largest delay in samples: the overlap a streamed block needs."""
        return int(self.delays.max())

    def decimated(
        self,
        *,
        pulse_width_s: float = 40e-6,
        tolerance: float = DECIMATION_TOL,
        max_factor: int = 16,
    ) -> DMPlan:
        """The same DM trials with :func:`decimation_factors` (Heimdall / DDplan rule).

        The channel width and lowest frequency come from ``freqs``; the delays are shared.
        """
        chan_bw = float(np.abs(np.diff(self.freqs)).min()) if self.nchan > 1 else 0.0
        factors = decimation_factors(
            self.dms,
            tsamp=self.tsamp,
            foff=chan_bw,
            fmin=float(self.freqs.min()),
            pulse_width_s=pulse_width_s,
            tolerance=tolerance,
            max_factor=max_factor,
        )
        return DMPlan(self.dms, self.freqs, self.tsamp, self.delays, factors)

    def undecimated(self) -> DMPlan:
        """The same DM trials, all at full time resolution."""
        ones = np.ones(self.ndm, np.int32)
        return DMPlan(self.dms, self.freqs, self.tsamp, self.delays, ones)

    def channel_range(self, start: int, stop: int) -> DMPlan:
        """The same trials over channels ``[start, stop)`` only, with the full band's delays
        (relative to its highest frequency): at output sample ``t`` the sums over disjoint
        channel ranges add up to the full band's, arrival times unchanged. The operator
        needs ``nout + max_delay`` input samples of those channels for ``nout`` outputs."""
        if not 0 <= start < stop <= self.nchan:
            raise ParameterError(f"channels {start}..{stop} are not a range of {self.nchan}")
        delays = np.ascontiguousarray(self.delays[:, start:stop])
        return DMPlan(self.dms, self.freqs[start:stop], self.tsamp, delays, self.decimation)

    def select_trials(self, index: np.ndarray) -> DMPlan:
        """Only the DM trials ``index`` (increasing), with the same channels and delays
        (each trial's output is the same as in the whole plan's)."""
        index = np.asarray(index, np.int64)
        if index.ndim != 1 or index.size == 0 or index.min() < 0 or index.max() >= self.ndm:
            raise ParameterError(f"trials {index} are not trials of a plan of {self.ndm}")
        delays = np.ascontiguousarray(self.delays[index])
        return DMPlan(self.dms[index], self.freqs, self.tsamp, delays, self.decimation[index])

    def nearest_trial(self, dm: float) -> int:
        """Index of the DM trial nearest ``dm``."""
        return int(np.argmin(np.abs(self.dms - dm)))

    def output_length(self, nsamp: int) -> int:
        """Valid dedispersed samples from an input block of ``nsamp`` samples."""
        return max(nsamp - self.max_delay, 0)

    def summary(self) -> dict[str, float | int]:
        """Small, JSON-friendly description for logs and flow metadata."""
        return {
            "ndm": self.ndm,
            "dm_min": float(self.dms[0]),
            "dm_max": float(self.dms[-1]),
            "nchan": self.nchan,
            "tsamp_s": self.tsamp,
            "f_ref_mhz": self.f_ref,
            "max_delay_samples": self.max_delay,
            "max_decimation": int(self.decimation.max()),
        }
