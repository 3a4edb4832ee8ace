"""The search pipeline as stage functions: plan → blocks → merge → classify → write.

The Prefect flows wrap each stage in a task; stages exchange file paths and small,
picklable metadata (:class:`SearchConfig`, :class:`SearchPlan`), never big arrays.
:func:`search_observation` runs the same stages in sequence without Prefect.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from drafts_ops.dedisp.modes import Backend, Mode
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.detect.candidates import Candidate, candidates_from_clusters
from drafts_ops.detect.cluster import ClusterLinks, merge_blocks, merge_sidelobes
from drafts_ops.detect.preprocess import (
    NormMethod,
    auto_mask,
    decimate_frequency,
    decimate_mask,
    decimate_time,
    preprocess_block,
    static_mask,
)
from drafts_ops.detect.single_pulse import Giants, block_snr, giants_above, giants_at
from drafts_ops.errors import ParameterError
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header

Detector = Literal["classical", "ml", "both"]

PathLike = str | Path


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """Every parameter of a search (validated; frozen; JSON-friendly via :meth:`to_dict`).

    Attributes
    ----------
    dm_min, dm_max : float
        DM range, pc cm^-3.
    dm_step : float or None
        Fixed DM step (pc cm^-3); ``None`` uses the tolerance rule with ``dm_tol``.
    dm_tol : float
        Allowed growth of the effective width between DM trials (dedisp / Heimdall).
    dedisp_mode : "prototype" | "production"
        Which dedispersion implementation runs.
    backend : "cpu" | "cuda"
        Where dedispersion runs.
    algorithm : str
        Dedispersion algorithm of the production operator (checked by the operator; not
        used by the prototype).
    detector : "classical" | "ml" | "both"
        Boxcar search, the neural detector, or both (then classified by the classifier).
    block_size : int
        New (dedispersed) samples per block; blocks overlap by the maximum delay.
    snr_threshold : float
        Boxcar S/N threshold (Heimdall convention).
    max_width_samples : int
        Widest boxcar (samples); widths 1, 2, 4, ... up to it.
    baseline_s : float
        Running-median baseline window, s.
    norm_method : "mad" | "iqr"
        Robust noise estimator for channels and dedispersed series.
    mask_channels : tuple of int
        Channels always masked (file order).
    auto_mask : bool
        Mask channels whose statistics are outliers (see ``preprocess.auto_mask``).
    mask_threshold : float
        Outlier threshold of the automatic mask, robust sigmas.
    zero_dm : bool
        Subtract the zero-DM series before dedispersion.
    time_decimation, freq_decimation : int
        Average this many samples / channels before searching.
    decimate : bool
        Dedisperse each DM trial at its Heimdall / DDplan time resolution
        (``DMPlan.from_header(..., decimate=True)``; production mode only). The boxcar
        search scales decimated rows so that their S/N keeps the white-noise convention.
    time_link, dm_link, width_link : int
        Clustering linking lengths (samples, DM trials, log2 width).
    detector_threshold : float
        Minimum neural-detector heatmap score (0..1) of a detection.
    ml_min_snr : float
        Neural-detector peaks whose best boxcar S/N (within 2 samples and one DM trial)
        is below this are dropped: on noise the detector fires at S/N 1-5, and the
        classifier passes some of those (``drafts evaluate search`` measured ~4 per
        minute before this floor).
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
    dm_max: float = 1000.0
    dm_step: float | None = None
    dm_tol: float = 1.25
    dedisp_mode: Mode = "prototype"
    algorithm: str = "brute"
    backend: Backend = "cpu"
    detector: Detector = "classical"
    block_size: int = 16384
    snr_threshold: float = 6.5
    max_width_samples: int = 64
    baseline_s: float = 2.0
    norm_method: NormMethod = "mad"
    mask_channels: tuple[int, ...] = ()
    auto_mask: bool = True
    mask_threshold: float = 5.0
    zero_dm: bool = False
    time_decimation: int = 1
    freq_decimation: int = 1
    decimate: bool = False
    time_link: int = 8
    dm_link: int = 20
    width_link: int = 3
    detector_threshold: float = 0.5
    ml_min_snr: float = 5.0
    classify: bool = True
    classifier_threshold: float = 0.5
    write_h5: bool = True
    write_plots: bool = True
    max_outputs: int = 50

    def __post_init__(self) -> None:
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
        for name in ("block_size", "max_width_samples", "time_decimation", "freq_decimation"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} = {getattr(self, name)} (must be >= 1)")
        if not (self.snr_threshold > 0 and self.baseline_s > 0 and self.ml_min_snr >= 0):
            problems.append("snr_threshold and baseline_s must be positive, ml_min_snr >= 0")
        for name in ("detector_threshold", "classifier_threshold"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} = {getattr(self, name)} (must be in 0..1)")
        problems += [
            text
            for bad, text in (
                (self.decimate and self.dedisp_mode != "production",
                 "decimate needs dedisp_mode 'production' (the prototype ignores it)"),
                (self.max_outputs < 0, f"max_outputs = {self.max_outputs}"),
            )
            if bad
        ]  # fmt: skip
        if problems:
            raise ParameterError("bad search configuration: " + "; ".join(problems))

    @property
    def links(self) -> ClusterLinks:
        return ClusterLinks(self.time_link, self.dm_link, self.width_link)

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
    ``[read_start, read_stop)`` (padding for boxcars plus the maximum delay)."""

    index: int
    start: int
    stop: int
    read_start: int
    read_stop: int


@dataclass(frozen=True, kw_only=True)
class SearchPlan:
    """Everything the stages need to know about one observation's search (small, picklable).

    ``header`` describes the searched data (after decimation), ``raw_header`` the file.
    """

    path: str
    config: SearchConfig
    raw_header: Header
    header: Header
    dms: tuple[float, ...]
    max_delay: int
    blocks: tuple[BlockRange, ...]
    decimation: tuple[int, ...] = ()

    def dm_plan(self) -> DMPlan:
        """The DM plan of the searched data (delays rebuilt from the trials)."""
        factors = np.asarray(self.decimation, np.int32) if self.decimation else None
        return DMPlan.build(
            np.asarray(self.dms), self.header.chan_freqs, self.header.tsamp, factors
        )

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
            "nblocks": len(self.blocks),
            "searched_samples": sum(b.stop - b.start for b in self.blocks),
        }


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """What :func:`search_observation` returns: candidates, files written, stage times (s)."""

    candidates: list[Candidate]
    outputs: dict[str, Path]
    plan: SearchPlan
    timings: dict[str, float] = field(default_factory=dict)


# -- stages ------------------------------------------------------------------------------


def plan_search(path: PathLike, config: SearchConfig) -> SearchPlan:
    """Read the header, build the DM plan and split the observation into blocks."""
    with open_observation(path) as reader:
        raw = reader.header
    header = _searched_header(raw, config)
    plan = DMPlan.from_header(
        header,
        config.dm_min,
        config.dm_max,
        config.dm_step,
        dm_tol=config.dm_tol,
        decimate=config.decimate,
    )
    end = header.nsamples - plan.max_delay  # last sample dedispersable at every DM
    if end <= 0:
        raise ParameterError(
            f"{path}: {header.tobs:.3f} s of data is shorter than the dispersion delay "
            f"{plan.max_delay * header.tsamp:.3f} s at DM {plan.dms[-1]:.1f}; lower dm_max"
        )
    pad = config.max_width_samples + config.time_link
    blocks = []
    for index, start in enumerate(range(0, end, config.block_size)):
        stop = min(start + config.block_size, end)
        read_start = max(start - pad, 0)
        read_stop = min(stop + pad, end) + plan.max_delay
        blocks.append(BlockRange(index, start, stop, read_start, read_stop))
    return SearchPlan(
        path=str(path),
        config=config,
        raw_header=raw,
        header=header,
        dms=tuple(float(d) for d in plan.dms),
        max_delay=plan.max_delay,
        blocks=tuple(blocks),
        decimation=tuple(int(f) for f in plan.decimation) if config.decimate else (),
    )


def process_block(path: PathLike, plan: SearchPlan, block_index: int, work_dir: PathLike) -> Path:
    """Search one block: read, preprocess, dedisperse, boxcar search (and the neural
    detector when configured). Writes the block's giants to ``work_dir`` and returns the path.
    """
    cfg = plan.config
    block = plan.blocks[block_index]
    data = _read_searched(path, plan, block.read_start, block.read_stop)
    mask = static_mask(plan.raw_header.nchans, cfg.mask_channels)
    if cfg.freq_decimation > 1:
        mask = decimate_mask(mask, cfg.freq_decimation)
    clean, _ = preprocess_block(
        data,
        method=cfg.norm_method,
        mask=mask,
        auto=cfg.auto_mask,
        threshold=cfg.mask_threshold,
        zero_dm=cfg.zero_dm,
    )
    dm_plan = plan.dm_plan()
    dm_time = _dedisperse(clean, dm_plan, cfg)
    keep = (block.start - block.read_start, block.stop - block.read_start)
    baseline = max(round(cfg.baseline_s / plan.header.tsamp), 4 * cfg.max_width_samples)
    snr, width = block_snr(
        dm_time,
        max_width=cfg.max_width_samples,
        baseline_window=baseline,
        method=cfg.norm_method,
        decimation=dm_plan.decimation if cfg.decimate else None,
    )
    parts = []
    if cfg.detector in ("classical", "both"):
        parts.append(giants_above(snr, width, cfg.snr_threshold, sample_offset=block.read_start,
                                  keep=keep))  # fmt: skip
    if cfg.detector in ("ml", "both"):
        peaks = _load_detector().detect(dm_time, threshold=cfg.detector_threshold)
        dms = np.array([p.dm_index for p in peaks], np.float64)
        cols = np.array([p.sample for p in peaks], np.float64)
        owned = (cols >= keep[0] - 0.5) & (cols < keep[1] - 0.5)
        scores = np.array([p.score for p in peaks], np.float32)[owned]
        ml = giants_at(snr, width, dms[owned], cols[owned], scores,
                       sample_offset=block.read_start)  # fmt: skip
        parts.append(ml.select(ml.snr >= cfg.ml_min_snr))
    return Giants.concatenate(parts).save(Path(work_dir) / f"block_{block_index:05d}.npz")


def merge_block_results(paths: Sequence[PathLike], plan: SearchPlan) -> list[Candidate]:
    """Cluster the giants of all blocks together and fold bow-tie sidelobes into their
    burst: one candidate per burst, brightest first."""
    parts = [Giants.load(p) for p in paths]
    clusters = merge_blocks(parts, plan.config.links)
    dms = np.asarray(plan.dms)
    clusters = merge_sidelobes(clusters, dms, plan.header.chan_freqs, plan.header.tsamp)
    return candidates_from_clusters(
        clusters,
        dms,
        plan.header.tsamp,
        file=plan.path,
        beam=plan.raw_header.ibeam,
    )


def classify_candidates(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, *, classifier: Any = None
) -> list[Candidate]:
    """Attach the classifier's burst probability to each candidate (any detector).

    With ``config.classify`` off the candidates are returned unchanged. ``classifier`` is
    any object with ``predict(freq_time, dm_time) -> float`` (default: the shipped model
    from ``drafts_ops.ml.inference.load_classifier()``).
    """
    if not plan.config.classify or not candidates:
        return list(candidates)
    if classifier is None:
        from drafts_ops.ml.inference import load_classifier

        classifier = load_classifier()
    out = []
    with open_observation(path) as reader:
        for cand in candidates:
            ft, dt = candidate_cutouts(reader, plan, cand)
            out.append(cand.replace(classifier_prob=float(classifier.predict(ft, dt))))
    return out


def write_outputs(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, out_dir: PathLike
) -> dict[str, Path]:
    """Write ``candidates.csv``, ``<stem>.cand`` and, for the first ``max_outputs``
    candidates (brightest first), FETCH ``h5/<id>.h5`` and ``plots/<id>.png``.

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
    from drafts_ops.detect.plots import plot_candidate

    raw = plan.raw_header
    with open_observation(path) as reader:
        for i, cand in enumerate(chosen):
            ft, dt = candidate_cutouts(reader, plan, cand)
            name = fetch_name(cand, raw)
            if cfg.write_h5:
                outputs[f"h5:{i}"] = write_fetch_h5(
                    cand, raw, ft, dt, out_dir / "h5" / f"{name}.h5"
                )
            if cfg.write_plots:
                outputs[f"png:{i}"] = plot_candidate(
                    cand, ft, dt, tsamp=raw.tsamp, fmax_mhz=raw.fmax, fmin_mhz=raw.fmin,
                    path=out_dir / "plots" / f"{name}.png",
                )  # fmt: skip
    return outputs


def search_observation(
    path: PathLike, out_dir: PathLike, config: SearchConfig | None = None
) -> SearchResult:
    """Run every stage in sequence (the non-Prefect path); block files go to ``out_dir/work``."""
    config = config or SearchConfig()
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = timings.get(stage, 0.0) + now - clock
        clock = now

    plan = plan_search(path, config)
    lap("plan")
    work = Path(out_dir) / "work"
    paths = [process_block(path, plan, b.index, work) for b in plan.blocks]
    lap("blocks")
    candidates = merge_block_results(paths, plan)
    lap("merge")
    candidates = classify_candidates(candidates, path, plan)
    lap("classify")
    outputs = write_outputs(candidates, path, plan, out_dir)
    lap("write")
    return SearchResult(candidates=candidates, outputs=outputs, plan=plan, timings=timings)


# -- helpers -----------------------------------------------------------------------------


def candidate_cutouts(reader, plan: SearchPlan, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
    """FETCH cutouts ``(freq_time, dm_time)`` of ``cand`` at the file's full resolution."""
    from drafts_ops.detect.cutouts import cutout_span, dm_time_cutout, freq_time_cutout

    raw, cfg = plan.raw_header, plan.config
    tf = cfg.time_decimation
    sample = cand.sample * tf + tf // 2
    width = cand.width_samples * tf
    start, stop = cutout_span(raw.chan_freqs, raw.tsamp, cand.dm, sample, width)
    lo = max(start, 0)
    data = reader.read_block(lo, stop - lo)
    mask = static_mask(raw.nchans, cfg.mask_channels)
    if cfg.auto_mask and data.shape[1] > 1:
        mask |= auto_mask(data, cfg.mask_threshold)
    args = (data, raw.chan_freqs, raw.tsamp, cand.dm, sample - lo, width)
    return freq_time_cutout(*args, chan_mask=mask), dm_time_cutout(*args, chan_mask=mask)


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


def _read_searched(path: PathLike, plan: SearchPlan, start: int, stop: int) -> np.ndarray:
    """Searched samples ``[start, stop)`` (decimated as configured), float32 ``[nchan, n]``."""
    cfg, raw = plan.config, plan.raw_header
    tf = cfg.time_decimation
    with open_observation(path) as reader:
        data = reader.read_block(start * tf, (stop - start) * tf)
    if tf > 1:
        data, _ = decimate_time(data, raw, tf)
    if cfg.freq_decimation > 1:
        data, _ = decimate_frequency(data, raw, cfg.freq_decimation)
    return data


def _dedisperse(data: np.ndarray, dm_plan: DMPlan, config: SearchConfig) -> np.ndarray:
    """The one call into dedispersion: the operator registry's dispatch."""
    from drafts_ops.dedisp import dedisperse

    return dedisperse(
        data,
        dm_plan,
        mode=config.dedisp_mode,
        algorithm=config.algorithm,
        backend=config.backend,
    )


def _load_detector():
    """The neural detector: ``.detect(dm_time [ndm, nt], threshold=) -> peaks`` with
    ``dm_index``, ``sample`` (fractional, in the block's coordinates) and ``score``."""
    from drafts_ops.ml.inference import load_detector

    return load_detector()
