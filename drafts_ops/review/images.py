"""A candidate's detail image for review: profile, waterfall and DM-time image drawn from
its stored FETCH cutouts (``h5/<id>.h5``), with the averaging the reviewer chooses; for a
candidate without one (not called a burst), the cutouts are made again from its file with
the search's own options (``perf.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from drafts_ops.core.errors import ObservationError
from drafts_ops.core.perf import PERF_FILENAME
from drafts_ops.detect.plots import CandidatePlotter, png_bytes
from drafts_ops.io import open_observation
from drafts_ops.review.catalogue import ReviewItem
from drafts_ops.search.config import SearchConfig
from drafts_ops.search.plan import plan_search
from drafts_ops.search.windows import CutoutMaker


def stored_cutouts(item: ReviewItem) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(freq_time [time, frequency], dm_time [dm, time], header figures)`` of ``item``."""
    if item.h5 is not None:
        with h5py.File(item.h5, "r") as fh:
            attrs = {k: float(fh.attrs[k]) for k in ("tsamp", "fch1", "foff", "nchans")
                     if k in fh.attrs}  # fmt: skip
            return fh["data_freq_time"][:], fh["data_dm_time"][:], attrs
    return remade_cutouts(item)


def remade_cutouts(item: ReviewItem) -> tuple[np.ndarray, np.ndarray, dict]:
    """Cutouts made again from the searched file, as the search made them."""
    perf = json.loads((item.search_dir / PERF_FILENAME).read_text())
    run = perf.get("run", {})
    files = str(run.get("file", "")).split(" ")
    if not files or not Path(files[0]).exists():
        raise ObservationError(files[0] if files else None, "the searched file is not there "
                               "any more: only candidates with .h5 files can be shown")  # fmt: skip
    options = {k: v for k, v in (run.get("options") or {}).items()
               if k in SearchConfig.model_fields}  # fmt: skip
    plan = plan_search(files if len(files) > 1 else files[0], SearchConfig(**options))
    with open_observation(plan.source) as reader:
        ft, dt = CutoutMaker(reader, plan).cutouts(item.candidate)
    h = plan.header
    return ft, dt, {"tsamp": h.tsamp, "fch1": h.fch1, "foff": h.foff, "nchans": h.nchans}


def detail_png(
    item: ReviewItem, *, subbands: int | None = None, smooth: int | None = None
) -> bytes:
    """The detail image of ``item`` as PNG bytes (the search's candidate figure), with
    ``subbands`` sub-bands (default: by its S/N) and ``smooth`` pixels of smoothing in time
    (default: its width)."""
    ft, dt, attrs = stored_cutouts(item)
    c = item.candidate
    fch1, foff, nchans = attrs["fch1"], attrs["foff"], int(attrs["nchans"])
    edges = (fch1, fch1 + foff * (nchans - 1))
    with CandidatePlotter(tsamp=attrs["tsamp"], fmax_mhz=max(edges), fmin_mhz=min(edges)) as plot:
        return png_bytes(plot.pixels(c, ft, dt, subbands=subbands, smooth=smooth))
