"""Numba kernels of the FETCH cutouts: normalised sums in phase-major order, their strided
dedispersion, row rebinning and a standardised pulse profile;
:mod:`drafts_ops.detect.cutouts` is their API."""

from __future__ import annotations

import math

import numba as nb
import numpy as np


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


#: Channels :func:`dedispersed_means` reads together (a 64-byte line of 8-bit spectra).
MEANS_GROUP = 64


@nb.njit(parallel=True, fastmath=True, cache=True)
def dedispersed_means(data, first, delays, factor, offset, weight, out):  # noqa: PLR0917
    """``out[c, j]`` = the mean of channel ``c``'s normalised samples ``(data[c, t] -
    offset[c]) * weight[c]`` over ``factor`` samples from ``t = first + delays[c] + j *
    factor`` (0 outside ``data``): a dedispersed, decimated waterfall read straight from
    ``data [nchan, nt]`` (any strides), only where each channel's pulse lies. A group of
    :data:`MEANS_GROUP` channels is read sample by sample together, so that a transposed
    view of the file's time-major spectra is read a cache line at a time."""
    nchan, size = out.shape
    nt = data.shape[1]
    inv = np.float32(1.0 / factor)
    for g in nb.prange((nchan + MEANS_GROUP - 1) // MEANS_GROUP):
        c0 = g * MEANS_GROUP
        c1 = min(c0 + MEANS_GROUP, nchan)
        for j in range(size):
            for c in range(c0, c1):
                w = np.float32(weight[c])
                t0 = first + delays[c] + j * factor
                lo, hi = max(t0, 0), min(t0 + factor, nt)
                if w == 0 or hi <= lo:
                    out[c, j] = 0.0
                    continue
                acc = np.float32(0.0)
                for t in range(lo, hi):
                    acc += np.float32(data[c, t])
                out[c, j] = (acc - np.float32(hi - lo) * np.float32(offset[c])) * w * inv
