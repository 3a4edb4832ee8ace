"""Time decimation kernels for DM trials searched at coarser resolution (Heimdall, DDplan).

:func:`decimate_time` averages ``ratio`` consecutive samples of every channel; applied to a
level that is itself decimated, it weights that level's last (partial) sample by the raw
samples it covers, so decimating by 2 repeatedly gives exactly the mean over each window
of ``2^k`` raw samples (the last window averages the raw samples that exist) while reading
every level once. :func:`upsample_rows` writes coarse DM-time rows back at full resolution
by repetition, so the operator's output shape does not depend on the decimation plan.
"""

from __future__ import annotations

from numba import float32, njit, prange


@njit(parallel=True, fastmath=True, cache=True)
def decimate_time(data, ratio, data_factor, nsamp_raw, out):
    """``out[b, c, j]`` = mean of the raw samples under ``data[b, c, ratio*j : ratio*(j+1)]``.

    ``data`` averages ``data_factor`` raw samples per sample (1 for the input itself) of a
    block of ``nsamp_raw`` raw samples; only its last sample may cover fewer.
    ``out.shape[2]`` must be ``ceil(data.shape[2] / ratio)``.
    """
    nbatch, nchan, ns = data.shape
    nc = out.shape[2]
    nfull = min((ns - 1) // ratio, nc)  # windows that do not reach the last input sample
    last_cnt = float32(nsamp_raw - (ns - 1) * data_factor)
    full_cnt = float32(data_factor)
    inv = float32(1.0) / float32(ratio)
    for k in prange(nbatch * nchan):
        src = data[k // nchan, k % nchan]
        dst = out[k // nchan, k % nchan]
        if ratio == 2:
            for j in range(nfull):
                dst[j] = (float32(src[2 * j]) + float32(src[2 * j + 1])) * inv
        else:
            for j in range(nfull):
                acc = float32(0.0)
                for i in range(j * ratio, j * ratio + ratio):
                    acc += float32(src[i])
                dst[j] = acc * inv
        for j in range(nfull, nc):  # the window holding the last (partial) input sample
            acc = float32(0.0)
            weight = float32(0.0)
            for i in range(j * ratio, min(j * ratio + ratio, ns)):
                cnt = last_cnt if i == ns - 1 else full_cnt
                acc += float32(src[i]) * cnt
                weight += cnt
            dst[j] = acc / weight


@njit(parallel=True, cache=True)
def upsample_rows(rows, index, factor, out):  # pragma: no cover - compiled
    """``out[b, index[i], t] = rows[b, i, t // factor]`` for every output sample ``t``."""
    nbatch, nrow = rows.shape[0], rows.shape[1]
    nout = out.shape[2]
    for k in prange(nbatch * nrow):
        src = rows[k // nrow, k % nrow]
        dst = out[k // nrow, index[k % nrow]]
        nfull = nout // factor
        for j in range(nfull):
            v = src[j]
            for t in range(j * factor, j * factor + factor):
                dst[t] = v
        for t in range(nfull * factor, nout):
            dst[t] = src[nfull]
