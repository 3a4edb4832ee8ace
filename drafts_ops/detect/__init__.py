"""Single-pulse detection: preprocessing, boxcar search, clustering, candidates, outputs.

Modules (each small, importable on its own):

* :mod:`~drafts_ops.detect.preprocess` — channel normalisation, masks, zero-DM, decimation
* :mod:`~drafts_ops.detect.single_pulse` — baseline, robust noise, boxcar S/N, giants
* :mod:`~drafts_ops.detect.cluster` — friends-of-friends clustering, merging blocks
* :mod:`~drafts_ops.detect.candidates` — the :class:`Candidate` record
* :mod:`~drafts_ops.detect.cutouts` — FETCH-layout freq-time and DM-time cutouts
* :mod:`~drafts_ops.detect.writers` — ``candidates.csv``, ``.cand``, FETCH ``.h5``
* :mod:`~drafts_ops.detect.plots` — diagnostic PNGs
* :mod:`~drafts_ops.detect.kernels` — the numba kernels behind them

The stages of a whole search are in :mod:`drafts_ops.search`.
"""
