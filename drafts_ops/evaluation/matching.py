"""Matching a search's candidates to the injected bursts: each burst's match window (the DM
error that sweeps its emitting band by its width, and the time that error moves it), the
found / missed decision, and the S/N a burst keeps at the searched resolution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s, smearing_s
from drafts_ops.detect.candidates import Candidate
from drafts_ops.evaluation.setup import (
    CLASSIFIER_THRESHOLD,
    MIN_DM_TOL_TRIALS,
    MIN_TIME_TOL_SAMPLES,
)
from drafts_ops.simulate import (
    read_truth,
    truth_path,
)

if TYPE_CHECKING:
    from drafts_ops.io.header import Header


# -- matching ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class InjectedBurst:
    """One injected burst as the truth table gives it (s, pc cm^-3, MHz)."""

    t_s: float
    dm: float
    snr: float
    width_s: float
    scattering_s: float = 0.0
    boxcar_width_s: float = 0.0
    band_centre_mhz: float | None = None
    band_fwhm_mhz: float | None = None

    @classmethod
    def from_truth_row(cls, row: dict[str, Any]) -> InjectedBurst:
        """From a ``kind == "burst"`` row of :func:`drafts_ops.simulate.read_truth`."""
        return cls(
            t_s=float(row["tcand_s"]),
            dm=float(row["dm"]),
            snr=float(row["snr"]),
            width_s=float(row["width_s"] or 0.0),
            scattering_s=float(row["scattering_s"] or 0.0),
            boxcar_width_s=float(row["boxcar_width_s"] or 0.0),
            band_centre_mhz=row.get("band_centre_mhz"),
            band_fwhm_mhz=row.get("band_fwhm_mhz"),
        )


@dataclass(frozen=True)
class Band:
    """What matching needs of an observation: sampling (s), band edges and channel width
    (MHz) of the searched data."""

    tsamp: float
    fmin_mhz: float
    fmax_mhz: float
    chan_bw_mhz: float = 0.0

    @classmethod
    def of(cls, header: Header) -> Band:
        """The band of a (searched) header."""
        return cls(header.tsamp, header.fmin, header.fmax, abs(header.foff))


#: Narrowest emitting band :func:`emission_band` gives a band-limited burst (fraction of
#: the band; the evaluation simulates envelopes down to a tenth of the band).
MIN_EMISSION_FRACTION = 0.1


@dataclass(frozen=True)
class MatchWindow:
    """Where a candidate of a burst may lie (see :func:`match_window`).

    ``t_tol`` (s) and ``dm_tol`` (pc cm^-3): tolerances; ``f_lo``, ``f_hi`` (MHz): the band
    in which the burst emits (half-power points of a band-limited burst, else the band).
    """

    t_tol: float
    dm_tol: float
    f_lo: float
    f_hi: float


def emission_band(burst: InjectedBurst, band: Band) -> tuple[float, float]:
    """Frequencies (MHz) where the burst emits: its envelope's half-power points (at least
    :data:`MIN_EMISSION_FRACTION` of the band wide) clipped to the band; a quarter of the
    band at the nearer edge when the envelope is centred off the band; else the band."""
    lo, hi = band.fmin_mhz, band.fmax_mhz
    if burst.band_centre_mhz is None or burst.band_fwhm_mhz is None:
        return lo, hi
    centre = float(burst.band_centre_mhz)
    if not lo <= centre <= hi:  # only the envelope's wing is in the band: its edge emits
        quarter = (hi - lo) / 4.0
        return (lo, lo + quarter) if centre < lo else (hi - quarter, hi)
    half = max(float(burst.band_fwhm_mhz), MIN_EMISSION_FRACTION * (hi - lo)) / 2.0
    return float(max(centre - half, lo)), float(min(centre + half, hi))


def match_window(burst: InjectedBurst, band: Band, dm_trials: np.ndarray) -> MatchWindow:
    """Tolerances of a match with ``burst``.

    With ``w`` the effective width — the largest of the best boxcar and the intrinsic width
    plus the scattering time and the dispersion smearing within a searched channel at the
    bottom of the emitting band — the time tolerance is
    ``max(w, 4 samples)`` and the DM tolerance the DM error that sweeps the emitting band
    by ``w`` (the S/N then drops by at most ~30 %), but at least two DM-trial spacings at
    the burst's DM.
    """
    f_lo, f_hi = emission_band(burst, band)
    scattering = burst.scattering_s * (band.fmax_mhz / f_lo) ** 4
    smearing = float(smearing_s(burst.dm, band.chan_bw_mhz, f_lo))
    width = max(burst.boxcar_width_s, burst.width_s + scattering + smearing)
    t_tol = max(width, MIN_TIME_TOL_SAMPLES * band.tsamp)
    sweep_per_dm = float(dispersion_delay_s(1.0, f_lo, f_hi))
    trials = np.asarray(dm_trials, np.float64)
    step = 0.0
    if trials.size > 1:
        i = int(np.clip(np.searchsorted(trials, burst.dm), 1, trials.size - 1))
        step = float(trials[i] - trials[i - 1])
    return MatchWindow(t_tol, max(t_tol / sweep_per_dm, MIN_DM_TOL_TRIALS * step), f_lo, f_hi)


def match_distance(
    burst: InjectedBurst, window: MatchWindow, band: Band, t_s: np.ndarray, dm: np.ndarray
) -> np.ndarray:
    """Distance of candidates at ``(t_s, dm)`` from ``burst`` in units of the tolerances
    (a match is <= 1).

    A candidate at a DM off by ``d`` sees the burst's emission at frequency ``f`` shifted
    by ``-K d (f^-2 - f_top^-2)`` relative to the top of the band, where its time is
    referenced; so its time offset is measured from the interval these shifts span over
    the emitting band (a band-limited burst at the bottom of the band is found at a lower
    DM and a later time, or a higher DM and an earlier time).
    """
    d_dm = np.asarray(dm, np.float64) - burst.dm
    d_t = np.asarray(t_s, np.float64) - burst.t_s
    a = -d_dm * dispersion_delay_s(1.0, window.f_lo, band.fmax_mhz)
    b = -d_dm * dispersion_delay_s(1.0, window.f_hi, band.fmax_mhz)
    off = np.maximum(np.minimum(a, b) - d_t, 0.0) + np.maximum(d_t - np.maximum(a, b), 0.0)
    return np.maximum(off / window.t_tol, np.abs(d_dm) / window.dm_tol)


@dataclass(frozen=True)
class Matches:
    """Result of :func:`match_candidates`.

    ``owner[j]``: index of the burst candidate ``j`` was matched to (-1: unmatched);
    ``found[i]``: burst ``i`` has a candidate; ``found_classified[i]``: one of them has
    ``classifier_prob >= threshold``; ``best[i]``: index of its highest-S/N candidate (-1).
    """

    owner: np.ndarray
    found: np.ndarray
    found_classified: np.ndarray
    best: np.ndarray

    @property
    def unmatched(self) -> int:
        return int(np.sum(self.owner < 0))


def match_candidates(
    bursts: Sequence[InjectedBurst],
    candidates: Sequence[Candidate],
    band: Band,
    dm_trials: np.ndarray,
    *,
    threshold: float = CLASSIFIER_THRESHOLD,
) -> Matches:
    """Match candidates to injected bursts: each candidate to the burst of smallest
    :func:`match_distance`, when that is <= 1."""
    nb, nc = len(bursts), len(candidates)
    owner = np.full(nc, -1, np.int64)
    if nb and nc:
        t = np.array([c.tcand_s for c in candidates])
        dm = np.array([c.dm for c in candidates])
        dist = np.stack(
            [match_distance(b, match_window(b, band, dm_trials), band, t, dm) for b in bursts]
        )
        nearest = np.argmin(dist, axis=0)
        ok = dist[nearest, np.arange(nc)] <= 1.0
        owner[ok] = nearest[ok]
    prob = np.array([_prob(c) for c in candidates], np.float64)
    snr = np.array([c.snr for c in candidates], np.float64)
    found = np.zeros(nb, bool)
    found_classified = np.zeros(nb, bool)
    best = np.full(nb, -1, np.int64)
    for i in range(nb):
        mine = np.flatnonzero(owner == i)
        if mine.size:
            found[i] = True
            found_classified[i] = bool(np.any(prob[mine] >= threshold))
            best[i] = int(mine[np.argmax(snr[mine])])
    return Matches(owner, found, found_classified, best)


def _prob(cand: Candidate) -> float:
    return -1.0 if cand.classifier_prob is None else float(cand.classifier_prob)


def truth_bursts(path: Path) -> tuple[list[InjectedBurst], list[dict[str, Any]]]:
    """Injected bursts and RFI rows of a simulated file's truth table."""

    rows = read_truth(truth_path(path))
    bursts = [InjectedBurst.from_truth_row(r) for r in rows if r["kind"] == "burst"]
    return bursts, [r for r in rows if str(r["kind"]).startswith("rfi_")]


#: Cause of a false positive that is the only candidate of a burst matching none: the
#: burst reported at a DM (and time) beyond its match tolerances (:func:`fp_causes`).
def _bandwidth_fraction(burst: InjectedBurst, span_mhz: float) -> float:
    """Fraction of the band a burst occupies (its envelope FWHM; 1 for a full-band one)."""
    if burst.band_fwhm_mhz is None:
        return 1.0
    return float(min(burst.band_fwhm_mhz / span_mhz, 1.0))


def searched_snr(burst: InjectedBurst, raw: Any, searched: Any) -> float:
    """The burst's S/N expected at the searched resolution (an estimate).

    The simulator's S/N is the best boxcar at the file's native resolution; a search that
    decimates (``searched``: the decimated header, ``raw``: the file's) broadens the pulse
    by the longer sampling time and the wider channels' dispersion smearing at the centre of
    the emitting band. Added in quadrature to the native best-boxcar width ``w``, they
    lower the S/N by ``sqrt(w / w_searched)`` (Cordes & McLaughlin 2003). Without
    decimation this is the injected S/N.
    """
    if searched.tsamp == raw.tsamp and searched.foff == raw.foff:
        return float(burst.snr)
    f_lo, f_hi = emission_band(burst, Band.of(raw))
    centre = 0.5 * (f_lo + f_hi)
    smear = [float(smearing_s(burst.dm, h.foff, centre)) for h in (raw, searched)]
    width = max(burst.boxcar_width_s, raw.tsamp)
    extra = max(searched.tsamp**2 - raw.tsamp**2 + smear[1] ** 2 - smear[0] ** 2, 0.0)
    return float(burst.snr * math.sqrt(width / math.sqrt(width**2 + extra)))
