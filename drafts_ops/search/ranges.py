"""The search's DM ranges: each range of trials searched at its own time resolution, in
blocks sized against its own overlap.

A range averages ``factor`` searched samples (the rule and its S/N bound:
:mod:`drafts_ops.dedisp.ddplan`). Its blocks count in its own samples, so its overlap (the
largest delay of its trials) shrinks by its factor; a block is sized to the memory budget
with its kernel input held as 8-bit levels (one byte per channel and sample) and its trials
dedispersed a chunk at a time, so the block can be several times its overlap and every
input sample is dedispersed about ``(block + overlap) / block`` times, not tens of times.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from drafts_ops.dedisp.ddplan import dedispersed_snr_loss, plan_ranges
from drafts_ops.dedisp.plan import DMPlan, max_delays
from drafts_ops.detect.preprocess import NORM_CHUNK
from drafts_ops.detect.preprocess_kernels import MAX_EXACT_SUM
from drafts_ops.io.blocks import block_spans
from drafts_ops.io.header import Header
from drafts_ops.search.blocks import BlockRange
from drafts_ops.search.config import SearchConfig

#: Memory that the budget leaves for what is not a block buffer (the operator's scratch,
#: per-row temporaries, giants, allocator slack), MiB; as the single-range plan's.
RANGE_RESERVE_MIB = 384.0
#: A block should own at least this many times its overlap (then each input sample is
#: dedispersed at most 1.5 times); shorter blocks are planned only when the budget allows
#: no more, and the plan says so.
MIN_OVERLAP_RATIO = 2.0
#: Shortest block, samples of its range.
MIN_RANGE_BLOCK = 4096
#: Trials of a range whose modelled loss (:func:`~drafts_ops.dedisp.ddplan.dedispersed_snr_
#: loss`) the plan evaluates to state its worst case.
LOSS_SAMPLE_TRIALS = 15


@dataclass(frozen=True)
class RangePlan:
    """One DM range of a search: ``factor`` searched samples averaged, its trials (the
    plan's trials ``first .. first + ntrials``), its largest delay and block length (in its
    own samples), the trials dedispersed at a time, and the modelled worst S/N loss."""

    factor: int
    first: int
    dms: tuple[float, ...]
    max_delay: int
    block_size: int
    chunk_trials: int
    snr_loss: float

    @property
    def ntrials(self) -> int:
        return len(self.dms)

    @property
    def overlap_ratio(self) -> float:
        """Block length over overlap: each input sample is dedispersed ``1 + 1/ratio``
        times."""
        return self.block_size / max(self.max_delay, 1)

    def dm_plan(self, header: Header) -> DMPlan:
        """The trials at this range's resolution of the searched ``header`` (cached)."""
        return _range_dm_plan(self.dms, tuple(header.chan_freqs.tolist()),
                              header.tsamp * self.factor)  # fmt: skip

    def chunks(self) -> list[tuple[int, int]]:
        """Trial index ranges ``[t0, t1)`` (within the range) dedispersed together."""
        step = max(1, self.chunk_trials)
        return [(t0, min(t0 + step, self.ntrials)) for t0 in range(0, self.ntrials, step)]

    def chunk_plan(self, header: Header, t0: int, t1: int) -> DMPlan:
        """The DM plan of trials ``[t0, t1)`` of this range (cached)."""
        return _chunk_plan(self.dm_plan(header), t0, t1)


@functools.lru_cache(maxsize=16)
def _range_dm_plan(dms: tuple[float, ...], freqs: tuple[float, ...], tsamp: float) -> DMPlan:
    return DMPlan.build(np.asarray(dms), np.asarray(freqs), tsamp)


@functools.lru_cache(maxsize=64)
def _chunk_plan(plan: DMPlan, t0: int, t1: int) -> DMPlan:
    return plan if (t0, t1) == (0, plan.ndm) else plan.select_trials(np.arange(t0, t1))


def uses_ranges(config: SearchConfig) -> bool:
    """Whether a search plans DM ranges (``auto_decimation``, the classical search at the
    file's resolution: decimation flags, per-trial decimation and the neural detector's
    or the sub-band searches' single DM-time array keep one range)."""
    return (config.auto_decimation and not config.decimates and not config.decimate
            and config.detector == "classical" and config.dedispersed_subbands == 1)  # fmt: skip


def search_ranges(header: Header, config: SearchConfig) -> list[tuple[int, np.ndarray]]:
    """``(factor, trials)`` of each range of ``config``'s DM range on ``header``: a fixed
    ``dm_step`` keeps one range at the searched resolution."""
    if config.dm_step is not None:
        from drafts_ops.dedisp.plan import fixed_step_dm_trials

        return [(1, fixed_step_dm_trials(config.dm_min, config.dm_max, config.dm_step))]
    ranges = plan_ranges(config.dm_min, config.dm_max, tsamp=header.tsamp, fch1=header.fch1,
                         foff=header.foff, nchans=header.nchans,
                         dm_tol=config.dm_tol)  # fmt: skip
    return [(r.factor, r.dms) for r in ranges]


def reads_into_levels(raw: Header, factor: int, quantised: bool) -> bool:
    """Whether a range's blocks are read straight into their 8-bit levels, a chunk of file
    pages at a time (an 8-bit file at the range's own resolution); else a piece of
    :data:`~drafts_ops.detect.preprocess.NORM_CHUNK` samples at a time goes through a
    buffer of :func:`piece_dtype`."""
    return raw.nbits == 8 and factor == 1 and quantised


def piece_dtype(raw: Header, factor: int) -> np.dtype:
    """What a range's piece buffer holds: uint16 sums of up to
    :data:`~drafts_ops.detect.preprocess_kernels.MAX_EXACT_SUM` samples of at most 8 bits,
    else float32 averages."""
    return np.dtype(np.uint16 if raw.nbits <= 8 and factor <= MAX_EXACT_SUM else np.float32)


def range_block_size(
    raw: Header, header: Header, factor: int, *, ntrials: int, max_delay: int,
    budget_mib: float, pad: int, length: int | None = None, quantised: bool = True,
) -> tuple[int, int]:  # fmt: skip
    """Block length (range samples, a multiple of 1024) and trials per chunk of a range.

    Per range sample a block holds each channel's 8-bit level (float32 where the search
    does not quantise its kernel input: ``quantised`` False) and each trial of a chunk its
    float32 S/N and int8 width index; a range that is not read straight into its levels
    also holds one piece buffer (:func:`reads_into_levels`, :func:`piece_dtype`). The
    overlap (largest delay plus the boxcar padding) is held once more. All trials are
    dedispersed together where a block of :data:`MIN_OVERLAP_RATIO` times the overlap fits
    beside them (the sub-band algorithm shares most work between trials); otherwise the
    block is that long, or as long as the input room allows, and the trials go in chunks
    that fit beside it. ``length``: the range samples to search (a block need not be
    longer).
    """
    per_input = header.nchans * (1.0 if quantised else 4.0)
    piece = 0 if reads_into_levels(raw, factor, quantised) else piece_dtype(raw, factor).itemsize
    fixed = header.nchans * NORM_CHUNK * piece
    room = (budget_mib - RANGE_RESERVE_MIB) * 1024**2 - fixed
    overlap = max_delay + 2 * pad
    longest = int(room / (per_input + 5.0 * ntrials)) - overlap  # every trial at once
    if longest >= MIN_OVERLAP_RATIO * overlap or (length is not None and longest >= length):
        size, chunk = longest, ntrials
    else:
        size = min(int(MIN_OVERLAP_RATIO * overlap), int(0.8 * room / per_input) - overlap)
        chunk = int((room - (size + overlap) * per_input) / (5.0 * (size + overlap)))
    size = max(MIN_RANGE_BLOCK, size - size % 1024)
    if length is not None:  # no longer than the samples to search
        size = min(size, max(MIN_RANGE_BLOCK, -(-length // 1024) * 1024))
    return size, max(1, min(ntrials, chunk))


def range_loss(dms: np.ndarray, factor: int, header: Header) -> float:
    """Modelled worst S/N loss of a range over a sample of its trials, for an unresolved
    burst and one ``2 * factor`` samples wide (0 at the searched resolution)."""
    if factor == 1:
        return 0.0
    pick = dms[np.linspace(0, dms.size - 1, min(LOSS_SAMPLE_TRIALS, dms.size)).astype(int)]
    return max(dedispersed_snr_loss(float(d), factor, header.chan_freqs, header.tsamp,
                                    width_samples=w)
               for d in pick for w in (0.0, 2.0 * factor))  # fmt: skip


def plan_range_blocks(
    raw: Header, header: Header, config: SearchConfig, span: tuple[int, int], pad: int,
) -> tuple[tuple[RangePlan, ...], list[BlockRange], list[str]]:  # fmt: skip
    """The ranges of a search of searched samples ``span = [first, last)`` of ``header``,
    their blocks (in each range's samples, ``range_index`` set) and notes for the user."""
    first, last = span
    ranges, blocks, notes, offset = [], [], [], 0
    for factor, trials in search_ranges(header, config):
        coarse = header.replace(tsamp=header.tsamp * factor, nsamples=header.nsamples // factor)
        longest = max_delays(trials, coarse.chan_freqs, coarse.tsamp)
        fits = longest <= coarse.nsamples - 256
        if not fits.any():
            continue
        dms = trials[: int(np.flatnonzero(fits)[-1]) + 1]
        max_delay = int(longest[: dms.size].max())
        lo, hi = first // factor, min(-(-last // factor), coarse.nsamples)  # range samples
        size, chunk = range_block_size(raw, header, factor, ntrials=dms.size,
                                       max_delay=max_delay, budget_mib=config.memory_budget_mib,
                                       pad=pad, length=hi - lo,
                                       quantised=config.quantises)  # fmt: skip
        if config.block_size:  # the user's block length, in every range's samples
            size = int(config.block_size)
        index = len(ranges)
        ranges.append(RangePlan(factor, offset, tuple(float(d) for d in dms), max_delay, size,
                                chunk, range_loss(dms, factor, header)))  # fmt: skip
        offset += dms.size
        for piece in block_spans(lo, hi, size, before=pad, after=pad, total=coarse.nsamples):
            blocks.append(BlockRange.of(piece, max_delay, coarse.nsamples, range_index=index))
        if size < min(MIN_OVERLAP_RATIO * max_delay, hi - lo):
            notes.append(f"DM {dms[0]:g}-{dms[-1]:.0f} at x{factor}: blocks of {size} samples "
                         f"are {size / max(max_delay, 1):.1f} times their overlap (the memory "
                         "budget allows no more): each sample is dedispersed "
                         f"{1 + max_delay / size:.1f} times; a larger --memory-budget-mib "
                         "searches faster")  # fmt: skip
    return tuple(ranges), blocks, notes


def cells(ranges: tuple[RangePlan, ...], nchans: int, nsamples: int) -> int:
    """Channel x sample x trial cells the ranges dedisperse over ``nsamples`` searched
    samples (each range at its own resolution)."""
    return int(sum(nchans * math.ceil(nsamples / r.factor) * r.ntrials for r in ranges))
