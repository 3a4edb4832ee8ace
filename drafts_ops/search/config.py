"""The search's options: every option of a search declared once, with its type, default,
bounds, unit, help and group (:func:`~drafts_ops.core.options.option`).

:class:`SearchConfig` is what the Python API takes, what ``drafts search --help`` lists
(grouped), what a flow run and a deployment file are validated against, and what
``perf.json`` records. How the options act on a search: docs/searching.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from drafts_ops.core.options import Options, option
from drafts_ops.dedisp.modes import Algorithm, Backend, Mode
from drafts_ops.detect.cluster import ClusterLinks
from drafts_ops.detect.preprocess import NormMethod

Detector = Literal["classical", "ml", "both"]

PathLike = str | Path


class SearchConfig(Options):
    """Every option of a search (validated, frozen; :meth:`to_dict` for JSON).

    Units: DM in pc cm^-3, times in s, widths and links in searched samples, thresholds
    in sigmas of the boxcar S/N, scores and probabilities 0-1. Bad values raise
    :class:`~drafts_ops.core.errors.OptionError`.
    """

    what = "search"

    # -- DM plan and dedispersion
    dm_min: float = option(0.0, "dm-plan", "lowest DM trial", unit="pc cm^-3", ge=0)
    dm_max: float = option(3000.0, "dm-plan", "highest DM trial (trials whose sweep does not "
                           "fit in a short file are dropped, and the plan says so)",
                           unit="pc cm^-3", ge=0, allow_inf_nan=False)  # fmt: skip
    dm_step: float | None = option(None, "dm-plan", "fixed DM step (unset: the tolerance rule)",
                                   unit="pc cm^-3", gt=0)  # fmt: skip
    dm_tol: float = option(1.25, "dm-plan", "allowed growth of the effective width between DM "
                           "trials (dedisp / Heimdall tolerance rule)", gt=1)  # fmt: skip
    auto_decimation: bool = option(True, "dm-plan", "search each DM range at the coarsest time "
                                   "resolution that loses under 5 % S/N (the classical search "
                                   "at the file's resolution; see `drafts plan`)")  # fmt: skip
    time_decimation: int = option(1, "dm-plan", "samples averaged before the search (one "
                                  "range at that resolution)", ge=1)  # fmt: skip
    freq_decimation: int = option(1, "dm-plan", "channels averaged before the search", ge=1)
    decimate: bool = option(False, "dm-plan", "dedisperse each DM trial at its Heimdall / DDplan "
                            "time resolution (production mode only)")  # fmt: skip
    dedisp_mode: Mode = option("production", "dm-plan", "direct-launched kernel (prototype) or "
                               "packaged operator (production)")  # fmt: skip
    algorithm: Algorithm = option("subband", "dm-plan", "dedispersion algorithm of the "
                                  "production operator (the prototype is brute force)")  # fmt: skip
    backend: Backend = option("cpu", "dm-plan", "where dedispersion runs")

    # -- RFI and normalisation
    auto_mask: bool = option(True, "rfi", "mask channels whose statistics are outliers")
    mask_threshold: float = option(5.0, "rfi", "automatic mask threshold", unit="robust sigma",
                                   gt=0)  # fmt: skip
    mask_channels: tuple[int, ...] = option((), "rfi", "channels always masked (file order)")
    zero_dm: bool = option(False, "rfi", "subtract the zero-DM series before dedispersion")
    clip_pixels: float = option(6.0, "rfi", "hold normalised samples within this many sigmas "
                                "(0: off; held samples reach the sub-band kernel as 8-bit "
                                "integers, 2x faster)", unit="sigma", ge=0,
                                allow_inf_nan=False)  # fmt: skip
    clip_impulses: float = option(10.0, "rfi", "blank broadband impulses above this many "
                                  "sigmas of the zero-DM series (0: off)", unit="sigma", ge=0,
                                  allow_inf_nan=False)  # fmt: skip
    norm_method: NormMethod = option("mad", "rfi", "robust estimator of each channel's noise")
    baseline_s: float = option(2.0, "rfi", "running-median baseline window", unit="s", gt=0)

    # -- detection
    detector: Detector = option("classical", "detection", "boxcar search, neural detector, or "
                                "both")  # fmt: skip
    snr_threshold: float = option(6.5, "detection", "boxcar S/N threshold (Heimdall "
                                  "convention)", gt=0)  # fmt: skip
    max_width_samples: int = option(64, "detection", "widest boxcar (widths spaced by "
                                    "sqrt(2))", unit="samples", ge=1)  # fmt: skip
    search_subbands: int = option(1, "detection", "also search this many equal sub-bands on "
                                  "their own (band-limited bursts; threshold raised for the "
                                  "extra trials; 1: full band only)", ge=1, le=64)  # fmt: skip
    detector_subbands: int = option(1, "detection", "the neural detector also sees this many "
                                    "sub-bands' DM-time data and keeps its peaks at their "
                                    "sub-band S/N (1: full band only)", ge=1, le=64)  # fmt: skip
    detector_threshold: float = option(0.2, "detection", "neural detector heatmap score cut",
                                       ge=0, le=1)  # fmt: skip
    ml_min_snr: float = option(6.0, "detection", "boxcar S/N floor of neural detections", ge=0)
    detector_faint_threshold: float = option(0.65, "detection", "neural detector score needed "
                                             "below the boxcar S/N threshold", ge=0,
                                             le=1)  # fmt: skip
    time_link: int = option(8, "detection", "clustering link in time", unit="samples", ge=0)
    dm_link: int = option(20, "detection", "clustering link in DM", unit="DM trials", ge=0)
    width_link: int = option(3, "detection", "clustering link in width", unit="log2 samples",
                             ge=0)  # fmt: skip

    # -- products
    classify: bool = option(True, "products", "score every candidate with the burst classifier")
    classifier: str | None = option(None, "products", "classifier model: an ONNX file or a "
                                    "folder with classifier.onnx and manifest.json, e.g. one "
                                    "retrained on labels (default: the shipped model)")  # fmt: skip
    classifier_threshold: float = option(0.5, "products", "classifier probability from which a "
                                         "candidate is a burst (is_burst)", ge=0,
                                         le=1)  # fmt: skip
    write_h5: bool = option(True, "products", "write FETCH .h5 candidate files")
    h5_for: Literal["bursts", "all"] = option(
        "bursts", "products", "which candidates get .h5 files: those the classifier calls "
        "bursts, or all (to re-classify every one elsewhere)")  # fmt: skip
    write_plots: bool = option(True, "products", "write PNGs of the candidates the classifier "
                               "calls bursts")  # fmt: skip
    max_outputs: int = option(50, "products", "cap on .h5 files and PNGs per observation "
                              "(brightest first)", ge=0)  # fmt: skip

    # -- execution
    block_size: int | None = option(None, "execution", "new samples per block (default: from "
                                    "the memory budget)", unit="samples", gt=0)  # fmt: skip
    memory_budget_mib: float = option(1024.0, "execution", "memory the block buffers may use",
                                      unit="MiB", ge=64)  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _prototype_is_brute_force(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("dedisp_mode") == "prototype":
            return {**values, "algorithm": "brute"}  # the prototype has one algorithm
        return values

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        problems = []
        if self.dm_max < self.dm_min:
            problems.append(f"DM range {self.dm_min}..{self.dm_max} pc cm^-3 (dm_max < dm_min)")
        if self.search_subbands > 1 and self.detector == "ml":
            problems.append("search_subbands needs the classical search (detector "
                            "'classical' or 'both')")  # fmt: skip
        if self.detector_subbands > 1 and self.detector == "classical":
            problems.append("detector_subbands needs the neural detector (detector 'ml' or "
                            "'both')")  # fmt: skip
        if min(self.search_subbands, self.detector_subbands) > 1 and (
            self.search_subbands != self.detector_subbands
        ):
            problems.append(f"search_subbands = {self.search_subbands} and "
                            f"detector_subbands = {self.detector_subbands} must agree "
                            "(one split of the band)")  # fmt: skip
        if self.decimate and self.dedisp_mode != "production":
            problems.append("decimate needs dedisp_mode 'production' (the prototype ignores it)")
        if problems:
            raise ValueError("; ".join(problems))
        return self

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

    def replace(self, **changes: Any) -> SearchConfig:
        """A copy with ``changes``, validated again."""
        return type(self)(**{**self.model_dump(), **changes})


class SearchOptions(SearchConfig):
    """A search's options and how it is run: what ``drafts search``, the flows and the
    deployments take (:meth:`config` gives the search's own part)."""

    max_workers: int = option(2, "execution", "segments of blocks searched concurrently on "
                              "Dask", ge=1, le=64)  # fmt: skip
    trace_memory: bool = option(False, "execution", "tracemalloc peaks per stage in perf.json")
    keep_intermediates: bool = option(False, "execution", "keep OUT/work (per-segment giants, "
                                      "cutouts) after success")  # fmt: skip

    def config(self) -> SearchConfig:
        """The search's configuration (without how it is run)."""
        return SearchConfig(**self.model_dump(include=set(SearchConfig.model_fields)))
