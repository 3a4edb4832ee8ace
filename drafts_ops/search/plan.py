"""The plan of one observation's search: the searched header, DM trials and blocks.

:func:`plan_search` reads the header, builds the DM plan and splits the observation into
overlapping blocks sized to the memory budget (:func:`block_size_for_budget`); the
:class:`SearchPlan` it returns is what every stage receives (small and picklable).
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan, smearing_s
from drafts_ops.io import open_observation
from drafts_ops.io.blocks import block_spans
from drafts_ops.io.header import Header
from drafts_ops.search.blocks import BlockRange
from drafts_ops.search.config import PathLike, SearchConfig
from drafts_ops.search.ranges import RangePlan, plan_range_blocks, uses_ranges

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SearchPlan:
    """Everything the stages need to know about one observation's search (small, picklable).

    ``header`` describes the searched data (after decimation), ``raw_header`` the file.
    ``notes`` are things the user should know (e.g. DM trials dropped for a short file).
    """

    path: str
    config: SearchConfig
    raw_header: Header
    files: tuple[str, ...] = ()
    header: Header
    dms: tuple[float, ...]
    max_delay: int
    blocks: tuple[BlockRange, ...]
    block_size: int
    decimation: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    #: Searched sample where the reported file starts (0, or the previous files of its
    #: beam read before it: :func:`plan_search`'s ``own``); candidates are relative to it.
    origin: int = 0
    #: Index in ``files`` of the file whose candidates are reported.
    own_index: int = 0
    #: The previous file's search could not see the arrivals in its last ``delay(d)``
    #: samples: they are searched here (``plan_search``'s ``lead_in``).
    lead_in: bool = False
    #: DM ranges, each at its own resolution (:mod:`drafts_ops.search.ranges`; the blocks
    #: then count in their range's samples); empty: one range at the searched resolution.
    ranges: tuple[RangePlan, ...] = ()

    @property
    def own_file(self) -> str:
        """The file whose candidates are reported."""
        return self.files[self.own_index] if self.files else self.path

    @property
    def own_header(self) -> Header:
        """The searched header of the reported file (its start time, from ``origin``)."""
        if self.origin == 0:
            return self.header
        start = self.header.tstart + self.origin * self.header.tsamp / 86400.0
        return self.header.replace(tstart=start, nsamples=self.header.nsamples - self.origin)

    @property
    def source(self) -> str | list[str]:
        """What to open: the file, or the consecutive files of one observation."""
        return list(self.files) if len(self.files) > 1 else self.path

    def dm_plan(self) -> DMPlan:
        """The DM plan of the searched data (built once per content, then cached)."""
        return _dm_plan_cached(
            self.dms, tuple(self.header.chan_freqs.tolist()), self.header.tsamp, self.decimation
        )

    def subband_channels(self) -> list[tuple[int, int]]:
        """Channel ranges ``[c0, c1)`` of the ``config.dedispersed_subbands`` sub-bands
        (equal shares of the searched channels, file order)."""
        edges = np.linspace(0, self.header.nchans, self.config.dedispersed_subbands + 1)
        edges = edges.round().astype(int)
        return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]

    def subband_frequencies(self) -> tuple[tuple[float, float], ...]:
        """``(fmin, fmax)`` MHz of each searched sub-band's channel centres."""
        freqs = self.header.chan_freqs
        return tuple((float(freqs[a:b].min()), float(freqs[a:b].max()))
                     for a, b in self.subband_channels())  # fmt: skip

    def subband_plans(self) -> list[DMPlan]:
        """The DM plan of each searched sub-band (:meth:`DMPlan.channel_range`; cached)."""
        return _subband_plans_cached(self.dm_plan(), tuple(self.subband_channels()))

    def segments(self, count: int) -> list[tuple[int, ...]]:
        """The blocks split into at most ``count`` runs of consecutive block indices."""
        count = max(1, min(int(count), len(self.blocks)))
        return [tuple(int(i) for i in part) for part in np.array_split(
            np.arange(len(self.blocks)), count) if part.size]  # fmt: skip

    @property
    def searched_samples(self) -> int:
        """Searched samples the blocks own (a plan with ranges: its first range's)."""
        if not self.ranges:
            return sum(b.stop - b.start for b in self.blocks)
        owned = sum(b.stop - b.start for b in self.blocks if b.range_index == 0)
        return min(owned * self.ranges[0].factor, self.header.nsamples)

    def block_shares(self) -> list[float]:
        """Each block's share of the streaming pass's work, summing to 1: trials
        dedispersed times samples read, at its DM range's resolution (what a progress bar
        advances by: a block of the full-resolution range costs many of a coarse one)."""
        trials = [r.ntrials for r in self.ranges] if self.ranges else [len(self.dms)]
        work = [trials[b.range_index] * b.read_len for b in self.blocks]
        total = sum(work) or 1
        return [w / total for w in work]

    def factor_of(self, dm_index: int) -> int:
        """Searched samples averaged by the DM range of trial ``dm_index`` (1 without
        ranges)."""
        for r in self.ranges:
            if r.first <= dm_index < r.first + r.ntrials:
                return r.factor
        return 1

    def summary_line(self) -> str:
        """The plan in a few words: trials, ranges and blocks (each no longer than the
        samples it searches)."""
        blocks = len(self.blocks)
        longest = max((b.stop - b.start for b in self.blocks), default=0)
        ranges = f" in {len(self.ranges)} DM ranges" if len(self.ranges) > 1 else ""
        noun = "block" if blocks == 1 else "blocks"
        unit = "samples of its range" if len(self.ranges) > 1 else "samples"
        size = f"of up to {longest} {unit}" if blocks > 1 else f"of {longest} {unit}"
        return f"{len(self.dms)} DM trials{ranges}, {blocks} {noun} {size}"

    def range_rows(self) -> list[dict[str, Any]]:
        """The plan's DM ranges as rows (DDplan's table: DM bounds and step, time
        averaging, trials, share of the dedispersion, modelled worst S/N loss, block and
        overlap in searched samples, memory of a block's kernel input in MiB)."""
        ranges = self.ranges or (_one_range(self),)
        work = [r.ntrials / r.factor for r in ranges]
        level = 1 if self.config.quantises else 4  # bytes of a kernel input sample
        rows = []
        for r, w in zip(ranges, work, strict=True):
            dms = np.asarray(r.dms)
            step = float(np.median(np.diff(dms))) if dms.size > 1 else 0.0
            rows.append({
                "dm_lo": float(dms[0]), "dm_hi": float(dms[-1]), "dm_step": step,
                "factor": r.factor, "tsamp_s": self.header.tsamp * r.factor,
                "trials": r.ntrials, "work_share": w / sum(work),
                "snr_loss": r.snr_loss, "block": r.block_size * r.factor,
                "overlap": r.max_delay * r.factor,
                "input_mib": self.header.nchans * (r.block_size + r.max_delay) * level / 2**20,
                "chunk_trials": r.chunk_trials,
            })  # fmt: skip
        return rows

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "nchans": self.header.nchans,
            "nsamples": self.header.nsamples,
            "tsamp_s": self.header.tsamp,
            "ndm": len(self.dms),
            "dm_min": self.dms[0],
            "dm_max": self.dms[-1],
            "max_delay_samples": self.max_delay,
            "block_size": self.block_size,
            "nblocks": len(self.blocks),
            "searched_samples": self.searched_samples,
            "notes": list(self.notes),
            "ranges": self.range_rows(),
        }


def _one_range(plan: SearchPlan) -> RangePlan:
    """A plan without ranges as one range (for its table)."""
    return RangePlan(1, 0, plan.dms, plan.max_delay, plan.block_size, len(plan.dms), 0.0)


@functools.lru_cache(maxsize=8)
def _dm_plan_cached(
    dms: tuple[float, ...], freqs: tuple[float, ...], tsamp: float, decimation: tuple[int, ...]
) -> DMPlan:
    factors = np.asarray(decimation, np.int32) if decimation else None
    return DMPlan.build(np.asarray(dms), np.asarray(freqs), tsamp, factors)


@functools.lru_cache(maxsize=8)
def _subband_plans_cached(plan: DMPlan, channels: tuple[tuple[int, int], ...]) -> list[DMPlan]:
    return [plan.channel_range(c0, c1) for c0, c1 in channels]


# -- plan --------------------------------------------------------------------------------

#: Fewest output samples a DM trial needs to be searched (whole boxcars and noise).
MIN_TRIAL_SAMPLES = 256


#: Channel smearing (in searched samples) at the largest DM from which the plan notes it.
SMEARING_NOTE_SAMPLES = 8


def channel_smearing_note(raw: Header, searched: Header, dm_max: float) -> str | None:
    """A note when frequency decimation smears a burst at ``dm_max`` (pc cm^-3) over more
    than :data:`SMEARING_NOTE_SAMPLES` searched samples at the bottom of the band (bursts
    narrower than that lose S/N as sqrt(width / smearing)); ``None`` otherwise."""
    factor = searched.nchans and raw.nchans // searched.nchans
    if factor <= 1:
        return None
    smear = float(smearing_s(dm_max, searched.foff, searched.fmin))
    if smear <= SMEARING_NOTE_SAMPLES * searched.tsamp:
        return None
    native = float(smearing_s(dm_max, raw.foff, raw.fmin))
    return (f"x{factor} frequency decimation smears a burst at DM {dm_max:g} over "
            f"{smear * 1e3:.1f} ms at {searched.fmin:.0f} MHz ({native * 1e3:.1f} ms in the "
            "native channels): narrower bursts there lose S/N as sqrt(width / smearing); use a "
            "smaller --freq-decimation for high-DM searches")  # fmt: skip


def plan_search(
    path: PathLike | Sequence[PathLike], config: SearchConfig, own: int | None = None,
    lead_in: bool = False,
) -> SearchPlan:  # fmt: skip
    """Read the header, build the DM plan and split the observation into blocks.

    Every sample of the observation is searched: block ``k`` owns ``[k B, (k+1) B)`` and
    the last block is zero-padded, so DM trial ``d`` is searched up to ``nsamples -
    delay(d)``. Trials whose sweep leaves fewer than :data:`MIN_TRIAL_SAMPLES` samples are
    dropped, and ``notes`` says so. ``path`` may be the consecutive files of one observation
    (a PSRFITS sequence, or files of one beam that follow each other): they are searched
    as one stream, each boundary once.

    ``own`` (an index into ``path``) searches only the arrivals in that file, the files
    around it giving the context: the previous file's last samples for the boxcars, and
    the next file's first ``max_delay`` samples, so that the file is searched to its end
    at every DM. With ``lead_in`` the arrivals in the previous file's last ``delay(d)``
    samples are searched too (that file was searched without this one after it).
    Candidates are reported relative to the start of file ``own`` (``plan.origin``).
    """
    files = tuple(str(p) for p in path) if isinstance(path, list | tuple) else (str(path),)
    with open_observation(list(files) if len(files) > 1 else files[0]) as reader:
        raw = reader.header
        edges = getattr(reader, "starts", None)  # first sample of each file (sequences)
    header = _searched_header(raw, config)
    if config.dedispersed_subbands > header.nchans:
        raise ParameterError(f"{path}: {config.dedispersed_subbands} sub-bands are more than "
                             f"the {header.nchans} searched channels")  # fmt: skip
    first, last = _own_range(files, own, edges, raw, config)
    where = {"path": files[0], "config": config, "raw_header": raw, "files": files,
             "header": header, "origin": first, "own_index": own or 0,
             "lead_in": bool(lead_in and own)}  # fmt: skip
    if uses_ranges(config):
        return _ranged_plan(where, first, last)
    return _single_plan(where, first, last)


def _single_plan(where: dict[str, Any], first: int, last: int) -> SearchPlan:
    """One DM range at the searched resolution (decimation flags, the neural detector and
    the sub-band searches): blocks sized by :func:`block_size_for_budget`."""
    config, raw, header, path = where["config"], where["raw_header"], where["header"], where["path"]
    full = DMPlan.from_header(header, config.dm_min, config.dm_max, config.dm_step,
                              dm_tol=config.dm_tol, decimate=config.decimate)  # fmt: skip
    full, notes = _fitting_trials(full, header, config, path)
    smearing = channel_smearing_note(raw, header, float(full.dms[-1]))
    if smearing:
        notes.append(smearing)
        log.warning("%s: %s", path, smearing)
    pad = config.max_width_samples + config.time_link
    size = config.block_size or block_size_for_budget(
        raw, header, full, config.memory_budget_mib, pad, subbands=config.search_subbands,
        quantised=config.quantises,
    )  # fmt: skip
    factor = int(full.decimation.max())
    size = -(-int(size) // factor) * factor  # decimated trials' windows align across blocks
    if where["lead_in"]:
        first = max(first - full.max_delay, 0)
    blocks = [BlockRange.of(span, full.max_delay, header.nsamples)
              for span in block_spans(first, last, size, before=pad, after=pad,
                                      total=header.nsamples)]  # fmt: skip
    return SearchPlan(**where, dms=tuple(float(d) for d in full.dms), max_delay=full.max_delay,
                      blocks=tuple(blocks), block_size=size, notes=tuple(notes),
                      decimation=tuple(int(f) for f in full.decimation) if config.decimate
                      else ())  # fmt: skip


def _fitting_trials(
    full: DMPlan, header: Header, config: SearchConfig, path: str
) -> tuple[DMPlan, list[str]]:
    """The trials whose sweep fits in the observation (with :data:`MIN_TRIAL_SAMPLES`
    searched samples), and a note when some were dropped."""
    fits = full.delays.max(axis=1) <= header.nsamples - MIN_TRIAL_SAMPLES
    if not fits.any():
        raise ParameterError(
            f"{path}: {header.tobs:.3f} s of data is shorter than the dispersion sweep "
            f"{full.delays[0].max() * header.tsamp:.3f} s at DM {full.dms[0]:.1f} plus "
            f"{MIN_TRIAL_SAMPLES} samples; lower dm_min"
        )
    if fits.all():
        return full, []
    kept = int(np.flatnonzero(fits)[-1]) + 1
    note = (f"observation of {header.tobs:.2f} s is too short for DM {config.dm_max:g}: "
            f"searched DM {full.dms[0]:g}-{full.dms[kept - 1]:.1f} pc cm^-3 "
            f"({kept} of {full.ndm} trials)")  # fmt: skip
    log.warning("%s: %s", path, note)
    return DMPlan.build(full.dms[:kept], full.freqs, full.tsamp, full.decimation[:kept]), [note]


def _ranged_plan(where: dict[str, Any], first: int, last: int) -> SearchPlan:
    """DM ranges, each at its own resolution and in its own blocks
    (:mod:`drafts_ops.search.ranges`)."""
    config, header, path = where["config"], where["header"], where["path"]
    pad = config.max_width_samples + config.time_link
    if where["lead_in"]:  # the previous file's last sweep: the largest of any range
        sweep = DMPlan.build(np.array([config.dm_max]), header.chan_freqs, header.tsamp)
        first = max(first - sweep.max_delay, 0)
    ranges, blocks, notes = plan_range_blocks(where["raw_header"], header, config,
                                              (first, last), pad)  # fmt: skip
    if not ranges:
        raise ParameterError(f"{path}: {header.tobs:.3f} s of data is shorter than the "
                             f"dispersion sweep at DM {config.dm_min:g} plus "
                             f"{MIN_TRIAL_SAMPLES} samples; lower dm_min")  # fmt: skip
    dms = tuple(d for r in ranges for d in r.dms)
    if dms[-1] < config.dm_max:
        notes.insert(0, f"observation of {header.tobs:.2f} s is too short for DM "
                     f"{config.dm_max:g}: searched DM {dms[0]:g}-{dms[-1]:.1f} "
                     "pc cm^-3")  # fmt: skip
    for note in notes:
        log.warning("%s: %s", path, note)
    max_delay = max(r.max_delay * r.factor for r in ranges)
    return SearchPlan(**where, dms=dms, max_delay=max_delay, blocks=tuple(blocks),
                      block_size=ranges[0].block_size, notes=tuple(notes),
                      ranges=ranges)  # fmt: skip


def _own_range(
    files: tuple[str, ...], own: int | None, edges, raw: Header, config: SearchConfig
) -> tuple[int, int]:
    """Searched samples ``[first, last)`` of the arrivals a plan searches: all, or file
    ``own``'s (``edges``: each file's first raw sample, as a sequence reader gives them;
    ``None`` for one file)."""
    total = raw.nsamples // config.time_decimation
    if own is None:
        return 0, total
    if not 0 <= own < len(files):
        raise ParameterError(f"own = {own} is not the index of one of the {len(files)} files")
    edges = (0, raw.nsamples) if edges is None else edges
    tf = config.time_decimation
    return int(edges[own]) // tf, min(int(edges[own + 1]) // tf, total)


#: Memory that the budget leaves for what is not a block buffer: the sub-band operator's
#: scratch (256 MiB), per-row kernel temporaries, the neural detector's input, giants,
#: allocator slack.
BUDGET_RESERVE_MIB = 384.0
#: Share of the remaining budget the block buffers are sized to (allocator slack, page
#: cache of the overlap: measured peak RSS exceeded the buffer sum by ~12% without it).
BUDGET_FILL = 0.85


def block_size_for_budget(
    raw: Header,
    header: Header,
    plan: DMPlan,
    budget_mib: float,
    pad: int,
    *,
    subbands: int = 1,
    quantised: bool = False,
) -> int:
    """Output samples per block so that one block's buffers fit in ``budget_mib``.

    Per searched sample a block holds its input (without decimation: the raw samples as
    read plus their memory-mapped file pages, and the normalised float32 block; with
    decimation: the float32 averages, normalised where they lie, the raw samples going
    through :data:`DECIMATION_CHUNK_BYTES` chunks), the float32 DM-time array (overwritten
    by S/N) and an int8 width index. A search that hands its kernel 8-bit levels
    (``quantised``) writes them into an 8-bit copy of a decimated block, or over 8-bit raw
    samples instead of a float32 block; the latter are sized as if it did not, since
    longer blocks searched no faster (FAST-like 60 s, DM 0-2000, whole streaming pass,
    medians of 3: 9 blocks 6.1 s, 7 blocks 5.9 s, 5 blocks 6.9 s) and the memory stays
    free (peak RSS 674 MiB against 933 MiB with a float32 block).
    The neural detector's input (the DM axis pooled to 64 rows: 256 bytes per sample,
    ~9 MiB for a FAST-like block) comes out of the reserve, so that ``--detector both``
    searches the same blocks as the classical search and only adds to its candidates. The
    overlap (maximum delay plus boxcar padding) costs the input terms once more;
    :data:`BUDGET_RESERVE_MIB` is left for the operator's scratch (and for the detector's
    sub-band rows: ``N x 256`` bytes per sample pooled by the operator, ~36 MiB for a
    FAST-like block in four sub-bands, or :data:`SUBBAND_ROWS_CHUNK_MIB` where each
    sub-band is dedispersed on its own). A sub-band search (``subbands > 1``)
    adds one sub-band's DM-time array, width index and contiguous input copy. Returns a
    multiple of 1024, at least 4096.
    """
    decimating = header.nchans != raw.nchans or header.tsamp > raw.tsamp * 1.5
    itemsize = max(raw.nbits, 8) / 8
    if decimating:
        input_bytes = (5.0 if quantised else 4.0) * header.nchans
        fixed = 2.0 * DECIMATION_CHUNK_BYTES
    else:
        input_bytes = 2.0 * raw.nchans * itemsize + 4.0 * header.nchans
        fixed = 0.0
    output_bytes = plan.ndm * (4 + 1 + (5 if subbands > 1 else 0))
    if subbands > 1:
        input_bytes += 4.0 * header.nchans / subbands
    overlap = plan.max_delay + 2 * pad
    room = (budget_mib - BUDGET_RESERVE_MIB) * 1024**2 - fixed - overlap * input_bytes
    size = int(BUDGET_FILL * room // (input_bytes + output_bytes))
    return max(4096, size - size % 1024)


#: Raw samples read (and decimated) at a time when a search averages samples or channels.
DECIMATION_CHUNK_BYTES = 64 * 1024**2

#: Largest buffer (MiB) in which the detector's sub-band rows are dedispersed, a run of
#: whole pooled rows of DM trials at a time: it comes out of :data:`BUDGET_RESERVE_MIB`,
#: so ``--detector-subbands`` searches the same blocks as the full-band search.
SUBBAND_ROWS_CHUNK_MIB = 16.0

# -- helpers -----------------------------------------------------------------------------


def _searched_header(raw: Header, config: SearchConfig) -> Header:
    header = raw
    if config.freq_decimation > 1:
        fch1 = raw.fch1 + raw.foff * (config.freq_decimation - 1) / 2.0
        header = header.replace(
            nchans=raw.nchans // config.freq_decimation,
            foff=raw.foff * config.freq_decimation,
            fch1=fch1,
        )
    if config.time_decimation > 1:
        header = header.replace(
            tsamp=raw.tsamp * config.time_decimation,
            nsamples=raw.nsamples // config.time_decimation,
        )
    return header


def plan_table(rows: list[dict[str, Any]], tsamp: float) -> str:
    """The DM plan as DDplan prints it: one line per range (:meth:`SearchPlan.range_rows`;
    ``tsamp`` the searched sample time, s)."""
    head = (f"{'DM range (pc cm^-3)':>22} {'step':>7} {'avg':>4} {'tsamp ms':>9} "
            f"{'trials':>7} {'work':>6} {'S/N loss':>9} {'block s':>8} {'overlap s':>10} "
            f"{'input MiB':>10}")  # fmt: skip
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['dm_lo']:>10.1f} - {r['dm_hi']:>9.1f} {r['dm_step']:>7.3f} {r['factor']:>4d} "
            f"{r['tsamp_s'] * 1e3:>9.4f} {r['trials']:>7d} {r['work_share']:>6.1%} "
            f"{r['snr_loss']:>9.1%} {r['block'] * tsamp:>8.2f} {r['overlap'] * tsamp:>10.2f} "
            f"{r['input_mib']:>10.0f}"
        )
    total = sum(r["trials"] for r in rows)
    lines.append(f"{total} trials; work: share of the dedispersion; S/N loss: modelled "
                 "worst loss of a burst from one sample wide, against the undecimated "
                 "search")  # fmt: skip
    return "\n".join(lines)
