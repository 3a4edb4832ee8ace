"""The streaming pass (dedisperse + detect): consecutive blocks read once, normalised,
dedispersed and searched, their giants saved for the merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.detect.preprocess import (
    decimate_mask,
    prepare_block,
    quantised_levels,
    same_samples,
    static_mask,
)
from drafts_ops.detect.single_pulse import Giants, giants_above
from drafts_ops.io import open_observation
from drafts_ops.io.reader import ObservationReader
from drafts_ops.ml.inference import pool_dm_rows
from drafts_ops.search import dedispersion, samples
from drafts_ops.search.buffers import BlockBuffers, save_segment
from drafts_ops.search.config import PathLike, SearchConfig
from drafts_ops.search.dedispersion import boxcar_search
from drafts_ops.search.neural import detector_giants, shipped_detector
from drafts_ops.search.plan import BlockRange, SearchPlan
from drafts_ops.search.range_pass import search_range_segment
from drafts_ops.search.samples import DecimatedReader
from drafts_ops.search.subbands import (
    SubbandProbe,
    band_pooling,
    raise_to_subband_rows,
    search_each_subband,
)

# -- dedisperse + detect: the streaming pass ---------------------------------------------


def search_segment(
    block_indices: Sequence[int], path: PathLike, plan: SearchPlan, work_dir: PathLike,
    *, on_block: Callable[[int], None] | None = None,
    on_dm_time: Callable[[BlockRange, np.ndarray], None] | None = None,
    on_detector_rows: Callable[[BlockRange, np.ndarray], None] | None = None,
) -> Path:  # fmt: skip
    """Search consecutive blocks of the observation in one streaming pass.

    Each block is read once (raw samples, decimated before any float copy), normalised
    and masked, dedispersed by the configured operator and searched by the fused boxcar
    kernel; giants of all the blocks go to one ``.npz`` file in ``work_dir`` (returned).
    ``on_block(i)`` is called after each block (progress), ``on_dm_time(block,
    dm_time)`` with the DM-time samples each block owns (``BlockBuffers.on_dm_time``),
    ``on_detector_rows(block, rows)`` with the detector's input rows (a search with
    the neural detector; ``BlockBuffers.on_detector_rows``).
    """
    if plan.ranges:  # DM ranges at their own resolutions
        if on_dm_time is not None or on_detector_rows is not None:
            raise ParameterError("the DM-time data of a search with DM ranges are not one "
                                 "array: plan it with auto_decimation=False")  # fmt: skip
        return search_range_segment(block_indices, plan, work_dir, on_block=on_block)
    indices = list(block_indices)
    if not indices:
        raise ParameterError("search_segment needs at least one block")
    dm_plan = plan.dm_plan()
    buffers = BlockBuffers(on_dm_time=on_dm_time, on_detector_rows=on_detector_rows)
    parts = []
    cfg = plan.config
    with open_observation(plan.source) as reader:
        kept = DecimatedReader(reader, plan, Path(work_dir)) if cfg.decimates else None
        for k, i in enumerate(indices):
            block = plan.blocks[i]
            if kept is None:  # 8-bit samples into one buffer that takes the kernel's levels
                shape = (plan.header.nchans, block.read_len)
                spent = cfg.quantises and plan.raw_header.nbits == 8
                into = buffers.get("raw", shape, np.uint8) if spent else None
                data = samples.read_searched(
                    reader, plan, block.read_start, block.read_stop, out=into
                )
            else:  # averages read into the block's float32 buffer and normalised there
                # (search_block): one float32 copy of the block, not two
                into = buffers.get("prepared", (plan.header.nchans, block.read_len), np.float32)
                last = k + 1 == len(indices)
                data = kept.read(block, into, keep_stop=block.stop if last else block.read_stop)
            if k + 1 < len(indices):  # the disk reads the next block while this one is searched
                _prefetch_block(reader, plan, plan.blocks[indices[k + 1]])
            parts.append(search_block(data, plan, block, dm_plan, buffers))
            # a block of another length gets a new buffer: the old one must not outlive it
            # (the first block is shorter by its padding: +90 MiB peak at FAST raw x8 x8)
            del data, into
            reader.release(block.stop * plan.config.time_decimation)
            if on_block is not None:
                on_block(i)

    return save_segment(parts, buffers, indices, work_dir)


def _prefetch_block(reader: ObservationReader, plan: SearchPlan, block: BlockRange) -> None:
    """Ask ``reader`` to read ``block``'s raw samples ahead (``reader.prefetch``): a file
    read cold from disk (FAST raw: 2.5 GB for 30 s) is then read while the block before it
    is searched."""
    tf = plan.config.time_decimation
    reader.prefetch(block.read_start * tf, block.read_len * tf)


def search_block(
    data: np.ndarray, plan: SearchPlan, block: BlockRange, dm_plan: DMPlan,
    buffers: BlockBuffers | None = None,
) -> Giants:  # fmt: skip
    """Preprocess, dedisperse and search one block's data ``[nchan, n]`` (searched
    resolution, any dtype; float32 data that lie in ``buffers.prepared`` are normalised
    where they lie, uint8 data that lie in ``buffers.raw`` are overwritten there by the
    kernel's 8-bit input); returns its giants in file sample coordinates."""
    cfg = plan.config
    buffers = buffers or BlockBuffers()
    nreal = data.shape[1]
    kernel_input, affine = _prepare(data, plan, block, buffers)
    nout = block.read_len - dm_plan.max_delay
    dm_time = buffers.get("dm_time", (dm_plan.ndm, nout), np.float32)
    valid = np.clip(nreal - dm_plan.delays.max(axis=1).astype(np.int64), 0, nout)
    keep = (block.start - block.read_start, block.stop - block.read_start)
    detector = shipped_detector() if cfg.detector in ("ml", "both") else None
    parts: list[Giants] = []
    pooling = None
    if cfg.search_subbands > 1:  # the full band is then the sum of the sub-bands
        search_each_subband(kernel_input, plan, block, dm_time, valid=valid, buffers=buffers,
                         keep=keep, affine=affine, parts=parts)  # fmt: skip
    else:
        pooling = band_pooling(plan, nout, buffers) if detector is not None else None
        dedispersion.dedisperse_block(
            kernel_input, dm_plan, cfg, out=dm_time, pooling=pooling, **affine
        )
    if buffers.on_dm_time is not None:
        buffers.on_dm_time(block, dm_time[:, keep[0] : keep[1]])
    if detector is not None:  # the detector's rows, before the S/N overwrites the samples
        pooled = pool_dm_rows(dm_time)
        if cfg.detector_subbands > 1:
            raise_to_subband_rows(pooled, kernel_input, plan, dm_time.shape[1],
                                   buffers=buffers, affine=affine, pooling=pooling)  # fmt: skip
        if buffers.on_detector_rows is not None:
            buffers.on_detector_rows(block, pooled[:, keep[0] : keep[1]])
    width_index = buffers.get("width_index", dm_time.shape, np.int8)
    widths = boxcar_search(dm_time, valid, width_index, plan)
    snr = dm_time
    if cfg.detector in ("classical", "both"):
        parts.append(giants_above(snr, width_index, cfg.snr_threshold, widths=widths,
                                  sample_offset=block.read_start, keep=keep))  # fmt: skip
    if detector is not None:
        # every peak: a FAST-like block has 100-250 of score >= 0.3, mostly noise that
        # the boxcar S/N gate removes (a cap of 50 dropped bursts ranked below them)
        peaks = detector.detect_pooled(pooled, snr.shape[0], cfg.detector_threshold,
                                       max_peaks=None)  # fmt: skip
        searched = (snr, width_index, widths)
        sub_bands = SubbandProbe(kernel_input, plan, block, valid, nout, affine)
        parts.append(detector_giants(peaks, detector, searched, sub_bands, cfg=cfg))
    return Giants.concatenate(parts)


def _prepare(
    data: np.ndarray, plan: SearchPlan, block: BlockRange, buffers: BlockBuffers
) -> tuple[np.ndarray, dict]:
    """Normalise and mask a block's data into the dedispersion kernel's input (counting
    the channels masked in ``buffers``); returns it and what its samples stand for
    (``offset`` and ``scale`` of 8-bit levels, else nothing)."""
    cfg = plan.config
    kernel_input = _kernel_input(data, block, cfg, buffers)
    mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
    if cfg.freq_decimation > 1:
        mask = decimate_mask(mask, cfg.freq_decimation)
    bad = prepare_block(data, data.shape[1], kernel_input, method=cfg.norm_method, mask=mask,
                        auto=cfg.auto_mask, threshold=cfg.mask_threshold,
                        zero_dm=cfg.zero_dm, clip_sigma=cfg.clip_impulses,
                        clip_pixels=cfg.clip_pixels, sums_of=cfg.decimation_factor)  # fmt: skip
    if buffers.masked is None or buffers.masked.size != bad.size:
        buffers.masked, buffers.blocks = np.zeros(bad.size, np.int64), 0
    buffers.masked += bad
    buffers.blocks += 1
    if not cfg.quantises:
        return kernel_input, {}
    offset, scale = quantised_levels(cfg.clip_pixels)  # the kernel gives back normalised units
    return kernel_input, {"offset": offset, "scale": scale}


def _kernel_input(
    data: np.ndarray, block: BlockRange, cfg: SearchConfig, buffers: BlockBuffers
) -> np.ndarray:
    """Where a block's normalised samples go (``[nchan, block.read_len]``): 8-bit levels
    (:attr:`SearchConfig.quantises`) over ``buffers.raw`` when ``data`` lie at its start
    (the samples read are spent), else into a buffer of their own; float32 into
    ``buffers.prepared``."""
    shape = (data.shape[0], block.read_len)
    if not cfg.quantises:
        return buffers.get("prepared", shape, np.float32)
    raw = buffers.raw
    if raw is not None and raw.shape == shape and same_samples(data, raw):
        return raw
    return buffers.get("quantised", shape, np.uint8)
