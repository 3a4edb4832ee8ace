"""The buffers one streaming pass reuses for every block (sized for the largest block)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.dedisp.workspace import default_pool
from drafts_ops.detect.single_pulse import Giants

if TYPE_CHECKING:
    from drafts_ops.search.plan import BlockRange


@dataclass
class BlockBuffers:
    """Buffers one streaming pass reuses for every block (sized for the largest block)."""

    prepared: np.ndarray | None = None
    raw: np.ndarray | None = None  # 8-bit samples read, then the kernel's levels over them
    quantised: np.ndarray | None = None  # 8-bit kernel input of samples read elsewhere
    dm_time: np.ndarray | None = None
    width_index: np.ndarray | None = None
    band_dm_time: np.ndarray | None = None  # one sub-band's (search_subbands > 1)
    band_width_index: np.ndarray | None = None
    band_rows_chunk: np.ndarray | None = None  # the detector's sub-band trials, a run
    band_rows: np.ndarray | None = None  # ... and one sub-band's pooled rows
    band_pooled: np.ndarray | None = None  # every sub-band's, pooled by the operator
    masked: np.ndarray | None = None  # blocks in which each channel was masked
    levels: np.ndarray | None = None  # a DM range's block: its kernel input (8-bit levels)
    piece: np.ndarray | None = None  # a decimated range's piece of integer sums
    floats: np.ndarray | None = None  # a range's piece of float32 averages (wider samples)
    blocks: int = 0
    #: Called with each block and its dedispersed samples ``[ndm, owned]`` (before the
    #: search overwrites them): training data for the neural detector.
    on_dm_time: Callable[[BlockRange, np.ndarray], None] | None = None
    #: Called with each block and the neural detector's input rows ``[64, owned]`` (the
    #: full band's pooled DM trials, raised to the sub-bands' with ``detector_subbands``).
    on_detector_rows: Callable[[BlockRange, np.ndarray], None] | None = None

    def get(self, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        buf = getattr(self, name)
        if buf is None or buf.shape != shape or buf.dtype != np.dtype(dtype):
            buf = np.empty(shape, dtype)
            setattr(self, name, buf)
        return buf


def save_segment(parts: list[Giants], buffers: BlockBuffers, indices: Sequence[int],
                 work_dir: str | Path) -> Path:  # fmt: skip
    """End of a streaming pass over blocks ``indices``: the operator's scratch released,
    how often each channel was masked (for the report) and the giants saved in
    ``work_dir``; the giants' ``.npz`` path."""
    default_pool.clear()  # the operator's scratch is not needed after the pass
    span = f"{indices[0]:05d}-{indices[-1]:05d}"
    if buffers.masked is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        np.save(Path(work_dir) / f"masked_{span}.npy",
                np.append(buffers.masked, buffers.blocks))  # fmt: skip
    return Giants.concatenate(parts).save(Path(work_dir) / f"giants_{span}.npz")
