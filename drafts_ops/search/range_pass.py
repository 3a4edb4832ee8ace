"""The streaming pass of a plan with DM ranges: each range's blocks read at its own
resolution, normalised into 8-bit levels, dedispersed a chunk of trials at a time and
searched; giants go out in the searched samples and trials of the whole plan.

A range at the searched resolution reads the file's 8-bit samples into its block and
writes the kernel's levels over them; a decimated range reads
:data:`~drafts_ops.detect.preprocess.NORM_CHUNK` of its samples at a time as integer sums
straight from the file's time-major spectra (or float32 averages of wider data) and
normalises each piece into the block's levels, so no full-resolution or float copy of the
block exists. Normalisation works on such pieces in either case, as in a single-range
search (:func:`~drafts_ops.detect.preprocess.prepare_block`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.preprocess import (
    NORM_CHUNK,
    decimate_mask,
    prepare_block,
    quantised_levels,
    static_mask,
)
from drafts_ops.detect.preprocess_kernels import decimate_spectra_sums_into
from drafts_ops.detect.single_pulse import Giants, giants_above
from drafts_ops.io import open_observation
from drafts_ops.io.reader import ObservationReader
from drafts_ops.io.transpose import transpose_into
from drafts_ops.search import dedispersion
from drafts_ops.search.blocks import BlockRange
from drafts_ops.search.buffers import BlockBuffers, save_segment
from drafts_ops.search.config import PathLike
from drafts_ops.search.dedispersion import boxcar_widths_for, search_rows_into
from drafts_ops.search.plan import SearchPlan
from drafts_ops.search.ranges import RangePlan, piece_dtype, reads_into_levels
from drafts_ops.search.samples import read_averaged


def search_range_segment(
    block_indices: Sequence[int], plan: SearchPlan, work_dir: PathLike,
    *, on_block: Callable[[int], None] | None = None,
) -> Path:  # fmt: skip
    """Search blocks of a plan with ranges in one streaming pass; their giants (in the
    plan's searched samples and trials) go to one ``.npz`` file in ``work_dir``."""
    indices = list(block_indices)
    if not indices:
        raise ParameterError("search_segment needs at least one block")
    buffers = BlockBuffers()
    parts = []
    with open_observation(plan.source) as reader:
        for k, i in enumerate(indices):
            block = plan.blocks[i]
            rng = plan.ranges[block.range_index]
            levels = read_levels(reader, plan, rng, block, buffers)
            if k + 1 < len(indices):  # the disk reads the next block meanwhile
                ahead = plan.blocks[indices[k + 1]]
                factor = plan.ranges[ahead.range_index].factor
                reader.prefetch(ahead.read_start * factor, ahead.read_len * factor)
            parts.append(search_range_block(levels, plan, rng, block, buffers))
            del levels
            reader.release(block.stop * rng.factor)
            if on_block is not None:
                on_block(i)
    return save_segment(parts, buffers, indices, work_dir)


def read_levels(
    reader: ObservationReader, plan: SearchPlan, rng: RangePlan, block: BlockRange,
    buffers: BlockBuffers,
) -> np.ndarray:  # fmt: skip
    """The block's normalised samples ``[nchan, n]`` at its range's resolution: 8-bit
    levels (``uint8``, :func:`~drafts_ops.detect.preprocess.quantised_levels`) when the
    search quantises, else float32; the channels masked are counted in ``buffers``."""
    cfg = plan.config
    nchan = plan.header.nchans
    kind = np.uint8 if cfg.quantises else np.float32
    out = buffers.get("levels", (nchan, block.read_len), kind)
    if reads_into_levels(plan.raw_header, rng.factor, cfg.quantises):
        n = _read_8bit_into(reader, block.read_start, block.read_stop, out)
        if n is not None:  # the file's samples, then the kernel's levels over them
            _count(prepare_block(out[:, :n], n, out[:, :n], **_normalisation(plan)), buffers)
            return _zero_tail(out, n, kind)
    nreal = 0
    for a in range(block.read_start, block.read_stop, NORM_CHUNK):
        b = min(a + NORM_CHUNK, block.read_stop)
        piece = _read_piece(reader, plan, rng.factor, (a, b), buffers)
        n = piece.shape[1]
        into = out[:, a - block.read_start : a - block.read_start + n]
        _count(prepare_block(piece, n, into, **_normalisation(plan, rng.factor)), buffers)
        nreal = a - block.read_start + n
        if n < b - a:
            break
    return _zero_tail(out, nreal, kind)


#: File samples transposed at a time into a block (their pages are then dropped: a block's
#: file pages are never resident all at once).
TRANSPOSE_CHUNK = 8192


def _read_8bit_into(
    reader: ObservationReader, start: int, stop: int, out: np.ndarray
) -> int | None:
    """The file's 8-bit samples ``[start, stop)`` transposed into ``out``'s first columns a
    chunk at a time (:func:`_chunk_of_8bit`), each chunk's file pages dropped after it;
    the samples read (``None``: a chunk's samples are not the file's 8-bit integers as
    searched, e.g. calibrated PSRFITS; the caller reads the block otherwise)."""
    n = 0
    for a in range(start, stop, TRANSPOSE_CHUNK):
        want = min(TRANSPOSE_CHUNK, stop - a)
        spectra = _chunk_of_8bit(reader, a, want)
        if spectra is None:
            return None
        got = spectra.shape[0]
        transpose_into(out[:, n : n + got], spectra)
        n += got
        reader.release(a + got)
        if got < want:
            break
    return n


def _chunk_of_8bit(reader: ObservationReader, start: int, count: int) -> np.ndarray | None:
    """File samples ``[start, start + count)`` as time-major 8-bit spectra ``[n, nchan]``:
    the file's own (a view, or a PSRFITS reader's gathered rows) where it gives them, else
    a transposed view of a channel-major copy (joined files across a file boundary);
    ``None`` where they are not uint8 (16/32-bit, signed or calibrated samples)."""
    spectra = reader.read_spectra(start, count)
    if spectra is not None:
        return spectra if spectra.dtype == np.uint8 else None
    if reader.header.nbits != 8 or reader.header.nifs != 1:  # summed or calibrated: floats
        return None
    block = reader.read_block(start, count, raw=True)
    return block.T if block.dtype == np.uint8 else None


def _zero_tail(out: np.ndarray, nreal: int, kind) -> np.ndarray:
    """``out`` with the samples past the data at the kernel's zero (zero-padded blocks)."""
    out[:, nreal:] = 128 if kind == np.uint8 else 0.0
    return out


def _read_piece(
    reader: ObservationReader, plan: SearchPlan, factor: int, span: tuple[int, int],
    buffers: BlockBuffers,
) -> np.ndarray:  # fmt: skip
    """Samples ``[a, b)`` of a range averaging ``factor`` file samples: integer sums of
    8-bit spectra (uint16, a chunk of file pages at a time, each dropped after use), else
    float32 averages; in a piece buffer every piece of the pass reuses (a float32 piece of
    4096 channels is 256 MiB: made anew for each piece, it cost a 32-bit FAST raw search
    more time zeroing fresh pages than dedispersing)."""
    a, b = span
    if (
        piece_dtype(plan.raw_header, factor) == np.uint16
        and (sums := _read_sums(reader, factor, span, buffers)) is not None
    ):
        return sums
    nchan = plan.raw_header.nchans // plan.config.freq_decimation
    floats = buffers.get("floats", (nchan, NORM_CHUNK), np.float32)
    return read_averaged(reader, plan, a, b, factor, out=floats)


def _read_sums(
    reader: ObservationReader, factor: int, span: tuple[int, int], buffers: BlockBuffers
) -> np.ndarray | None:
    """Integer sums (uint16) of ``factor`` 8-bit file samples, ``[a, b)`` of them, in the
    piece buffer, a chunk at a time (:func:`_chunk_of_8bit`), each chunk's file pages
    dropped after use; ``None`` where a chunk's samples are not 8-bit integers."""
    a, b = span
    piece = buffers.get("piece", (reader.header.nchans, NORM_CHUNK), np.uint16)
    step = max(1, TRANSPOSE_CHUNK // factor)
    n = 0
    for c0 in range(a, b, step):
        want = min(step, b - c0)
        spectra = _chunk_of_8bit(reader, c0 * factor, want * factor)
        if spectra is None:
            return None
        got = spectra.shape[0] // factor
        decimate_spectra_sums_into(spectra, factor, piece[:, n : n + got])
        reader.release((c0 + want) * factor)
        n += got
        if got < want:
            break
    return piece[:, :n]


def _normalisation(plan: SearchPlan, factor: int = 1) -> dict:
    """``prepare_block``'s options for this search (``factor``: samples per sum)."""
    cfg = plan.config
    mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
    if cfg.freq_decimation > 1:
        mask = decimate_mask(mask, cfg.freq_decimation)
    return {"method": cfg.norm_method, "mask": mask, "auto": cfg.auto_mask,
            "threshold": cfg.mask_threshold, "zero_dm": cfg.zero_dm,
            "clip_sigma": cfg.clip_impulses, "clip_pixels": cfg.clip_pixels,
            "sums_of": factor if factor > 1 else 0}  # fmt: skip


def _count(bad: np.ndarray, buffers: BlockBuffers) -> None:
    """Count a piece's masked channels (the report's masked-channel figure)."""
    if buffers.masked is None or buffers.masked.size != bad.size:
        buffers.masked, buffers.blocks = np.zeros(bad.size, np.int64), 0
    buffers.masked += bad
    buffers.blocks += 1


def search_range_block(
    levels: np.ndarray, plan: SearchPlan, rng: RangePlan, block: BlockRange,
    buffers: BlockBuffers,
) -> Giants:  # fmt: skip
    """Dedisperse and search one block of a range, a chunk of trials at a time; its
    giants in the plan's searched samples (a coarse sample's centre) and trials."""
    cfg = plan.config
    affine = {}
    if levels.dtype == np.uint8:  # 8-bit levels: the kernel gives back normalised units
        offset, scale = quantised_levels(cfg.clip_pixels)
        affine = {"offset": offset, "scale": scale}
    nreal = min(block.read_stop - block.read_start, levels.shape[1])
    keep = (block.start - block.read_start, block.stop - block.read_start)
    tsamp = plan.header.tsamp * rng.factor
    widths, window = boxcar_widths_for(cfg, tsamp, rng.factor)
    size = rng.chunk_trials * (block.read_len - min(rng.chunk_plan(plan.header, *c).max_delay
                                                    for c in rng.chunks()))  # fmt: skip
    flat = buffers.get("dm_time", (size,), np.float32)
    flat_index = buffers.get("width_index", (size,), np.int8)
    parts = []
    for t0, t1 in rng.chunks():
        chunk = rng.chunk_plan(plan.header, t0, t1)
        nout = block.read_len - chunk.max_delay  # a lower-DM chunk: more samples, all used
        dm_time = flat[: (t1 - t0) * nout].reshape(t1 - t0, nout)
        dedispersion.dedisperse_block(levels, chunk, cfg, out=dm_time, **affine)
        valid = np.clip(nreal - chunk.delays.max(axis=1).astype(np.int64), 0, nout)
        width_index = flat_index[: dm_time.size].reshape(dm_time.shape)
        search_rows_into(dm_time, valid, widths, window, width_index)
        found = giants_above(dm_time, width_index, cfg.snr_threshold, widths=widths,
                             sample_offset=block.read_start, keep=keep)  # fmt: skip
        parts.append(_in_plan_units(found, rng, t0))
    return Giants.concatenate(parts)


def _in_plan_units(giants: Giants, rng: RangePlan, t0: int) -> Giants:
    """Giants of a range's chunk in the plan's units: trials counted over all ranges,
    samples and widths in searched samples (a coarse sample stands for its centre)."""
    f = rng.factor
    return Giants(giants.dm_index + np.int32(rng.first + t0),
                  giants.sample * f + (f - 1) // 2, giants.width * np.int32(f),
                  giants.snr, giants.score, giants.band)  # fmt: skip
