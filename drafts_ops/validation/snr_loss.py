"""S/N loss of a dedispersion algorithm against brute force, on simulated bursts.

For white noise of rms ``sigma`` per channel, every production output sample is a sum of
``nchan`` distinct channel samples (brute force and sub-band alike), so a boxcar of ``w``
output samples has noise ``sigma * sqrt(nchan * w)``. The S/N of a noise-free burst is
therefore exact and deterministic: the best boxcar sum over every DM trial and time,
divided by that noise. The loss of an algorithm is ``1 - S/N(algorithm) / S/N(brute)``,
each searched over the plan's whole DM grid (as a search would).

A trial decimated by ``f`` (``plan.decimation``) is searched on its coarse series (every
``f``-th output sample, the operator's upsampling repeats each coarse value ``f`` times):
a coarse sample is the mean of ``f`` output samples, noise ``sigma * sqrt(nchan / f)``,
so a boxcar of ``wc`` coarse samples has noise ``sigma * sqrt(nchan * wc / f)``, the
Heimdall convention for decimated trials. Brute force runs on the undecimated plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drafts_ops.dedisp.operator import dedisperse
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.detect.single_pulse import boxcar_widths
from drafts_ops.simulate.burst import BurstSpec, burst_signal

#: Boxcar widths (samples) searched for the best S/N: the search's own set.
BOXCARS: tuple[int, ...] = tuple(int(w) for w in boxcar_widths(64))

SignalFn = Callable[[DMPlan, float, float, float, int], np.ndarray]


@dataclass(frozen=True)
class Detection:
    """Best boxcar S/N of a DM-time array and where it is."""

    snr: float
    dm_index: int
    sample: int
    width: int


def best_boxcar(
    dmt: np.ndarray, nchan: int, sigma: float = 1.0, decimation: np.ndarray | None = None
) -> Detection:
    """Highest boxcar S/N over every row of ``dmt [ndm, nout]`` (noise-free input).

    ``decimation [ndm]`` gives each row's time-decimation factor (default: all 1); rows of
    factor ``f`` are searched on their coarse series and report ``sample`` and ``width``
    in full-resolution samples.
    """
    factors = np.ones(dmt.shape[0], np.int64) if decimation is None else np.asarray(decimation)
    best = Detection(-np.inf, 0, 0, 1)
    for f in map(int, np.unique(factors)):
        rows = np.flatnonzero(factors == f)
        found = _best_rows(dmt[rows, ::f], nchan / f, sigma)
        if found.snr > best.snr:
            row = int(rows[found.dm_index])
            best = Detection(found.snr, row, found.sample * f, found.width * f)
    return best


def _best_rows(dmt: np.ndarray, nchan_eff: float, sigma: float) -> Detection:
    cums = np.concatenate([np.zeros((dmt.shape[0], 1)), np.cumsum(dmt, axis=1)], axis=1)
    best = Detection(-np.inf, 0, 0, 1)
    for w in BOXCARS:
        if w > dmt.shape[1]:
            break
        sums = (cums[:, w:] - cums[:, :-w]) / (sigma * np.sqrt(nchan_eff * w))
        d, t = np.unravel_index(int(np.argmax(sums)), sums.shape)
        if sums[d, t] > best.snr:
            best = Detection(float(sums[d, t]), int(d), int(t), w)
    return best


def simulated_burst(plan: DMPlan, dm: float, t_s: float, width_s: float, nsamp: int) -> np.ndarray:
    """Noise-free burst ``[nchan, nsamp]`` float32 (simulator's :func:`burst_signal`).

    Arrives at ``t_s`` at the top of the band with FWHM ``width_s``; the simulator adds
    the exact (unrounded) dispersion delays and in-channel smearing.
    """

    spec = BurstSpec(t_s=t_s, dm=dm, snr=20.0, width_s=width_s)
    return burst_signal(plan.freqs, plan.tsamp, spec, 0, nsamp)


def snr_loss_survey(
    plan: DMPlan,
    dms: np.ndarray,
    widths_s: tuple[float, ...],
    *,
    algorithm: str = "subband",
    lead: int = 64,
    nout: int = 256,
    signal: SignalFn = simulated_burst,
) -> np.ndarray:
    """S/N loss ``[len(widths_s), len(dms)]`` of ``algorithm`` against brute force.

    Each burst arrives ``lead`` samples into a block of ``nout + plan.max_delay`` samples.
    ``algorithm`` runs on ``plan`` as given (decimated if ``plan.decimation`` says so);
    brute force runs on ``plan.undecimated()``, every trial at full resolution.
    """

    full = plan.undecimated()
    nsamp = nout + plan.max_delay
    loss = np.empty((len(widths_s), len(dms)))
    for i, width in enumerate(widths_s):
        for j, dm in enumerate(dms):
            data = signal(plan, float(dm), lead * plan.tsamp, width, nsamp)
            brute = best_boxcar(dedisperse(data, full, algorithm="brute"), plan.nchan)
            out = dedisperse(data, plan, algorithm=algorithm)
            fast = best_boxcar(out, plan.nchan, decimation=plan.decimation)
            loss[i, j] = 1.0 - fast.snr / brute.snr
    return loss
