"""The DM plan in ranges: each range of DM trials searched at its own time resolution.

The rule. Dedispersion at the exact DM leaves an unresolved burst smeared inside each
channel (``8.3e-6 s * DM * chan_bw / f^3``, least at the top of the band), and the integer
delays leave each channel up to half a sample off. Summed over the band, the dedispersed
pulse is that wide; averaging ``f`` samples (and rounding each delay to the coarse
samples) costs such a pulse little S/N once it spans several coarse samples.
:func:`dedispersed_snr_loss` models exactly that for a given band, DM and factor: each
channel's smeared pulse, shifted by its rounded delay, summed, binned at the worst arrival
phase and searched with boxcars, against the native search of the same trial. A range is
searched at factor ``f`` from the lowest DM where that modelled loss is at most
:data:`LOSS_TARGET` for an unresolved burst and for one ``2 f`` samples wide (wider bursts
lose less), so the loss against the undecimated search stays under 5 % for bursts of any
intrinsic width from one native sample up; the search's tests inject bursts at range
edges and measure it. Each range's trials follow the tolerance rule at its own sample time
(``f * tsamp``), continuing from the range below: coarser samples widen the effective
width, so the steps grow with ``f`` (as in PRESTO's DDplan and TransientX).

Frequency averaging is never chosen: it widens every channel's smearing by its factor,
so an unresolved burst at high DM loses about ``1 - 1/sqrt(factor)`` of its S/N, above
any useful bound (``--freq-decimation`` remains for a user who accepts that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s, smearing_s, tolerance_dm_trials

#: Time-averaging factors a range may use (powers of two: each range costs a pass over the
#: file, so finer steps save less dedispersion than their passes cost).
RANGE_FACTORS: tuple[int, ...] = (1, 2, 4, 8, 16)
#: Modelled S/N loss (fraction) a range's averaging may cost at its lower edge
#: (:func:`dedispersed_snr_loss`): below the 5 % the plan promises, since the rounding of
#: each trial's delays moves the loss by about 1 % from trial to trial.
LOSS_TARGET = 0.035


@dataclass(frozen=True)
class DMRange:
    """One DM range of a plan: its trials (pc cm^-3) and time-averaging factor."""

    factor: int
    dms: np.ndarray

    @property
    def dm_lo(self) -> float:
        return float(self.dms[0])

    @property
    def dm_hi(self) -> float:
        return float(self.dms[-1])

    @property
    def ntrials(self) -> int:
        return int(self.dms.size)


def plan_ranges(
    dm_min: float, dm_max: float, *, tsamp: float, fch1: float, foff: float, nchans: int,
    dm_tol: float = 1.25, pulse_width_s: float = 40e-6, loss_target: float = LOSS_TARGET,
    factors: tuple[int, ...] = RANGE_FACTORS,
) -> list[DMRange]:  # fmt: skip
    """DM ranges from ``dm_min`` to ``dm_max`` (pc cm^-3) with their factors and trials.

    Trials of each range come from the tolerance rule at the range's own sample time
    (:func:`~drafts_ops.dedisp.plan.tolerance_dm_trials`); a range ends at the first trial
    from which a larger factor is allowed, and the next range starts there. Every range
    has at least one trial; the last trial is the first one ``>= dm_max``.
    """
    if (
        not 0 < loss_target < 1
        or not factors
        or factors[0] != 1
        or (list(factors) != sorted(factors))
    ):
        raise ParameterError(f"bad range plan: loss target {loss_target}, factors {factors}")
    freqs = fch1 + foff * np.arange(nchans)
    bounds = factor_edges(dm_min, dm_max, freqs, tsamp, loss_target=loss_target,
                          factors=factors)  # fmt: skip
    ranges, start = [], float(dm_min)
    for factor, edge in bounds:
        stop = min(edge, dm_max)
        dms = tolerance_dm_trials(start, stop, tsamp=tsamp * factor, fch1=fch1, foff=foff,
                                  nchans=nchans, pulse_width_s=pulse_width_s,
                                  dm_tol=dm_tol)  # fmt: skip
        if stop < dm_max and dms.size > 1:
            dms = dms[:-1]  # the last trial (>= edge) starts the next range instead
        ranges.append(DMRange(int(factor), dms))
        if stop >= dm_max:
            break
        start = (float(dms[-1]) if dms.size == 1 else
                 _next_trial(dms, stop, tsamp * factor, fch1, foff, nchans, pulse_width_s,
                             dm_tol))  # fmt: skip
    return ranges


def _next_trial(dms, edge, tsamp, fch1, foff, nchans, width, dm_tol) -> float:  # noqa: PLR0917
    """The first trial at or beyond ``edge`` continuing ``dms``'s tolerance rule."""
    more = tolerance_dm_trials(float(dms[-1]), edge, tsamp=tsamp, fch1=fch1, foff=foff,
                               nchans=nchans, pulse_width_s=width, dm_tol=dm_tol)  # fmt: skip
    return float(more[-1])


def factor_edges(
    dm_min: float, dm_max: float, freqs_mhz: np.ndarray, tsamp: float, *,
    loss_target: float = LOSS_TARGET, factors: tuple[int, ...] = RANGE_FACTORS,
) -> list[tuple[int, float]]:  # fmt: skip
    """``(factor, upper DM edge)`` of each factor used between ``dm_min`` and ``dm_max``:
    a factor's range ends where the next factor's modelled loss
    (:func:`dedispersed_snr_loss`, worst of an unresolved burst and one ``2 f`` samples
    wide) falls to ``loss_target`` (found by bisection; the loss falls with DM)."""

    def loss(dm: float, factor: int) -> float:
        return max(dedispersed_snr_loss(dm, factor, freqs_mhz, tsamp, width_samples=w)
                   for w in (0.0, 2.0 * factor))  # fmt: skip

    edges, lo = [], float(dm_min)
    for k, factor in enumerate(factors):
        nxt = factors[k + 1] if k + 1 < len(factors) else None
        if nxt is None or loss(dm_max, nxt) > loss_target:
            edges.append((factor, math.inf))
            break
        a, b = lo, float(dm_max)
        if loss(a, nxt) > loss_target:
            for _ in range(24):  # the lowest DM where the next factor's loss is in bound
                mid = 0.5 * (a + b)
                a, b = (a, mid) if loss(mid, nxt) <= loss_target else (mid, b)
        edges.append((factor, b))
        lo = b
    return edges


def dedispersed_snr_loss(
    dm: float, factor: int, freqs_mhz: np.ndarray, tsamp: float, *,
    width_samples: float = 0.0, oversample: int = 8, phases: int = 8,
) -> float:  # fmt: skip
    """Worst S/N lost by searching a burst at ``dm`` at ``factor`` coarser samples, against
    the native-resolution search of the same DM trial: a noise-free model of the search.

    Each channel holds the burst smeared over its own dispersion smearing (a top-hat,
    convolved with the burst's intrinsic top-hat of ``width_samples`` native samples) and
    is shifted by its integer delay, rounded to native or to coarse samples (the rounding
    residual of up to half a coarse sample is part of what averaging costs); the band's
    sum is binned into native or coarse samples at the worst of ``phases`` arrival phases
    and searched with boxcars of 1-64 bins (noise ``sqrt(nchan * bin)`` per bin).
    """
    freqs = np.asarray(freqs_mhz, np.float64)
    chan_bw = float(np.abs(np.diff(freqs)).min()) if freqs.size > 1 else 0.0
    smear = smearing_s(dm, chan_bw, freqs) / tsamp
    delay = dispersion_delay_s(dm, freqs, float(freqs.max())) / tsamp
    width = np.hypot(smear, max(width_samples, 1.0))  # at least the native sample
    native = min(_band_snr(delay, width, 1, phase, oversample)
                 for phase in np.linspace(0, 1, phases, endpoint=False))  # fmt: skip
    if factor <= 1:
        return 0.0
    coarse = min(_band_snr(delay, width, factor, phase, oversample)
                 for phase in np.linspace(0, factor, phases, endpoint=False))  # fmt: skip
    return float(max(0.0, 1.0 - coarse / native))


def _band_snr(delay: np.ndarray, width: np.ndarray, factor: int, phase: float,
              oversample: int) -> float:  # fmt: skip
    """Best boxcar S/N of the band-summed dedispersed pulse binned by ``factor``."""
    return float(_band_snr_kernel(delay, width, int(factor), float(phase), int(oversample)))


@nb.njit(cache=True)
def _band_snr_kernel(delay, width, factor, phase, oversample):  # pragma: no cover - compiled
    """:func:`_band_snr` compiled (the plan evaluates it a few thousand times: 75 us each
    in numpy on 4096 channels): each channel's top-hat of unit fluence as a +/- step on a
    grid of ``oversample`` steps per sample, integrated, summed into bins of ``factor``
    samples, then the best boxcar of 1-64 bins."""
    nchan = delay.size
    lo = np.empty(nchan)
    hi = np.empty(nchan)
    for c in range(nchan):
        residual = delay[c] - factor * np.rint(delay[c] / factor)  # applied shift: whole bins
        lo[c] = residual - width[c] / 2.0 + phase
        hi[c] = residual + width[c] / 2.0 + phase
    start = math.floor(lo.min()) - factor
    stop = math.ceil(hi.max()) + 2 * factor
    n = (stop - start) * oversample
    step = 1.0 / oversample
    edges = np.zeros(n + 1)
    for c in range(nchan):
        i0 = min(max(math.ceil((lo[c] - start) * oversample - 0.5), 0), n)
        i1 = min(max(math.ceil((hi[c] - start) * oversample - 0.5), 0), n)
        edges[i0] += step / width[c]
        edges[i1] -= step / width[c]
    nbins = (n // oversample) // factor
    bins = np.zeros(nbins)
    level = 0.0
    for i in range(nbins * factor * oversample):
        level += edges[i]
        bins[i // (factor * oversample)] += level
    return _best_boxcar_snr(bins / math.sqrt(nchan * factor))


@nb.njit(cache=True)
def _best_boxcar_snr(series):  # pragma: no cover - compiled
    """Best boxcar S/N of a noise-free series with unit noise per bin (1-64 bins)."""
    n = series.size
    cumulative = np.zeros(n + 1)
    for i in range(n):
        cumulative[i + 1] = cumulative[i] + series[i]
    best = 0.0
    for w in range(1, min(64, n) + 1):
        top = -np.inf
        for t in range(n - w + 1):
            top = max(top, cumulative[t + w] - cumulative[t])
        best = max(best, top / math.sqrt(w))
    return best
