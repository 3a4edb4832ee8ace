"""Numba kernels that group points: peaks along a row, friends-of-friends clusters of giants,
and the greedy merge of the neural detector's peaks. They import nothing else from the
package and write into arrays the caller owns."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(parallel=True, cache=True)
def run_peaks(snr, threshold, lo, hi, prominence):  # pragma: no cover - compiled
    """Peaks of runs of samples with ``snr >= threshold`` in each DM row: the highest of
    each run, and any other local maximum of the run that stands ``prominence`` above the
    dips on either side of it (``inf``: one peak per run).

    Only peaks with ``lo <= sample < hi`` are returned. Returns ``(dm_index, sample)`` int64
    arrays, ordered by DM then sample. Rows run in parallel (count, then fill).
    """
    ndm = snr.shape[0]
    counts = np.zeros(ndm + 1, np.int64)
    for d in nb.prange(ndm):
        counts[d + 1] = _row_peaks(snr[d], threshold, lo, hi, prominence, np.empty(0, np.int64))
    for d in range(ndm):
        counts[d + 1] += counts[d]
    dms = np.empty(counts[ndm], np.int64)
    samples = np.empty(counts[ndm], np.int64)
    for d in nb.prange(ndm):
        a, b = counts[d], counts[d + 1]
        if b > a:
            _row_peaks(snr[d], threshold, lo, hi, prominence, samples[a:b])
            dms[a:b] = d
    return dms, samples


@nb.njit(cache=True)
def _row_peaks(row, threshold, lo, hi, prominence, out):  # noqa: PLR0917  # pragma: no cover
    """Count the run peaks of one row in ``[lo, hi)``; store them in ``out`` if it has room.

    Within a run the series is followed as a zigzag: a peak is confirmed once the series
    falls ``prominence`` below it (or the run ends), the next one searched for once it
    rises ``prominence`` above the lowest point since."""
    nt = row.size
    count = 0
    t = 0
    while t < nt:
        if row[t] < threshold:
            t += 1
            continue
        peak = t
        trough = t
        rising = True
        while t < nt and row[t] >= threshold:
            v = row[t]
            if rising:
                if v > row[peak]:
                    peak = t
                elif row[peak] - v >= prominence:
                    count = _keep_peak(peak, lo, hi, out, count)
                    rising = False
                    trough = t
            elif v < row[trough]:
                trough = t
            elif v - row[trough] >= prominence:
                rising = True
                peak = t
            t += 1
        if rising:
            count = _keep_peak(peak, lo, hi, out, count)
    return count


@nb.njit(cache=True)
def _keep_peak(peak, lo, hi, out, count):  # pragma: no cover - compiled
    """Count ``peak`` if ``lo <= peak < hi`` (stored in ``out`` while it has room)."""
    if lo <= peak < hi:
        if count < out.size:
            out[count] = peak
        count += 1
    return count


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


@nb.njit(cache=True)
def keep_apart(dm_index, sample, factor, radius_dm, radius_columns):  # pragma: no cover
    """Greedy suppression of points given best first: True where a point lies more than
    ``radius_dm`` from every point kept before it in ``dm_index``, or more than
    ``radius_columns * max(factor_i, factor_j)`` in ``sample`` (the neural detector's
    peaks of several time scales, ``factor`` being each peak's scale)."""
    n = dm_index.size
    keep = np.zeros(n, np.bool_)
    kept = np.empty(n, np.int64)
    nkept = 0
    for i in range(n):
        apart = True
        for j in range(nkept):
            k = kept[j]
            near_dm = not abs(dm_index[i] - dm_index[k]) > radius_dm
            reach = radius_columns * max(factor[i], factor[k])
            if near_dm and not abs(sample[i] - sample[k]) > reach:
                apart = False
                break
        if apart:
            keep[i] = True
            kept[nkept] = i
            nkept += 1
    return keep


# -- the streaming search's fused kernels ------------------------------------------------
