"""The search: its configuration, its plan, its stages and the one sequence that runs them.

Stages: plan → dedisperse+detect (a streaming pass over the file, one or more segments of
consecutive blocks) → merge → cutouts → classify → write. :func:`run_search` is the only
place that orders them; it runs each stage through a :class:`StageRunner`: the default
runs them here, one after another; the Prefect flow passes a runner that makes each stage
a task (``flows/search.py``). Stages exchange file paths and small picklable metadata
(:class:`SearchConfig`, :class:`SearchPlan`), never big arrays.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import itertools
import logging
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import numpy as np

from drafts_ops.dedisp.modes import Backend, Mode
from drafts_ops.dedisp.plan import DMPlan, dispersion_delay_s, smearing_s
from drafts_ops.dedisp.subband import BandPooling
from drafts_ops.detect.candidates import Candidate, candidates_from_clusters, reported_at_peaks
from drafts_ops.detect.cluster import (
    ClusterLinks,
    Response,
    fold_clusters,
    fold_measured_sidelobes,
    labelled_clusters,
    release_hidden_bursts,
    sidelobe_owners,
)
from drafts_ops.detect.kernels import decimate_spectra_into
from drafts_ops.detect.preprocess import (
    NormMethod,
    decimate_block,
    prepare_block,
    quantised_levels,
    same_samples,
    static_mask,
)
from drafts_ops.detect.single_pulse import Giants, boxcar_widths, giants_above, giants_at
from drafts_ops.errors import ParameterError
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header
from drafts_ops.io.reader import ObservationReader, transpose_into
from drafts_ops.perf import PERF_FILENAME, ObservationSize, PerfRecorder, PerfReport
from drafts_ops.platform import kernels_compiled, mark_kernels_compiled

log = logging.getLogger(__name__)

Detector = Literal["classical", "ml", "both"]

PathLike = str | Path

#: Stage names, in order, as they appear in ``perf.json``.
STAGES = ("plan", "dedisperse_detect", "merge", "cutouts", "classify", "write", "report")
#: What the first search with new kernels on a machine says (and its perf.json notes): Numba
#: compiles them then (a 4 s FAST-like file: 42 s instead of 3 s on 2 cores), caching them.
KERNELS_COMPILING = (
    "first search with these kernels on this machine (after installing or updating "
    "drafts-ops, or on a new CPU): Numba compiles them now, about 40 s on 2 cores, then "
    "caches them; this run's times include that"
)
#: Intermediate results (per-segment giants, cutouts) live here under the output directory.
WORK_DIR = "work"


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """Every parameter of a search (validated; frozen; JSON-friendly via :meth:`to_dict`).

    Attributes
    ----------
    dm_min, dm_max : float
        DM range, pc cm^-3. Trials whose sweep does not fit in the observation are dropped
        (the plan's ``notes`` say how far the search reached).
    dm_step : float or None
        Fixed DM step (pc cm^-3); ``None`` uses the tolerance rule with ``dm_tol``.
    dm_tol : float
        Allowed growth of the effective width between DM trials (dedisp / Heimdall).
    dedisp_mode : "prototype" | "production"
        Which dedispersion implementation runs (production by default; the prototype is
        the baseline that ``drafts validate`` compares against).
    backend : "cpu" | "cuda"
        Where dedispersion runs.
    algorithm : str
        Dedispersion algorithm of the production operator (``subband`` by default: the
        fastest whose S/N loss stays under 5%; the prototype is brute force only).
    detector : "classical" | "ml" | "both"
        Boxcar search, the neural detector, or both (then classified by the classifier).
    block_size : int or None
        New (dedispersed) samples per block; ``None`` chooses it from ``memory_budget_mib``.
    memory_budget_mib : float
        Memory the block buffers may use, MiB (input, normalised block, DM-time, S/N).
    snr_threshold : float
        Boxcar S/N threshold (Heimdall convention).
    max_width_samples : int
        Widest boxcar (samples); widths spaced by sqrt(2) up to it
        (:func:`~drafts_ops.detect.single_pulse.boxcar_widths`).
    baseline_s : float
        Running-median baseline window, s.
    norm_method : "mad" | "iqr"
        Robust noise estimator for channels.
    mask_channels : tuple of int
        Channels always masked (file order).
    auto_mask : bool
        Mask channels whose statistics are outliers (see ``preprocess.auto_mask``).
    mask_threshold : float
        Outlier threshold of the automatic mask, robust sigmas.
    zero_dm : bool
        Subtract the zero-DM series before dedispersion.
    clip_pixels : float
        Hold every normalised sample within this many sigmas (0 turns it off): bright
        narrow-band RFI that no channel statistic catches (a signal drifting through the
        band) then cannot raise the measured noise of every DM trial; a burst loses S/N
        only where single samples of a single channel exceed it. Held samples also fit
        8 bits: the CPU sub-band search then hands its kernel uint8 samples (2x faster;
        :attr:`quantises`); 0 keeps float32.
    clip_impulses : float
        Blank time samples whose mean over the channels is more than this many robust
        sigmas from its median (broadband zero-DM impulses; 0 turns it off; see
        ``preprocess.clip_impulses``).
    time_decimation, freq_decimation : int
        Average this many samples / channels before searching.
    search_subbands : int
        Also search each of this many equal sub-bands (channel ranges) on its own, with the
        full band's DM trials and delays (1: the full band only): a burst that occupies one
        sub-band reaches ``sqrt(search_subbands)`` times its full-band S/N there. Their
        threshold is raised for the extra trials (:func:`~drafts_ops.detect.single_pulse.
        trials_threshold`); classical search only.
    detector_subbands : int
        The neural detector also sees this many equal sub-bands (1: the full band only):
        each sub-band of the block is also dedispersed on its own (the full band as
        without them, so the boxcar search is unchanged; with ``search_subbands``, which
        must then agree, the full band is their sum), and the detector's input
        is, pixel by pixel, the largest of the full band's pooled DM-time rows and each
        sub-band's, scaled to the full band's noise (``sqrt(nchans / sub-band
        channels)``): a burst confined to one of ``n`` sub-bands stands up to
        ``sqrt(n)`` times higher there. One network pass per tile as before. A peak
        the full band does not keep (:func:`keeps_detection`) but that scores at least
        ``detector_faint_threshold`` has its boxcar S/N measured in each sub-band near
        it (within the detector's precision) and is kept at the best where that passes
        the same rules with ``ml_min_snr`` and ``snr_threshold`` raised for the extra
        trials (:func:`~drafts_ops.detect.single_pulse.trials_threshold`); its
        candidate names the sub-band. Unlike ``search_subbands``, no sub-band is
        searched whole: a sub-band detection needs the detector's confidence.
    decimate : bool
        Dedisperse each DM trial at its Heimdall / DDplan time resolution
        (``DMPlan.from_header(..., decimate=True)``; production mode only).
    time_link, dm_link, width_link : int
        Clustering linking lengths (samples, DM trials, log2 width).
    detector_threshold : float
        Minimum neural-detector heatmap score (0..1) of a detection (default 0.2 with
        ``ml_min_snr`` 6). Every peak from this score on goes to the boxcar S/N gate
        (``ml_min_snr``, ``detector_faint_threshold``), which removes most noise peaks:
        on validation seeds 4242 and 4243 the detector alone found 361 and 367 of 375
        bursts at S/N >= 8 at 0.2 against 355 and 365 at 0.3, with 1 and 3 false
        positives after the classifier at both.
    ml_min_snr : float
        Neural-detector peaks whose best boxcar S/N (within the detector's precision:
        two pooled DM rows and four columns of its coarsest time scale, 64 samples;
        :meth:`~drafts_ops.ml.inference.Detector.position_uncertainty`) is below this
        are dropped.
    detector_faint_threshold : float
        Minimum neural-detector score of a peak whose boxcar S/N lies below
        ``snr_threshold`` (between ``ml_min_snr`` and the boxcar search's own threshold).
        Noise peaks there are ten times more common per 0.5 sigma (pure noise, FAST-like,
        60 s, DM 0-2000: 72 clusters >= 5.5, 6 >= 6.0, none >= 6.5), and the classifier
        cannot tell them from faint bursts. On validation seeds 4242-4246 the faint bursts
        the detector added to the boxcar search (and the classifier kept) scored 0.70-0.92,
        the faint noise and RFI peaks that the classifier passed 0.35-0.63.
    classify : bool
        Score every candidate (of any detector) with the shipped classifier; the
        probability is written beside it (``classifier_prob``).
    classifier_threshold : float
        Probability from which a candidate counts as a burst.
    write_h5, write_plots : bool
        Write FETCH ``.h5`` files / PNGs (for the brightest ``max_outputs`` candidates).
    max_outputs : int
        Cap on ``.h5`` files and PNGs per observation.
    """

    dm_min: float = 0.0
    dm_max: float = 3000.0
    dm_step: float | None = None
    dm_tol: float = 1.25
    dedisp_mode: Mode = "production"
    algorithm: str = "subband"
    backend: Backend = "cpu"
    detector: Detector = "classical"
    block_size: int | None = None
    memory_budget_mib: float = 1024.0
    snr_threshold: float = 6.5
    search_subbands: int = 1
    detector_subbands: int = 1
    max_width_samples: int = 64
    baseline_s: float = 2.0
    norm_method: NormMethod = "mad"
    mask_channels: tuple[int, ...] = ()
    auto_mask: bool = True
    mask_threshold: float = 5.0
    zero_dm: bool = False
    clip_pixels: float = 6.0
    clip_impulses: float = 10.0
    time_decimation: int = 1
    freq_decimation: int = 1
    decimate: bool = False
    time_link: int = 8
    dm_link: int = 20
    width_link: int = 3
    detector_threshold: float = 0.2
    ml_min_snr: float = 6.0
    detector_faint_threshold: float = 0.65
    classify: bool = True
    classifier_threshold: float = 0.5
    write_h5: bool = True
    write_plots: bool = True
    max_outputs: int = 50

    def __post_init__(self) -> None:  # noqa: PLR0912 (one check per field)
        object.__setattr__(self, "mask_channels", tuple(int(c) for c in self.mask_channels))
        problems = []
        for name, kind in (("dedisp_mode", Mode), ("backend", Backend), ("detector", Detector),
                           ("norm_method", NormMethod)):  # fmt: skip
            if getattr(self, name) not in get_args(kind):
                problems.append(f"{name} = {getattr(self, name)!r} (use one of {get_args(kind)})")
        if not (0 <= self.dm_min <= self.dm_max and math.isfinite(self.dm_max)):
            problems.append(f"DM range {self.dm_min}..{self.dm_max} pc cm^-3")
        if self.dm_step is not None and not self.dm_step > 0:
            problems.append(f"dm_step = {self.dm_step}")
        if not self.dm_tol > 1:
            problems.append(f"dm_tol = {self.dm_tol} (must be > 1)")
        for name in ("max_width_samples", "time_decimation", "freq_decimation"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} = {getattr(self, name)} (must be >= 1)")
        if self.block_size is not None and int(self.block_size) < 1:
            problems.append(f"block_size = {self.block_size} (must be >= 1)")
        if not self.memory_budget_mib >= 64:
            problems.append(f"memory_budget_mib = {self.memory_budget_mib} (must be >= 64)")
        if not (self.snr_threshold > 0 and self.baseline_s > 0 and self.ml_min_snr >= 0):
            problems.append("snr_threshold and baseline_s must be positive, ml_min_snr >= 0")
        for name in ("detector_threshold", "detector_faint_threshold", "classifier_threshold"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} = {getattr(self, name)} (must be in 0..1)")
        if int(self.search_subbands) < 1:
            problems.append(f"search_subbands = {self.search_subbands} (must be >= 1)")
        elif self.search_subbands > 1 and self.detector == "ml":
            problems.append("search_subbands needs the classical search (detector "
                            "'classical' or 'both')")  # fmt: skip
        if int(self.detector_subbands) < 1:
            problems.append(f"detector_subbands = {self.detector_subbands} (must be >= 1)")
        elif self.detector_subbands > 1 and self.detector == "classical":
            problems.append("detector_subbands needs the neural detector (detector 'ml' or "
                            "'both')")  # fmt: skip
        elif min(self.search_subbands, self.detector_subbands) > 1 and (
            self.search_subbands != self.detector_subbands
        ):
            problems.append(f"search_subbands = {self.search_subbands} and "
                            f"detector_subbands = {self.detector_subbands} must agree "
                            "(one split of the band)")  # fmt: skip
        if self.decimate and self.dedisp_mode != "production":
            problems.append("decimate needs dedisp_mode 'production' (the prototype ignores it)")
        if self.dedisp_mode == "prototype" and self.algorithm != "brute":
            object.__setattr__(self, "algorithm", "brute")  # the prototype has one algorithm
        if self.max_outputs < 0:
            problems.append(f"max_outputs = {self.max_outputs}")
        for name in ("clip_pixels", "clip_impulses"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                problems.append(f"{name} = {value} (sigmas >= 0; 0 is off)")
        if problems:
            raise ParameterError("bad search configuration: " + "; ".join(problems))

    @property
    def links(self) -> ClusterLinks:
        return ClusterLinks(self.time_link, self.dm_link, self.width_link)

    @property
    def dedispersed_subbands(self) -> int:
        """Sub-bands the search splits the band into (1: none): ``search_subbands`` or
        ``detector_subbands``, whichever asks for them."""
        return max(self.search_subbands, self.detector_subbands)

    @property
    def decimates(self) -> bool:
        """Whether the search averages samples or channels before searching."""
        return self.time_decimation > 1 or self.freq_decimation > 1

    @property
    def quantises(self) -> bool:
        """Whether blocks reach the dedispersion kernel as uint8 (normalised samples held
        within ``clip_pixels``, :func:`~drafts_ops.detect.preprocess.quantised_levels`): the
        CPU sub-band operator then runs stage 1 in 16-bit integers, 2x faster."""
        return (self.dedisp_mode == "production" and self.algorithm == "subband"
                and self.backend == "cpu" and self.clip_pixels > 0)  # fmt: skip

    @property
    def decimation_factor(self) -> int:
        """Raw samples averaged into each searched sample (time x frequency)."""
        return self.time_decimation * self.freq_decimation

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SearchConfig:
        """Build from a mapping; unknown keys are an error."""
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ParameterError(f"unknown search option(s): {', '.join(unknown)}")
        return cls(**values)


@dataclass(frozen=True)
class BlockRange:
    """One block, in searched samples: it owns output samples ``[start, stop)`` and reads
    ``[read_start, read_stop)`` (padding for boxcars plus the maximum delay, clipped to the
    data; the operator sees ``read_len`` samples, zero-padded beyond the data)."""

    index: int
    start: int
    stop: int
    read_start: int
    read_stop: int
    read_len: int


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
        return sum(b.stop - b.start for b in self.blocks)

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
        }


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
    full = DMPlan.from_header(
        header, config.dm_min, config.dm_max, config.dm_step,
        dm_tol=config.dm_tol, decimate=config.decimate,
    )  # fmt: skip
    fits = full.delays.max(axis=1) <= header.nsamples - MIN_TRIAL_SAMPLES
    notes: list[str] = []
    if not fits.any():
        raise ParameterError(
            f"{path}: {header.tobs:.3f} s of data is shorter than the dispersion sweep "
            f"{full.delays[0].max() * header.tsamp:.3f} s at DM {full.dms[0]:.1f} plus "
            f"{MIN_TRIAL_SAMPLES} samples; lower dm_min"
        )
    if not fits.all():
        kept = int(np.flatnonzero(fits)[-1]) + 1
        notes.append(
            f"observation of {header.tobs:.2f} s is too short for DM {config.dm_max:g}: "
            f"searched DM {full.dms[0]:g}-{full.dms[kept - 1]:.1f} pc cm^-3 "
            f"({kept} of {full.ndm} trials)"
        )
        log.warning("%s: %s", path, notes[-1])
        full = DMPlan.build(full.dms[:kept], full.freqs, full.tsamp, full.decimation[:kept])
    smearing = channel_smearing_note(raw, header, float(full.dms[-1]))
    if smearing:
        notes.append(smearing)
        log.warning("%s: %s", path, smearing)
    pad = config.max_width_samples + config.time_link
    size = config.block_size or block_size_for_budget(
        raw,
        header,
        full,
        config.memory_budget_mib,
        pad,
        subbands=config.search_subbands,
        quantised=config.quantises,
    )
    factor = int(full.decimation.max())
    size = -(-int(size) // factor) * factor  # decimated trials' windows align across blocks
    first, last = _own_range(files, own, edges, raw, config)
    origin = first
    if lead_in and own:
        first = max(first - full.max_delay, 0)
    blocks = []
    for index, start in enumerate(range(first, last, size)):
        stop = min(start + size, last)
        read_start = max(start - pad, 0)
        want = min(stop + pad, header.nsamples) + full.max_delay
        blocks.append(BlockRange(index, start, stop, read_start, min(want, header.nsamples),
                                 want - read_start))  # fmt: skip
    return SearchPlan(
        path=files[0],
        config=config,
        raw_header=raw,
        files=files,
        header=header,
        dms=tuple(float(d) for d in full.dms),
        max_delay=full.max_delay,
        blocks=tuple(blocks),
        block_size=size,
        decimation=tuple(int(f) for f in full.decimation) if config.decimate else (),
        notes=tuple(notes),
        origin=origin,
        own_index=own or 0,
        lead_in=bool(lead_in and own),
    )


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


# -- dedisperse + detect: the streaming pass ---------------------------------------------


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
                data = read_searched(reader, plan, block.read_start, block.read_stop, out=into)
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
    from drafts_ops.dedisp.workspace import default_pool

    default_pool.clear()  # the operator's scratch is not needed after the pass
    span = f"{indices[0]:05d}-{indices[-1]:05d}"
    if buffers.masked is not None:  # for the report: how often each channel was masked
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        np.save(Path(work_dir) / f"masked_{span}.npy",
                np.append(buffers.masked, buffers.blocks))  # fmt: skip
    name = f"giants_{span}.npz"
    return Giants.concatenate(parts).save(Path(work_dir) / name)


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
    kernel_input = _kernel_input(data, block, cfg, buffers)
    mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
    if cfg.freq_decimation > 1:
        from drafts_ops.detect.preprocess import decimate_mask

        mask = decimate_mask(mask, cfg.freq_decimation)
    bad = prepare_block(data, nreal, kernel_input, method=cfg.norm_method, mask=mask,
                        auto=cfg.auto_mask, threshold=cfg.mask_threshold,
                        zero_dm=cfg.zero_dm, clip_sigma=cfg.clip_impulses,
                        clip_pixels=cfg.clip_pixels, sums_of=cfg.decimation_factor)  # fmt: skip
    if buffers.masked is None or buffers.masked.size != bad.size:
        buffers.masked, buffers.blocks = np.zeros(bad.size, np.int64), 0
    buffers.masked += bad
    buffers.blocks += 1
    affine = {}
    if cfg.quantises:  # 8-bit levels: the kernel gives back normalised units
        offset, scale = quantised_levels(cfg.clip_pixels)
        affine = {"offset": offset, "scale": scale}
    nout = block.read_len - dm_plan.max_delay
    dm_time = buffers.get("dm_time", (dm_plan.ndm, nout), np.float32)
    valid = np.clip(nreal - dm_plan.delays.max(axis=1).astype(np.int64), 0, nout)
    keep = (block.start - block.read_start, block.stop - block.read_start)
    detector = _load_detector() if cfg.detector in ("ml", "both") else None
    parts: list[Giants] = []
    pooling = None
    if cfg.search_subbands > 1:  # the full band is then the sum of the sub-bands
        _search_subbands(kernel_input, plan, block, dm_time, valid=valid, buffers=buffers,
                         keep=keep, affine=affine, parts=parts)  # fmt: skip
    else:
        pooling = _band_pooling(plan, nout, buffers) if detector is not None else None
        _dedisperse(kernel_input, dm_plan, cfg, out=dm_time, pooling=pooling, **affine)
    if buffers.on_dm_time is not None:
        buffers.on_dm_time(block, dm_time[:, keep[0] : keep[1]])
    if detector is not None:  # the detector's rows, before the S/N overwrites the samples
        from drafts_ops.ml.inference import pool_dm_rows

        pooled = pool_dm_rows(dm_time)
        if cfg.detector_subbands > 1:
            _raise_to_subband_rows(pooled, kernel_input, plan, dm_time.shape[1],
                                   buffers=buffers, affine=affine, pooling=pooling)  # fmt: skip
        if buffers.on_detector_rows is not None:
            buffers.on_detector_rows(block, pooled[:, keep[0] : keep[1]])
    width_index = buffers.get("width_index", dm_time.shape, np.int8)
    widths = _boxcar_search(dm_time, valid, width_index, plan)
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
        sub_bands = _SubbandProbe(kernel_input, plan, block, valid, nout, affine)
        parts.append(_detector_giants(peaks, detector, searched, sub_bands, cfg=cfg))
    return Giants.concatenate(parts)


def _detector_giants(
    peaks: list, detector: Any, searched: tuple[np.ndarray, np.ndarray, np.ndarray],
    sub_bands: _SubbandProbe, *, cfg: SearchConfig,
) -> Giants:  # fmt: skip
    """The giants of the detector's ``peaks`` in the block that the search keeps
    (:func:`keeps_detection`), each at the best boxcar S/N near it (``searched``: the
    full band's S/N, width index and widths).

    With ``detector_subbands > 1``, a peak the full band does not keep but that scores at
    least ``detector_faint_threshold`` is kept at its best sub-band's S/N (``band = k``,
    measured by ``sub_bands``) where that passes the same rules with both thresholds
    raised for the extra trials (:func:`trials_threshold`).
    """
    from drafts_ops.detect.single_pulse import trials_threshold

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
    raised = dataclasses.replace(cfg, snr_threshold=trials_threshold(cfg.snr_threshold, n),
                                 ml_min_snr=floor)  # fmt: skip
    probed = ~kept & (full.score >= cfg.detector_faint_threshold)
    sub = sub_bands.giants_at(dms[owned][probed], cols[owned][probed], full.score[probed],
                              radius=radius, dm_radius=dm_radius)  # fmt: skip
    in_band = keeps_detection(sub.snr, sub.score, raised)
    return Giants.concatenate([full.select(kept), sub.select(in_band)])


@dataclass
class _SubbandProbe:
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
        from drafts_ops.detect.single_pulse import baseline_window

        plan = self.plan
        cfg = dataclasses.replace(plan.config, algorithm="brute")
        widths = boxcar_widths(cfg.max_width_samples)
        baseline = baseline_window(cfg.baseline_s, plan.header.tsamp, cfg.max_width_samples)
        pairs = zip(plan.subband_channels(), plan.subband_plans(), strict=True)
        bands = [(c0, c1, band, subband_trial_stride(plan.header.chan_freqs, c0, c1))
                 for (c0, c1), band in pairs]  # fmt: skip
        return cfg, widths, baseline, bands

    def _best_in_sub_bands(self, d0: int, t0: int, radius: int, dm_radius: int) -> tuple:
        from drafts_ops.detect.kernels import search_rows

        cfg, widths, baseline, bands = self._setup
        ndm, nout = len(self.plan.dms), self.nout
        d0, t0 = min(max(d0, 0), ndm - 1), min(max(t0, 0), nout - 1)
        lo, hi = max(d0 - dm_radius, 0), min(d0 + dm_radius + 1, ndm)
        t_lo, t_hi = max(t0 - radius, 0), min(t0 + radius + 1, nout)
        best = (d0, t0, 1, -np.inf, 0)
        for k, (c0, c1, band, stride) in enumerate(bands, start=1):
            rows = np.arange(lo + (d0 - lo) % stride, hi, stride)  # d0 among them
            sub = band.select_trials(rows).undecimated()
            series = _dedisperse(self.prepared[c0:c1, : nout + sub.max_delay], sub, cfg,
                                 **self.affine)  # fmt: skip
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


def keeps_detection(snr: np.ndarray, score: np.ndarray, config: SearchConfig) -> np.ndarray:
    """Which neural-detector peaks (boxcar ``snr``, heatmap ``score``) the search keeps: S/N
    at least ``ml_min_snr``, and below the boxcar threshold ``snr_threshold`` a score of
    at least ``detector_faint_threshold``."""
    faint = snr < config.snr_threshold
    return (snr >= config.ml_min_snr) & (~faint | (score >= config.detector_faint_threshold))


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


def _search_subbands(
    prepared: np.ndarray, plan: SearchPlan, block: BlockRange, dm_time: np.ndarray,
    *, valid: np.ndarray, buffers: BlockBuffers, keep: tuple[int, int], affine: dict,
    parts: list[Giants],
) -> None:  # fmt: skip
    """Dedisperse and search each sub-band of the block on its own; their sum, the full
    band's DM-time data, is left in ``dm_time`` (the same trials and delays: exact).

    Sub-band giants carry ``band = k`` (1-based) and cross a threshold raised for the
    extra trials (:func:`trials_threshold`); they are appended to ``parts``.
    """
    from drafts_ops.detect.single_pulse import trials_threshold

    cfg = plan.config
    threshold = trials_threshold(cfg.snr_threshold, cfg.search_subbands)
    band = buffers.get("band_dm_time", dm_time.shape, np.float32)
    width_index = buffers.get("band_width_index", dm_time.shape, np.int8)
    nout = dm_time.shape[1]
    pairs = zip(plan.subband_channels(), plan.subband_plans(), strict=True)
    for k, ((c0, c1), sub_plan) in enumerate(pairs, start=1):
        _dedisperse(prepared[c0:c1, : nout + sub_plan.max_delay], sub_plan, cfg, out=band,
                    **affine)  # fmt: skip
        if k == 1:
            dm_time[...] = band
        else:
            dm_time += band
        widths = _boxcar_search(band, valid, width_index, plan)
        parts.append(giants_above(band, width_index, threshold, widths=widths,
                                  sample_offset=block.read_start, keep=keep, band=k))  # fmt: skip


#: Largest buffer (MiB) in which the detector's sub-band rows are dedispersed, a run of
#: whole pooled rows of DM trials at a time: it comes out of :data:`BUDGET_RESERVE_MIB`,
#: so ``--detector-subbands`` searches the same blocks as the full-band search.
SUBBAND_ROWS_CHUNK_MIB = 16.0


def subband_trial_stride(freqs_mhz: np.ndarray, c0: int, c1: int) -> int:
    """Every how many of the full band's DM trials channels ``[c0, c1)`` need one: the
    full band's dispersion sweep over the sub-band's (``f_lo^-2 - f_hi^-2``), at least 1.
    A DM error smears a sub-band's pulse that much less (FAST-like quarters: 2-6)."""
    freqs = np.asarray(freqs_mhz, np.float64)
    sub = freqs[c0:c1]
    full_sweep = float(dispersion_delay_s(1.0, freqs.min(), freqs.max()))
    sub_sweep = float(dispersion_delay_s(1.0, sub.min(), sub.max()))
    return max(int(full_sweep // sub_sweep), 1) if sub_sweep > 0 else 1


def _band_pooling(plan: SearchPlan, nout: int, buffers: BlockBuffers) -> BandPooling | None:
    """The request that the sub-band operator pool the detector's sub-band rows as it
    dedisperses the full band (``detector_subbands > 1``; :class:`BandPooling`): rows
    scaled to the full band's noise, ``sqrt(nchans / sub-band channels)``."""
    bands = plan.config.detector_subbands
    if bands < 2:
        return None
    edges = _detector_row_edges(len(plan.dms))
    channels = np.array([c0 for c0, _ in plan.subband_channels()] + [plan.header.nchans])
    rows = buffers.get("band_pooled", (bands, edges.size - 1, nout), np.float32)
    weights = np.sqrt(plan.header.nchans / np.diff(channels)).astype(np.float32)
    return BandPooling(channels, edges, rows, weights)


def _detector_row_edges(ndm: int) -> np.ndarray:
    """Trials pooled into each of the detector's rows ``[rows + 1]``: its max-pooling of
    the DM axis, or one trial a row where there are no more trials than rows (the rows are
    then interpolated, :func:`~drafts_ops.ml.inference.pool_dm_rows`)."""
    from drafts_ops.ml.preprocess import DETECTOR_ROWS, max_pool_edges

    return max_pool_edges(ndm, DETECTOR_ROWS) if ndm > DETECTOR_ROWS else np.arange(ndm + 1)


def _raise_to_subband_rows(
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
    from drafts_ops.ml.inference import pool_dm_rows

    def raise_to(rows: np.ndarray) -> None:
        np.maximum(pooled, rows if pooling_rows else pool_dm_rows(rows), out=pooled)

    ndm = len(plan.dms)
    pooling_rows = ndm > pooled.shape[0]  # else the rows are the trials (then interpolated)
    if pooling is not None and pooling.filled:
        for rows in pooling.rows:
            raise_to(rows)
        return
    edges = _detector_row_edges(ndm)
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
            _dedisperse(prepared[c0:c1, : nout + sub.max_delay], sub, plan.config, out=out,
                        **affine)  # fmt: skip
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


def _boxcar_search(
    series: np.ndarray, valid: np.ndarray, width_index: np.ndarray, plan: SearchPlan
) -> np.ndarray:
    """Replace each DM row of ``series`` by its best boxcar S/N (fused kernel: running
    baseline, per-width noise measured on the data), the chosen width's index into
    ``width_index``; returns the boxcar widths (samples)."""
    from drafts_ops.detect.kernels import search_rows
    from drafts_ops.detect.single_pulse import baseline_window

    cfg = plan.config
    widths = boxcar_widths(cfg.max_width_samples)
    baseline = baseline_window(cfg.baseline_s, plan.header.tsamp, cfg.max_width_samples)
    search_rows(series, valid, widths, baseline, SEARCH_NOISE_POINTS, series, width_index)
    return widths


#: Strided samples from which each DM row's baseline and per-boxcar noise are measured.
SEARCH_NOISE_POINTS = 1024
#: Raw samples read (and decimated) at a time when a search averages samples or channels.
DECIMATION_CHUNK_BYTES = 64 * 1024**2


class DecimatedReader:
    """Reads a decimating pass's blocks and keeps their searched samples.

    Each block's averages go into its normalisation buffer. The samples a block shares
    with the one before it (boxcar padding plus the largest delay: about half of what a
    FAST raw block reads) come from the samples the previous block kept, not from the
    file again, bit for bit (:meth:`SearchedSamples.save` keeps them exactly). The new
    samples are kept, for the next block and for the cutouts, in files named by their
    first sample (``work/searched_<sample>.npy``).
    """

    def __init__(self, reader, plan: SearchPlan, work_dir: Path) -> None:
        self.reader, self.plan, self.work_dir = reader, plan, work_dir
        self.factor = plan.config.decimation_factor
        #: ``(first sample, stop, path)`` of the files this pass kept, in order.
        self.files: list[tuple[int, int, Path]] = []

    @property
    def kept_until(self) -> int | None:
        """Samples before this are kept (``None`` before the first block)."""
        return self.files[-1][1] if self.files else None

    def read(self, block: BlockRange, out: np.ndarray, *, keep_stop: int) -> np.ndarray:
        """Samples ``[block.read_start, block.read_stop)`` (float32, a view of ``out``;
        shorter at the end of the file); keeps those from the kept samples' end (the
        block's start for the first block) to ``keep_stop``."""
        from drafts_ops.detect.products import SearchedSamples

        start, stop = block.read_start, block.read_stop
        head = start if self.kept_until is None else min(max(self.kept_until, start), stop)
        if head > start:
            parts = [(a, path) for a, b, path in self.files if b > start and a < head]
            SearchedSamples(parts, self.factor).read_averages_into(start, head, out)
        rest = read_searched(self.reader, self.plan, head, stop, out=out[:, head - start :])
        data = out[:, : head - start + rest.shape[1]]
        first = block.start if self.kept_until is None else self.kept_until
        end = min(keep_stop, start + data.shape[1])
        if end > first:
            part = data[:, first - start : end - start]
            path = self.work_dir / f"searched_{first:012d}.npy"
            self.files.append((first, end, SearchedSamples.save(path, part, self.factor)))
        return data


def read_searched(
    reader,
    plan: SearchPlan,
    start: int,
    stop: int,
    *,
    file_layout: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Searched samples ``[start, stop)`` of an open reader, ``[nchan, n]``.

    Without decimation: the raw samples in their own dtype (uint8 for 8-bit data); with
    ``file_layout``, where the format allows, a transposed view of the file's own
    time-major spectra instead of a channel-major copy (for callers that read only part
    of each channel, such as the cutouts); ``out`` (``[nchan, >= stop - start]``, the
    file's dtype): where the format gives its spectra as they lie, transposed into it
    (returns a view), else a new array. With
    time / frequency decimation: float32 averages, read and decimated in chunks of about
    :data:`DECIMATION_CHUNK_BYTES`, so no full-resolution float copy of the block exists;
    ``out`` (float32 ``[nchan, >= stop - start]``): write them there (returns a view).
    """
    cfg = plan.config
    tf, ff = cfg.time_decimation, cfg.freq_decimation
    if not cfg.decimates:
        wanted = file_layout or out is not None
        spectra = reader.read_spectra(start, stop - start) if wanted else None
        if spectra is not None and file_layout:
            return spectra.T
        if spectra is not None and _fits(out, spectra.T):
            into = out[:, : spectra.shape[0]]
            transpose_into(into, spectra)
            return into
        return reader.read_block(start, stop - start, raw=True)
    raw = plan.raw_header
    shape = (raw.nchans // ff, stop - start)
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.dtype != np.float32 or out.shape[0] != shape[0] or out.shape[1] < shape[1]:
        raise ParameterError(f"read_searched: out {out.shape} {out.dtype} cannot hold {shape}")
    out = out[:, : shape[1]]
    per_sample = raw.nchans * max(raw.nbits, 8) // 8 * tf
    step = max(1, DECIMATION_CHUNK_BYTES // per_sample)
    for a in range(start, stop, step):
        b = min(a + step, stop)
        reader.prefetch(b * tf, min(step, stop - b) * tf)  # the disk reads the next chunk meanwhile
        spectra = reader.read_spectra(a * tf, (b - a) * tf)
        if spectra is not None:  # straight from the file's layout: no transposed copy
            n = spectra.shape[0] // tf
            decimate_spectra_into(spectra, tf, ff, out[:, a - start : a - start + n])
        else:
            chunk = reader.read_block(a * tf, (b - a) * tf, raw=True)
            n = chunk.shape[1] // tf
            if n:
                out[:, a - start : a - start + n] = decimate_block(chunk[:, : n * tf], tf, ff)
        reader.release(b * tf)  # the chunk's file pages are not needed again here
        if n < b - a:
            return out[:, : a - start + n]
    return out


def _fits(out: np.ndarray, block: np.ndarray) -> bool:
    """Whether ``block [nchan, n]`` can be written into the leading columns of ``out``."""
    return (out.dtype == block.dtype and out.shape[0] == block.shape[0]
            and out.shape[1] >= block.shape[1])  # fmt: skip


# -- merge, cutouts, classify, write -----------------------------------------------------


def merge_block_results(
    paths: Sequence[PathLike], plan: SearchPlan, work_dir: PathLike | None = None
) -> list[Candidate]:
    """Cluster the giants of all blocks together and fold bow-tie sidelobes into their
    burst (those of band-limited and very wide bursts judged on the burst's measured
    pulse, read from the searched samples kept in ``work_dir`` or from the file): one
    candidate per burst, reported at its peak (the centre of a flat one:
    :func:`~drafts_ops.detect.candidates.reported_at_peaks`), brightest first."""
    dms = np.asarray(plan.dms)
    bands = plan.subband_frequencies() if plan.config.dedispersed_subbands > 1 else ()
    response = Response(dms, plan.header.chan_freqs, plan.header.tsamp,
                        plan.config.max_width_samples, bands)  # fmt: skip
    giants = Giants.concatenate([Giants.load(p) for p in paths])
    clusters, giants, label = labelled_clusters(giants, plan.config.links, response)
    owners = sidelobe_owners(clusters, dms, plan.header.chan_freqs, plan.header.tsamp,
                             max_width=plan.config.max_width_samples, bands=bands)  # fmt: skip
    clusters, into = fold_clusters(clusters, owners)
    candidates = candidates_from_clusters(
        clusters,
        dms,
        plan.header.tsamp,
        file=plan.own_file,
        beam=plan.raw_header.ibeam,
        subbands=plan.config.dedispersed_subbands > 1,
    )
    if candidates:
        from drafts_ops.detect.products import CutoutMaker, SearchedSamples

        with open_observation(plan.source) as reader:
            maker = CutoutMaker(reader, plan, SearchedSamples.find(Path(work_dir), plan)
                                if work_dir is not None else None, origin=0)  # fmt: skip
            candidates, boxcar = release_hidden_bursts(
                candidates, giants, into[label], response, plan.config.links,
                pulse_shape=maker.pulse_shape, snr_outside=maker.snr_outside,
                snr_within=maker.snr_within, boxcar=clusters.boxcar,
            )  # fmt: skip
            candidates = fold_measured_sidelobes(
                candidates, maker.pulse_shape, plan.header.chan_freqs, plan.header.tsamp,
                max_width=plan.config.max_width_samples, boxcar=boxcar,
                snr_outside=maker.snr_outside,
            )  # fmt: skip
    candidates = reported_at_peaks(candidates, clusters, dms, plan.header.tsamp)
    return own_candidates(candidates, plan)


def own_candidates(candidates: Sequence[Candidate], plan: SearchPlan) -> list[Candidate]:
    """The candidates the plan's own file reports, relative to its start.

    Without files around it: all of them, unchanged. Otherwise those whose arrival lies
    in the file, or, with ``plan.lead_in``, in the previous file's last ``delay(d)``
    samples that its own search could not reach (negative times: seconds before this
    file's start); each boundary is so searched exactly once.
    """
    if plan.origin == 0 and not plan.lead_in:
        return list(candidates)
    origin = plan.origin
    reach = plan.dm_plan().delays.max(axis=1) if plan.lead_in else np.zeros(len(plan.dms), int)
    mine = [c for c in candidates if c.sample >= origin - int(reach[c.dm_index])]
    return [c.replace(sample=c.sample - origin, tcand_s=(c.sample - origin) * plan.header.tsamp,
                      first_sample=c.first_sample - origin, last_sample=c.last_sample - origin)
            for c in mine]  # fmt: skip


def cutout_count(candidates: Sequence[Candidate], config: SearchConfig) -> int:
    """How many candidates (brightest first) need cutouts: all when classifying, else the
    ones that get ``.h5`` files or PNGs."""
    wanted = config.max_outputs if (config.write_h5 or config.write_plots) else 0
    return len(candidates) if config.classify else min(wanted, len(candidates))


def make_cutouts(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, work_dir: PathLike
) -> Path | None:
    """Compute each needed candidate's FETCH cutouts once; save them for the classifier,
    the ``.h5`` writer and the PNG (``work_dir/cutouts.npz``, float16). ``None`` if none."""
    from drafts_ops.atomic import atomic_path
    from drafts_ops.detect.products import CutoutMaker, SearchedSamples

    count = cutout_count(candidates, plan.config)
    if count == 0:
        return None
    with open_observation(plan.source) as reader:
        maker = CutoutMaker(reader, plan, SearchedSamples.find(Path(work_dir), plan))
        pairs = [maker.cutouts(cand) for cand in candidates[:count]]
    target = Path(work_dir) / "cutouts.npz"
    with atomic_path(target) as tmp, tmp.open("wb") as fh:
        np.savez(fh, freq_time=np.stack([p[0] for p in pairs]).astype(np.float16),
                 dm_time=np.stack([p[1] for p in pairs]).astype(np.float16))  # fmt: skip
    return target


def load_cutouts(path: PathLike | None) -> tuple[np.ndarray, np.ndarray]:
    """``(freq_time [n, 256, 256], dm_time [n, 256, 256])`` float32 from :func:`make_cutouts`."""
    if path is None:
        empty = np.empty((0, 0, 0), np.float32)
        return empty, empty
    with np.load(path) as npz:
        return npz["freq_time"].astype(np.float32), npz["dm_time"].astype(np.float32)


def classify_candidates(
    candidates: Sequence[Candidate], plan: SearchPlan, cutouts: PathLike | None,
    *, classifier: Any = None,
) -> list[Candidate]:  # fmt: skip
    """Attach the classifier's burst probability to each candidate (any detector).

    With ``config.classify`` off the candidates are returned unchanged. ``classifier`` is
    any object with ``predict(freq_time, dm_time) -> float`` (default: the shipped model).
    """
    if not plan.config.classify or not candidates:
        return list(candidates)
    if classifier is None:
        from drafts_ops.ml.inference import load_classifier

        classifier = load_classifier()
    ft, dt = load_cutouts(cutouts)
    threshold = plan.config.classifier_threshold
    probs = [float(classifier.predict(ft[i], dt[i])) for i in range(len(candidates))]
    return [cand.replace(classifier_prob=p, is_burst=p >= threshold)
            for cand, p in zip(candidates, probs, strict=True)]  # fmt: skip


def write_outputs(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, out_dir: PathLike,
    cutouts: PathLike | None = None,
) -> dict[str, Path]:  # fmt: skip
    """Write ``candidates.csv``, ``<stem>.cand`` and, for the first ``max_outputs``
    candidates (brightest first), FETCH ``h5/<id>.h5`` and, for those of them that count
    as bursts (:func:`is_burst`), ``plots/<id>.png``, from the saved cutouts.

    Returns the paths: keys ``csv``, ``cand``, and ``h5:<i>`` / ``png:<i>`` for candidate i.
    """
    from drafts_ops.detect.writers import fetch_name, write_cand, write_csv, write_fetch_h5

    cfg = plan.config
    out_dir = Path(out_dir)
    outputs = {
        "csv": write_csv(candidates, out_dir / "candidates.csv"),
        "cand": write_cand(candidates, out_dir / f"{Path(path).stem}.cand"),
    }
    chosen = list(candidates)[: cfg.max_outputs] if (cfg.write_h5 or cfg.write_plots) else []
    if not chosen:
        return outputs
    from drafts_ops.detect.plots import CandidatePlotter, wants_helper

    ft_all, dt_all = load_cutouts(cutouts)
    header = plan.own_header  # the searched resolution: candidates and cutouts are in it
    plotter = None  # made at the first PNG (matplotlib's import takes ~0.5 s)
    plotted = [cfg.write_plots and is_burst(cand, cfg) for cand in chosen]
    helper = wants_helper(sum(plotted))  # a second process draws some of many PNGs
    try:
        for i, cand in enumerate(chosen):
            ft, dt = ft_all[i], dt_all[i]
            name = fetch_name(cand, header)
            if cfg.write_h5:
                h5_path = out_dir / "h5" / f"{name}.h5"
                outputs[f"h5:{i}"] = write_fetch_h5(cand, header, ft, dt, h5_path)
            if plotted[i]:
                plotter = plotter or CandidatePlotter(tsamp=header.tsamp, fmax_mhz=header.fmax,
                                                      fmin_mhz=header.fmin,
                                                      helper=helper)  # fmt: skip
                png_path = out_dir / "plots" / f"{name}.png"
                outputs[f"png:{i}"] = plotter.plot(cand, ft, dt, png_path)
    finally:
        if plotter is not None:  # PNGs are written while the next candidate is drawn
            plotter.finish()
    return outputs


def is_burst(cand: Candidate, config: SearchConfig) -> bool:
    """Whether a candidate counts as a burst: classifier probability at least
    ``classifier_threshold`` (every candidate when it was not classified)."""
    prob = cand.classifier_prob
    return prob is None or prob >= config.classifier_threshold


# -- the stage sequence ------------------------------------------------------------------


class StageRunner(Protocol):
    """How :func:`run_search` runs its stages (here, or as Prefect tasks)."""

    name: str

    def stage(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` as stage ``name`` and return its result."""

    def map(self, name: str, fn: Callable[..., Any], items: Sequence[Any], *args: Any) -> list:
        """Run ``fn(item, *args)`` for every item (possibly concurrently), results in order."""


@dataclass
class SerialRunner:
    """Runs every stage in this process, one after another (``on_block`` for progress)."""

    on_block: Callable[[int], None] | None = None
    name: str = "serial"
    orchestrator: str = "direct"

    def stage(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def map(self, name: str, fn: Callable[..., Any], items: Sequence[Any], *args: Any) -> list:
        if fn is search_segment and self.on_block is not None:
            return [fn(item, *args, on_block=self.on_block) for item in items]
        return [fn(item, *args) for item in items]


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """What a search returns: candidates, files written, the plan and the perf log."""

    path: Path
    out_dir: Path
    candidates: list[Candidate]
    outputs: dict[str, Path]
    plan: SearchPlan
    perf: PerfReport
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Small JSON-friendly summary (what flows pass around)."""
        return {
            "path": str(self.path),
            "out_dir": str(self.out_dir),
            "candidates": len(self.candidates),
            "outputs": {k: str(v) for k, v in self.outputs.items()},
            "perf": str(self.out_dir / "perf.json"),
            "wall_s": self.perf.wall_s,
            "realtime_factor": self.perf.realtime_factor,
            "notes": list(self.plan.notes),
        }


def masked_fraction(work: Path) -> np.ndarray | None:
    """Share of blocks in which each channel was masked, over every streaming pass."""
    counts = [np.load(p) for p in sorted(Path(work).glob("masked_*.npy"))]
    if not counts:
        return None
    total = np.sum(counts, axis=0)
    return total[:-1] / max(int(total[-1]), 1)


def observation_size(plan: SearchPlan) -> ObservationSize:
    """Channels, searched samples, sampling time and DM trials of a search plan."""
    return ObservationSize(plan.header.nchans, plan.searched_samples, plan.header.tsamp,
                           len(plan.dms))  # fmt: skip


def run_search(
    path: PathLike | Sequence[PathLike],
    out_dir: PathLike,
    config: SearchConfig | None = None,
    *,
    runner: StageRunner | None = None,
    segments: int = 1,
    trace_memory: bool = False,
    keep_intermediates: bool = False,
    own: int | None = None,
    lead_in: bool = False,
) -> SearchResult:
    """Search ``path`` into ``out_dir``: the one sequence of the search's stages.

    ``path`` may be consecutive files of one beam; ``own`` and ``lead_in`` report only one
    of them, the others giving context (:func:`plan_search`).

    ``segments`` runs of consecutive blocks are searched as separate streaming passes
    (concurrently where the runner allows: Dask workers). Writes ``perf.json``; the
    intermediates in ``out_dir/work`` are removed after success unless kept.
    """
    config = config or SearchConfig()
    runner = runner or SerialRunner()
    out = Path(out_dir)
    prepare_output_dir(out)
    work = out / WORK_DIR
    perf = PerfRecorder(trace_memory=trace_memory)
    with perf.stage("plan"):
        source = [str(p) for p in path] if isinstance(path, list | tuple) else str(path)
        plan = runner.stage("plan", plan_search, source, config, own, lead_in)
    check_disk_space(plan, work)
    notes = list(plan.notes)
    if not kernels_compiled():
        notes.append(KERNELS_COMPILING)
        log.warning("%s: %s", plan.path, KERNELS_COMPILING)
    size = observation_size(plan)
    extent = {"samples": size.nsamples, "cells": size.cells}
    parts = plan.segments(segments)
    with perf.stage("dedisperse_detect", calls=len(plan.blocks), **extent):
        giants = runner.map("dedisperse_detect", search_segment, parts, plan.path, plan,
                            str(work))  # fmt: skip
    with perf.stage("merge", **extent):
        candidates = runner.stage("merge", merge_block_results, giants, plan, str(work))
    with perf.stage("cutouts", calls=cutout_count(candidates, config), **extent):
        cutouts = runner.stage("cutouts", make_cutouts, candidates, plan.path, plan, str(work))
    with perf.stage("classify", **extent):
        candidates = runner.stage("classify", classify_candidates, candidates, plan, cutouts)
    with perf.stage("write", **extent):
        outputs = runner.stage("write", write_outputs, candidates, plan.path, plan, str(out),
                               cutouts)  # fmt: skip
    run = {
        "file": " ".join(plan.files), "dedisp_mode": config.dedisp_mode,
        "algorithm": config.algorithm,
        "detector": config.detector, "orchestrator": getattr(runner, "orchestrator", "direct"),
        "task_runner": runner.name, "notes": notes,
    }  # fmt: skip
    from drafts_ops.report import write_search_report

    with perf.stage("report", **extent):  # the page shows the stages before it
        before = perf.report(run=run, observation=size, candidates=len(candidates))
        outputs["report"] = write_search_report(
            out, plan, candidates=candidates, outputs=outputs, perf=before, cutouts=cutouts,
            masked=masked_fraction(work),
        )  # fmt: skip
    report = perf.report(run=run, observation=size, candidates=len(candidates))
    report.write(out)
    if not keep_intermediates:
        shutil.rmtree(work, ignore_errors=True)
    write_manifest(out, [*outputs.values(), out / PERF_FILENAME])
    mark_kernels_compiled()
    timings = {s.name: s.wall_s for s in report.stages}
    return SearchResult(path=Path(plan.path), out_dir=out, candidates=candidates, outputs=outputs,
                        plan=plan, perf=report, timings=timings)  # fmt: skip


def check_disk_space(plan: SearchPlan, work: Path) -> None:
    """Refuse a decimating search whose kept samples (for the cutouts) would not fit
    where ``work`` is: ``OSError`` (ENOSPC, naming ``work``) before any block is searched,
    not after minutes of work (a 600 s FAST raw file at x8 t x2 f keeps about 6 GB)."""
    from drafts_ops.detect.products import SearchedSamples

    need = SearchedSamples.disk_bytes(plan)
    if not need:
        return
    free = shutil.disk_usage(work if work.exists() else work.parent).free
    if need > free:
        raise OSError(errno.ENOSPC, f"the {need / 2**20:,.0f} MiB of searched samples "
                      f"this decimating search keeps for its cutouts do not fit "
                      f"({free / 2**20:,.0f} MiB free)", str(work))  # fmt: skip


def search_observation(
    path: PathLike, out_dir: PathLike, config: SearchConfig | None = None, **options: Any
) -> SearchResult:
    """Search one observation in this process (no orchestrator); see :func:`run_search`."""
    return run_search(path, out_dir, config, **options)


# -- the output directory ----------------------------------------------------------------

#: Written last by a search: every output with its size and checksum. Its presence says
#: the directory holds one finished search; a directory without it is unfinished.
DONE_FILE = "DONE.json"
#: What a search writes into its output directory (replaced by the next search there).
PRODUCTS = ("candidates.csv", "*.cand", "h5", "plots", PERF_FILENAME, WORK_DIR, "blocks",
            "report.html")  # fmt: skip


def prepare_output_dir(out: Path) -> None:
    """Check that ``out`` can be written, then clear what an earlier search left there.

    :data:`DONE_FILE` goes first (the directory is unfinished from then on), then the
    earlier products (:data:`PRODUCTS`) and temporary files of a killed writer, so a rerun
    into the same directory replaces the previous run's outputs instead of mixing with
    them. Anything else in the directory is left alone.
    """
    import os

    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".drafts-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        reason = os.strerror(err.errno) if err.errno else str(err)
        raise ParameterError(f"{out}: cannot write the output directory ({reason})") from None
    (out / DONE_FILE).unlink(missing_ok=True)
    for pattern in (*PRODUCTS, ".*.tmp"):
        for path in out.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def write_manifest(out: Path, files: Sequence[Path]) -> Path:
    """Write :data:`DONE_FILE` listing ``files`` (relative paths, bytes, sha256)."""
    import datetime as dt
    import hashlib

    from drafts_ops.atomic import write_json_atomic

    entries = {}
    for path in sorted({Path(p) for p in files}):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entries[path.relative_to(out).as_posix()] = {"bytes": path.stat().st_size,
                                                     "sha256": digest}  # fmt: skip
    doc = {"schema": "drafts-ops/search-output", "schema_version": 1, "complete": True,
           "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "files": entries}  # fmt: skip
    return write_json_atomic(out / DONE_FILE, doc)


def is_complete(out: PathLike) -> bool:
    """Whether ``out`` holds a finished search whose files match its manifest (sizes)."""
    import json

    try:
        doc = json.loads((Path(out) / DONE_FILE).read_text())
        return all((Path(out) / name).stat().st_size == meta["bytes"]
                   for name, meta in doc["files"].items())  # fmt: skip
    except (OSError, ValueError, KeyError):
        return False


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


def _dedisperse(
    data: np.ndarray, dm_plan: DMPlan, config: SearchConfig, out: np.ndarray | None = None,
    *, offset: float = 0.0, scale: float = 1.0, pooling: BandPooling | None = None,
) -> np.ndarray:  # fmt: skip
    """The one call into dedispersion: the operator registry's dispatch (``offset`` and
    ``scale``: what quantised ``data`` stand for; ``pooling``: see ``dedisperse``)."""
    from drafts_ops.dedisp import dedisperse

    return dedisperse(data, dm_plan, mode=config.dedisp_mode, algorithm=config.algorithm,
                      backend=config.backend, out=out, offset=offset, scale=scale,
                      pooling=pooling)  # fmt: skip


@functools.lru_cache(maxsize=1)
def _load_detector():
    """The neural detector: ``.detect(dm_time [ndm, nt], threshold=) -> peaks`` with
    ``dm_index``, ``sample`` (fractional, in the block's coordinates) and ``score``;
    loaded (and its hash checked) once per process, not once per block."""
    from drafts_ops.ml.inference import load_detector

    return load_detector()
