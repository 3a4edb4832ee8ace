"""The evaluation's simulated observations: seeded survey-band files that hold bursts and
every RFI kind together (:class:`EvaluationSetup`), as the search evaluation and the
training harvest search them."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.evaluation.networks import SNR_EDGES
from drafts_ops.simulate import (
    BurstSpec,
    RFISpec,
    SimulationConfig,
)
from drafts_ops.simulate.bands import SURVEY_BANDS, SurveyBand, survey_band
from drafts_ops.simulate.burst import MAX_FOOTPRINT, SCATTERING_TAIL

if TYPE_CHECKING:
    pass


#: Default seed of the evaluation (training uses 0, 1, ...; the model validation 20261130).
EVALUATION_SEED = 20_261_207
#: Sub-bands of the sub-band classical search (issue 15's baseline for band-limited bursts).
EVALUATION_SUBBANDS = 4
#: Searches run on every file: name -> ``SearchConfig`` options.
SEARCHES: dict[str, dict[str, Any]] = {
    "classical": {"detector": "classical"},
    "sub-band": {"detector": "classical", "search_subbands": EVALUATION_SUBBANDS},
    "detector": {"detector": "ml"},
    "both": {"detector": "both"},
    "both-sub": {"detector": "both", "detector_subbands": EVALUATION_SUBBANDS},
}
#: Configurations reported: (name, search, after classification).
CONFIGURATIONS: tuple[tuple[str, str, bool], ...] = (
    ("classical", "classical", False),
    ("classical + classifier", "classical", True),
    ("sub-band classical", "sub-band", False),
    ("sub-band classical + classifier", "sub-band", True),
    ("detector", "detector", False),
    ("detector + classifier", "detector", True),
    ("both", "both", False),
    ("both + classifier", "both", True),
    ("both, sub-bands", "both-sub", False),
    ("both, sub-bands + classifier", "both-sub", True),
)
#: Smallest time tolerance of a match, samples.
MIN_TIME_TOL_SAMPLES = 4
#: Smallest DM tolerance of a match, in local DM-trial spacings.
MIN_DM_TOL_TRIALS = 2.0
#: Probability from which a candidate counts as a burst.
CLASSIFIER_THRESHOLD = 0.5
#: Targets (issue 11): recall at injected S/N >= 8 and >= 12; false positives per minute
#: after classification.
TARGET_RECALL_8, TARGET_RECALL_12, TARGET_FP_PER_MIN = 0.95, 0.99, 0.5
#: Target (issue 15): gain in recall of band-limited bursts at injected S/N 6-8 of ``both``
#: over the full-band classical search.
TARGET_FAINT_GAIN = 0.15
#: Bins of the recall tables by DM (pc cm^-3), FWHM (ms) and occupied bandwidth (fraction).
DM_EDGES = (0.0, 500.0, 1000.0, 2000.0, 3000.0)
WIDTH_EDGES_MS = (0.1, 1.0, 5.0, 20.0)
BANDWIDTH_EDGES = (0.0, 0.3, 0.6, 1.0)


@dataclass(frozen=True, kw_only=True)
class EvaluationSetup:
    """What is simulated and searched (seeded: the same setup gives the same numbers).

    Attributes
    ----------
    seed : int
        Seed of every random draw (bursts, RFI, noise).
    per_bin : int
        Injected bursts per S/N bin, in each band.
    bands : tuple of str
        Survey bands (keys of :data:`~drafts_ops.simulate.bands.SURVEY_BANDS`), each
        searched with its decimation.
    nbits : int
        Bits per sample of the simulated files.
    file_s : float
        Burst-bearing span of one file, s (the file runs on until the last sweep ends).
    min_spacing_s, mean_spacing_s : float
        Smallest and mean time between consecutive bursts, s.
    dm_range : (float, float)
        Injected DMs, pc cm^-3 (uniform).
    width_range_s : (float, float)
        Intrinsic FWHM, s (log-uniform).
    scattered_fraction, scattering_range_s
        Fraction of scattered bursts and their scattering time at the top of the band, s
        (log-uniform).
    spectral_index_range : (float, float)
        Power-law spectral index (uniform).
    band_limited_fraction, band_fraction_range
        Fraction of band-limited bursts (Gaussian envelope centred in the band) and the
        envelope FWHM as a fraction of the band (uniform).
    impulses_per_min, drifting_per_min, persistent_channels : (int, int)
        RFI in every file: zero-DM impulses (1-8 sigma, 0.5-5 ms) and drifting signals
        (3-12 sigma, 0.2-2 s) per minute, persistent channels (2-20 sigma); uniform.
    dm_max : float
        Largest DM trial of the search, pc cm^-3.
    """

    seed: int = EVALUATION_SEED
    per_bin: int = 10
    bands: tuple[str, ...] = ("fast", "gbt", "fast-raw")
    nbits: int = 8
    file_s: float = 30.0
    min_spacing_s: float = 0.2
    mean_spacing_s: float = 1.0
    dm_range: tuple[float, float] = (20.0, 2900.0)
    width_range_s: tuple[float, float] = (0.1e-3, 20e-3)
    scattered_fraction: float = 0.3
    scattering_range_s: tuple[float, float] = (0.5e-3, 10e-3)
    spectral_index_range: tuple[float, float] = (-3.0, 3.0)
    band_limited_fraction: float = 0.3
    band_fraction_range: tuple[float, float] = (0.1, 0.6)
    impulses_per_min: tuple[int, int] = (5, 15)
    drifting_per_min: tuple[int, int] = (1, 4)
    persistent_channels: tuple[int, int] = (1, 3)
    dm_max: float = 3000.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "bands", tuple(self.bands))
        for name in self.bands:
            survey_band(name)  # raises for an unknown band
        if self.per_bin < 1 or not self.bands:
            raise ParameterError(
                f"nothing to evaluate: per_bin = {self.per_bin} must be >= 1 and bands "
                f"{list(self.bands)} not empty"
            )
        if not (0 < self.min_spacing_s <= self.mean_spacing_s):
            raise ParameterError(
                f"burst spacing: 0 < min {self.min_spacing_s} s <= mean "
                f"{self.mean_spacing_s} s does not hold"
            )
        if not (self.file_s > 0 and math.isfinite(self.file_s)):
            raise ParameterError(f"file span {self.file_s} s must be positive")
        if not 0 <= self.dm_range[0] <= self.dm_range[1] <= self.dm_max:
            raise ParameterError(
                f"injected DM range {self.dm_range} must lie inside 0-{self.dm_max:g}"
            )
        lo, hi = self.band_fraction_range
        if not (0 <= self.band_limited_fraction <= 1 and 0 < lo <= hi <= 1):
            raise ParameterError(
                f"band-limited bursts: fraction {self.band_limited_fraction} must be in 0-1 and "
                f"their emitting band {self.band_fraction_range} within 0-1 of the band, low "
                "first"
            )

    def survey_bands(self) -> list[SurveyBand]:
        return [SURVEY_BANDS[name] for name in self.bands]


# -- simulated observations --------------------------------------------------------------


def draw_bursts(setup: EvaluationSetup, band: SurveyBand, rng: np.random.Generator) -> list[Any]:
    """``per_bin`` bursts per S/N bin (S/N uniform in the bin), in random order, with
    random DM, width, scattering and spectrum; times are set by :func:`observation_configs`."""

    snrs = [rng.uniform(lo, hi) for lo, hi in itertools.pairwise(SNR_EDGES)
            for _ in range(setup.per_bin)]  # fmt: skip
    span = band.fmax - band.fmin
    most_scattering = renderable_scattering_s(band)
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
                scattering_s=min(
                    float(np.exp(rng.uniform(*np.log(setup.scattering_range_s)))), most_scattering
                )
                if scattered
                else 0.0,
                spectral_index=float(rng.uniform(*setup.spectral_index_range)),
                band_centre_mhz=float(rng.uniform(band.fmin, band.fmax)) if limited else None,
                band_fwhm_mhz=float(rng.uniform(*setup.band_fraction_range) * span)
                if limited
                else None,
            )
        )
    return bursts


def renderable_scattering_s(band: SurveyBand) -> float:
    """Largest scattering time (s, at the top of the band) whose tail the simulator can
    render in ``band`` (a quarter of :data:`~drafts_ops.simulate.burst.MAX_FOOTPRINT`)."""

    samples = MAX_FOOTPRINT / 4 / band.nchans
    return samples * band.tsamp / SCATTERING_TAIL / (band.fmin / band.fmax) ** -4.0


def file_rfi(setup: EvaluationSetup, duration_s: float, rng: np.random.Generator) -> tuple:
    """Every RFI kind for a file of ``duration_s``, at the setup's rates (random strengths)."""

    minutes = duration_s / 60.0

    def count(rate: tuple[int, int]) -> int:
        return int(rng.poisson(rng.uniform(*rate) * minutes))

    return (
        RFISpec(kind="persistent", count=int(rng.integers(setup.persistent_channels[0],
                setup.persistent_channels[1] + 1)), strength=float(rng.uniform(2, 20))),
        RFISpec(kind="impulsive", count=count(setup.impulses_per_min),
                strength=float(rng.uniform(1, 8)), width_s=float(rng.uniform(0.5e-3, 5e-3))),
        RFISpec(kind="drifting", count=count(setup.drifting_per_min),
                strength=float(rng.uniform(3, 12)), width_s=float(rng.uniform(0.2, 2.0))),
    )  # fmt: skip


def observation_configs(
    setup: EvaluationSetup, band: SurveyBand, rng: np.random.Generator
) -> list[Any]:
    """Simulation configurations of one band's files: the bursts of :func:`draw_bursts`
    ``min_spacing_s`` plus an exponential delay apart (mean ``mean_spacing_s``), about
    ``file_s`` of them per file, each file running on until the last sweep has ended; every
    RFI kind in every file (:func:`file_rfi`)."""

    extra = setup.mean_spacing_s - setup.min_spacing_s
    pending = draw_bursts(setup, band, rng)
    configs = []
    while pending:
        t, placed = 0.3, []
        while pending and t <= setup.file_s:
            placed.append(dataclasses.replace(pending.pop(), t_s=float(t)))
            t += setup.min_spacing_s + float(rng.exponential(extra) if extra > 0 else 0.0)
        end = max(b.t_s + band.sweep_s(b.dm) + 4 * (b.width_s + b.scattering_s) for b in placed)
        duration = end + 0.3
        configs.append(
            SimulationConfig(
                **band.simulation_fields(),
                nbits=setup.nbits,
                bandpass="smooth",
                duration_s=float(duration),
                bursts=tuple(placed),
                rfi=file_rfi(setup, duration, rng),
                seed=int(rng.integers(2**31)),
                source_name=f"drafts-eval-{band.name}",
            )
        )
    return configs


def evaluation_observations(setup: EvaluationSetup) -> list[tuple[SurveyBand, Any]]:
    """Every (band, simulation) of ``setup``, seeded by ``setup.seed``."""
    rng = np.random.default_rng(setup.seed)
    return [(band, config) for band in setup.survey_bands()
            for config in observation_configs(setup, band, rng)]  # fmt: skip
