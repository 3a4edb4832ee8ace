"""Candidate products: each candidate's FETCH cutouts, computed once at the searched
resolution and shared by the classifier, the ``.h5`` writer and the PNG.

The window is read through the search's own reader path
(:func:`drafts_ops.pipeline.read_searched`): raw samples, averaged to the searched time and
frequency resolution before any float copy, so a 4096-channel file searched at x8 x8
decimation costs 64 times less than its raw resolution would. The DM–time cutout goes
through the production operator (:func:`~drafts_ops.detect.cutouts.dm_time_cutout`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.cutouts import cutout_pair, cutout_span
from drafts_ops.detect.preprocess import auto_mask, decimate_mask, static_mask

if TYPE_CHECKING:
    from drafts_ops.io.reader import ObservationReader
    from drafts_ops.pipeline import SearchPlan


class CutoutMaker:
    """Makes ``(freq_time, dm_time)`` cutouts of candidates of one search plan.

    ``made`` counts the candidates processed (tests check that a search makes each
    candidate's cutouts once).
    """

    def __init__(self, reader: ObservationReader, plan: SearchPlan) -> None:
        self.reader = reader
        self.plan = plan
        cfg = plan.config
        mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
        if cfg.freq_decimation > 1:
            mask = decimate_mask(mask, cfg.freq_decimation)
        self.static_mask = mask
        self.made = 0

    def cutouts(self, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
        """FETCH cutouts ``(freq_time [256, 256], dm_time [256, 256])`` of ``cand``."""
        from drafts_ops.pipeline import read_searched

        header, cfg = self.plan.header, self.plan.config
        freqs = header.chan_freqs
        start, stop = cutout_span(freqs, header.tsamp, cand.dm, cand.sample, cand.width_samples)
        lo, hi = max(start, 0), min(stop, header.nsamples)
        data = read_searched(self.reader, self.plan, lo, max(hi, lo + 1))
        mask = self.static_mask.copy()
        if cfg.auto_mask and data.shape[1] > 1:
            mask |= auto_mask(data, cfg.mask_threshold)
        args = (data, freqs, header.tsamp, cand.dm, cand.sample - lo, cand.width_samples)
        self.made += 1
        return cutout_pair(*args, chan_mask=mask)
