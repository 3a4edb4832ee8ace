"""Time decimation kernels for DM trials searched at coarser resolution (Heimdall, DDplan).

:func:`decimate_time` averages ``factor`` consecutive samples of every channel (the last
window averages the samples that exist); :func:`upsample_rows` writes coarse DM-time rows
back at full resolution by repetition, so the operator's output shape does not depend on
the decimation plan.
"""

from __future__ import annotations

from numba import float32, njit, prange


@njit(parallel=True, cache=True)
def decimate_time(data, factor, out):  # pragma: no cover - compiled
    """``out[b, c, j] = mean(data[b, c, factor*j : factor*(j+1)])`` (float32)."""
    nbatch, nchan, nsamp = data.shape
    ncoarse = out.shape[2]
    for k in prange(nbatch * nchan):
        b = k // nchan
        c = k % nchan
        for j in range(ncoarse):
            lo = j * factor
            hi = min(lo + factor, nsamp)
            acc = float32(0.0)
            for i in range(lo, hi):
                acc += float32(data[b, c, i])
            out[b, c, j] = acc / float32(max(hi - lo, 1))


@njit(parallel=True, cache=True)
def upsample_rows(rows, index, factor, out):  # pragma: no cover - compiled
    """``out[b, index[i], t] = rows[b, i, t // factor]`` for every output sample ``t``."""
    nbatch, nrow = rows.shape[0], rows.shape[1]
    nout = out.shape[2]
    for k in prange(nbatch * nrow):
        b = k // nrow
        i = k % nrow
        d = index[i]
        for t in range(nout):
            out[b, d, t] = rows[b, i, t // factor]
