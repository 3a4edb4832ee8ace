"""Numba kernels of the single-pulse search. They import nothing else from the package and
write into arrays the caller owns; :mod:`drafts_ops.detect.single_pulse` is their API."""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(
    "void(float32[:, :], int64[:], float32[:, :], int32[:, :])",
    parallel=True,
    cache=True,
)
def boxcar_best(series, widths, best_snr, best_width):  # pragma: no cover - compiled
    """Best boxcar S/N and width per (DM, sample) of unit-noise series.

    ``series`` [ndm, nt] has zero baseline and unit noise. For each width ``w`` the boxcar
    covering samples ``[t - w // 2, t - w // 2 + w)`` gives ``S/N = sum / sqrt(w)`` at ``t``.
    ``best_snr`` gets the maximum over widths (-inf where no boxcar fits), ``best_width``
    the width (samples) reaching it.
    """
    ndm, nt = series.shape
    for d in nb.prange(ndm):
        csum = np.zeros(nt + 1, dtype=np.float64)
        for t in range(nt):
            csum[t + 1] = csum[t] + series[d, t]
        for t in range(nt):
            best_snr[d, t] = -np.inf
            best_width[d, t] = 0
        for w in widths:
            half = w // 2
            norm = 1.0 / math.sqrt(w)
            for t in range(half, nt - w + half + 1):
                snr = (csum[t - half + w] - csum[t - half]) * norm
                if snr > best_snr[d, t]:
                    best_snr[d, t] = snr
                    best_width[d, t] = w


@nb.njit(cache=True)
def run_peaks(snr, threshold, lo, hi):  # pragma: no cover - compiled
    """Peaks of runs of samples with ``snr >= threshold``, one per run per DM row.

    Only peaks with ``lo <= sample < hi`` are returned. Returns ``(dm_index, sample)`` int64
    arrays, ordered by DM then sample.
    """
    ndm, nt = snr.shape
    count = 0
    for phase in range(2):
        if phase == 1:
            dms = np.empty(count, np.int64)
            samples = np.empty(count, np.int64)
            count = 0
        for d in range(ndm):
            t = 0
            while t < nt:
                if snr[d, t] >= threshold:
                    peak = t
                    while t < nt and snr[d, t] >= threshold:
                        if snr[d, t] > snr[d, peak]:
                            peak = t
                        t += 1
                    if lo <= peak < hi:
                        if phase == 1:
                            dms[count] = d
                            samples[count] = peak
                        count += 1
                else:
                    t += 1
    return dms, samples


@nb.njit(cache=True)
def friends_of_friends(  # noqa: PLR0917 (numba kernel: positional only)
    sample, dm_index, log2_width, width, time_link, dm_link, width_link
):
    """Cluster labels (0..n-1, by first member) linking points close in time, DM and width.

    Points must be sorted by ``sample``. Two points are friends when
    ``|dt| <= time_link + (w_i + w_j) / 2``, ``|d dm_index| <= dm_link`` and
    ``|d log2 width| <= width_link``; clusters are the transitive closure (union-find).
    """  # pragma: no cover - compiled
    n = sample.size
    parent = np.arange(n)
    max_width = 0
    for i in range(n):
        max_width = max(max_width, width[i])
    for i in range(n):
        j = i + 1
        while j < n and sample[j] - sample[i] <= time_link + max_width:
            close_t = sample[j] - sample[i] <= time_link + 0.5 * (width[i] + width[j])
            close_dm = abs(dm_index[j] - dm_index[i]) <= dm_link
            close_w = abs(log2_width[j] - log2_width[i]) <= width_link
            if close_t and close_dm and close_w:
                a, b = i, j
                while parent[a] != a:
                    parent[a] = parent[parent[a]]
                    a = parent[a]
                while parent[b] != b:
                    parent[b] = parent[parent[b]]
                    b = parent[b]
                if a != b:
                    parent[max(a, b)] = min(a, b)
            j += 1
    labels = np.empty(n, np.int64)
    for i in range(n):
        a = i
        while parent[a] != a:
            a = parent[a]
        labels[i] = a
    return labels
