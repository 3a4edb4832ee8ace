"""The search's two calls on DM-time data: dedispersion (through the operator
registry) and the fused boxcar search of its rows."""

from __future__ import annotations

import numpy as np

from drafts_ops import dedisp
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.subband import BandPooling
from drafts_ops.detect.boxcar_kernels import search_rows
from drafts_ops.detect.single_pulse import baseline_window, boxcar_widths
from drafts_ops.search.config import SearchConfig
from drafts_ops.search.plan import SearchPlan


def dedisperse_block(
    data: np.ndarray, dm_plan: DMPlan, config: SearchConfig, out: np.ndarray | None = None,
    *, offset: float = 0.0, scale: float = 1.0, pooling: BandPooling | None = None,
) -> np.ndarray:  # fmt: skip
    """The one call into dedispersion: the operator registry's dispatch (``offset`` and
    ``scale``: what quantised ``data`` stand for; ``pooling``: see ``dedisperse``)."""

    return dedisp.dedisperse(data, dm_plan, mode=config.dedisp_mode, algorithm=config.algorithm,
                      backend=config.backend, out=out, offset=offset, scale=scale,
                      pooling=pooling)  # fmt: skip


def boxcar_search(
    series: np.ndarray, valid: np.ndarray, width_index: np.ndarray, plan: SearchPlan
) -> np.ndarray:
    """Replace each DM row of ``series`` by its best boxcar S/N (fused kernel: running
    baseline, per-width noise measured on the data), the chosen width's index into
    ``width_index``; returns the boxcar widths (samples)."""
    widths, window = boxcar_widths_for(plan.config, plan.header.tsamp)
    search_rows_into(series, valid, widths, window, width_index)
    return widths


def boxcar_widths_for(
    config: SearchConfig, tsamp: float, factor: int = 1
) -> tuple[np.ndarray, int]:
    """The boxcar widths and the baseline window (samples) of a search of data sampled
    every ``tsamp`` seconds, each sample ``factor`` searched samples (a DM range's): the
    widest boxcar spans the same time at every resolution."""
    widest = max(1, config.max_width_samples // factor)
    return boxcar_widths(widest), baseline_window(config.baseline_s, tsamp, widest)


def search_rows_into(
    series: np.ndarray, valid: np.ndarray, widths: np.ndarray, window: int,
    width_index: np.ndarray,
) -> None:  # fmt: skip
    """The fused boxcar search of ``series`` in place (S/N), widths' indices into
    ``width_index``."""
    search_rows(series, valid, widths, window, SEARCH_NOISE_POINTS, series, width_index)


#: Strided samples from which each DM row's baseline and per-boxcar noise are measured.
SEARCH_NOISE_POINTS = 1024
