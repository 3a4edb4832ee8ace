"""Numba kernels of brute-force dedispersion: the core arithmetic every path reuses.

Nothing here imports the rest of the package. Two layers:

* :func:`dedisperse_span` — the core computation, ``out[d, t] = sum_c data[c, t +
  delays[d, c]]`` for one DM row ``d`` and one span of output samples ``[t_lo, t_hi)``
  (:func:`accumulate_span` adds a channel range, for callers that tile channels).
  Channels outer, samples inner, so the inner loop is contiguous in memory and the CPU
  compiler vectorises it; accumulation is in the dtype of ``out`` (float32). It compiles
  for any real input dtype (``uint8`` straight from 8-bit files, ``float32``) and as a CUDA
  device function. The production operator calls it on its own tiles.
* :func:`dedisperse_thread` — the per-thread kernel body for :func:`drafts_ops.dedisp.launch
  .launch`: block ``(bx, by)`` covers DM ``bx`` and chunk ``by`` of ``block_dim[0] *
  samples_per_thread`` output samples; thread ``tx`` computes its ``samples_per_thread``
  consecutive samples of that chunk with :func:`dedisperse_span`.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def accumulate_span(  # noqa: PLR0917 (numba kernels take positional arguments)
    data: np.ndarray,
    delays: np.ndarray,
    out: np.ndarray,
    d: int,
    t_lo: int,
    t_hi: int,
    c_lo: int,
    c_hi: int,
) -> None:
    """Add channels ``c_lo <= c < c_hi`` of DM row ``d`` to ``out[d, t_lo:t_hi]``.

    ``out[d, t] += sum_c data[c, t + delays[d, c]]``: the core arithmetic, for callers
    that tile over channels (sub-bands) as well as time. Same arguments as
    :func:`dedisperse_span`, plus the channel range.
    """
    n = t_hi - t_lo
    row_out = out[d, t_lo:t_hi]
    for c in range(c_lo, c_hi):
        start = t_lo + delays[d, c]
        row_in = data[c, start : start + n]
        for k in range(n):
            row_out[k] += row_in[k]


@numba.njit(cache=True, nogil=True)
def dedisperse_span(  # noqa: PLR0917
    data: np.ndarray, delays: np.ndarray, out: np.ndarray, d: int, t_lo: int, t_hi: int
) -> None:
    """Dedisperse DM row ``d`` for output samples ``t_lo <= t < t_hi`` into ``out``.

    Parameters
    ----------
    data : ndarray [nchan, nsamp]
        Filterbank block, any real dtype; channel order matches the columns of ``delays``.
    delays : ndarray [ndm, nchan] int
        Channel delays in samples (``DMPlan.delays``); all ``t + delays[d, c] < nsamp``.
    out : ndarray [ndm, nout] float32
        Output; ``out[d, t_lo:t_hi]`` is overwritten (no need to zero it first).
    d, t_lo, t_hi : int
        DM row and sample span; the caller keeps them inside ``out``.
    """
    row_out = out[d, t_lo:t_hi]
    for k in range(t_hi - t_lo):
        row_out[k] = 0
    accumulate_span(data, delays, out, d, t_lo, t_hi, 0, data.shape[0])


@numba.njit(cache=True, nogil=True)
def dedisperse_thread(  # noqa: PLR0917
    block: tuple[int, int],
    thread: tuple[int, int],
    block_dim: tuple[int, int],
    data: np.ndarray,
    delays: np.ndarray,
    out: np.ndarray,
    samples_per_thread: int,
) -> None:
    """Kernel body: grid ``(ndm, ceil(nout / (block_dim[0] * samples_per_thread)))``.

    DM is the fastest-varying block index, so consecutive blocks (on one CPU core) reuse
    the same time chunk of ``data`` from cache for neighbouring DMs.

    Threads past the end of the output (the last, partial chunk) do nothing.
    """
    d = block[0]
    t_lo = (block[1] * block_dim[0] + thread[0]) * samples_per_thread
    nout = out.shape[1]
    if d >= out.shape[0] or t_lo >= nout:
        return
    t_hi = min(t_lo + samples_per_thread, nout)
    dedisperse_span(data, delays, out, d, t_lo, t_hi)
