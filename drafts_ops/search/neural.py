"""The neural detector in the streaming pass: its peaks, kept at their best boxcar S/N
(and, with ``detector_subbands``, at a sub-band's)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from drafts_ops.detect.single_pulse import Giants, giants_at, trials_threshold
from drafts_ops.ml.inference import load_detector
from drafts_ops.search.config import SearchConfig
from drafts_ops.search.subbands import SubbandProbe


def detector_giants(
    peaks: list, detector: Any, searched: tuple[np.ndarray, np.ndarray, np.ndarray],
    sub_bands: SubbandProbe, *, cfg: SearchConfig,
) -> Giants:  # fmt: skip
    """The giants of the detector's ``peaks`` in the block that the search keeps
    (:func:`keeps_detection`), each at the best boxcar S/N near it (``searched``: the
    full band's S/N, width index and widths).

    With ``detector_subbands > 1``, a peak the full band does not keep but that scores at
    least ``detector_faint_threshold`` is kept at its best sub-band's S/N (``band = k``,
    measured by ``sub_bands``) where that passes the same rules with both thresholds
    raised for the extra trials (:func:`trials_threshold`).
    """

    snr, width_index, widths = searched
    block = sub_bands.block
    dms = np.array([p.dm_index for p in peaks], np.float64)
    cols = np.array([p.sample for p in peaks], np.float64)
    lo, hi = block.start - block.read_start, block.stop - block.read_start
    owned = (cols >= lo - 0.5) & (cols < hi - 0.5)
    dm_radius, radius = detector.position_uncertainty(snr.shape[0])
    scores = np.array([p.score for p in peaks], np.float32)[owned]
    full = giants_at(snr, width_index, dms[owned], cols[owned], scores, radius=radius,
                     dm_radius=dm_radius, sample_offset=block.read_start,
                     widths=widths)  # fmt: skip
    kept = keeps_detection(full.snr, full.score, cfg)
    n = cfg.detector_subbands
    if n == 1 or kept.all():
        return full.select(kept)
    floor = trials_threshold(cfg.ml_min_snr, n) if cfg.ml_min_snr > 0 else 0.0
    raised = cfg.replace(snr_threshold=trials_threshold(cfg.snr_threshold, n),
                                 ml_min_snr=floor)  # fmt: skip
    probed = ~kept & (full.score >= cfg.detector_faint_threshold)
    sub = sub_bands.giants_at(dms[owned][probed], cols[owned][probed], full.score[probed],
                              radius=radius, dm_radius=dm_radius)  # fmt: skip
    in_band = keeps_detection(sub.snr, sub.score, raised)
    return Giants.concatenate([full.select(kept), sub.select(in_band)])


def keeps_detection(snr: np.ndarray, score: np.ndarray, config: SearchConfig) -> np.ndarray:
    """Which neural-detector peaks (boxcar ``snr``, heatmap ``score``) the search keeps: S/N
    at least ``ml_min_snr``, and below the boxcar threshold ``snr_threshold`` a score of
    at least ``detector_faint_threshold``."""
    faint = snr < config.snr_threshold
    return (snr >= config.ml_min_snr) & (~faint | (score >= config.detector_faint_threshold))


@functools.lru_cache(maxsize=1)
def shipped_detector():
    """The neural detector: ``.detect(dm_time [ndm, nt], threshold=) -> peaks`` with
    ``dm_index``, ``sample`` (fractional, in the block's coordinates) and ``score``;
    loaded (and its hash checked) once per process, not once per block."""

    return load_detector()
