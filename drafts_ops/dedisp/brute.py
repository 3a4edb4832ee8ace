"""Tiled brute-force dedispersion on the CPU (Numba kernels).

``out[b, d, t] = sum_c data[b, c, t + delays[d, c]]``, the same arithmetic as the prototype
kernel, organised for the memory hierarchy:

* tiles of ``tile_dm`` DMs x ``tile_t`` output samples run in parallel (``prange``);
* inside a tile, channels are visited in slabs of ``tile_chan`` that stay in L2, and every
  DM of the tile sweeps the slab while it is hot;
* the inner loop runs over contiguous time, eight channels per pass
  (``acc += ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))``), so it vectorises (AVX2:
  8 lanes) and loads/stores the accumulator an eighth as often as a channel-at-a-time
  loop (the prototype's order), which is what bounds that loop. The input dtype (uint8,
  uint16, float32) is converted in registers: no float copy of the block is made. One
  body is compiled per dtype. The adds run in the accumulator's type (:func:`_lane`):
  float32, or uint16 where the sub-band stage 1 sums 8-bit data (twice the lanes).

Channel slabs hold whole groups of eight, so every output sample is summed in the same
order for any tile sizes and the result does not depend on the tiling. Integer input gives
exact sums (< 2**24); float32 input agrees with a sequential sum to float32 rounding
(~1e-6 relative).
"""

from __future__ import annotations

import numpy as np
from numba import float32, njit, prange, types, uint16
from numba.extending import overload


def _lane(acc, x):  # pragma: no cover - replaced in compiled code by its overload
    """``x`` in the accumulator's arithmetic: float32, or uint16 for a uint16 accumulator."""
    raise NotImplementedError


@overload(_lane, inline="always")
def _lane_overload(acc, x):
    if acc.dtype == types.uint16:
        return lambda acc, x: uint16(x)
    return lambda acc, x: float32(x)


@njit(fastmath=True, cache=True)
def _add4(acc, x0, x1, x2, x3, n):  # noqa: PLR0917  # pragma: no cover
    for i in range(n):
        acc[i] += (_lane(acc, x0[i]) + _lane(acc, x1[i])) + (_lane(acc, x2[i]) + _lane(acc, x3[i]))


@njit(fastmath=True, cache=True)
def _add8(acc, x0, x1, x2, x3, x4, x5, x6, x7, n):  # noqa: PLR0917  # pragma: no cover
    for i in range(n):
        acc[i] += (
            (_lane(acc, x0[i]) + _lane(acc, x1[i])) + (_lane(acc, x2[i]) + _lane(acc, x3[i]))
        ) + ((_lane(acc, x4[i]) + _lane(acc, x5[i])) + (_lane(acc, x6[i]) + _lane(acc, x7[i])))


@njit(fastmath=True, cache=True)
def _add1(acc, x0, n):  # pragma: no cover - compiled
    for i in range(n):
        acc[i] += _lane(acc, x0[i])


@njit(fastmath=True, cache=True)
def accumulate_channels(acc, data, dl, shift, c0, c1, n):  # noqa: PLR0917  # pragma: no cover
    """``acc[i] += sum_{c0 <= c < c1} data[c, i + dl[c] + shift]`` for ``i < n``."""
    c = c0
    while c + 8 <= c1:
        _add8(
            acc,
            data[c, dl[c] + shift : dl[c] + shift + n],
            data[c + 1, dl[c + 1] + shift : dl[c + 1] + shift + n],
            data[c + 2, dl[c + 2] + shift : dl[c + 2] + shift + n],
            data[c + 3, dl[c + 3] + shift : dl[c + 3] + shift + n],
            data[c + 4, dl[c + 4] + shift : dl[c + 4] + shift + n],
            data[c + 5, dl[c + 5] + shift : dl[c + 5] + shift + n],
            data[c + 6, dl[c + 6] + shift : dl[c + 6] + shift + n],
            data[c + 7, dl[c + 7] + shift : dl[c + 7] + shift + n],
            n,
        )
        c += 8
    if c + 4 <= c1:
        s0 = dl[c] + shift
        s1 = dl[c + 1] + shift
        s2 = dl[c + 2] + shift
        s3 = dl[c + 3] + shift
        _add4(
            acc,
            data[c, s0 : s0 + n],
            data[c + 1, s1 : s1 + n],
            data[c + 2, s2 : s2 + n],
            data[c + 3, s3 : s3 + n],
            n,
        )
        c += 4
    while c < c1:
        s0 = dl[c] + shift
        _add1(acc, data[c, s0 : s0 + n], n)
        c += 1


@njit(inline="always", cache=True)
def tile_origin(k, nrow_tiles, ntime_tiles, tile_rows, tile_t):  # pragma: no cover
    """Batch index, first row and first sample of flat tile ``k`` (tiles: batch x rows x time)."""
    b = k // (nrow_tiles * ntime_tiles)
    r0 = ((k // ntime_tiles) % nrow_tiles) * tile_rows
    t0 = (k % ntime_tiles) * tile_t
    return b, r0, t0


@njit(parallel=True, fastmath=True, cache=True)
def brute_tiles(data, delays, out, tile_dm, tile_t, tile_chan):  # noqa: PLR0917  # pragma: no cover
    """Dedisperse ``data [nbatch, nchan, nsamp]`` into ``out [nbatch, ndm, nout]``."""
    nbatch, nchan = data.shape[0], data.shape[1]
    ndm, nout = out.shape[1], out.shape[2]
    ntd = (ndm + tile_dm - 1) // tile_dm
    ntt = (nout + tile_t - 1) // tile_t
    for k in prange(nbatch * ntd * ntt):
        b, d0, t0 = tile_origin(k, ntd, ntt, tile_dm, tile_t)
        d1 = min(d0 + tile_dm, ndm)
        n = min(t0 + tile_t, nout) - t0
        block = data[b]
        for d in range(d0, d1):
            out[b, d, t0 : t0 + n] = 0.0
        for c0 in range(0, nchan, tile_chan):
            c1 = min(c0 + tile_chan, nchan)
            for d in range(d0, d1):
                accumulate_channels(out[b, d, t0 : t0 + n], block, delays[d], t0, c0, c1, n)


def brute_cpu(data: np.ndarray, delays: np.ndarray, out: np.ndarray, tiling) -> None:
    """Run :func:`brute_tiles` with the tile sizes of a :class:`TilingPlan`."""
    brute_tiles(data, delays, out, tiling.tile_dm, tiling.tile_t, tiling.tile_chan)
