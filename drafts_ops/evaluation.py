"""End-to-end evaluation of the search as a user runs it (``drafts evaluate search``).

Held-out simulated observations (a seed never used in training) go through
:func:`drafts_ops.pipeline.search_observation` exactly as ``drafts search`` runs them:

* **recall** — files with several bursts each (DM, width, scattering, spectrum drawn at
  random; injected S/N uniform within each bin of :data:`SNR_EDGES`, the same number per
  bin), searched with the classical detector and with ``both``; a burst is found when a
  candidate lies within the tolerances of :func:`match_window`, and found *after
  classification* when such a candidate has ``classifier_prob >= 0.5``;
* **false positives** — 60 s files of noise with every RFI kind (random strengths), where
  every candidate is false; counted per minute of searched data before and after
  classification, and attributed to the RFI that caused it when one is near.

The patch-level validation of the models themselves is :mod:`drafts_ops.ml.evaluate`
(whose S/N bins this module shares).
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.atomic import write_text_atomic
from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.candidates import Candidate
from drafts_ops.errors import ModelError, ParameterError
from drafts_ops.ml.evaluate import SNR_EDGES

#: Default seed of the evaluation (training uses 0, 1, ...; the model validation 20261130).
EVALUATION_SEED = 20_261_207
#: Configurations reported: (name, detector, after classification).
CONFIGURATIONS: tuple[tuple[str, str, bool], ...] = (
    ("classical", "classical", False),
    ("classical + classifier", "classical", True),
    ("both", "both", False),
    ("both + classifier", "both", True),
)
#: Smallest time tolerance of a match, samples.
MIN_TIME_TOL_SAMPLES = 4
#: Smallest DM tolerance of a match, in local DM-trial spacings.
MIN_DM_TOL_TRIALS = 2.0
#: Probability from which a candidate counts as a burst.
CLASSIFIER_THRESHOLD = 0.5
#: Target of issue 5: recall at injected S/N >= 8 and false positives per minute.
TARGET_RECALL, TARGET_FP_PER_MIN = 0.90, 1.0


@dataclass(frozen=True, kw_only=True)
class EvaluationSetup:
    """What is simulated and searched (seeded: the same setup gives the same numbers).

    Attributes
    ----------
    seed : int
        Seed of every random draw (bursts, RFI, noise).
    per_bin : int
        Injected bursts per S/N bin.
    noise_minutes : float
        Minutes of noise + RFI observations (60 s files) for the false-positive rate.
    nchans, fch1, foff, tsamp, nbits : int, MHz, MHz, s, bit
        Observation setup (default: as ``data/demo.fil``, 1200-1500 MHz, 512 us).
    spacing_s : float
        Time between bursts in a file, s (more than the largest dispersion sweep).
    bursts_per_file : int
        Bursts per simulated file.
    dm_range : (float, float)
        Injected DMs, pc cm^-3 (uniform).
    width_range_s : (float, float)
        Intrinsic FWHM, s (log-uniform).
    scattered_fraction, scattering_range_s
        Fraction of scattered bursts and their scattering time at the top of the band, s
        (log-uniform).
    spectral_index_range : (float, float)
        Power-law spectral index (uniform).
    band_limited_fraction, band_fwhm_range_mhz
        Fraction of band-limited bursts (Gaussian envelope centred in the band) and the
        envelope FWHM, MHz (uniform).
    dm_max : float
        Largest DM trial of the search, pc cm^-3.
    """

    seed: int = EVALUATION_SEED
    per_bin: int = 25
    noise_minutes: float = 5.0
    nchans: int = 256
    fch1: float = 1499.4140625
    foff: float = -1.171875
    tsamp: float = 512e-6
    nbits: int = 8
    spacing_s: float = 1.5
    bursts_per_file: int = 36
    dm_range: tuple[float, float] = (50.0, 1000.0)
    width_range_s: tuple[float, float] = (0.5e-3, 8e-3)
    scattered_fraction: float = 0.3
    scattering_range_s: tuple[float, float] = (0.5e-3, 4e-3)
    spectral_index_range: tuple[float, float] = (-3.0, 3.0)
    band_limited_fraction: float = 0.3
    band_fwhm_range_mhz: tuple[float, float] = (60.0, 200.0)
    dm_max: float = 1000.0

    def __post_init__(self) -> None:
        if self.per_bin < 0 or self.bursts_per_file < 1:
            raise ParameterError(
                f"per_bin = {self.per_bin} must be >= 0 and bursts_per_file "
                f"= {self.bursts_per_file} >= 1"
            )
        if not (self.noise_minutes >= 0 and math.isfinite(self.noise_minutes)):
            raise ParameterError(f"noise minutes = {self.noise_minutes} must be >= 0")
        if self.per_bin == 0 and self.noise_minutes == 0:
            raise ParameterError("nothing to evaluate: no bursts and no noise minutes")
        if not self.spacing_s > 0:
            raise ParameterError(f"burst spacing = {self.spacing_s} s must be positive")


# -- matching ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class InjectedBurst:
    """One injected burst as the truth table gives it (s, pc cm^-3, MHz)."""

    t_s: float
    dm: float
    snr: float
    width_s: float
    scattering_s: float = 0.0
    boxcar_width_s: float = 0.0
    band_centre_mhz: float | None = None
    band_fwhm_mhz: float | None = None

    @classmethod
    def from_truth_row(cls, row: dict[str, Any]) -> InjectedBurst:
        """From a ``kind == "burst"`` row of :func:`drafts_ops.simulate.read_truth`."""
        return cls(
            t_s=float(row["tcand_s"]),
            dm=float(row["dm"]),
            snr=float(row["snr"]),
            width_s=float(row["width_s"] or 0.0),
            scattering_s=float(row["scattering_s"] or 0.0),
            boxcar_width_s=float(row["boxcar_width_s"] or 0.0),
            band_centre_mhz=row.get("band_centre_mhz"),
            band_fwhm_mhz=row.get("band_fwhm_mhz"),
        )


@dataclass(frozen=True)
class Band:
    """What matching needs of an observation: sampling (s) and band edges (MHz)."""

    tsamp: float
    fmin_mhz: float
    fmax_mhz: float


@dataclass(frozen=True)
class MatchWindow:
    """Where a candidate of a burst may lie (see :func:`match_window`).

    ``t_tol`` (s) and ``dm_tol`` (pc cm^-3): tolerances; ``f_lo``, ``f_hi`` (MHz): the band
    in which the burst emits (half-power points of a band-limited burst, else the band).
    """

    t_tol: float
    dm_tol: float
    f_lo: float
    f_hi: float


def emission_band(burst: InjectedBurst, band: Band) -> tuple[float, float]:
    """Frequencies (MHz) where the burst emits: its envelope's half-power points inside the
    band (at least a quarter of the band wide), or the whole band."""
    lo, hi = band.fmin_mhz, band.fmax_mhz
    if burst.band_centre_mhz is None or burst.band_fwhm_mhz is None:
        return lo, hi
    half = burst.band_fwhm_mhz / 2.0
    f_lo = float(np.clip(burst.band_centre_mhz - half, lo, hi))
    f_hi = float(np.clip(burst.band_centre_mhz + half, lo, hi))
    quarter = (hi - lo) / 4.0
    if f_hi - f_lo < quarter:  # envelope mostly outside the band: its edge emits
        f_lo, f_hi = (lo, lo + quarter) if f_hi <= lo + quarter else (hi - quarter, hi)
    return f_lo, f_hi


def match_window(burst: InjectedBurst, band: Band, dm_trials: np.ndarray) -> MatchWindow:
    """Tolerances of a match with ``burst``.

    With ``w`` the effective width — the largest of the best boxcar and the intrinsic width
    plus the scattering time at the bottom of the emitting band — the time tolerance is
    ``max(w, 4 samples)`` and the DM tolerance the DM error that sweeps the emitting band
    by ``w`` (the S/N then drops by at most ~30 %), but at least two DM-trial spacings at
    the burst's DM.
    """
    f_lo, f_hi = emission_band(burst, band)
    scattering = burst.scattering_s * (band.fmax_mhz / f_lo) ** 4
    width = max(burst.boxcar_width_s, burst.width_s + scattering)
    t_tol = max(width, MIN_TIME_TOL_SAMPLES * band.tsamp)
    sweep_per_dm = float(dispersion_delay_s(1.0, f_lo, f_hi))
    trials = np.asarray(dm_trials, np.float64)
    step = 0.0
    if trials.size > 1:
        i = int(np.clip(np.searchsorted(trials, burst.dm), 1, trials.size - 1))
        step = float(trials[i] - trials[i - 1])
    return MatchWindow(t_tol, max(t_tol / sweep_per_dm, MIN_DM_TOL_TRIALS * step), f_lo, f_hi)


def match_distance(
    burst: InjectedBurst, window: MatchWindow, band: Band, t_s: np.ndarray, dm: np.ndarray
) -> np.ndarray:
    """Distance of candidates at ``(t_s, dm)`` from ``burst`` in units of the tolerances
    (a match is <= 1).

    A candidate at a DM off by ``d`` sees the burst's emission at frequency ``f`` shifted
    by ``-K d (f^-2 - f_top^-2)`` relative to the top of the band, where its time is
    referenced; so its time offset is measured from the interval these shifts span over
    the emitting band (a band-limited burst at the bottom of the band is found at a lower
    DM and a later time, or a higher DM and an earlier time).
    """
    d_dm = np.asarray(dm, np.float64) - burst.dm
    d_t = np.asarray(t_s, np.float64) - burst.t_s
    a = -d_dm * dispersion_delay_s(1.0, window.f_lo, band.fmax_mhz)
    b = -d_dm * dispersion_delay_s(1.0, window.f_hi, band.fmax_mhz)
    off = np.maximum(np.minimum(a, b) - d_t, 0.0) + np.maximum(d_t - np.maximum(a, b), 0.0)
    return np.maximum(off / window.t_tol, np.abs(d_dm) / window.dm_tol)


@dataclass(frozen=True)
class Matches:
    """Result of :func:`match_candidates`.

    ``owner[j]``: index of the burst candidate ``j`` was matched to (-1: unmatched);
    ``found[i]``: burst ``i`` has a candidate; ``found_classified[i]``: one of them has
    ``classifier_prob >= threshold``; ``best[i]``: index of its highest-S/N candidate (-1).
    """

    owner: np.ndarray
    found: np.ndarray
    found_classified: np.ndarray
    best: np.ndarray

    @property
    def unmatched(self) -> int:
        return int(np.sum(self.owner < 0))


def match_candidates(
    bursts: Sequence[InjectedBurst],
    candidates: Sequence[Candidate],
    band: Band,
    dm_trials: np.ndarray,
    *,
    threshold: float = CLASSIFIER_THRESHOLD,
) -> Matches:
    """Match candidates to injected bursts: each candidate to the burst of smallest
    :func:`match_distance`, when that is <= 1."""
    nb, nc = len(bursts), len(candidates)
    owner = np.full(nc, -1, np.int64)
    if nb and nc:
        t = np.array([c.tcand_s for c in candidates])
        dm = np.array([c.dm for c in candidates])
        dist = np.stack(
            [match_distance(b, match_window(b, band, dm_trials), band, t, dm) for b in bursts]
        )
        nearest = np.argmin(dist, axis=0)
        ok = dist[nearest, np.arange(nc)] <= 1.0
        owner[ok] = nearest[ok]
    prob = np.array([_prob(c) for c in candidates], np.float64)
    snr = np.array([c.snr for c in candidates], np.float64)
    found = np.zeros(nb, bool)
    found_classified = np.zeros(nb, bool)
    best = np.full(nb, -1, np.int64)
    for i in range(nb):
        mine = np.flatnonzero(owner == i)
        if mine.size:
            found[i] = True
            found_classified[i] = bool(np.any(prob[mine] >= threshold))
            best[i] = int(mine[np.argmax(snr[mine])])
    return Matches(owner, found, found_classified, best)


def _prob(cand: Candidate) -> float:
    return -1.0 if cand.classifier_prob is None else float(cand.classifier_prob)


# -- simulated observations --------------------------------------------------------------


def _sim_base(setup: EvaluationSetup) -> dict[str, Any]:
    return {
        "nchans": setup.nchans,
        "fch1": setup.fch1,
        "foff": setup.foff,
        "tsamp": setup.tsamp,
        "nbits": setup.nbits,
        "bandpass": "smooth",
    }


def _band(setup: EvaluationSetup) -> tuple[float, float]:
    freqs = setup.fch1 + setup.foff * np.arange(setup.nchans)
    return float(freqs.min()), float(freqs.max())


def draw_bursts(setup: EvaluationSetup, rng: np.random.Generator) -> list[Any]:
    """``per_bin`` bursts per S/N bin (S/N uniform in the bin), in random order, with
    random DM, width, scattering and spectrum; times are set by :func:`burst_configs`."""
    from drafts_ops.simulate import BurstSpec

    fmin, fmax = _band(setup)
    snrs = [rng.uniform(lo, hi) for lo, hi in itertools.pairwise(SNR_EDGES)
            for _ in range(setup.per_bin)]  # fmt: skip
    bursts = []
    for snr in rng.permutation(np.array(snrs)):
        scattered = rng.random() < setup.scattered_fraction
        limited = rng.random() < setup.band_limited_fraction
        bursts.append(
            BurstSpec(
                t_s=0.0,
                dm=float(rng.uniform(*setup.dm_range)),
                snr=float(snr),
                width_s=float(np.exp(rng.uniform(*np.log(setup.width_range_s)))),
                scattering_s=float(np.exp(rng.uniform(*np.log(setup.scattering_range_s))))
                if scattered
                else 0.0,
                spectral_index=float(rng.uniform(*setup.spectral_index_range)),
                band_centre_mhz=float(rng.uniform(fmin, fmax)) if limited else None,
                band_fwhm_mhz=float(rng.uniform(*setup.band_fwhm_range_mhz)) if limited else None,
            )
        )
    return bursts


def burst_configs(setup: EvaluationSetup, rng: np.random.Generator) -> list[Any]:
    """Simulation configurations of the recall files: ``bursts_per_file`` bursts each,
    ``spacing_s`` apart (plus up to 0.2 s of jitter), the last sweep inside the file."""
    import dataclasses

    from drafts_ops.simulate import SimulationConfig

    fmin, fmax = _band(setup)
    tail = float(dispersion_delay_s(setup.dm_max, fmin, fmax)) + 0.5
    bursts = draw_bursts(setup, rng)
    configs = []
    for k in range(0, len(bursts), setup.bursts_per_file):
        chunk = bursts[k : k + setup.bursts_per_file]
        times = 0.5 + setup.spacing_s * np.arange(len(chunk)) + rng.uniform(0, 0.2, len(chunk))
        placed = [dataclasses.replace(b, t_s=float(t)) for b, t in zip(chunk, times, strict=True)]
        configs.append(
            SimulationConfig(
                **_sim_base(setup),
                duration_s=float(times[-1] + setup.spacing_s / 2 + tail),
                bursts=tuple(placed),
                seed=int(rng.integers(2**31)),
                source_name="drafts-eval",
            )
        )
    return configs


def noise_configs(setup: EvaluationSetup, rng: np.random.Generator) -> list[Any]:
    """60 s files (the last one shorter) of noise with every RFI kind: 1-3 persistent
    channels (2-20 sigma), 5-15 impulsive pulses (1-8 sigma per channel, 0.5-5 ms), 1-4
    drifting signals (3-12 sigma, 0.2-2 s)."""
    from drafts_ops.simulate import RFISpec, SimulationConfig

    fmin, fmax = _band(setup)
    tail = float(dispersion_delay_s(setup.dm_max, fmin, fmax))
    configs, left = [], 60.0 * setup.noise_minutes
    while left > 1e-6:
        searched = min(60.0, left)
        left -= searched
        rfi = (
            RFISpec(kind="persistent", count=int(rng.integers(1, 4)),
                    strength=float(rng.uniform(2, 20))),
            RFISpec(kind="impulsive", count=int(rng.integers(5, 16)),
                    strength=float(rng.uniform(1, 8)), width_s=float(rng.uniform(0.5e-3, 5e-3))),
            RFISpec(kind="drifting", count=int(rng.integers(1, 5)),
                    strength=float(rng.uniform(3, 12)), width_s=float(rng.uniform(0.2, 2.0))),
        )  # fmt: skip
        configs.append(
            SimulationConfig(
                **_sim_base(setup),
                duration_s=searched + tail + 2 * setup.tsamp,
                rfi=rfi,
                seed=int(rng.integers(2**31)),
                source_name="drafts-eval-noise",
            )
        )
    return configs


# -- running the search ------------------------------------------------------------------


@dataclass
class SearchEvaluation:
    """Everything measured (see the module docstring); ``to_dict`` is the JSON."""

    setup: EvaluationSetup
    snr_bins: list[tuple[float, float]]
    bursts: list[dict[str, Any]] = field(default_factory=list)
    burst_minutes: float = 0.0
    unmatched: dict[str, int] = field(default_factory=dict)
    noise_files: list[dict[str, Any]] = field(default_factory=list)
    noise_minutes: float = 0.0
    false_positives: dict[str, int] = field(default_factory=dict)
    fp_causes: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def recall_table(self) -> list[dict[str, Any]]:
        """Per S/N bin: number of bursts and recall of every configuration."""
        rows = []
        snr = np.array([b["snr"] for b in self.bursts])
        for k, (lo, hi) in enumerate(self.snr_bins):
            last = k == len(self.snr_bins) - 1
            sel = (snr >= lo) & ((snr <= hi) if last else (snr < hi))
            row: dict[str, Any] = {"snr_lo": lo, "snr_hi": hi, "n": int(sel.sum())}
            for name, *_ in CONFIGURATIONS:
                hits = [b["found"][name] for b, s in zip(self.bursts, sel, strict=True) if s]
                row[name] = float(np.mean(hits)) if hits else float("nan")
            rows.append(row)
        return rows

    def recall_at_least(self, snr: float = 8.0) -> dict[str, float]:
        """Recall over all bursts with injected S/N >= ``snr``, per configuration."""
        chosen = [b for b in self.bursts if b["snr"] >= snr]
        return {
            name: float(np.mean([b["found"][name] for b in chosen])) if chosen else float("nan")
            for name, *_ in CONFIGURATIONS
        }

    def fp_per_minute(self) -> dict[str, float]:
        """False positives per minute of searched noise + RFI data, per configuration."""
        if self.noise_minutes <= 0:
            return {name: float("nan") for name, *_ in CONFIGURATIONS}
        return {k: v / self.noise_minutes for k, v in self.false_positives.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "setup": asdict(self.setup),
            "snr_bins": self.snr_bins,
            "recall": self.recall_table(),
            "recall_snr_ge_8": self.recall_at_least(8.0),
            "fp_per_minute": self.fp_per_minute(),
            "false_positives": self.false_positives,
            "fp_causes": self.fp_causes,
            "noise_minutes": self.noise_minutes,
            "burst_minutes": self.burst_minutes,
            "unmatched_in_burst_files": self.unmatched,
            "noise_files": self.noise_files,
            "bursts": self.bursts,
            "seconds": self.seconds,
        }


def _search(path: Path, out: Path, detector: str, dm_max: float) -> tuple[list[Candidate], Any]:
    from drafts_ops.pipeline import SearchConfig, search_observation

    config = SearchConfig(detector=detector, dm_max=dm_max, write_h5=False, write_plots=False)
    result = search_observation(path, out, config)
    return result.candidates, result.plan


def _detectors() -> list[str]:
    return list(dict.fromkeys(det for _, det, _ in CONFIGURATIONS))


def _keep(cand: Candidate, classified: bool) -> bool:
    return not classified or _prob(cand) >= CLASSIFIER_THRESHOLD


def _score_burst_file(ev: SearchEvaluation, path: Path, work: Path) -> None:
    from drafts_ops.simulate import read_truth, truth_path

    truth = [InjectedBurst.from_truth_row(r) for r in read_truth(truth_path(path))
             if r["kind"] == "burst"]  # fmt: skip
    rows = [dict(asdict(b), found={}) for b in truth]
    for detector in _detectors():
        cands, plan = _search(path, work / f"{path.stem}-{detector}", detector, ev.setup.dm_max)
        band = Band(plan.header.tsamp, plan.header.fmin, plan.header.fmax)
        m = match_candidates(truth, cands, band, np.asarray(plan.dms))
        for name, det, classified in CONFIGURATIONS:
            if det != detector:
                continue
            hit = m.found_classified if classified else m.found
            kept = [c for c, o in zip(cands, m.owner, strict=True)
                    if o < 0 and _keep(c, classified)]  # fmt: skip
            ev.unmatched[name] = ev.unmatched.get(name, 0) + len(kept)
            for row, h in zip(rows, hit, strict=True):
                row["found"][name] = bool(h)
        for row, j in zip(rows, m.best, strict=True):
            c = cands[j] if j >= 0 else None
            row[f"{detector}_match"] = None if c is None else {
                "tcand_s": c.tcand_s, "dm": c.dm, "snr": c.snr, "width_s": c.width_s,
                "classifier_prob": c.classifier_prob, "detector_score": c.detector_score,
            }  # fmt: skip
        ev.burst_minutes += _searched_minutes(plan) / len(_detectors())
    ev.bursts.extend(rows)


def _searched_minutes(plan: Any) -> float:
    return plan.summary()["searched_samples"] * plan.header.tsamp / 60.0


def rfi_cause(cand: Candidate, rfi_rows: Sequence[dict[str, Any]], band: Band) -> str:
    """The RFI kind that most plausibly caused a false candidate: ``impulsive`` if an
    impulse arrives within the candidate's dispersion sweep (plus 50 ms), ``drifting`` if a
    drifting signal overlaps it, ``persistent`` if the file has persistent RFI and the
    candidate is at DM < 20, else ``noise``."""
    sweep = float(dispersion_delay_s(cand.dm, band.fmin_mhz, band.fmax_mhz))
    t0, t1 = cand.tcand_s - 0.05, cand.tcand_s + sweep + 0.05
    kinds = {str(r["kind"]) for r in rfi_rows}
    for r in rfi_rows:
        if r["kind"] == "rfi_impulsive" and t0 <= float(r["tcand_s"]) <= t1:
            return "impulsive"
    for r in rfi_rows:
        start = float(r["tcand_s"])
        if r["kind"] == "rfi_drifting" and start <= t1 and start + float(r["duration_s"]) >= t0:
            return "drifting"
    return "persistent" if "rfi_persistent" in kinds and cand.dm < 20 else "noise"


def _score_noise_file(ev: SearchEvaluation, path: Path, work: Path) -> None:
    from drafts_ops.simulate import read_truth, truth_path

    rfi = [r for r in read_truth(truth_path(path)) if str(r["kind"]).startswith("rfi_")]
    record: dict[str, Any] = {"file": path.name, "candidates": {}}
    for detector in _detectors():
        cands, plan = _search(path, work / f"{path.stem}-{detector}", detector, ev.setup.dm_max)
        band = Band(plan.header.tsamp, plan.header.fmin, plan.header.fmax)
        for name, det, classified in CONFIGURATIONS:
            if det != detector:
                continue
            kept = [c for c in cands if _keep(c, classified)]
            ev.false_positives[name] = ev.false_positives.get(name, 0) + len(kept)
            causes = ev.fp_causes.setdefault(name, {})
            for c in kept:
                cause = rfi_cause(c, rfi, band)
                causes[cause] = causes.get(cause, 0) + 1
            record["candidates"][name] = len(kept)
        record["searched_s"] = _searched_minutes(plan) * 60.0
    ev.noise_minutes += record["searched_s"] / 60.0
    ev.noise_files.append(record)


def evaluate_search(
    setup: EvaluationSetup | None = None,
    *,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SearchEvaluation:
    """Simulate the observations of ``setup``, search and score them (module docstring).

    ``work_dir`` keeps the simulated files and search outputs (default: a temporary folder,
    removed afterwards); ``progress`` receives one line per file.
    """
    setup = setup or EvaluationSetup()
    rng = np.random.default_rng(setup.seed)
    bursts = burst_configs(setup, rng) if setup.per_bin else []
    noise = noise_configs(setup, rng)
    return evaluate_observations(setup, bursts, noise, work_dir=work_dir, progress=progress)


def evaluate_observations(
    setup: EvaluationSetup,
    burst_sims: Sequence[Any],
    noise_sims: Sequence[Any],
    *,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SearchEvaluation:
    """Write, search and score given simulations (:class:`~drafts_ops.simulate.
    SimulationConfig`): recall on ``burst_sims``, false positives on ``noise_sims`` (whose
    bursts, if any, would count as false). ``setup`` gives ``dm_max`` and the description."""
    from drafts_ops.simulate import write_simulation

    ev = SearchEvaluation(setup=setup, snr_bins=list(itertools.pairwise(SNR_EDGES)))
    jobs = [("bursts", c, _score_burst_file) for c in burst_sims]
    jobs += [("noise", c, _score_noise_file) for c in noise_sims]
    with tempfile.TemporaryDirectory(prefix="drafts-eval-") as tmp:
        work = Path(work_dir) if work_dir is not None else Path(tmp)
        for k, (kind, config, score) in enumerate(jobs):
            t0 = time.perf_counter()
            path = write_simulation(work / f"{kind}_{k:03d}.fil", config)
            t1 = time.perf_counter()
            score(ev, path, work)
            t2 = time.perf_counter()
            ev.seconds["simulate"] = ev.seconds.get("simulate", 0.0) + t1 - t0
            ev.seconds[f"search_{kind}"] = ev.seconds.get(f"search_{kind}", 0.0) + t2 - t1
            if progress is not None:
                progress(f"[{k + 1}/{len(jobs)}] {path.name}: {config.header().tobs:.1f} s "
                         f"simulated in {t1 - t0:.1f} s, searched in {t2 - t1:.1f} s")  # fmt: skip
    return ev


# -- reporting ---------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def results_markdown(ev: SearchEvaluation) -> str:
    """The recall and false-positive tables (markdown)."""
    names = [name for name, *_ in CONFIGURATIONS]
    s = ev.setup
    lines = [
        f"Seed {s.seed} (held out from training); {s.nchans} channels "
        f"{_band(s)[0]:.0f}-{_band(s)[1]:.0f} MHz, {s.tsamp * 1e6:.0f} us, {s.nbits}-bit; "
        f"search DM 0-{s.dm_max:g} pc cm^-3 (tolerance rule), default `SearchConfig` "
        f"(boxcar S/N >= 6.5, widths 1-64 samples); classifier threshold "
        f"{CLASSIFIER_THRESHOLD}.",
        "",
        f"Recall: {len(ev.bursts)} bursts ({s.per_bin} per S/N bin, injected S/N uniform in "
        f"the bin) in {ev.burst_minutes:.1f} min of data, {s.bursts_per_file} per file "
        f"{s.spacing_s:g} s apart; DM {s.dm_range[0]:g}-{s.dm_range[1]:g} pc cm^-3, FWHM "
        f"{s.width_range_s[0] * 1e3:g}-{s.width_range_s[1] * 1e3:g} ms, "
        f"{s.scattered_fraction:.0%} scattered ({s.scattering_range_s[0] * 1e3:g}-"
        f"{s.scattering_range_s[1] * 1e3:g} ms at the top of the band), spectral index "
        f"{s.spectral_index_range[0]:g}..{s.spectral_index_range[1]:g}, "
        f"{s.band_limited_fraction:.0%} band-limited. A burst is found when a candidate lies "
        "within the DM error that sweeps the emitting band by max(width, 4 samples) (at least "
        "2 DM trials), and within that width in time of where that DM error moves the "
        "emission (`drafts_ops.evaluation.match_distance`).",
        "",
        "| injected S/N | n | " + " | ".join(names) + " |",
        "|---" * (len(names) + 2) + "|",
    ]
    for row in ev.recall_table():
        cells = " | ".join(_fmt(row[n]) for n in names)
        lines.append(f"| {row['snr_lo']:g}-{row['snr_hi']:g} | {row['n']} | {cells} |")
    at8 = ev.recall_at_least(8.0)
    n8 = sum(b["snr"] >= 8 for b in ev.bursts)
    lines.append(f"| >= 8 | {n8} | " + " | ".join(_fmt(at8[n]) for n in names) + " |")
    fp = ev.fp_per_minute()
    lines += [
        "",
        f"False positives on {ev.noise_minutes:.1f} min of searched noise with every RFI kind "
        f"({len(ev.noise_files)} files of up to 60 s: 1-3 persistent channels, 5-15 "
        "impulsive pulses, 1-4 drifting signals each, random strengths):",
        "",
        "| | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        "| candidates | " + " | ".join(str(ev.false_positives.get(n, 0)) for n in names) + " |",
        "| per minute | " + " | ".join(_fmt(fp[n]) for n in names) + " |",
    ]
    causes = sorted({c for d in ev.fp_causes.values() for c in d})
    for cause in causes:
        counts = " | ".join(str(ev.fp_causes.get(n, {}).get(cause, 0)) for n in names)
        lines.append(f"| of which {cause} | {counts} |")
    unmatched = " / ".join(f"{n} {ev.unmatched.get(n, 0)}" for n in names)
    lines += [
        "",
        f"Candidates in the burst files that match no injected burst (mostly fragments of "
        f"bright or wide bursts split by clustering): {unmatched}.",
        "",
        _verdict(ev),
    ]
    return "\n".join(lines)


def _verdict(ev: SearchEvaluation) -> str:
    at8, fp = ev.recall_at_least(8.0), ev.fp_per_minute()
    parts = []
    for name in ("classical + classifier", "both + classifier"):
        ok = at8[name] >= TARGET_RECALL and fp[name] <= TARGET_FP_PER_MIN
        parts.append(f"{name}: recall {_fmt(at8[name])} at S/N >= 8, {_fmt(fp[name])} FP/min "
                     f"({'meets' if ok else 'misses'} the target)")  # fmt: skip
    return (f"Target (issue 5): recall >= {TARGET_RECALL:.2f} at injected S/N >= 8 with <= "
            f"{TARGET_FP_PER_MIN:g} false positive per minute after classification. "
            + "; ".join(parts) + ".")  # fmt: skip


def write_results(ev: SearchEvaluation, out_dir: str | Path) -> dict[str, Path]:
    """Write ``search_evaluation.json`` and ``search_evaluation.md`` atomically."""
    out = Path(out_dir)
    text = json.dumps(ev.to_dict(), indent=1, default=_json_default, allow_nan=True)
    return {
        "json": write_text_atomic(out / "search_evaluation.json", text + "\n"),
        "markdown": write_text_atomic(
            out / "search_evaluation.md",
            "# End-to-end search evaluation\n\n" + results_markdown(ev) + "\n",
        ),
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def card_section(ev: SearchEvaluation) -> str:
    """The model card's section (heading included)."""
    from drafts_ops.ml.card import SEARCH_SECTION

    return (
        f"{SEARCH_SECTION}\n\nMeasured by `drafts evaluate search` "
        f"(`drafts_ops/evaluation.py`): held-out simulated observations searched by "
        "`drafts_ops.pipeline.search_observation` as `drafts search` runs it.\n\n"
        + results_markdown(ev)
        + "\n"
    )


def update_model_card(ev: SearchEvaluation, card: str | Path) -> Path:
    """Put :func:`card_section` into the model card ``card`` (replacing an older one);
    the rest of the card is kept as it is."""
    from drafts_ops.ml.card import with_section

    path = Path(card)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ModelError(f"{path}: cannot read the model card: {err.strerror}") from None
    return write_text_atomic(path, with_section(text, card_section(ev)))
