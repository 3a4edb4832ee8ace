"""Numba kernels of the single-pulse search. They import nothing else from the package and
write into arrays the caller owns; :mod:`drafts_ops.detect.single_pulse` is their API."""

from __future__ import annotations

import math

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


@nb.njit(inline="always")
def _normalised(x, off, w, lim, zero, gate):  # noqa: PLR0917  # pragma: no cover - compiled
    """One normalised sample: ``(x - off) * w`` held within ``±lim``, minus the zero-DM
    series ``zero``, times ``gate`` (0 blanks an impulse), float32."""
    v = (np.float32(x) - off) * w
    return (min(max(v, -lim), lim) - zero) * gate


@nb.njit(parallel=True, cache=True)
def normalise_into(data, nvalid, offset, weight, limit, zero, gate, out):  # noqa: PLR0917
    """``out[c, t]`` (float32) = ``(clip((data[c, t] - offset[c]) * weight[c], ±limit) -
    zero[t]) * gate[t]`` for ``t < nvalid``, 0 beyond and in channels of weight 0.

    ``data`` may be uint8/uint16/float32; ``zero`` (zero-DM series) and ``gate`` (1, or 0
    where an impulse is blanked) float32 ``[>= nvalid]``.
    """
    nchan, nt = out.shape
    lim = np.float32(limit)
    for c in nb.prange(nchan):
        off = np.float32(offset[c])
        w = np.float32(weight[c])
        if w == 0:
            out[c, :] = 0.0
            continue
        for t in range(nvalid):
            out[c, t] = _normalised(data[c, t], off, w, lim, zero[t], gate[t])
        for t in range(nvalid, nt):
            out[c, t] = 0.0


#: The uint8 level of a normalised 0 in :func:`quantise_normalised_into`.
QUANTISED_ZERO = 128


@nb.njit(inline="always")
def _level(x, off, w, lim, zero, gate, scale):  # noqa: PLR0917  # pragma: no cover - compiled
    """The uint8 level ``QUANTISED_ZERO + rint(v * scale)`` (held within 0..255) of the
    normalised sample ``v`` (:func:`_normalised`)."""
    v = np.rint(_normalised(x, off, w, lim, zero, gate) * scale) + np.float32(QUANTISED_ZERO)
    return np.uint8(min(max(v, np.float32(0.0)), np.float32(255.0)))


@nb.njit(parallel=True, cache=True)
def quantise_normalised_into(data, nvalid, offset, weight, limit, zero, gate, level, out):  # noqa: PLR0917
    """As :func:`normalise_into`, each normalised sample ``x`` written as the uint8
    ``QUANTISED_ZERO + rint(x * level)`` held within 0..255 (:data:`QUANTISED_ZERO`, the
    level of 0, beyond ``nvalid`` and in masked channels). For ``out`` = ``data`` use
    :func:`quantise_normalised_in_place` (here it would run 10x slower)."""
    _quantise_rows(data, nvalid, offset, weight, limit, zero, gate, level, out)


@nb.njit(parallel=True, cache=True)
def quantise_normalised_in_place(data, nvalid, offset, weight, limit, zero, gate, level):  # noqa: PLR0917
    """:func:`quantise_normalised_into` with uint8 ``data`` as its own output: one array
    inside the kernel, so the loop vectorises (two views of the same memory made LLVM
    fall back to scalar code: 22 instead of 2 ms per FAST-like piece)."""
    _quantise_rows(data, nvalid, offset, weight, limit, zero, gate, level, data)


@nb.njit(inline="always")
def _quantise_rows(data, nvalid, offset, weight, limit, zero, gate, level, out):  # noqa: PLR0917  # pragma: no cover
    """The body of both quantising kernels (inlined: ``out`` is ``data`` in one)."""
    nchan, nt = out.shape
    lim = np.float32(limit)
    s = np.float32(level)
    for c in nb.prange(nchan):
        off = np.float32(offset[c])
        w = np.float32(weight[c])
        if w == 0:
            out[c, :] = QUANTISED_ZERO
            continue
        for t in range(nvalid):
            out[c, t] = _level(data[c, t], off, w, lim, zero[t], gate[t], s)
        for t in range(nvalid, nt):
            out[c, t] = QUANTISED_ZERO


@nb.njit(parallel=True, cache=True)
def normalised_mean_series(data, nvalid, offset, weight, limit):  # pragma: no cover - compiled
    """Mean over the channels of nonzero ``weight`` of the normalised samples
    ``clip((data[c, t] - offset[c]) * weight[c], ±limit)``, ``t < nvalid`` (float64), from
    the raw ``data`` (no normalised copy needed).

    Tiles of time in parallel, every channel added into a tile in turn: one parallel
    launch (a launch per channel cost twice as much, more on a busy machine)."""
    nchan = data.shape[0]
    series = np.zeros(nvalid, np.float64)
    ngood = 0
    for c in range(nchan):
        if weight[c] != 0:
            ngood += 1
    if ngood == 0:
        return series
    lim = np.float32(limit)
    tile = 2048
    for k in nb.prange((nvalid + tile - 1) // tile):
        t0 = k * tile
        t1 = min(t0 + tile, nvalid)
        m = t1 - t0
        acc = np.zeros(m, np.float64)
        for c in range(nchan):
            w = np.float32(weight[c])
            if w != 0:
                off = np.float32(offset[c])
                src = data[c, t0:t1]  # a slice from 0: the loop vectorises (3x faster)
                for j in range(m):
                    acc[j] += np.float64(_normalised(src[j], off, w, lim, np.float32(0.0),
                                                     np.float32(1.0)))  # fmt: skip
        for j in range(m):
            series[t0 + j] = acc[j] / ngood
    return series


@nb.njit(parallel=True, cache=True)
def decimate_into(data, tfac, ffac, out):  # pragma: no cover - compiled
    """``out[c, t]`` = mean of ``data[c*ffac:(c+1)*ffac, t*tfac:(t+1)*tfac]`` (float32).

    ``out.shape`` is ``(nchan // ffac, nsamp // tfac)``; remainders are dropped.
    """
    nc, nt = out.shape
    inv = np.float32(1.0 / (tfac * ffac))
    for c in nb.prange(nc):
        for t in range(nt):
            acc = np.float32(0.0)
            for f in range(c * ffac, c * ffac + ffac):
                for i in range(t * tfac, t * tfac + tfac):
                    acc += np.float32(data[f, i])
            out[c, t] = acc * inv


@nb.njit(parallel=True, cache=True)
def decimate_spectra_into(spectra, tfac, ffac, out):  # pragma: no cover - compiled
    """``out[c, t]`` = mean of ``spectra[t*tfac:(t+1)*tfac, c*ffac:(c+1)*ffac]`` (float32).

    Reads time-major spectra (the file layout) and writes channel-major averages: the
    transpose and the averaging in one pass. ``out.shape`` is ``(nchan // ffac, n //
    tfac)``.
    """
    nc, nt = out.shape
    nraw = nc * ffac
    inv = np.float32(1.0 / (tfac * ffac))
    tile = 64
    for k in nb.prange((nt + tile - 1) // tile):
        acc = np.zeros(nraw, np.float32)
        for t in range(k * tile, min(k * tile + tile, nt)):
            acc[:] = 0.0
            for i in range(t * tfac, t * tfac + tfac):  # whole spectra: contiguous, SIMD
                row = spectra[i]
                for f in range(nraw):
                    acc[f] += np.float32(row[f])
            for c in range(nc):  # then the channel groups (3x faster than per group)
                s = np.float32(0.0)
                for f in range(c * ffac, c * ffac + ffac):
                    s += acc[f]
                out[c, t] = s * inv


@nb.njit(parallel=True, cache=True)
def averages_to_sums_into(averages, factor, out):  # pragma: no cover - compiled
    """``out[c, t]`` = ``averages[c, t] * factor`` rounded (uint16): the integer sums of
    integer samples that :func:`decimate_spectra_into` averaged over ``factor``. Returns
    whether every average is exactly such a sum times ``1 / factor`` (float32, as that
    kernel computes it), i.e. whether the sums give back the averages bit for bit."""
    scale = np.float32(factor)
    inv = np.float32(1.0 / factor)
    exact = np.ones(averages.shape[0], np.bool_)
    for c in nb.prange(averages.shape[0]):
        for t in range(averages.shape[1]):
            level = _integer_level(averages[c, t], scale, inv)
            if level < 0:
                exact[c] = False
            else:
                out[c, t] = level
    return exact.all()


@nb.njit(parallel=True, fastmath=True, cache=True)
def search_rows(dmt, valid, widths, window, max_points, snr, width_index):  # noqa: PLR0917
    """Baseline, noise and boxcar search of every DM row, fused (Heimdall's stages).

    Per row ``d`` of ``dmt [ndm, nt]`` (only its first ``valid[d]`` samples are data):

    1. baseline: medians of segments of about ``window`` samples (from at most
       ``max_points`` strided samples each), linearly interpolated between segment
       centres, subtracted;
    2. for each boxcar width ``w`` (samples): the boxcar sums ``S_w(t)`` over
       ``[t - w // 2, t - w // 2 + w)``; their median and robust sigma (MAD of at most
       ``max_points`` strided sums) give ``S/N = (S_w - median) / sigma_w``, so red noise
       and correlated rows (decimated trials) are measured, not assumed white;
    3. ``snr[d, t]`` = best S/N over widths (``-inf`` where no boxcar fits or beyond the
       valid samples), ``width_index[d, t]`` (int8) the index in ``widths`` reaching it.

    ``snr`` may be ``dmt`` itself (each row is copied before it is overwritten).
    """
    ndm, nt = dmt.shape
    nw = widths.size
    for d in nb.prange(ndm):
        n = min(valid[d], nt)
        if n < 2:
            snr[d, :] = -np.inf
            width_index[d, :] = 0
            continue
        csum = _baseline_cumsum(dmt[d], n, window, max_points)
        loc, sigma = _boxcar_noise(csum, widths, n, max_points)
        # the best so far and the next best in two buffers that swap (see _fold_width);
        # the row's own output is one of them (snr may alias dmt: the row has been read)
        best, index = snr[d], width_index[d]
        best[:] = -np.inf
        index[:] = 0
        new_best, new_index = np.empty(nt, np.float32), np.empty(nt, np.int8)
        swapped = False
        for k in range(nw):
            if widths[k] > n or not sigma[k] > 0:
                continue
            _fold_width(csum, widths[k], n, loc[k], 1.0 / sigma[k], np.int8(k),
                        best, index, new_best, new_index)  # fmt: skip
            best, new_best = new_best, best
            index, new_index = new_index, index
            swapped = not swapped
        if swapped:
            snr[d, :] = best
            width_index[d, :] = index


@nb.njit(fastmath=True, cache=True)
def _fold_width(csum, w, n, med, inv, k, best, index, new_best, new_index):  # noqa: PLR0917
    """``new_best`` = ``best`` raised to the S/N ``(S_w - med) * inv`` of the ``w``-sample
    boxcars where that is higher, ``new_index`` = ``index`` with ``k`` there.

    Written to other arrays, with every load and store unconditional: an in-place "store
    if higher", or a load in one branch of the choice, compiles to masked loads and
    stores (``vmaskmovps``, microcoded on AMD Zen 3) or, for int8 without AVX-512, to
    scalar code with a mispredicted branch per sample: the whole search kernel ran 3.8x
    slower on an AVX2 machine (1.56 s against 0.41 s per [1279, 34888] block).
    """
    m = n - w + 1
    h = w // 2
    new_best[:h] = best[:h]
    new_index[:h] = index[:h]
    new_best[h + m :] = best[h + m :]
    new_index[h + m :] = index[h + m :]
    hi, lo = csum[w : w + m], csum[0:m]
    old, old_index = best[h : h + m], index[h : h + m]
    out, out_index = new_best[h : h + m], new_index[h : h + m]
    for s in range(m):
        value = np.float32((hi[s] - lo[s] - med) * inv)
        previous, previous_index = old[s], old_index[s]
        better = value > previous
        chosen = value if better else previous
        chosen_index = k if better else previous_index
        out[s] = chosen
        out_index[s] = chosen_index


#: Independent boxcar sums a row needs for its noise at a width to be measured; wider
#: boxcars of a short row take the widest measured width's noise, scaled as white noise.
MIN_INDEPENDENT_SUMS = 64


@nb.njit(cache=True)
def _boxcar_noise(csum, widths, n, max_points):  # pragma: no cover - compiled
    """Median and robust sigma of the boxcar sums of each width (``[nw]`` each).

    Measured (median, MAD of at most ``max_points`` strided sums) at every other width
    and the widest, as long as the row holds :data:`MIN_INDEPENDENT_SUMS` independent sums
    of that width; the widths between take the geometric mean of their neighbours'
    ``sigma / sqrt(w)`` (exact for white noise, smooth for red) and the linear
    interpolation of their median; wider ones scale the widest measured as white noise.
    """
    nw = widths.size
    loc = np.zeros(nw, np.float64)
    sigma = np.zeros(nw, np.float64)
    last = -1
    for k in range(nw):
        if widths[k] > n:
            break
        last = k
    measured = 0
    for k in range(last + 1):
        if (n - widths[k] + 1) // widths[k] >= MIN_INDEPENDENT_SUMS or k == 0:
            measured = k
    for k in range(measured + 1):
        if k % 2 == 0 or k == measured:
            loc[k], sigma[k] = _strided_median_mad(csum, widths[k], n - widths[k] + 1, max_points)
    for k in range(1, measured):
        if k % 2 == 1:
            wa, wb, w = widths[k - 1], widths[k + 1], widths[k]
            frac = math.log(w / wa) / math.log(wb / wa)
            ra, rb = sigma[k - 1] / math.sqrt(wa), sigma[k + 1] / math.sqrt(wb)
            if ra > 0 and rb > 0:
                sigma[k] = math.sqrt(w) * math.exp((1 - frac) * math.log(ra) + frac * math.log(rb))
            loc[k] = loc[k - 1] + (loc[k + 1] - loc[k - 1]) * (w - wa) / (wb - wa)
    wm = widths[measured]
    for k in range(measured + 1, last + 1):
        sigma[k] = sigma[measured] * math.sqrt(widths[k] / wm)
        loc[k] = loc[measured] * widths[k] / wm
    return loc, sigma


@nb.njit(cache=True)
def _strided_median_mad(csum, w, m, max_points):  # pragma: no cover - compiled
    """Median and MAD-sigma of the boxcar sums ``csum[s + w] - csum[s]`` at <= max_points s."""
    step = max(1, m // max(max_points, 1))
    npts = (m + step - 1) // step
    v = np.empty(npts, np.float64)
    for i in range(npts):
        v[i] = csum[i * step + w] - csum[i * step]
    med = _median(v)
    for i in range(npts):
        v[i] = abs(v[i] - med)
    return med, _MAD_TO_STD * _median(v)


@nb.njit(cache=True)
def _baseline_cumsum(row, n, window, max_points):  # pragma: no cover - compiled
    """Cumulative sum ``[n + 1]`` (float64) of ``row[:n]`` minus its running baseline.

    The baseline is the median of each segment of about ``window`` samples (from at most
    ``max_points`` strided samples), linear between segment centres and flat beyond the
    first and last centre.
    """
    nseg = max(1, n // max(window, 1))
    meds = np.empty(nseg, np.float64)
    centres = np.empty(nseg + 1, np.float64)
    for s in range(nseg):
        a = s * n // nseg
        b = (s + 1) * n // nseg
        step = max(1, (b - a) // max(max_points, 1))
        npts = (b - a + step - 1) // step
        v = np.empty(npts, np.float64)
        for i in range(npts):
            v[i] = row[a + i * step]
        meds[s] = _median(v)
        centres[s] = 0.5 * (a + b - 1)
    csum = np.empty(n + 1, np.float64)
    csum[0] = 0.0
    acc = 0.0
    first = min(int(centres[0]) + 1, n)
    for t in range(first):
        acc += row[t] - meds[0]
        csum[t + 1] = acc
    for s in range(nseg - 1):
        a = int(centres[s]) + 1
        b = min(int(centres[s + 1]) + 1, n)
        slope = (meds[s + 1] - meds[s]) / (centres[s + 1] - centres[s])
        for t in range(a, b):
            acc += row[t] - (meds[s] + slope * (t - centres[s]))
            csum[t + 1] = acc
    for t in range(max(int(centres[nseg - 1]) + 1, first), n):
        acc += row[t] - meds[nseg - 1]
        csum[t + 1] = acc
    return csum


@nb.njit(parallel=True, cache=True)
def transpose_into_kernel(src, dst):  # pragma: no cover - compiled
    """``dst[j, i] = src[i, j]`` in 64 x 64 tiles, tiles in parallel (any dtype pair)."""
    rows, cols = src.shape
    tile = 64
    ntr = (rows + tile - 1) // tile
    ntc = (cols + tile - 1) // tile
    for k in nb.prange(ntr * ntc):
        i0 = (k // ntc) * tile
        j0 = (k % ntc) * tile
        for j in range(j0, min(j0 + tile, cols)):
            for i in range(i0, min(i0 + tile, rows)):
                dst[j, i] = src[i, j]


_BYTE_MASKS = (0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF)


@nb.njit(inline="always")
def _swap(a, b, shift, mask):  # pragma: no cover - compiled
    """One stage of an 8 x 8 byte transpose: ``a`` keeps its low pieces and takes ``b``'s
    low pieces shifted up; ``b`` takes ``a``'s high pieces shifted down (``shift`` bits,
    ``mask``: the low pieces)."""
    return (a & mask) | ((b & mask) << shift), ((a >> shift) & mask) | (b & ~mask)


@nb.njit(inline="always")
def _transpose_8x8(a0, a1, a2, a3, a4, a5, a6, a7):  # noqa: PLR0917  # pragma: no cover
    """Transpose 8 x 8 bytes held as 8 little-endian uint64 rows (byte ``q`` of word ``r``
    is element ``[r, q]``) in three stages of swaps (bytes, pairs, quads)."""
    m1, m2, m3 = np.uint64(_BYTE_MASKS[0]), np.uint64(_BYTE_MASKS[1]), np.uint64(_BYTE_MASKS[2])
    s1, s2, s3 = np.uint64(8), np.uint64(16), np.uint64(32)
    b0, b1 = _swap(a0, a1, s1, m1)
    b2, b3 = _swap(a2, a3, s1, m1)
    b4, b5 = _swap(a4, a5, s1, m1)
    b6, b7 = _swap(a6, a7, s1, m1)
    c0, c2 = _swap(b0, b2, s2, m2)
    c1, c3 = _swap(b1, b3, s2, m2)
    c4, c6 = _swap(b4, b6, s2, m2)
    c5, c7 = _swap(b5, b7, s2, m2)
    d0, d4 = _swap(c0, c4, s3, m3)
    d1, d5 = _swap(c1, c5, s3, m3)
    d2, d6 = _swap(c2, c6, s3, m3)
    d3, d7 = _swap(c3, c7, s3, m3)
    return d0, d1, d2, d3, d4, d5, d6, d7


@nb.njit(parallel=True, cache=True)
def transpose_bytes_kernel(src, dst):  # pragma: no cover - compiled
    """Byte transpose through uint64 words: ``src`` ``[rows, cols / 8]`` and ``dst`` ``[cols,
    rows / 8]`` are uint64 views of byte arrays ``[rows, cols]`` and ``[cols, rows]`` (rows
    and cols multiples of 8); 8 x 8 byte blocks are swapped in registers, 64 x 64 byte
    tiles in parallel. Twice as fast as :func:`transpose_into_kernel` on uint8 (19 against
    36 ms for a [58392, 1024] block), which moves one byte at a time."""
    nbr, nbc = src.shape[0] // 8, src.shape[1]
    ntr, ntc = (nbr + 7) // 8, (nbc + 7) // 8
    for k in nb.prange(ntr * ntc):
        r0, c0 = (k // ntc) * 8, (k % ntc) * 8
        for br in range(r0, min(r0 + 8, nbr)):
            i = br * 8
            for bc in range(c0, min(c0 + 8, nbc)):
                d = _transpose_8x8(src[i, bc], src[i + 1, bc], src[i + 2, bc], src[i + 3, bc],
                                   src[i + 4, bc], src[i + 5, bc], src[i + 6, bc],
                                   src[i + 7, bc])  # fmt: skip
                j = bc * 8
                for q in range(8):
                    dst[j + q, br] = d[q]


@nb.njit(parallel=True, fastmath=True, cache=True)
def normalised_phased_sums(piece, first, offset, weight, factor, rows, out):  # noqa: PLR0917
    """Normalised samples summed over ``factor`` samples, in phase-major order.

    Channel ``c``'s window holds ``x[c, first + k] = (piece[c, k] - offset[c]) * weight[c]``
    and 0 outside ``piece`` (uint8/uint16/float32, any strides); its ``n = factor *
    nq`` samples go to ``out[rows[c] : rows[c] + n]`` (``rows`` ``[nchan + 1]``: row starts,
    ``nq = (rows[c + 1] - rows[c]) // factor``), so that ``out[rows[c] + r * nq + q]`` is
    ``sum(x[c, t : t + factor])`` at ``t = q * factor + r``: the sums at ``t, t + factor,
    ...`` lie next to each other. Sums that would run past the end hold the samples that
    exist. ``factor == 1`` gives the normalised window itself.
    """
    nchan = piece.shape[0]
    npiece = piece.shape[1]
    for c in nb.prange(nchan):
        n = rows[c + 1] - rows[c]
        nq = n // factor
        row = out[rows[c] : rows[c + 1]]
        off = np.float32(offset[c])
        w = np.float32(weight[c])
        src = piece[c]
        k_lo, k_hi = max(0, -first), min(npiece, n - first)  # the piece's samples in the row
        if w == 0 or k_hi <= k_lo:
            row[:] = 0.0
            continue
        if factor == 1:
            row[: first + k_lo] = 0.0
            row[first + k_hi :] = 0.0
            for k in range(k_lo, k_hi):
                row[first + k] = (np.float32(src[k]) - off) * w
            continue
        for r in range(factor):  # x in phase-major order: row[r * nq + q] = x[q * factor + r]
            base = r * nq  # (read at stride factor, written in order, no test per sample)
            q0 = min(max(0, -((r - first - k_lo) // factor)), nq)  # first q of the piece
            q1 = min(max(q0, -((r - first - k_hi) // factor)), nq)  # first q beyond it
            row[base : base + q0] = 0.0
            for q in range(q0, q1):
                row[base + q] = (np.float32(src[q * factor + r - first]) - off) * w
            row[base + q1 : base + nq] = 0.0
        block = np.zeros(nq + 1, np.float32)  # block[q]: sum of window block q, r in order
        for r in range(factor):
            base = r * nq
            for q in range(nq):
                block[q] += row[base + q]
        head = np.zeros(nq + 1, np.float32)  # head[q]: sum of block q's first r samples
        for r in range(factor):
            base = r * nq
            for q in range(nq):  # the sum from q * factor + r: rest of block q, head of q+1
                x = row[base + q]
                row[base + q] = block[q] - head[q] + head[q + 1]
                head[q] += x


@nb.njit(parallel=True, cache=True)
def strided_shift(phased, rows, delays, factor, out):
    """``out[c, j] = S[c, delays[c] + j * factor] / factor``: each channel's ``factor``-sample
    means from its delay on (a dedispersed, decimated waterfall); ``phased`` and ``rows``
    as :func:`normalised_phased_sums` writes them."""
    nchan, size = out.shape
    inv = np.float32(1.0 / factor)
    for c in nb.prange(nchan):
        nq = (rows[c + 1] - rows[c]) // factor
        d = delays[c]
        base = rows[c] + (d % factor) * nq + d // factor
        for j in range(size):
            out[c, j] = phased[base + j] * inv


@nb.njit(parallel=True, cache=True)
def rebin_rows_into(data, order, first, weights, out):  # pragma: no cover - compiled
    """``out[k] = sum_j weights[k, j] * data[order[first[k] + j]]``: rows of ``data`` taken
    in ``order`` and averaged onto ``out``'s rows by sparse overlap weights (zero-padded).
    A dense matrix product would wake the BLAS library's threads, which then spin beside
    these kernels' own."""
    nout, m = weights.shape
    nin = order.size
    for k in nb.prange(nout):
        out[k, :] = 0.0
        for j in range(m):
            w = weights[k, j]
            if w == 0.0 or first[k] + j >= nin:
                continue
            row = data[order[first[k] + j]]
            for t in range(out.shape[1]):
                out[k, t] += w * row[t]


#: DM rows one thread accumulates together in :func:`strided_dedisperse`.
_DM_ROWS_PER_BLOCK = 32


@nb.njit(parallel=True, fastmath=True, cache=True)
def strided_dedisperse(phased, rows, delays, factor, out):
    """``out[i, j] += sum_c S[c, delays[i, c] + j * factor] / factor`` (float32).

    ``phased`` holds the ``factor``-sample sums ``S`` as :func:`normalised_phased_sums`
    writes them. The result is the band-summed series at each DM row averaged over windows
    of ``factor`` samples: the dedispersed series decimated, without computing the samples
    the decimation drops, reading contiguous memory.
    """
    ndm, nchan = delays.shape
    size = out.shape[1]
    inv = np.float32(1.0 / factor)
    nblock = (ndm + _DM_ROWS_PER_BLOCK - 1) // _DM_ROWS_PER_BLOCK
    for b in nb.prange(nblock):  # channels outer: each channel's sums stay in cache
        i0 = b * _DM_ROWS_PER_BLOCK
        i1 = min(i0 + _DM_ROWS_PER_BLOCK, ndm)
        acc = np.zeros((i1 - i0, size), np.float32)
        for c in range(nchan):
            nq = (rows[c + 1] - rows[c]) // factor
            for i in range(i0, i1):
                d = delays[i, c]
                base = rows[c] + (d % factor) * nq + d // factor
                src = phased[base : base + size]  # a slice: contiguous, vectorised
                dst = acc[i - i0]
                for j in range(size):
                    dst[j] += src[j]
        for i in range(i0, i1):
            for j in range(size):
                out[i, j] += acc[i - i0, j] * inv


@nb.njit(cache=True)
def standardised_profile(data, rows, starts, ncols, clip):  # pragma: no cover - compiled
    """Sum over channels ``rows`` of ``data`` (``[nchan, nsamp]``, any strides and dtype) of
    each channel's samples ``starts[i] .. starts[i] + ncols`` (indices held within the
    data), standardised by their own mean and standard deviation (left as they are for a
    constant channel) and held within ``+-clip``: a dedispersed profile ``[ncols]`` (float64)
    in one pass over the samples, without a copy of the pixels."""
    profile = np.zeros(ncols, np.float64)
    values = np.empty(ncols, np.float64)
    last = data.shape[1] - 1
    for i in range(rows.size):
        row = rows[i]
        total = 0.0
        for j in range(ncols):
            v = float(data[row, min(max(starts[i] + j, 0), last)])
            values[j] = v
            total += v
        mean = total / ncols
        squares = 0.0
        for j in range(ncols):
            values[j] -= mean
            squares += values[j] * values[j]
        std = math.sqrt(squares / ncols)
        scale = 1.0 / std if std > 0 else 1.0
        for j in range(ncols):
            profile[j] += min(max(values[j] * scale, -clip), clip)
    return profile
