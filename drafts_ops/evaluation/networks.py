"""Validation of the shipped models on simulated data kept apart from training.

Training draws from seeds 0, 1, ...; validation uses :data:`VALIDATION_SEED`, so no
example is shared. Three measurements:

1. **classifier on search candidates** — cutouts at a search's (jittered) DM, time and
   width for bursts in S/N bins (recall), and at noise / RFI triggers (false-positive
   fraction per kind);
2. **detector, and detector then classifier** — one burst per DM-time block, recall per
   S/N bin (a peak within the tolerance, then the classifier on the peak's cutout);
3. **false positives per minute** — long blocks of noise with RFI (each kind present with
   probability 1/2 per block) through detector and classifier.

:func:`evaluate_and_write_card` writes the tables into ``models/MODEL_CARD.md``.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.ml.card import card_path, write_generated
from drafts_ops.ml.inference import Classifier, Detector, load_classifier, load_detector
from drafts_ops.simulate import network_examples as data

VALIDATION_SEED = 20_261_130
#: Edges of the injected-S/N bins of the recall tables.
SNR_EDGES: tuple[float, ...] = (6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 30.0)
#: Operating points reported in the model card (the search's default detector threshold
#: is 0.5).
DETECTOR_THRESHOLDS: tuple[float, ...] = (0.3, 0.5)
CLASSIFIER_THRESHOLD = 0.5
#: Width (samples) used for the cutouts of detector peaks (the detector gives no width).
PEAK_CUTOUT_WIDTH = 2


@dataclass
class Evaluation:
    """Numbers of one validation run (all measured, see the module docstring)."""

    seed: int
    snr_bins: list[tuple[float, float]]
    classifier_recall: list[float] = field(default_factory=list)
    classifier_recall_ft_only: list[float] = field(default_factory=list)
    classifier_fp: dict[str, float] = field(default_factory=dict)
    detector_recall: dict[float, list[float]] = field(default_factory=dict)
    pipeline_recall: dict[float, list[float]] = field(default_factory=dict)
    per_bin: int = 0
    negatives_per_kind: int = 0
    fp_minutes: float = 0.0
    detector_fp_per_min: dict[float, float] = field(default_factory=dict)
    pipeline_fp_per_min: dict[float, float] = field(default_factory=dict)
    seconds: float = 0.0


def _bins() -> list[tuple[float, float]]:
    return list(itertools.pairwise(SNR_EDGES))


def classifier_metrics(
    clf: Classifier, rng: np.random.Generator, ev: Evaluation, per_bin: int, negatives: int
) -> None:
    """Recall per S/N bin on burst candidates; positive fraction on each negative kind."""
    for lo, hi in ev.snr_bins:
        cuts = [data.classifier_example(rng, "burst", rng.uniform(lo, hi)) for _ in range(per_bin)]
        ft = np.stack([c[0] for c in cuts])
        dt = np.stack([c[1] for c in cuts])
        ev.classifier_recall.append(float(np.mean(clf.predict(ft, dt) >= CLASSIFIER_THRESHOLD)))
        ev.classifier_recall_ft_only.append(float(np.mean(clf.predict(ft) >= CLASSIFIER_THRESHOLD)))
    for kind in ("noise", *data.RFI_KINDS):
        cuts = [data.classifier_example(rng, kind) for _ in range(negatives)]
        prob = clf.predict(np.stack([c[0] for c in cuts]), np.stack([c[1] for c in cuts]))
        ev.classifier_fp[kind] = float(np.mean(prob >= CLASSIFIER_THRESHOLD))


def _classify_peak(clf: Classifier, block: data.DetectorBlock, peak) -> float:
    dm = float(np.interp(peak.dm_index, np.arange(block.dms.size), block.dms))
    cand = data.Candidate(dm, round(peak.sample), PEAK_CUTOUT_WIDTH)
    ft, dt = data.cutout_pair(block.data, block.setup, cand)
    return float(clf.predict(ft, dt))


def _matches(block: data.DetectorBlock, burst, peak) -> bool:
    """A peak within ``max(4, width)`` samples of the burst and within the DM error that
    sweeps the band by less than ``max(4, width)`` samples (or 3 DM rows, if more)."""
    f = block.setup.freqs
    width = max(4.0, (burst.width_s + burst.scattering_s) / block.setup.tsamp)
    sweep_per_dm = float(dispersion_delay_s(1.0, f.min(), f.max())) / block.setup.tsamp
    dm_tol = max(width / sweep_per_dm, 3.0 * float(np.max(np.diff(block.dms))))
    dm = float(np.interp(peak.dm_index, np.arange(block.dms.size), block.dms))
    return abs(dm - burst.dm) <= dm_tol and abs(peak.sample - block.sample(burst)) <= width


def detector_metrics(
    det: Detector, clf: Classifier, rng: np.random.Generator, ev: Evaluation, per_bin: int
) -> None:
    """Detector recall and detector-then-classifier recall per S/N bin, per threshold."""
    low = min(DETECTOR_THRESHOLDS)
    for lo, hi in ev.snr_bins:
        best, prob = np.zeros(per_bin), np.zeros(per_bin)
        for k in range(per_bin):
            block = data.detector_example(
                rng, n_bursts=1, rfi=(), snr=rng.uniform(lo, hi), tail=4096
            )
            burst = block.bursts[0]
            peaks = [p for p in det.detect(block.dm_time, low) if _matches(block, burst, p)]
            if peaks:
                best[k] = peaks[0].score
                prob[k] = _classify_peak(clf, block, peaks[0])
        for thr in DETECTOR_THRESHOLDS:
            ev.detector_recall.setdefault(thr, []).append(float(np.mean(best >= thr)))
            ev.pipeline_recall.setdefault(thr, []).append(
                float(np.mean((best >= thr) & (prob >= CLASSIFIER_THRESHOLD)))
            )


def false_positive_metrics(
    det: Detector, clf: Classifier, rng: np.random.Generator, ev: Evaluation, minutes: float
) -> None:
    """Detector peaks, and those the classifier keeps, per minute of noise + RFI."""
    seconds, scores, probs = 0.0, [], []
    while seconds < 60.0 * minutes:
        rfi = tuple(k for k in data.RFI_KINDS if rng.random() < 0.5)
        block = data.detector_example(rng, n_bursts=0, rfi=rfi, columns=2048, tail=4096)
        seconds += block.dm_time.shape[1] * block.setup.tsamp
        for peak in det.detect(block.dm_time, min(DETECTOR_THRESHOLDS)):
            scores.append(peak.score)
            probs.append(_classify_peak(clf, block, peak))
    ev.fp_minutes = seconds / 60.0
    s, p = np.array(scores), np.array(probs)
    for thr in DETECTOR_THRESHOLDS:
        ev.detector_fp_per_min[thr] = float(np.sum(s >= thr)) / ev.fp_minutes
        ev.pipeline_fp_per_min[thr] = (
            float(np.sum((s >= thr) & (p >= CLASSIFIER_THRESHOLD))) / ev.fp_minutes
        )


def evaluate(
    models: str | Path | None = None,
    *,
    seed: int = VALIDATION_SEED,
    per_bin: int = 30,
    negatives: int = 50,
    fp_minutes: float = 2.0,
) -> Evaluation:
    """Run all validation measurements on the models in ``models`` (default: shipped)."""
    folder = None if models is None else Path(models)
    clf = load_classifier(None if folder is None else folder / "classifier.onnx")
    det = load_detector(None if folder is None else folder / "detector.onnx")
    t0 = time.perf_counter()
    ev = Evaluation(seed=seed, snr_bins=_bins(), per_bin=per_bin, negatives_per_kind=negatives)
    rng = np.random.default_rng(seed)
    classifier_metrics(clf, rng, ev, per_bin, negatives)
    detector_metrics(det, clf, rng, ev, per_bin)
    false_positive_metrics(det, clf, rng, ev, fp_minutes)
    ev.seconds = time.perf_counter() - t0
    return ev


def results_markdown(ev: Evaluation) -> str:
    """The validation tables of the model card."""
    t1, t2 = DETECTOR_THRESHOLDS
    lines = [
        f"Validation seed {ev.seed} (not a training seed); {ev.per_bin} bursts per S/N "
        f"bin; classifier threshold {CLASSIFIER_THRESHOLD}; detector thresholds {t1} and "
        f"{t2}. Measured in {ev.seconds:.0f} s.",
        "",
        "Recall (fraction of injected bursts found):",
        "",
        "| injected S/N | classifier, FT + DM-time | classifier, FT only "
        f"| detector >= {t1} | detector >= {t2} | detector >= {t1} + classifier "
        f"| detector >= {t2} + classifier |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, (lo, hi) in enumerate(ev.snr_bins):
        lines.append(
            f"| {lo:g}-{hi:g} | {ev.classifier_recall[i]:.2f} | "
            f"{ev.classifier_recall_ft_only[i]:.2f} | {ev.detector_recall[t1][i]:.2f} | "
            f"{ev.detector_recall[t2][i]:.2f} | {ev.pipeline_recall[t1][i]:.2f} | "
            f"{ev.pipeline_recall[t2][i]:.2f} |"
        )
    lines += [
        "",
        f"Classifier positives on non-burst candidates ({ev.negatives_per_kind} per kind): "
        + ", ".join(f"{k} {v:.3f}" for k, v in ev.classifier_fp.items())
        + ".",
        "",
        f"False positives per minute on {ev.fp_minutes:.1f} min of simulated noise with RFI "
        "(each RFI kind present in half of the 2048-sample blocks):",
        "",
        "| detector threshold | detector alone | detector + classifier |",
        "|---|---|---|",
    ]
    lines += [
        f"| {t} | {ev.detector_fp_per_min[t]:.2f} | {ev.pipeline_fp_per_min[t]:.2f} |"
        for t in DETECTOR_THRESHOLDS
    ]
    return "\n".join(lines)


def summary_at_8(ev: Evaluation) -> dict[str, float]:
    """Recall averaged over the bins at S/N >= 8 (each bin weighted equally)."""
    keep = [i for i, (lo, _) in enumerate(ev.snr_bins) if lo >= 8]
    out = {"classifier": float(np.mean([ev.classifier_recall[i] for i in keep]))}
    for t in DETECTOR_THRESHOLDS:
        out[f"detector>={t}"] = float(np.mean([ev.detector_recall[t][i] for i in keep]))
        out[f"detector>={t}+classifier"] = float(np.mean([ev.pipeline_recall[t][i] for i in keep]))
    return out


def validation_section(ev: Evaluation) -> str:
    """The body of the model card's generated ``validation`` section."""
    at8 = ", ".join(f"{k} {v:.2f}" for k, v in summary_at_8(ev).items())
    target = "(target: >= 0.90 with <= 1 false positive per minute after classification)."
    return f"{results_markdown(ev)}\n\nMean recall over the S/N >= 8 bins: {at8}\n{target}"


def evaluate_and_write_card(models: str | Path = "models", **kwargs) -> Path:
    """Evaluate the models in ``models`` and rewrite the validation section of its
    ``MODEL_CARD.md`` (copied from the shipped card first when the folder has none)."""
    ev = evaluate(models, **kwargs)
    return write_generated(card_path(models), {"validation": validation_section(ev)})
