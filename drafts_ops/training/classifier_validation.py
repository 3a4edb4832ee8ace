"""The classifier on held-out harvested candidates (``drafts evaluate classifier``):
recall by injected S/N, how often each kind of false candidate passes, and the
reliability of its probability; the body of the model card's ``classifier-candidates``
section."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from drafts_ops.evaluation.networks import SNR_EDGES
from drafts_ops.ml.inference import load_classifier
from drafts_ops.training.harvest import HARVEST_BANDS, CandidatePool

#: Edges of the reliability-curve bins (predicted probability).
RELIABILITY_EDGES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
#: Seed of the classifier's held-out validation pool (training: 0, 1, ...).
CLASSIFIER_VALIDATION_SEED = 20_261_131


@dataclass
class ClassifierValidation:
    """The classifier on held-out harvested candidates (:data:`CLASSIFIER_VALIDATION_SEED`)."""

    seed: int
    threshold: float
    examples: int
    minutes: float
    recall_by_snr: list[dict] = field(default_factory=list)
    fp_by_cause: list[dict] = field(default_factory=list)
    reliability: list[dict] = field(default_factory=list)
    expected_calibration_error: float = float("nan")

    def markdown(self) -> str:
        lines = [
            f"Held-out seed {self.seed}: {self.examples} candidates the search found in "
            f"{self.minutes:.1f} min of simulated data in the bands "
            f"{', '.join(HARVEST_BANDS)} (bursts and every RFI kind in the same files; "
            "`drafts_ops/training/harvest.py`), at threshold "
            f"{self.threshold:g}. `drafts evaluate classifier` reproduces it.",
            "",
            "| injected S/N | bursts | recall |",
            "|---|---|---|",
        ]
        lines += [f"| {r['lo']:g}-{r['hi']:g} | {r['n']} | {_f(r['recall'])} |"
                  for r in self.recall_by_snr]  # fmt: skip
        lines += ["", "| negative (cause) | candidates | passed as bursts |", "|---|---|---|"]
        lines += [f"| {r['cause']} | {r['n']} | {_f(r['fp_fraction'])} |"
                  for r in self.fp_by_cause]  # fmt: skip
        lines += ["", "Reliability (does the probability mean what it says?): expected "
                  f"calibration error {_f(self.expected_calibration_error)}.", "",
                  "| predicted | candidates | mean predicted | fraction bursts |",
                  "|---|---|---|---|"]  # fmt: skip
        lines += [f"| {r['lo']:g}-{r['hi']:g} | {r['n']} | {_f(r['mean_prob'])} | "
                  f"{_f(r['burst_fraction'])} |" for r in self.reliability]  # fmt: skip
        return "\n".join(lines) + "\n"


def _f(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


def validate_classifier(
    pool: CandidatePool, probs: np.ndarray, *, seed: int, threshold: float = 0.5
) -> ClassifierValidation:
    """Recall by injected S/N, false-positive fraction per negative cause and the
    reliability curve of ``probs`` (the classifier's output on ``pool``)."""
    probs = np.asarray(probs, np.float64)
    v = ClassifierValidation(seed, threshold, len(pool), pool.minutes)
    labels = pool.labels > 0.5
    edges = list(SNR_EDGES)
    for lo, hi in itertools.pairwise(edges):
        sel = labels & (pool.injected_snr >= lo) & (pool.injected_snr < hi)
        v.recall_by_snr.append({"lo": lo, "hi": hi, "n": int(sel.sum()),
                                "recall": _mean(probs[sel] >= threshold)})  # fmt: skip
    causes = np.array(pool.causes)
    for cause in sorted(set(pool.causes) - {"burst"}):
        sel = causes == cause
        v.fp_by_cause.append({"cause": cause, "n": int(sel.sum()),
                              "fp_fraction": _mean(probs[sel] >= threshold)})  # fmt: skip
    ece = 0.0
    for k, (lo, hi) in enumerate(itertools.pairwise(RELIABILITY_EDGES)):
        last = k == len(RELIABILITY_EDGES) - 2
        sel = (probs >= lo) & ((probs <= hi) if last else (probs < hi))
        mean_p, frac = _mean(probs[sel]), _mean(labels[sel])
        v.reliability.append({"lo": lo, "hi": hi, "n": int(sel.sum()), "mean_prob": mean_p,
                              "burst_fraction": frac})  # fmt: skip
        if sel.any():
            ece += sel.sum() / max(len(pool), 1) * abs(mean_p - frac)
    v.expected_calibration_error = float(ece)
    return v


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if np.size(x) else float("nan")


def classifier_probabilities(pool: CandidatePool, classifier=None) -> np.ndarray:
    """The shipped (or given) classifier's probabilities on a harvested pool."""
    if classifier is None:
        classifier = load_classifier()
    return np.asarray(classifier.predict_prepared(pool.freq_time, pool.dm_time), np.float64)
