"""Plain numpy dedispersion: obviously correct, slow. The yardstick for every kernel."""

from __future__ import annotations

import numpy as np

from drafts_ops.core.errors import OperatorError


def dedisperse_reference(data: np.ndarray, delays: np.ndarray) -> np.ndarray:
    """Brute-force incoherent dedispersion.

    Parameters
    ----------
    data : ndarray [nchan, nsamp]
        Filterbank block (any real dtype), channels in the order of ``delays``' columns.
    delays : ndarray [ndm, nchan] of int
        Delay of each channel in samples (see :class:`drafts_ops.dedisp.plan.DMPlan`).

    Returns
    -------
    ndarray [ndm, nsamp - max(delays)] float32
        ``out[d, t] = sum_c data[c, t + delays[d, c]]``, accumulated in float64.
    """
    data = np.asarray(data)
    delays = np.asarray(delays)
    if data.ndim != 2 or delays.ndim != 2 or delays.shape[1] != data.shape[0]:
        raise OperatorError(f"shapes {data.shape} and delays {delays.shape} do not match")
    nout = data.shape[1] - int(delays.max(initial=0))
    if nout <= 0:
        raise OperatorError(
            f"{data.shape[1]} samples is not more than the maximum delay {delays.max()}"
        )
    out = np.zeros((delays.shape[0], nout), dtype=np.float64)
    for d, row in enumerate(delays):
        for c, shift in enumerate(row):
            out[d] += data[c, shift : shift + nout]
    return out.astype(np.float32)
