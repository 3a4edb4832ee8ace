"""Numba kernels of robust statistics: selection and medians, channel moments, exact
medians and MADs of integer samples from histograms, and the rows' standardisation of the
networks' inputs. They import nothing else from the package."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

#: Gaussian standard deviation per unit MAD (the kernels' copy; see detect.preprocess).
_MAD_TO_STD = 1.482602218505602


#: Ranges at most this long are finished by insertion sort in :func:`_select`.
_SELECT_SMALL = 16


@nb.njit(cache=True)
def _select(v, k):  # pragma: no cover - compiled
    """The ``k``-th smallest value of ``v``, reordered in place so that ``v[:k] <= v[k] <=
    v[k + 1:]`` (quickselect).

    Each pass partitions around a median of three with a branchless Lomuto loop (every
    value swapped, the boundary advanced by the comparison's 0 or 1): Hoare's partition
    mispredicted a branch for about every other value of noise and ran 2.5-3x slower
    (20 against 6-8 us per 1024 values). A pivot equal to the smallest value of its
    range takes a second pass that gathers the values equal to it (ties, integer data).
    """
    lo, hi = 0, v.size - 1
    while hi - lo > _SELECT_SMALL:
        a, b, c = v[lo], v[(lo + hi) // 2], v[hi]
        if a > b:
            a, b = b, a
        b = min(b, c)
        pivot = max(a, b)
        i = _move_to_front(v, lo, hi, pivot, True)
        if k < i:
            hi = i - 1
        elif i > lo:
            lo = i
        else:  # nothing below the pivot: gather the values equal to it
            e = _move_to_front(v, lo, hi, pivot, False)
            if k < e or e == lo:  # (e == lo: a NaN pivot)
                return pivot
            lo = e
    for j in range(lo + 1, hi + 1):  # insertion sort of the short range left
        x = v[j]
        m = j - 1
        while m >= lo and v[m] > x:
            v[m + 1] = v[m]
            m -= 1
        v[m + 1] = x
    return v[k]


@nb.njit(cache=True, inline="always")
def _move_to_front(v, lo, hi, pivot, below):  # pragma: no cover - compiled
    """Move the values of ``v[lo:hi + 1]`` below ``pivot`` (``below``) or equal to it to
    the front of that range, without branches; returns the index after the last moved."""
    i = lo
    for j in range(lo, hi + 1):
        x = v[j]
        v[j] = v[i]
        v[i] = x
        i += (x < pivot) if below else (x == pivot)
    return i


@nb.njit(cache=True)
def _median(v):  # pragma: no cover - compiled
    """Median of ``v`` (reordered in place): O(n), several times faster than np.median."""
    n = v.size
    upper = _select(v, n // 2)
    if n % 2:
        return upper
    lower = v[0]
    for i in range(1, n // 2):  # after the selection, v[:n//2] holds the smaller half
        lower = max(lower, v[i])
    return 0.5 * (lower + upper)


@nb.njit(parallel=True, cache=True)
def channel_moments(data, nvalid):  # pragma: no cover - compiled
    """Per-channel ``(mean, std, excess kurtosis)`` of ``data[:, :nvalid]`` in one pass.

    Any numeric dtype (uint8 and float32 without a float64 copy); float64 accumulators,
    shifted by each channel's first sample for numerical stability. Returns
    ``float64 [nchan, 3]``.
    """
    nchan = data.shape[0]
    out = np.zeros((nchan, 3), np.float64)
    for c in nb.prange(nchan):
        if nvalid < 1:
            continue
        shift = float(data[c, 0])
        s1, s2, s3, s4 = _power_sums(data[c], nvalid, shift)
        m1 = s1 / nvalid
        var = s2 / nvalid - m1 * m1
        out[c, 0] = m1 + shift
        if var > 1e-12 * (1.0 + m1 * m1):
            m4 = s4 / nvalid - 4 * m1 * s3 / nvalid + 6 * m1 * m1 * s2 / nvalid - 3 * m1**4
            out[c, 1] = math.sqrt(var)
            out[c, 2] = m4 / (var * var) - 3.0
    return out


@nb.njit(fastmath=True, cache=True)
def _power_sums(row, nvalid, shift):  # pragma: no cover - compiled
    """Sums of ``x``, ``x^2``, ``x^3``, ``x^4`` over ``x = row[:nvalid] - shift`` (float64).

    ``fastmath`` lets the sums run in SIMD lanes (4-5x faster for 8-bit data); for integer
    samples every partial sum is an integer below 2^53, so the result is exact and does
    not depend on the order of the additions.
    """
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    for t in range(nvalid):
        x = float(row[t]) - shift
        x2 = x * x
        s1 += x
        s2 += x2
        s3 += x2 * x
        s4 += x2 * x2
    return s1, s2, s3, s4


@nb.njit(parallel=True, cache=True)
def channel_median_mad_u8(data, nvalid):  # pragma: no cover - compiled
    """Exact per-channel median and MAD-sigma of 8-bit ``data[:, :nvalid]`` from a
    histogram of each channel (one pass, no sorting). ``float64 [nchan, 2]``; the median
    is the lower median (an integer level), as is the MAD."""
    nchan = data.shape[0]
    out = np.zeros((nchan, 2), np.float64)
    for c in nb.prange(nchan):
        counts = np.zeros(256, np.int64)
        for t in range(nvalid):
            counts[data[c, t]] += 1
        half = (nvalid + 1) // 2
        acc = 0
        med = 0
        for level in range(256):
            acc += counts[level]
            if acc >= half:
                med = level
                break
        acc = counts[med]
        mad = 0
        while acc < half and mad < 255:
            mad += 1
            if med + mad < 256:
                acc += counts[med + mad]
            if med - mad >= 0:
                acc += counts[med - mad]
        out[c, 0] = med
        out[c, 1] = _MAD_TO_STD * mad
    return out


@nb.njit(parallel=True, cache=True)
def channel_median_mad_int(data, nvalid, max_points, factor=1):  # pragma: no cover - compiled
    """:func:`channel_median_scale` (MAD), bit for bit, of integer ``data`` (uint16: the
    sums a decimating search keeps) or of float32 averages of ``factor`` integer samples
    (a decimating search's blocks: each ``sum * float32(1 / factor)``), from a histogram of
    each channel's strided samples' integer levels instead of two selections: the same
    order statistics, no sorting. A channel whose samples are not such levels, or spread
    over more than 4x its samples' count of them, is selected as there."""
    nchan = data.shape[0]
    out = np.zeros((nchan, 2), np.float64)
    step = max(1, nvalid // max(max_points, 1))
    npts = (nvalid + step - 1) // step
    scale = np.float32(factor)
    inv = np.float32(1.0 / factor)
    for c in nb.prange(nchan):
        if npts < 1:
            continue
        lo, hi, exact = 65535, 0, True
        for i in range(npts):
            x = data[c, i * step]
            level = _integer_level(x, scale, inv)
            if level < 0:
                exact = False
                break
            lo, hi = min(lo, level), max(hi, level)
        if not exact or hi - lo + 1 > 4 * npts:
            v = np.empty(npts, np.float64)
            for i in range(npts):
                v[i] = float(data[c, i * step])
            out[c, 0], out[c, 1] = _median_mad_sigma(v)
            continue
        counts = np.zeros(hi - lo + 1, np.int64)
        for i in range(npts):
            counts[_integer_level(data[c, i * step], scale, inv) - lo] += 1
        med = _histogram_median(counts, lo, inv, npts)
        out[c, 0] = med
        out[c, 1] = _MAD_TO_STD * _histogram_mad(counts, lo, inv, med, npts)
    return out


@nb.njit(cache=True)
def _level_value(level, inv):  # pragma: no cover - compiled
    """The sample value of an integer level: ``float32(level) * inv`` as float64."""
    return float(np.float32(level) * inv)


@nb.njit(cache=True)
def _integer_level(x, scale, inv):  # pragma: no cover - compiled
    """The integer ``s`` in ``[0, 65535]`` with ``float32(s) * inv == x``, or -1."""
    y = x * scale
    if not (y >= 0.0 and y <= 65535.0):  # NaN fails too
        return -1
    level = int(y + 0.5)
    return level if np.float32(level) * inv == x else -1


@nb.njit(cache=True)
def _histogram_median(counts, lo, inv, n):  # pragma: no cover - compiled
    """Median of ``n`` samples histogrammed at levels ``lo, lo + 1, ...`` (values
    :func:`_level_value`; as :func:`_median`: the mean of the two middle order statistics
    when ``n`` is even)."""
    upper_rank = n // 2
    lower_rank = upper_rank if n % 2 else upper_rank - 1
    lower = upper = np.nan
    acc = 0
    for k in range(counts.size):
        acc += counts[k]
        if np.isnan(lower) and acc > lower_rank:
            lower = _level_value(lo + k, inv)
        if acc > upper_rank:
            upper = _level_value(lo + k, inv)
            break
    return upper if n % 2 else 0.5 * (lower + upper)


@nb.njit(cache=True)
def _histogram_mad(counts, lo, inv, centre, n):  # pragma: no cover - compiled
    """Median of ``|value - centre|`` over ``n`` histogrammed samples (as :func:`_median`
    of the absolute deviations), walking the levels outwards from ``centre``."""
    upper_rank = n // 2
    lower_rank = upper_rank if n % 2 else upper_rank - 1
    up = 0  # first level above the centre
    while up < counts.size and _level_value(lo + up, inv) <= centre:
        up += 1
    down = up - 1
    lower = upper = np.nan
    acc = 0
    while acc <= upper_rank:
        dev_down = centre - _level_value(lo + down, inv) if down >= 0 else np.inf
        dev_up = _level_value(lo + up, inv) - centre if up < counts.size else np.inf
        if dev_down <= dev_up:
            acc += counts[down]
            dev = dev_down
            down -= 1
        else:
            acc += counts[up]
            dev = dev_up
            up += 1
        if np.isnan(lower) and acc > lower_rank:
            lower = dev
        if acc > upper_rank:
            upper = dev
    return upper if n % 2 else 0.5 * (lower + upper)


@nb.njit(parallel=True, cache=True)
def channel_median_scale(data, nvalid, max_points, iqr):  # pragma: no cover - compiled
    """Per-channel median and robust sigma of ``data[:, :nvalid]`` from at most
    ``max_points`` evenly strided samples (MAD, or IQR when ``iqr``). ``float64 [nchan, 2]``.
    """
    nchan = data.shape[0]
    out = np.zeros((nchan, 2), np.float64)
    step = max(1, nvalid // max(max_points, 1))
    npts = (nvalid + step - 1) // step
    for c in nb.prange(nchan):
        if npts < 1:
            continue
        v = np.empty(npts, np.float64)
        for i in range(npts):
            v[i] = float(data[c, i * step])
        if iqr:
            med = _median(v)
            q1 = np.partition(v, int(0.25 * (npts - 1)))[int(0.25 * (npts - 1))]
            q3 = np.partition(v, int(0.75 * (npts - 1)))[int(0.75 * (npts - 1))]
            scale = (q3 - q1) / 1.3489795003921634
        else:
            med, scale = _median_mad_sigma(v)
        out[c, 0] = med
        out[c, 1] = scale
    return out


@nb.njit(cache=True)
def _median_mad_sigma(v):  # pragma: no cover - compiled
    """Median and MAD-sigma of ``v`` (overwritten)."""
    med = _median(v)
    for i in range(v.size):
        v[i] = abs(v[i] - med)
    return med, _MAD_TO_STD * _median(v)


@nb.njit(cache=True)
def standardise_rows_into(img, step, mad_to_std, lo, hi, scale, out):  # noqa: PLR0917
    """``out[r] = clip((img[r] - median) / sigma, lo, hi) / scale`` per row of float32
    ``img [nrow, n]``, the median and ``sigma = mad_to_std * MAD`` taken from every
    ``step``-th sample (float32 throughout, bit for bit as the same numpy expressions).

    Serial: it runs between ONNX Runtime's calls, whose threads still spin. Returns the
    rows' median and sigma (float32 ``[nrow, 2]``); a row of sigma <= 0 is left unwritten
    for the caller.
    """
    nrow, n = img.shape
    npts = (n + step - 1) // step
    v = np.empty(npts, np.float32)
    stats = np.empty((nrow, 2), np.float32)
    m = np.float32(mad_to_std)
    lo32, hi32, s32 = np.float32(lo), np.float32(hi), np.float32(scale)
    for r in range(nrow):
        for i in range(npts):
            v[i] = img[r, i * step]
        med = np.float32(_median(v))
        for i in range(npts):
            v[i] = abs(v[i] - med)
        sigma = m * np.float32(_median(v))
        stats[r, 0] = med
        stats[r, 1] = sigma
        if not sigma > 0:
            continue
        for t in range(n):
            z = (img[r, t] - med) / sigma
            out[r, t] = min(max(z, lo32), hi32) / s32
    return stats
