"""Small simulated observations for the flow tests (noise plus one dispersed pulse)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc

#: The small test band: 64 channels of 2 MHz from 1500 MHz down, 1 ms samples.
HEADER = Header(nchans=64, fch1=1500.0, foff=-2.0, tsamp=1e-3, nbits=8, nsamples=0)
#: Search options matched to it (keep the flow tests fast).
SEARCH = {
    "dm_min": 0.0,
    "dm_max": 300.0,
    "block_size": 2048,
    "snr_threshold": 8.0,
    "max_outputs": 1,
    "write_plots": False,
}


def write_observation(
    path: Path, rng: np.random.Generator, *, dm: float, t_s: float, nsamples: int = 6144
) -> Path:
    """Write a 8-bit filterbank with Gaussian noise and a 3-sample pulse at ``dm``, ``t_s``.

    ``t_s`` is the arrival time at the top of the band, seconds from the first sample.
    """
    data = rng.normal(100.0, 10.0, size=(HEADER.nchans, nsamples))
    delays = dispersion_delay_s(dm, HEADER.chan_freqs, HEADER.fmax) / HEADER.tsamp
    start = np.rint(t_s / HEADER.tsamp + delays).astype(int)
    for chan, s in enumerate(start):
        data[chan, s : s + 3] += 25.0
    return write_sigproc(path, HEADER.replace(nsamples=nsamples), np.clip(np.rint(data), 0, 255))
