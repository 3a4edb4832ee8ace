"""End-to-end evaluation of the search as a survey meets it (``drafts evaluate search``).

Held-out simulated observations (a seed never used in training or tuning) in the survey
bands of :data:`drafts_ops.simulate.bands.SURVEY_BANDS` go through
:func:`drafts_ops.search.run_search` exactly as ``drafts search`` runs them, with each
band's decimation and the search's default DM range (0-3000 pc cm^-3). One operating
point, measured on the same files:

* every file holds **bursts and every RFI kind together**: bursts over DM 20-2900, FWHM
  0.1-20 ms, scattered, band-limited down to a tenth of the band, spaced down to 0.2 s
  apart (so inside each other's dispersion sweep), with persistent channels, zero-DM
  impulses and drifting narrow-band signals at random strengths;
* **recall** — a burst is found when a candidate lies within the tolerances of
  :func:`match_window`, and found *after classification* when such a candidate has
  ``classifier_prob >= 0.5``; tabulated by injected S/N (the same number of bursts per
  bin of :data:`SNR_EDGES`), DM, width, occupied bandwidth and band;
* **false positives** — every candidate that matches no injected burst, per minute of
  searched data, before and after classification, attributed to its most plausible cause
  (a fragment of a nearby burst, an impulse, a drifting signal, persistent RFI, noise);
* every file is searched five ways (:data:`SEARCHES`): the full-band classical search,
  the sub-band classical search (the same, plus each of four sub-bands on its own: the
  classical baseline for band-limited bursts), the neural detector alone, the detector
  with the classical search (``both``), and ``both`` with the detector also seeing four
  sub-bands (``detector_subbands``);
* each missed burst gets a reason (:func:`miss_reason`): outside the searched range,
  merged into another burst's candidate, beside a brighter candidate of no burst (RFI)
  that crosses its sweep, or below the threshold.

The patch-level validation of the models themselves is :mod:`drafts_ops.evaluation.networks`
(whose S/N bins this module shares).
"""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.detect.candidates import Candidate
from drafts_ops.evaluation.causes import BESIDE_BRIGHTER, OFFSET_DM_BURST, fp_causes, miss_reason
from drafts_ops.evaluation.matching import (
    Band,
    _bandwidth_fraction,
    _prob,
    match_candidates,
    searched_snr,
    truth_bursts,
)
from drafts_ops.evaluation.networks import SNR_EDGES
from drafts_ops.evaluation.setup import (
    BANDWIDTH_EDGES,
    CLASSIFIER_THRESHOLD,
    CONFIGURATIONS,
    DM_EDGES,
    SEARCHES,
    WIDTH_EDGES_MS,
    EvaluationSetup,
    evaluation_observations,
)
from drafts_ops.search import SearchConfig, run_search
from drafts_ops.simulate import (
    write_simulation,
)
from drafts_ops.simulate.bands import SurveyBand

if TYPE_CHECKING:
    pass

# -- running the search ------------------------------------------------------------------


#: Bins of :func:`searched_snr` (decimation can take a burst below the injected bins).
SEARCHED_SNR_EDGES = (0.0, *SNR_EDGES)


def _bins(edges: Sequence[float]) -> list[tuple[float, float]]:
    return list(itertools.pairwise(edges))


@dataclass
class SearchEvaluation:
    """Everything measured (see the module docstring); ``to_dict`` is the JSON."""

    setup: EvaluationSetup
    snr_bins: list[tuple[float, float]]
    bursts: list[dict[str, Any]] = field(default_factory=list)
    minutes: dict[str, float] = field(default_factory=dict)  # searched, per band
    false_positives: dict[str, dict[str, int]] = field(default_factory=dict)  # band -> name
    fp_causes: dict[str, dict[str, int]] = field(default_factory=dict)
    files: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_minutes(self) -> float:
        return float(sum(self.minutes.values()))

    def _recall(self, chosen: list[dict[str, Any]]) -> dict[str, float]:
        return {
            name: float(np.mean([b["found"][name] for b in chosen])) if chosen else float("nan")
            for name, *_ in CONFIGURATIONS
        }

    def recall_table(self) -> list[dict[str, Any]]:
        """Per injected S/N bin: number of bursts and recall of every configuration."""
        return self.recall_by("snr", [lo for lo, _ in self.snr_bins] + [self.snr_bins[-1][1]],
                              min_snr=0.0)  # fmt: skip

    def recall_by(
        self, key: str, edges: Sequence[float], *, min_snr: float = 8.0,
        max_snr: float = math.inf,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Recall of every configuration per bin of ``key`` (a burst field: ``dm``,
        ``width_ms``, ``bandwidth_fraction``, ``snr``) over bursts of ``min_snr <= S/N <
        max_snr``; the last bin includes its upper edge."""
        rows = []
        pairs = _bins(edges)
        for k, (lo, hi) in enumerate(pairs):
            last = k == len(pairs) - 1
            chosen = [b for b in self.bursts if min_snr <= b["snr"] < max_snr
                      and lo <= b[key] and (b[key] <= hi if last else b[key] < hi)]  # fmt: skip
            rows.append({"lo": lo, "hi": hi, "n": len(chosen), **self._recall(chosen)})
        return rows

    def recall_by_band(self, min_snr: float = 8.0) -> list[dict[str, Any]]:
        """Recall of every configuration per band over bursts of S/N >= ``min_snr``."""
        rows = []
        for name in self.minutes:
            chosen = [b for b in self.bursts if b["band"] == name and b["snr"] >= min_snr]
            rows.append({"band": name, "n": len(chosen), **self._recall(chosen)})
        return rows

    def recall_at_least(self, snr: float = 8.0, key: str = "snr") -> dict[str, float]:
        """Recall over all bursts with injected S/N (or another burst field ``key``, e.g.
        ``searched_snr``) >= ``snr``, per configuration."""
        return self._recall([b for b in self.bursts if b.get(key, b["snr"]) >= snr])

    def fp_per_minute(self, band: str | None = None) -> dict[str, float]:
        """False positives per minute of searched data, per configuration (all bands, or
        ``band``)."""
        minutes = self.total_minutes if band is None else self.minutes.get(band, 0.0)
        names = [name for name, *_ in CONFIGURATIONS]
        if minutes <= 0:
            return dict.fromkeys(names, float("nan"))
        bands = (self.false_positives.values() if band is None
                 else [self.false_positives.get(band, {})])  # fmt: skip
        return {n: sum(b.get(n, 0) for b in bands) / minutes for n in names}

    def fp_per_minute_without_offset_dm(self) -> dict[str, float]:
        """:meth:`fp_per_minute` (all bands) less the bursts' only candidates at an offset
        DM (:data:`OFFSET_DM_BURST`): the candidates that show no burst at all."""
        fp, minutes = self.fp_per_minute(), self.total_minutes
        if minutes <= 0:
            return fp
        return {n: v - self.fp_causes.get(n, {}).get(OFFSET_DM_BURST, 0) / minutes
                for n, v in fp.items()}  # fmt: skip

    def lost_to_merging(self, min_snr: float = 8.0) -> dict[str, int]:
        """Bursts of S/N >= ``min_snr`` missed because another burst's candidate took them,
        per search."""
        return self._missed_for(("merged",), min_snr)

    def lost_beside_brighter(self, min_snr: float = 8.0) -> dict[str, int]:
        """Bursts of S/N >= ``min_snr`` missed beside a brighter candidate of no burst that
        crosses their sweep (:data:`BESIDE_BRIGHTER`), per search."""
        return self._missed_for((BESIDE_BRIGHTER,), min_snr)

    def _missed_for(self, reasons: tuple[str, ...], min_snr: float) -> dict[str, int]:
        """Missed bursts of S/N >= ``min_snr`` whose reason starts with one of ``reasons``."""
        counts: dict[str, int] = {}
        for b in self.bursts:
            for det, reason in b.get("reason", {}).items():
                if b["snr"] >= min_snr and reason.startswith(reasons):
                    counts[det] = counts.get(det, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "setup": asdict(self.setup),
            "snr_bins": self.snr_bins,
            "recall": self.recall_table(),
            "recall_by_dm": self.recall_by("dm", DM_EDGES),
            "recall_by_width_ms": self.recall_by("width_ms", WIDTH_EDGES_MS),
            "recall_by_bandwidth": self.recall_by("bandwidth_fraction", BANDWIDTH_EDGES),
            "recall_by_bandwidth_snr_6_8": self.recall_by(
                "bandwidth_fraction", BANDWIDTH_EDGES, min_snr=6.0, max_snr=8.0
            ),
            "recall_by_band": self.recall_by_band(),
            "recall_snr_ge_8": self.recall_at_least(8.0),
            "recall_snr_ge_12": self.recall_at_least(12.0),
            "recall_by_searched_snr": self.recall_by(
                "searched_snr", SEARCHED_SNR_EDGES, min_snr=0.0
            ),
            "recall_searched_snr_ge_8": self.recall_at_least(8.0, "searched_snr"),
            "fp_per_minute": self.fp_per_minute(),
            "fp_per_minute_by_band": {b: self.fp_per_minute(b) for b in self.minutes},
            "fp_per_minute_without_offset_dm": self.fp_per_minute_without_offset_dm(),
            "false_positives": self.false_positives,
            "fp_causes": self.fp_causes,
            "lost_to_merging_snr_ge_8": self.lost_to_merging(),
            "lost_beside_brighter_snr_ge_8": self.lost_beside_brighter(),
            "minutes": self.minutes,
            "files": self.files,
            "bursts": self.bursts,
            "seconds": self.seconds,
        }


def _searches() -> list[str]:
    return list(dict.fromkeys(search for _, search, _ in CONFIGURATIONS))


def _keep(cand: Candidate, classified: bool) -> bool:
    return not classified or _prob(cand) >= CLASSIFIER_THRESHOLD


def search_for_evaluation(  # noqa: PLR0917
    path: Path, out: Path, band: SurveyBand, detector: str, dm_max: float,
    options: dict[str, Any] | None = None, **run: Any,
) -> Any:  # fmt: skip
    """Search ``path`` as ``drafts search`` does in ``band`` (its decimation), without
    ``.h5`` files and plots (``options``: other ``SearchConfig`` fields); ``run`` goes to
    :func:`~drafts_ops.search.run_search`."""

    config = SearchConfig(detector=detector, dm_max=dm_max, write_h5=False, write_plots=False,
                          **band.search_options(), **(options or {}))  # fmt: skip
    return run_search(path, out, config, **run)


def _score_file(ev: SearchEvaluation, path: Path, band: SurveyBand, work: Path) -> None:
    truth, rfi = truth_bursts(path)
    span = band.fmax - band.fmin
    rows = [dict(asdict(b), band=band.name, width_ms=b.width_s * 1e3,
                 bandwidth_fraction=_bandwidth_fraction(b, span), found={}, reason={})
            for b in truth]  # fmt: skip
    record: dict[str, Any] = {"file": path.name, "band": band.name, "bursts": len(truth),
                              "false_positives": {}}  # fmt: skip
    fps = ev.false_positives.setdefault(band.name, {})
    for search in _searches():
        options = dict(SEARCHES[search])
        detector = options.pop("detector")
        result = search_for_evaluation(path, work / f"{path.stem}-{search}", band, detector,
                                       ev.setup.dm_max, options)  # fmt: skip
        cands, plan = result.candidates, result.plan
        dms = np.asarray(plan.dms)
        b = Band.of(plan.header)
        m = match_candidates(truth, cands, b, dms)
        if search == _searches()[0]:  # the same for every search of the file
            for row, burst in zip(rows, truth, strict=True):
                row["searched_snr"] = searched_snr(burst, plan.raw_header, plan.header)
        for name, searched, classified in CONFIGURATIONS:
            if searched != search:
                continue
            hit = m.found_classified if classified else m.found
            for row, h in zip(rows, hit, strict=True):
                row["found"][name] = bool(h)
            false = [c for c, o in zip(cands, m.owner, strict=True)
                     if o < 0 and _keep(c, classified)]  # fmt: skip
            fps[name] = fps.get(name, 0) + len(false)
            record["false_positives"][name] = len(false)
            causes = ev.fp_causes.setdefault(name, {})
            for cause in fp_causes(false, truth, hit, rfi, b):
                causes[cause] = causes.get(cause, 0) + 1
        for i, (row, j) in enumerate(zip(rows, m.best, strict=True)):
            c = cands[j] if j >= 0 else None
            row[f"{search}_match"] = None if c is None else {
                "tcand_s": c.tcand_s, "dm": c.dm, "snr": c.snr, "width_s": c.width_s,
                "classifier_prob": c.classifier_prob, "detector_score": c.detector_score,
            }  # fmt: skip
            if c is None:
                row["reason"][search] = miss_reason(truth[i], i, b, dms, cands, m.owner, truth)
        record["searched_s"] = plan.summary()["searched_samples"] * plan.header.tsamp
    ev.minutes[band.name] = ev.minutes.get(band.name, 0.0) + record["searched_s"] / 60.0
    ev.files.append(record)
    ev.bursts.extend(rows)


def evaluate_search(
    setup: EvaluationSetup | None = None,
    *,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SearchEvaluation:
    """Simulate the observations of ``setup``, search and score them (module docstring).

    ``work_dir`` keeps the simulated files and search outputs (default: a temporary folder;
    each file is removed once scored); ``progress`` receives one line per file.
    """
    setup = setup or EvaluationSetup()
    return evaluate_observations(setup, evaluation_observations(setup), work_dir=work_dir,
                                 progress=progress)  # fmt: skip


def evaluate_observations(
    setup: EvaluationSetup,
    observations: Sequence[tuple[SurveyBand, Any]],
    *,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SearchEvaluation:
    """Write, search and score given (band, :class:`~drafts_ops.simulate.SimulationConfig`)
    pairs; ``setup`` gives ``dm_max`` and the description."""

    ev = SearchEvaluation(setup=setup, snr_bins=_bins(SNR_EDGES))
    with tempfile.TemporaryDirectory(prefix="drafts-eval-") as tmp:
        work = Path(work_dir) if work_dir is not None else Path(tmp)
        for k, (band, config) in enumerate(observations):
            t0 = time.perf_counter()
            path = write_simulation(work / f"{band.name}_{k:03d}.fil", config)
            t1 = time.perf_counter()
            _score_file(ev, path, band, work)
            t2 = time.perf_counter()
            if work_dir is None:  # survey-sized files: keep the disk free
                path.unlink()
                for out in work.glob(f"{path.stem}-*"):
                    shutil.rmtree(out, ignore_errors=True)
            ev.seconds["simulate"] = ev.seconds.get("simulate", 0.0) + t1 - t0
            ev.seconds["search"] = ev.seconds.get("search", 0.0) + t2 - t1
            if progress is not None:
                progress(f"[{k + 1}/{len(observations)}] {path.name}: "
                         f"{config.header().tobs:.1f} s, {len(config.bursts)} bursts, "
                         f"simulated in {t1 - t0:.1f} s, searched in {t2 - t1:.1f} s")  # fmt: skip
    return ev
