"""Numba kernels of a block's preparation: normalisation (and its 8-bit quantised form),
the zero-DM series, and time / frequency decimation. :mod:`drafts_ops.detect.preprocess`
is their API."""

from __future__ import annotations

import numba as nb
import numpy as np

from drafts_ops.detect.statistics_kernels import _integer_level

#: Most 8-bit samples one uint16 sum holds exactly (255 * 257 = 65535).
MAX_EXACT_SUM = 257


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
        t0 = k * tile
        t1 = min(t0 + tile, nt)
        acc = np.zeros((tile, nraw), np.float32)
        for t in range(t0, t1):
            row_acc = acc[t - t0]
            for i in range(t * tfac, t * tfac + tfac):  # whole spectra: contiguous, SIMD
                row = spectra[i]
                for f in range(nraw):
                    row_acc[f] += np.float32(row[f])
        for c in range(nc):  # a channel's tile of averages: contiguous writes
            for t in range(t0, t1):
                s = np.float32(0.0)
                for f in range(c * ffac, c * ffac + ffac):
                    s += acc[t - t0, f]
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


@nb.njit(parallel=True, cache=True)
def decimate_spectra_sums_into(spectra, tfac, out):  # pragma: no cover - compiled
    """``out[c, t]`` = sum of ``spectra[t*tfac:(t+1)*tfac, c]`` (uint16): the time-major
    8-bit spectra of the file transposed and summed over ``tfac`` samples in one pass;
    exact for ``tfac <=`` :data:`MAX_EXACT_SUM`. ``out.shape`` is ``(nchan, n // tfac)``.
    Sums of a tile of samples gather in a small time-major buffer, then go out a channel
    row at a time."""
    nc, nt = out.shape
    tile = 64
    for k in nb.prange((nt + tile - 1) // tile):
        t0 = k * tile
        t1 = min(t0 + tile, nt)
        acc = np.zeros((tile, nc), np.uint16)
        for t in range(t0, t1):
            row_acc = acc[t - t0]
            for i in range(t * tfac, t * tfac + tfac):  # whole spectra: contiguous, SIMD
                row = spectra[i]
                for c in range(nc):
                    row_acc[c] += np.uint16(row[c])
        for c in range(nc):  # a channel's tile of sums: contiguous writes
            for t in range(t0, t1):
                out[c, t] = acc[t - t0, c]


@nb.njit(inline="always")
def _channels_still_read(stops, t):  # pragma: no cover - compiled
    """``(ca, cb)``: the channels ``ca <= c < cb`` whose ``stops[c]`` lie beyond ``t``
    (empty: ``cb <= ca``)."""
    ca, cb = stops.size, 0
    for c in range(stops.size):
        if stops[c] > t:
            ca = min(ca, c)
            cb = max(cb, c + 1)
    return ca, cb


@nb.njit(parallel=True, cache=True)
def window_rows_into(spectra, tfac, out, t_first, stops, scale):  # noqa: PLR0917  # pragma: no cover
    """``out[c, t_first + t]`` = ``scale`` x the sum of ``spectra[t*tfac:(t+1)*tfac, c]``,
    summed in ``out``'s dtype, where ``t_first + t < stops[c]``: a dispersed window's
    triangle of time-major spectra, each tile of samples summed only over the channels
    that still need it (the high channels of a window stop early); ``out`` keeps its
    values past each channel's stop. uint16 ``out`` and ``scale`` 1: exact sums of 8-bit
    samples (:func:`decimate_spectra_sums_into` for a window); float32 and ``1 / tfac``:
    averages of any samples."""
    nt = min(spectra.shape[0] // tfac, out.shape[1] - t_first)
    tile = 64
    for k in nb.prange((nt + tile - 1) // tile):
        t0 = k * tile
        t1 = min(t0 + tile, nt)
        ca, cb = _channels_still_read(stops, t_first + t0)
        if cb <= ca:
            continue
        width = cb - ca
        acc = np.zeros((tile, width), out.dtype)
        for t in range(t0, t1):
            row_acc = acc[t - t0]
            for i in range(t * tfac, t * tfac + tfac):  # a run of each spectrum: SIMD
                row = spectra[i, ca:cb]
                for j in range(width):
                    row_acc[j] += row[j]
        for c in range(ca, cb):
            for t in range(t0, min(t1, stops[c] - t_first)):
                out[c, t_first + t] = acc[t - t0, c - ca] * scale


#: Channels :func:`band_rows_into` copies together (a 64-byte line of 8-bit spectra).
BAND_GROUP = 64


@nb.njit(parallel=True, cache=True)
def band_rows_into(spectra, first, base, rows):  # pragma: no cover - compiled
    """``rows[c, j]`` = ``spectra[base[c] + j - first, c]`` wherever that spectrum lies in
    ``spectra`` (time-major ``[n, nchan]``, spectra from window sample ``first``): a chunk
    of a channel band's rows (:class:`~drafts_ops.detect.cutouts.ChannelBand`), a group of
    :data:`BAND_GROUP` channels at a time, each group only over the spectra its rows span."""
    n = spectra.shape[0]
    nchan, length = rows.shape
    for g in nb.prange((nchan + BAND_GROUP - 1) // BAND_GROUP):
        c0 = g * BAND_GROUP
        c1 = min(c0 + BAND_GROUP, nchan)
        lo, hi = base[c0:c1].min(), base[c0:c1].max() + length
        for t in range(max(lo, first), min(hi, first + n)):
            spectrum = spectra[t - first]
            for c in range(c0, c1):
                j = t - base[c]
                if 0 <= j < length:
                    rows[c, j] = spectrum[c]
