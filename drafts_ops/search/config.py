"""The search's configuration: every option of a search, validated and frozen."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.modes import Backend, Mode
from drafts_ops.detect.cluster import (
    ClusterLinks,
)
from drafts_ops.detect.preprocess import (
    NormMethod,
)

Detector = Literal["classical", "ml", "both"]

PathLike = str | Path


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
