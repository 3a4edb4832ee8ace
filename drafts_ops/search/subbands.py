"""Sub-bands in the streaming pass: the classical search of each sub-band on its own
(``search_subbands``) and the neural detector's sub-band rows (``detector_subbands``)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from drafts_ops.dedisp.plan import DMPlan, dispersion_delay_s
from drafts_ops.dedisp.subband import BandPooling
from drafts_ops.detect.boxcar_kernels import search_rows
from drafts_ops.detect.single_pulse import (
    Giants,
    baseline_window,
    boxcar_widths,
    giants_above,
    trials_threshold,
)
from drafts_ops.ml.inference import pool_dm_rows
from drafts_ops.ml.inputs import DETECTOR_ROWS, max_pool_edges
from drafts_ops.search import dedispersion
from drafts_ops.search.buffers import BlockBuffers
from drafts_ops.search.config import SearchConfig
from drafts_ops.search.dedispersion import SEARCH_NOISE_POINTS, boxcar_search
from drafts_ops.search.plan import SUBBAND_ROWS_CHUNK_MIB, BlockRange, SearchPlan


def search_each_subband(
    prepared: np.ndarray, plan: SearchPlan, block: BlockRange, dm_time: np.ndarray,
    *, valid: np.ndarray, buffers: BlockBuffers, keep: tuple[int, int], affine: dict,
    parts: list[Giants],
) -> None:  # fmt: skip
    """Dedisperse and search each sub-band of the block on its own; their sum, the full
    band's DM-time data, is left in ``dm_time`` (the same trials and delays: exact).

    Sub-band giants carry ``band = k`` (1-based) and cross a threshold raised for the
    extra trials (:func:`trials_threshold`); they are appended to ``parts``.
    """

    cfg = plan.config
    threshold = trials_threshold(cfg.snr_threshold, cfg.search_subbands)
    band = buffers.get("band_dm_time", dm_time.shape, np.float32)
    width_index = buffers.get("band_width_index", dm_time.shape, np.int8)
    nout = dm_time.shape[1]
    pairs = zip(plan.subband_channels(), plan.subband_plans(), strict=True)
    for k, ((c0, c1), sub_plan) in enumerate(pairs, start=1):
        data = prepared[c0:c1, : nout + sub_plan.max_delay]
        dedispersion.dedisperse_block(data, sub_plan, cfg, out=band, **affine)
        if k == 1:
            dm_time[...] = band
        else:
            dm_time += band
        widths = boxcar_search(band, valid, width_index, plan)
        parts.append(giants_above(band, width_index, threshold, widths=widths,
                                  sample_offset=block.read_start, keep=keep, band=k))  # fmt: skip


def subband_trial_stride(freqs_mhz: np.ndarray, c0: int, c1: int) -> int:
    """Every how many of the full band's DM trials channels ``[c0, c1)`` need one: the
    full band's dispersion sweep over the sub-band's (``f_lo^-2 - f_hi^-2``), at least 1.
    A DM error smears a sub-band's pulse that much less (FAST-like quarters: 2-6)."""
    freqs = np.asarray(freqs_mhz, np.float64)
    sub = freqs[c0:c1]
    full_sweep = float(dispersion_delay_s(1.0, freqs.min(), freqs.max()))
    sub_sweep = float(dispersion_delay_s(1.0, sub.min(), sub.max()))
    return max(int(full_sweep // sub_sweep), 1) if sub_sweep > 0 else 1


def band_pooling(plan: SearchPlan, nout: int, buffers: BlockBuffers) -> BandPooling | None:
    """The request that the sub-band operator pool the detector's sub-band rows as it
    dedisperses the full band (``detector_subbands > 1``; :class:`BandPooling`): rows
    scaled to the full band's noise, ``sqrt(nchans / sub-band channels)``."""
    bands = plan.config.detector_subbands
    if bands < 2:
        return None
    edges = detector_row_edges(len(plan.dms))
    channels = np.array([c0 for c0, _ in plan.subband_channels()] + [plan.header.nchans])
    rows = buffers.get("band_pooled", (bands, edges.size - 1, nout), np.float32)
    weights = np.sqrt(plan.header.nchans / np.diff(channels)).astype(np.float32)
    return BandPooling(channels, edges, rows, weights)


def detector_row_edges(ndm: int) -> np.ndarray:
    """Trials pooled into each of the detector's rows ``[rows + 1]``: its max-pooling of
    the DM axis, or one trial a row where there are no more trials than rows (the rows are
    then interpolated, :func:`~drafts_ops.ml.inference.pool_dm_rows`)."""

    return max_pool_edges(ndm, DETECTOR_ROWS) if ndm > DETECTOR_ROWS else np.arange(ndm + 1)


def raise_to_subband_rows(
    pooled: np.ndarray, prepared: np.ndarray, plan: SearchPlan, nout: int,
    *, buffers: BlockBuffers, affine: dict, pooling: BandPooling | None = None,
) -> None:  # fmt: skip
    """Raise the detector's pooled rows ``pooled`` (the full band's) to each sub-band's,
    scaled to the full band's noise (``sqrt(nchans / sub-band channels)``), wherever those
    are higher.

    A sub-band's pooled row is the largest of its trials in that row's DM range, as the
    full band's (all of them: the network's input keeps the statistics it was trained
    on; every :func:`subband_trial_stride`-th trial gave it twice the noise peaks). They
    come from ``pooling`` where the operator filled it while dedispersing the full band
    (the production sub-band operator: each trial's stage-2 sum taken band by band; 5.5
    -> ~1 s per FAST-like minute); else each sub-band is dedispersed a run of whole
    pooled rows at a time into a buffer of at most :data:`SUBBAND_ROWS_CHUNK_MIB`.
    """

    def raise_to(rows: np.ndarray) -> None:
        np.maximum(pooled, rows if pooling_rows else pool_dm_rows(rows), out=pooled)

    ndm = len(plan.dms)
    pooling_rows = ndm > pooled.shape[0]  # else the rows are the trials (then interpolated)
    if pooling is not None and pooling.filled:
        for rows in pooling.rows:
            raise_to(rows)
        return
    edges = detector_row_edges(ndm)
    per_chunk = max(int(SUBBAND_ROWS_CHUNK_MIB * 2**20 // (4 * nout)), int(np.diff(edges).max()))
    buffer = buffers.get("band_rows_chunk", (per_chunk, nout), np.float32)
    rows = buffers.get("band_rows", (edges.size - 1, nout), np.float32)
    runs = _runs_of_groups(np.diff(edges).tolist(), per_chunk)
    pairs = zip(plan.subband_channels(), plan.subband_plans(), strict=True)
    for (c0, c1), band_plan in pairs:
        for g0, g1 in runs:
            r0, r1 = int(edges[g0]), int(edges[g1])
            sub = band_plan if r1 - r0 == ndm else band_plan.select_trials(np.arange(r0, r1))
            out = buffer[: r1 - r0]
            data = prepared[c0:c1, : nout + sub.max_delay]
            dedispersion.dedisperse_block(data, sub, plan.config, out=out, **affine)
            for g in range(g0, g1):  # numpy's reduceat is ~10x slower here
                np.max(out[edges[g] - r0 : edges[g + 1] - r0], axis=0, out=rows[g])
        rows *= np.float32(math.sqrt(plan.header.nchans / (c1 - c0)))
        raise_to(rows)


def _runs_of_groups(sizes: list[int], per_run: int) -> list[tuple[int, int]]:
    """Runs ``(g0, g1)`` of consecutive groups whose ``sizes`` add up to at most
    ``per_run`` (at least one group each)."""
    runs, g0 = [], 0
    while g0 < len(sizes):
        g1, total = g0 + 1, sizes[g0]
        while g1 < len(sizes) and total + sizes[g1] <= per_run:
            total += sizes[g1]
            g1 += 1
        runs.append((g0, g1))
        g0 = g1
    return runs


@dataclass
class SubbandProbe:
    """Measures the sub-band S/N of a few DM-time positions of a block from its kernel
    input (the detector's peaks the full band does not keep): cheaper than searching
    every sub-band's whole DM-time array."""

    prepared: np.ndarray
    plan: SearchPlan
    block: BlockRange
    valid: np.ndarray
    nout: int
    affine: dict

    def giants_at(
        self, dm_index: np.ndarray, sample: np.ndarray, score: np.ndarray, *, radius: int,
        dm_radius: int,
    ) -> Giants:  # fmt: skip
        """Giants at the best S/N of any sub-band within ``dm_radius`` trials and ``radius``
        samples of each (fractional) position in the block, with ``band = k``."""
        if not len(score):
            return Giants.empty()
        best = [self._best_in_sub_bands(round(d), round(t), radius, dm_radius)
                for d, t in zip(dm_index, sample, strict=True)]  # fmt: skip
        d, t, w, snr, band = (np.array(v) for v in zip(*best, strict=True))
        return Giants(d.astype(np.int32), t + self.block.read_start, w.astype(np.int32),
                      snr.astype(np.float32), np.asarray(score, np.float32),
                      band.astype(np.int8))  # fmt: skip

    @functools.cached_property
    def _setup(self) -> tuple[SearchConfig, np.ndarray, int, list[tuple[int, int, DMPlan, int]]]:
        """What every probe of the block shares: the config with brute-force dedispersion
        (a few trials), the boxcar widths, the baseline window and, per sub-band, its
        channels, plan and :func:`subband_trial_stride`."""

        plan = self.plan
        cfg = plan.config.replace(algorithm="brute")
        widths = boxcar_widths(cfg.max_width_samples)
        baseline = baseline_window(cfg.baseline_s, plan.header.tsamp, cfg.max_width_samples)
        pairs = zip(plan.subband_channels(), plan.subband_plans(), strict=True)
        bands = [(c0, c1, band, subband_trial_stride(plan.header.chan_freqs, c0, c1))
                 for (c0, c1), band in pairs]  # fmt: skip
        return cfg, widths, baseline, bands

    def _best_in_sub_bands(self, d0: int, t0: int, radius: int, dm_radius: int) -> tuple:

        cfg, widths, baseline, bands = self._setup
        ndm, nout = len(self.plan.dms), self.nout
        d0, t0 = min(max(d0, 0), ndm - 1), min(max(t0, 0), nout - 1)
        lo, hi = max(d0 - dm_radius, 0), min(d0 + dm_radius + 1, ndm)
        t_lo, t_hi = max(t0 - radius, 0), min(t0 + radius + 1, nout)
        best = (d0, t0, 1, -np.inf, 0)
        for k, (c0, c1, band, stride) in enumerate(bands, start=1):
            rows = np.arange(lo + (d0 - lo) % stride, hi, stride)  # d0 among them
            sub = band.select_trials(rows).undecimated()
            data = self.prepared[c0:c1, : nout + sub.max_delay]
            series = dedispersion.dedisperse_block(data, sub, cfg, **self.affine)
            series = np.ascontiguousarray(series, np.float32)
            index = np.empty(series.shape, np.int8)
            search_rows(series, self.valid[rows], widths, baseline, SEARCH_NOISE_POINTS,
                        series, index)  # fmt: skip
            patch = series[:, t_lo:t_hi]
            i, j = np.unravel_index(int(np.argmax(patch)), patch.shape)
            if patch[i, j] > best[3]:
                best = (int(rows[i]), t_lo + j, int(widths[index[i, t_lo + j]]),
                        float(patch[i, j]), k)  # fmt: skip
        return best
