"""Classifier examples harvested from the search itself, in the survey bands.

The classifier sees, in a survey, the cutouts :func:`drafts_ops.search.make_cutouts`
makes for the candidates the search finds. So its training data are exactly those: seeded
observations in the survey bands (:data:`HARVEST_BANDS`, each with its decimation), with
bursts and every RFI kind in the same files
(:func:`drafts_ops.evaluation.setup.observation_configs`), searched by
:func:`~drafts_ops.search.run_search` with the classical detector and its sub-band search
(:data:`HARVEST_SEARCH`) to DM 3000. Each candidate's saved cutouts become one example,
labelled a burst when it matches an injected burst
(:func:`drafts_ops.evaluation.matching.match_candidates`) and otherwise a negative of its
cause (burst at an offset DM, burst fragment / sidelobe, impulsive, drifting, persistent
RFI, noise; :func:`drafts_ops.evaluation.causes.fp_causes`).

Training uses seeds 0, 1, ...; :mod:`~drafts_ops.training.classifier_validation` uses a
held-out seed, and ``drafts evaluate search`` another one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.evaluation.causes import fp_causes
from drafts_ops.evaluation.matching import Band, match_candidates, truth_bursts
from drafts_ops.evaluation.search import search_for_evaluation
from drafts_ops.evaluation.setup import EvaluationSetup, evaluation_observations
from drafts_ops.ml import inputs as pp
from drafts_ops.ml.inference import DETECTOR_SCALES
from drafts_ops.search import WORK_DIR, SearchConfig, load_cutouts, plan_search, search_segment
from drafts_ops.simulate import write_simulation
from drafts_ops.simulate.bands import SURVEY_BANDS

T = TypeVar("T")

#: Survey bands of the harvested observations (interleaved, so every band is in any pool).
HARVEST_BANDS: tuple[str, ...] = ("gbt", "fast", "demo", "fast-raw")
#: Burst-bearing span of a harvested file, s.
HARVEST_FILE_S = 20.0
#: Search options of a harvest beyond the band's defaults: the sub-band search too, so the
#: classifier sees the faint band-limited candidates (and sub-band RFI) it finds, besides
#: every full-band candidate.
HARVEST_SEARCH = {"search_subbands": 4}


def cached(
    path: Path | None, compute: Callable[[], T], load: Callable[[Path], T],
    save: Callable[[T, Path], object], *, log: Callable[[str], None] = print, what: str = "cache",
) -> T:  # fmt: skip
    """``compute()``, kept at ``path`` (``save``) and read back (``load``) by a later call
    that finds it there (``log``: "<what>: reading <path>"); ``path`` ``None``: no cache.
    The harvests take tens of minutes."""
    if path is not None and path.exists():
        log(f"{what}: reading {path}")
        return load(path)
    result = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save(result, path)
    return result


@dataclass
class CandidatePool:
    """Preprocessed classifier inputs of harvested candidates and what each one was.

    ``freq_time``/``dm_time``: ``[n, 64, 64]`` (:mod:`drafts_ops.ml.inputs`);
    ``labels``: 1 for a burst; ``causes``: ``"burst"`` or the negative's cause; ``snr``:
    the candidate's search S/N; ``injected_snr``: the matched burst's (NaN for negatives);
    ``bands``: the survey band of each.
    """

    freq_time: np.ndarray
    dm_time: np.ndarray
    labels: np.ndarray
    causes: list[str] = field(default_factory=list)
    snr: np.ndarray = field(default_factory=lambda: np.empty(0))
    injected_snr: np.ndarray = field(default_factory=lambda: np.empty(0))
    bands: list[str] = field(default_factory=list)
    minutes: float = 0.0
    files: int = 0

    def __len__(self) -> int:
        return int(self.labels.size)

    def save(self, path: str | Path) -> Path:
        """Write the pool to ``path`` (``.npz``, atomically)."""

        with atomic_path(Path(path)) as tmp, tmp.open("wb") as fh:
            np.savez(fh, freq_time=self.freq_time, dm_time=self.dm_time, labels=self.labels,
                     causes=np.array(self.causes, dtype=str), snr=self.snr,
                     injected_snr=self.injected_snr, bands=np.array(self.bands, dtype=str),
                     minutes=self.minutes, files=self.files)  # fmt: skip
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> CandidatePool:
        """A pool written by :meth:`save`."""
        with np.load(path) as npz:
            return cls(
                freq_time=npz["freq_time"], dm_time=npz["dm_time"], labels=npz["labels"],
                causes=npz["causes"].tolist(), snr=npz["snr"],
                injected_snr=npz["injected_snr"], bands=npz["bands"].tolist(),
                minutes=float(npz["minutes"]), files=int(npz["files"]),
            )  # fmt: skip

    @classmethod
    def concatenate(cls, parts: Sequence[CandidatePool]) -> CandidatePool:
        empty = np.empty((0, pp.CLASSIFIER_SIZE, pp.CLASSIFIER_SIZE), np.float32)
        return cls(
            freq_time=np.concatenate([empty, *(p.freq_time for p in parts)]),
            dm_time=np.concatenate([empty, *(p.dm_time for p in parts)]),
            labels=np.concatenate([np.empty(0, np.float32), *(p.labels for p in parts)]),
            causes=[c for p in parts for c in p.causes],
            snr=np.concatenate([np.empty(0), *(p.snr for p in parts)]),
            injected_snr=np.concatenate([np.empty(0), *(p.injected_snr for p in parts)]),
            bands=[b for p in parts for b in p.bands],
            minutes=sum(p.minutes for p in parts),
            files=sum(p.files for p in parts),
        )


def harvest_setup(seed: int, per_bin: int = 100):
    """The :class:`~drafts_ops.evaluation.setup.EvaluationSetup` of a harvest: the evaluation's
    operating point (bursts and RFI in the same files) in :data:`HARVEST_BANDS`."""

    return EvaluationSetup(seed=seed, per_bin=per_bin, bands=HARVEST_BANDS,
                           file_s=HARVEST_FILE_S)  # fmt: skip


def interleaved_observations(setup) -> list:
    """The setup's (band, simulation) pairs, alternating between bands."""

    by_band: dict[str, list] = {}
    for band, config in evaluation_observations(setup):
        by_band.setdefault(band.name, []).append((band, config))
    rounds = max(len(v) for v in by_band.values())
    return [obs[k] for k in range(rounds) for obs in by_band.values() if k < len(obs)]


def harvest_file(
    path: Path, band, work: Path, dm_max: float, options: dict | None = None
) -> CandidatePool:
    """Search one simulated file (``options``: other ``SearchConfig`` fields) and turn each
    candidate's cutouts into an example."""

    out = work / f"{path.stem}-harvest"
    result = search_for_evaluation(path, out, band, "classical", dm_max, options,
                                   keep_intermediates=True)  # fmt: skip
    cands, plan = result.candidates, result.plan
    ft, dt = load_cutouts(out / WORK_DIR / "cutouts.npz" if cands else None)
    truth, rfi = truth_bursts(path)
    b = Band.of(plan.header)
    matches = match_candidates(truth, cands, b, np.asarray(plan.dms))
    owner = matches.owner
    false = np.flatnonzero(owner < 0)
    causes = ["burst"] * len(cands)
    for j, cause in zip(false, fp_causes([cands[j] for j in false], truth, matches.found, rfi, b),
                        strict=True):  # fmt: skip
        causes[j] = cause
    shutil.rmtree(out, ignore_errors=True)
    n = len(cands)
    shape = (n, pp.CLASSIFIER_SIZE, pp.CLASSIFIER_SIZE)
    return CandidatePool(
        freq_time=np.stack([pp.prepare_freq_time(x) for x in ft]) if n else np.empty(shape),
        dm_time=np.stack([pp.prepare_dm_time_cutout(x) for x in dt]) if n else np.empty(shape),
        labels=(owner >= 0).astype(np.float32),
        causes=causes,
        snr=np.array([c.snr for c in cands], np.float64),
        injected_snr=np.array([truth[o].snr if o >= 0 else np.nan for o in owner], np.float64),
        bands=[band.name] * n,
        minutes=plan.summary()["searched_samples"] * plan.header.tsamp / 60.0,
        files=1,
    )


def band_decimation() -> dict[str, list[int]]:
    """``{band: [time, frequency]}`` decimation of each decimated survey band, as the
    harvests search it."""

    return {name: [b.time_decimation, b.freq_decimation] for name, b in SURVEY_BANDS.items()
            if b.time_decimation * b.freq_decimation > 1}  # fmt: skip


def _bands_tag() -> str:
    """Cache-name part for the bands' decimation (a cached pool searched at another
    decimation must not be read back)."""
    return "".join(f"-{name}{t}x{f}" for name, (t, f) in band_decimation().items())


def harvest(
    seed: int,
    examples: int,
    *,
    per_bin: int = 100,
    work_dir: str | Path | None = None,
    cache: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> CandidatePool:
    """At least ``examples`` harvested candidates (fewer if the setup's files run out),
    from the observations of :func:`harvest_setup` ``(seed, per_bin)`` in order.

    Each file is searched with :data:`HARVEST_SEARCH`. ``cache``: a folder where the pool
    is kept (``harvest-<seed>-<examples>-<per_bin>-<options>.npz``) and read back by a
    later call with the same seed and size.
    """
    tag = "-".join(f"{k}{v}" for k, v in sorted(HARVEST_SEARCH.items())) + _bands_tag()
    path = Path(cache) / f"harvest-{seed}-{examples}-{per_bin}-{tag}.npz" if cache else None
    return cached(path, lambda: _harvest(seed, examples, per_bin, work_dir, log),
                  CandidatePool.load, CandidatePool.save, log=log, what="harvest")  # fmt: skip


def _harvest(
    seed: int, examples: int, per_bin: int, work_dir: str | Path | None,
    log: Callable[[str], None],
) -> CandidatePool:  # fmt: skip

    setup = harvest_setup(seed, per_bin)
    observations = interleaved_observations(setup)
    parts: list[CandidatePool] = []
    count, t0 = 0, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="drafts-harvest-") as tmp:
        work = Path(work_dir) if work_dir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for k, (band, config) in enumerate(observations):
            if count >= examples:
                break
            path = write_simulation(work / f"harvest_{seed}_{k:04d}.fil", config)
            part = harvest_file(path, band, work, setup.dm_max, HARVEST_SEARCH)
            path.unlink()
            path.with_name(path.stem + ".truth.csv").unlink(missing_ok=True)
            parts.append(part)
            count += len(part)
            log(f"harvest {k + 1}/{len(observations)} ({band.name}): {len(part)} candidates, "
                f"{int(part.labels.sum())} bursts; {count}/{examples} in "
                f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    return CandidatePool.concatenate(parts)


def balanced_indices(labels: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` example indices, half bursts and half negatives (drawn with replacement)."""
    pos, neg = np.flatnonzero(labels > 0.5), np.flatnonzero(labels <= 0.5)
    if pos.size == 0 or neg.size == 0:
        return rng.integers(0, labels.size, size)
    half = size // 2
    return np.concatenate([rng.choice(pos, half), rng.choice(neg, size - half)])


# -- detector images harvested from the search's own DM-time data ---------------------------

#: Seeds of the detector's survey images (the classifier's harvest uses 0, 1, ...).
DETECTOR_HARVEST_SEEDS: tuple[int, ...] = (101, 102, 103, 104, 105, 106)
#: Bursts per S/N bin per band in each seed's observations.
DETECTOR_HARVEST_PER_BIN = 10
#: Random (not burst-centred) crops per burst-centred crop.
DETECTOR_RANDOM_CROPS = 0.5
#: Sub-bands of the second view of every harvested file: the detector's input in a search
#: with ``--detector-subbands`` (crops of it as many as of the full band's).
DETECTOR_HARVEST_SUBBANDS = 4


@dataclass
class DetectorImages:
    """Detector training images ``[n, 64, columns]`` (preprocessed), the burst centres in
    each (detector-pixel (row, col)), the survey band each comes from and the wall-clock
    seconds it took to make them (kept in the cache, so a run that reads them back can
    report what building them costs)."""

    images: np.ndarray
    centres: list[list[tuple[float, float]]] = field(default_factory=list)
    bands: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def save(self, path: str | Path) -> Path:
        """Write to ``path`` (``.npz``, atomically)."""

        with atomic_path(Path(path)) as tmp, tmp.open("wb") as fh:
            np.savez(fh, images=self.images, centres=json.dumps(self.centres),
                     bands=np.array(self.bands, dtype=str), seconds=self.seconds)  # fmt: skip
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> DetectorImages:
        """Images written by :meth:`save`."""

        with np.load(path) as npz:
            centres = [[tuple(c) for c in crop] for crop in json.loads(str(npz["centres"]))]
            seconds = float(npz["seconds"]) if "seconds" in npz.files else 0.0
            return cls(npz["images"], centres, npz["bands"].tolist(), seconds)

    @classmethod
    def concatenate(cls, parts: Sequence[DetectorImages], columns: int) -> DetectorImages:
        empty = np.empty((0, pp.DETECTOR_ROWS, columns), np.float32)
        centres = [c for p in parts for c in p.centres]
        bands = [b for p in parts for b in p.bands]
        return cls(np.concatenate([empty, *(p.images for p in parts)]), centres, bands)


def pooled_dm_time(
    path: Path, band, work: Path, dm_max: float, *, subbands: int = 1
) -> tuple[dict[str, np.ndarray], object]:
    """The search's DM-time data of a file (its default options in ``band``, to
    ``dm_max``), each column's DM axis max-pooled to the detector's 64 rows as inference
    does (:func:`~drafts_ops.ml.inputs.resample_axis`), and the plan. Pooling rows
    commutes with cropping columns, so crops of it are exactly the detector's input rows.

    Returns ``{"full": [64, nsamples]}`` and, with ``subbands > 1``, ``"sub<N>"``: the
    detector's input in a search with ``--detector-subbands N`` (the same rows raised to
    the sub-bands' where those are higher), from the same pass.
    """

    ml = {"detector": "both", "detector_subbands": subbands} if subbands > 1 else {}
    config = SearchConfig(dm_max=dm_max, classify=False, write_h5=False, write_plots=False,
                          auto_decimation=False, **band.search_options(), **ml)  # fmt: skip
    plan = plan_search(path, config)  # one DM-time array at one resolution, as inference sees
    views = {name: np.zeros((pp.DETECTOR_ROWS, plan.header.nsamples), np.float32)
             for name in ("full", *([f"sub{subbands}"] if ml else []))}  # fmt: skip

    def keep(block, dm_time: np.ndarray) -> None:
        n = dm_time.shape[1]
        views["full"][:, block.start : block.start + n] = pp.resample_axis(
            dm_time, pp.DETECTOR_ROWS, 0, "max"
        )

    def keep_rows(block, rows: np.ndarray) -> None:
        views[f"sub{subbands}"][:, block.start : block.start + rows.shape[1]] = rows

    search_segment(range(len(plan.blocks)), path, plan, work, on_dm_time=keep,
                   on_detector_rows=keep_rows if ml else None)  # fmt: skip
    return views, plan


def detector_crops(
    pooled: np.ndarray, centres: np.ndarray, rng: np.random.Generator, columns: int, *,
    random_crops: float = DETECTOR_RANDOM_CROPS, scales: Sequence[int] = (1,),
) -> tuple[np.ndarray, list[list[tuple[float, float]]]]:  # fmt: skip
    """Crops of ``columns`` detector columns from ``pooled`` ``[64, nt]``: one with each
    burst centre ``(row, col)`` (``col`` in samples) at a random place inside (16 columns
    from the edges), and ``random_crops`` per burst at random places; each crop at a
    time-averaging factor drawn from ``scales`` (those that fit), prepared as inference
    prepares it (:func:`~drafts_ops.ml.inputs.prepare_dm_time`), with every centre it
    holds in its own detector columns."""
    nt = pooled.shape[1]
    fitting = [f for f in scales if columns * f <= nt]
    if not fitting:
        return np.empty((0, pp.DETECTOR_ROWS, columns), np.float32), []
    n_random = round(random_crops * len(centres))
    factors = rng.choice(fitting, len(centres) + n_random)
    starts = [int(np.clip(col - f * rng.uniform(16, columns - 16), 0, nt - columns * f))
              for (_, col), f in zip(centres, factors[: len(centres)], strict=True)]  # fmt: skip
    starts += [int(rng.integers(0, nt - columns * f + 1)) for f in factors[len(centres) :]]
    samples = np.asarray(centres, np.float64).reshape(-1, 2)[:, 1]
    images, inside = [], []
    for start, f in zip(starts, factors, strict=True):
        images.append(pp.prepare_dm_time(pooled[:, start : start + columns * f], int(f)))
        _, cols = pp.input_to_detector_coords(0.0, samples - start, 1, int(f))
        inside.append([(float(r), float(c)) for (r, _), c in zip(centres, cols, strict=True)
                       if 0 <= c < columns])  # fmt: skip
    return np.stack(images), inside


def harvest_detector_images(
    seeds: Sequence[int] = DETECTOR_HARVEST_SEEDS, *, per_bin: int = DETECTOR_HARVEST_PER_BIN,
    columns: int = 192,
    bands: Sequence[str] = ("fast", "gbt", "fast-raw"), dm_max: float = 3000.0,
    subbands: int = DETECTOR_HARVEST_SUBBANDS,
    cache: str | Path | None = None, log: Callable[[str], None] = print,
) -> DetectorImages:  # fmt: skip
    """Detector images from the search's own DM-time data of seeded observations in the
    survey ``bands`` (the evaluation's operating point: bursts and every RFI kind in the
    same files, DM to 2900, band-limited and scattered bursts), burst-centred and random
    crops (:func:`detector_crops`) of the full band's rows and, with ``subbands > 1``, as
    many of the rows ``--detector-subbands`` gives the detector (band ``<band>-sub<N>``).
    ``cache``: a folder where they are kept and read back by a later call with the same
    seeds and sizes."""

    scales = "x".join(str(f) for f in DETECTOR_SCALES)
    views = f"-sub{subbands}" if subbands > 1 else ""
    name = (f"detector-{'-'.join(str(s) for s in seeds)}-{per_bin}-{columns}-t{scales}"
            f"{views}{_bands_tag()}.npz")  # fmt: skip
    return cached(Path(cache) / name if cache else None,
                  lambda: _harvest_detector_images(seeds, per_bin, columns, bands, dm_max,
                                                   DETECTOR_SCALES, subbands, log),
                  DetectorImages.load, DetectorImages.save, log=log,
                  what="detector harvest")  # fmt: skip


def _harvest_detector_images(  # noqa: PLR0917
    seeds: Sequence[int], per_bin: int, columns: int, bands: Sequence[str], dm_max: float,
    scales: Sequence[int], subbands: int, log: Callable[[str], None],
) -> DetectorImages:  # fmt: skip

    parts: list[DetectorImages] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="drafts-detector-") as tmp:
        work = Path(tmp)
        for seed in seeds:
            setup = EvaluationSetup(seed=seed, per_bin=per_bin, bands=tuple(bands),
                                    dm_max=dm_max)  # fmt: skip
            rng = np.random.default_rng(seed)
            for k, (band, config) in enumerate(evaluation_observations(setup)):
                path = write_simulation(work / f"det_{seed}_{k:03d}.fil", config)
                views, plan = pooled_dm_time(path, band, work / "search", dm_max,
                                             subbands=subbands)  # fmt: skip
                truth, _ = truth_bursts(path)
                dms = np.asarray(plan.dms)
                index = np.interp([b.dm for b in truth], dms, np.arange(dms.size))
                rows, cols = pp.input_to_detector_coords(
                    index, np.array([b.t_s / plan.header.tsamp for b in truth]), dms.size, 1
                )
                inside = [(r, c) for r, c, b in zip(rows, cols, truth, strict=True)
                          if b.dm <= dms[-1]]  # fmt: skip
                for view, pooled in views.items():
                    images, centres = detector_crops(pooled, np.array(inside), rng, columns,
                                                     scales=scales)  # fmt: skip
                    label = band.name if view == "full" else f"{band.name}-{view}"
                    parts.append(DetectorImages(images, centres, [label] * len(images)))
                path.unlink()
                path.with_name(path.stem + ".truth.csv").unlink(missing_ok=True)
                log(f"detector harvest seed {seed} file {k + 1} ({band.name}): "
                    f"{sum(len(p) for p in parts[-len(views):])} images, {len(inside)} bursts; "
                    f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    images = DetectorImages.concatenate(parts, columns)
    images.seconds = time.perf_counter() - t0
    return images
