"""``models/MODEL_CARD.md``: how the shipped models were made and how well they do."""

from __future__ import annotations

from pathlib import Path

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.ml import data
from drafts_ops.ml import preprocess as pp
from drafts_ops.ml.evaluate import Evaluation, results_markdown, summary_at_8
from drafts_ops.ml.manifest import read_manifest

#: Heading of the section written by ``drafts evaluate search`` (drafts_ops/evaluation.py);
#: :func:`write_model_card` keeps it when it regenerates the rest of the card.
SEARCH_SECTION = "## End-to-end search evaluation"
#: Heading of the section written by ``drafts evaluate classifier`` (drafts_ops/ml/harvest.py).
CLASSIFIER_SECTION = "## Classifier on search candidates"
#: Heading of the inference-cost section (measured with ``drafts bench search``, written
#: by hand: kept out of the end-to-end section, which ``--card`` rewrites whole).
INFERENCE_SECTION = "## Inference cost"
#: Sections measured by other commands, kept when the card is regenerated.
KEPT_SECTIONS = (CLASSIFIER_SECTION, SEARCH_SECTION, INFERENCE_SECTION)


def find_section(text: str, heading: str = SEARCH_SECTION) -> str | None:
    """The section of markdown ``text`` that starts with the line ``heading``, up to the
    next heading of the same level (or the end), without trailing blank lines; ``None``
    when absent."""
    lines = text.splitlines()
    if heading not in lines:
        return None
    start = lines.index(heading)
    level = heading.split(" ", 1)[0] + " "
    stop = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(level)),
                len(lines))  # fmt: skip
    return "\n".join(lines[start:stop]).rstrip() + "\n"


def with_section(text: str, section: str, *, before: str = "## Limits") -> str:
    """``text`` with ``section`` (starting with its heading line) in place of the section of
    the same heading, or inserted before the heading ``before`` (appended when absent)."""
    heading = section.splitlines()[0]
    section = section.rstrip() + "\n"
    old = find_section(text, heading)
    if old is not None:
        return text.replace(old.rstrip(), section.rstrip(), 1)
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.rstrip("\n") == before), None)
    if at is None:
        return text.rstrip() + "\n\n" + section
    return "".join(lines[:at]) + section + "\n" + "".join(lines[at:])


def _training_table(manifest: dict) -> str:
    rows = [
        "| model | size | steps | seed | data (s) | training (s) | CPU (s) | final loss | sha256 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, info in sorted(manifest["models"].items()):
        rows.append(
            f"| {name} | {info.get('size_bytes', 0) / 1024:.0f} kB | {info.get('steps')} | "
            f"{info.get('seed')} | {info.get('seconds_data')} | {info.get('seconds_train')} | "
            f"{info.get('cpu_seconds', '?')} | "
            f"{info.get('final_loss')} | `{info['sha256']}` |"
        )
    return "\n".join(rows)


def _fast_raw_decimation(info: dict) -> str:
    """The FAST raw band's search decimation a model was trained at (its manifest entry's
    ``band_decimation``, recorded by ``drafts train``)."""
    t, f = info.get("band_decimation", {}).get("fast-raw", (None, None))
    return f"x{t} t x{f} f" if t else "decimation not recorded"


def _crop_scales(info: dict, inference: tuple[int, ...]) -> str:
    """The time-averaging factors of a detector's training crops (its manifest entry's
    ``time_scales``, recorded by ``drafts train``), beside those inference runs at."""
    trained = tuple(info.get("time_scales", ()))
    names = ", ".join(str(f) for f in trained)
    if trained == tuple(inference):
        return f"those inference runs at ({names})"
    if not trained:
        return "factors not recorded"
    return (f"({names}); inference also runs at "
            f"{', '.join(str(f) for f in inference if f not in trained)}, which the network "
            "never saw in training")  # fmt: skip


def _pool_built(manifest: dict) -> str:
    """The sentence on what making the detector's pool cost where the recorded run read it
    from ``--pool-cache`` (its manifest entry's ``seconds_data_built``)."""
    info = manifest.get("models", {}).get("detector.onnx", {})
    built = info.get("seconds_data_built")
    if built is None or built <= float(info.get("seconds_data", 0.0)) + 60:
        return ""
    return (
        " The detector's data seconds are those of a run that read its pool from "
        f"`--pool-cache`: making it (simulating and searching the survey seeds' "
        f"observations, and the 64-channel blocks) took {built / 60:.0f} minutes more on "
        "2 cores."
    )


def _subband_view(info: dict) -> str:
    """The clause on a detector's crops of the ``--detector-subbands`` input (its manifest
    entry's ``subband_view``, recorded by ``drafts train``; empty when it saw none)."""
    n = int(info.get("subband_view", 1))
    if n <= 1:
        return ""
    return (
        f"; and as many crops of the input a search with `--detector-subbands {n}` "
        f"gives the detector (the same rows raised to the {n} sub-bands' pooled rows, "
        "scaled to the full band's noise, where those are higher), from the same pass"
    )


def _stale_band_note(models: dict) -> str:
    """A sentence naming the models trained at another FAST raw decimation than the one
    the search now uses (empty when none is)."""
    from drafts_ops.ml.harvest import band_decimation

    now = band_decimation()["fast-raw"]
    stale = {name: info["band_decimation"]["fast-raw"] for name, info in sorted(models.items())
             if info.get("band_decimation", {}).get("fast-raw", now) != now}  # fmt: skip
    if not stale:
        return ""
    seen = "; ".join(f"{name} at x{t} t x{f} f" for name, (t, f) in stale.items())
    return (
        f"\nThese models saw the FAST raw band searched at another decimation ({seen}, "
        f"their manifest entries' `band_decimation`) than the search now uses (x{now[0]} "
        f"t x{now[1]} f) and were not retrained for it: the held-out FAST raw figures above "
        "are measured with them."
    )


def model_card(manifest: dict, ev: Evaluation) -> str:
    """The model card text."""
    from drafts_ops.ml.harvest import DETECTOR_HARVEST_SEEDS, HARVEST_SEARCH
    from drafts_ops.ml.inference import DETECTOR_SCALES
    from drafts_ops.ml.train import CLASSIFIER_JITTER, DETECTOR_SURVEY_SHARE

    ranges = data.BURST_RANGES
    at8_text = ", ".join(f"{k} {v:.2f}" for k, v in summary_at_8(ev).items())
    models = manifest["models"]
    det_pool = models.get("detector.onnx", {}).get("pool_size", "?")
    clf_pool = models.get("classifier.onnx", {}).get("pool_size", "?")
    det_raw = _fast_raw_decimation(models.get("detector.onnx", {}))
    clf_raw = _fast_raw_decimation(models.get("classifier.onnx", {}))
    nsub, jitter = HARVEST_SEARCH["search_subbands"], CLASSIFIER_JITTER
    scales = ", ".join(str(f) for f in DETECTOR_SCALES)
    crop_scales = _crop_scales(models.get("detector.onnx", {}), DETECTOR_SCALES)
    sub_view = _subband_view(models.get("detector.onnx", {}))
    return f"""# drafts-ops neural models

Two small networks in the style of DRAFTS (Zhang et al. 2024), trained with PyTorch on
simulated data and shipped as ONNX (opset 17) for ONNX Runtime. Inference:
`drafts_ops.ml.inference.load_detector()` / `load_classifier()`; both check the sha256
below (also in `manifest.json`) and raise `ModelError` for a missing or corrupt file.

## Models

* **detector.onnx** — CenterNet-style CNN on DM-time images. Input `dm_time`
  `[B, 1, 64, W]` (W a multiple of 16, any length); outputs `heatmap [B, 1, 16, W/4]`
  (burst-centre probability per 4 x 4 cell) and `offset [B, 2, 16, W/4]` (sub-cell
  position). Backbone: 3x3 conv + BN + ReLU, two stride-2 stages, dilated context layers
  (dilation 2, 4, 8); 4, 8 and 16 channels (ONNX Runtime works in blocks of 16
  channels: ~0.7x the time of 8, 16 and 32, with the same recall on a validation seed).
  `Detector.detect(dm_time [ndm, nt], threshold)` returns `DetectorPeak(dm_index, sample,
  score)` in the input's coordinates (3 x 3 peak picking).
* **classifier.onnx** — two convolutional branches (freq-time and DM-time, as FETCH),
  global max pooling, a small linear head. Inputs `freq_time`, `dm_time` `[B, 1, 64, 64]`;
  output `probability [B]`. `Classifier.predict(freq_time, dm_time=None)` takes FETCH
  cutouts (`[256 time, 256 freq]` and `[256 DM, 256 time]`, as
  `drafts_ops.detect.cutouts` makes them); trained with the DM-time input blanked for
  25% of examples, so it also works on the waterfall alone.

## Preprocessing (drafts_ops/ml/preprocess.py, identical in training and inference)

* freq-time cutout: transposed to [frequency, time]; frequency area-averaged to
  {pp.CLASSIFIER_SIZE} sub-bands; central {pp.CLASSIFIER_SIZE} time columns kept.
* DM-time cutout: DM axis max-pooled to {pp.CLASSIFIER_SIZE} rows; central
  {pp.CLASSIFIER_SIZE} columns kept.
* detector block: DM axis max-pooled (or linearly stretched) to {pp.DETECTOR_ROWS} rows; time
  averaged by `time_factor` (default 1); padded to a multiple of 16 columns.
* every row then robustly standardised (median, 1.4826 x MAD), clipped to
  [{pp.CLIP_SIGMA[0]:g}, {pp.CLIP_SIGMA[1]:g}] sigma and divided by {pp.INPUT_SCALE:g}.

## Training data (drafts_ops/ml/data.py)

Seeded blocks from the project simulator (`drafts_ops.simulate`, 32-bit samples, smooth
bandpass, Gaussian noise): {data.NCHAN} channels, top of band 1.1-1.7 GHz, 15-30%
fractional bandwidth, sampling 0.3-1.5 ms. Each block is cleaned as the search does
(`drafts_ops.detect.preprocess.preprocess_block`: per-channel median/MAD normalisation
and automatic channel masking) before dedispersion or cutting out.

* bursts: simulator S/N {ranges["snr"][0]:g}-{ranges["snr"][1]:g} (6 + exponential of
  mean 7, capped; best dedispersed boxcar, Heimdall convention); intrinsic FWHM
  {ranges["width_samples"][0]:g}-{ranges["width_samples"][1]:g} samples (log-uniform);
  scattering none (50%) or {ranges["scattering_samples"][0]:g}-{ranges["scattering_samples"][1]:g}
  samples at the top of the band (f^-4); spectral index
  {ranges["spectral_index"][0]:g}..{ranges["spectral_index"][1]:g}, 40% band-limited
  (Gaussian envelope); DM {ranges["dm"][0]:g}-{ranges["dm"][1]:g} pc cm^-3 (classifier)
  or 10-90% of a 150-1200 pc cm^-3 DM range (detector).
* RFI (negatives and confusers), the simulator's three kinds: persistent narrow-band
  channels (1-3, 2-20 sigma), impulsive broadband zero-DM pulses (1-3, 1-8 sigma per
  channel, 0.5-5 ms), drifting narrow-band signals (3-12 sigma); and pure noise.
* detector: {det_pool} DM-time images of 192 columns, of two kinds. (1) 64-channel blocks
  as above, DM trials from 0 by the tolerance rule (half) or 48-256 uniform steps (half),
  reference dedisperser; 0-2 bursts per block, each RFI kind with probability 1/4. (2)
  The search's *own* DM-time data (`drafts_ops/ml/harvest.py`,
  `harvest_detector_images`, seeds {", ".join(str(x) for x in DETECTOR_HARVEST_SEEDS)}):
  seeded observations at the search evaluation's operating point in the FAST-like, GBT-like
  and FAST raw ({det_raw}) bands, dedispersed to DM 3000 by the streaming search itself (the
  production operator, its normalisation, masking and clipping), each column's DM axis
  pooled to 64 rows as inference pools it; one crop with each burst at a random place and
  half as many random crops (bow-tie sidelobes, RFI, masked-channel residues, noise), each
  averaged in time by a factor drawn from {crop_scales}{sub_view}.
  {DETECTOR_SURVEY_SHARE:.0%} of every batch is of kind (2). Random 128-column crops;
  CenterNet focal loss on Gaussian heatmaps (sigma 1 cell) + L1 offset loss.
* classifier (`drafts_ops/ml/harvest.py`, not the 64-channel blocks above): {clf_pool}
  examples, three quarters of them candidates *found by the search itself* in simulated
  survey observations (FAST-like 1024 ch 196.608 us, GBT-like 336 ch 1.27 ms, demo-like
  256 ch 512 us, FAST raw 4096 ch 49.152 us searched {clf_raw}; 8-bit; bursts and every RFI
  kind in the same files, bursts 0.2 s + exponential (mean 1 s) apart over DM 20-2900,
  FWHM 0.1-20 ms, 30% scattered, 30% band-limited down to 10% of the band; searched to DM
  3000 with each band's decimation, full band and {nsub} sub-bands, `--search-subbands
  {nsub}`), each with the cutouts the search made for it (`make_cutouts`, searched
  resolution); a candidate matching an injected burst is a positive, every other one a
  negative of its cause (burst fragments / sidelobes, impulses, drifting signals,
  persistent channels, noise); the other quarter synthetic 64-channel cutouts (noise and
  RFI where no search candidate lies, and bursts). Batches half bursts, half negatives;
  each example shifted in time by up to {jitter} columns (both inputs together: the search
  centres a candidate only to a sample or two); binary cross-entropy.
* AdamW (lr 3e-3, one-cycle), batch 16 (detector) / 32 (classifier), one CPU thread.
  Reproduce with `drafts train detector` and `drafts train classifier`
  (`--seed`, `--steps`, `--pool`; `--evaluate` rewrites this card).

{_training_table(manifest)}

Data and training seconds are wall-clock on the project's shared 2-core CPU (one torch
thread; other jobs sometimes running beside it); CPU is the process's total CPU time
(user + system), data generation included.{_pool_built(manifest)}

The detector runs at time-averaging factors {scales} and merges peaks within 2 DM rows
and 8 columns of the coarser of two peaks' scales (`Detector.detect(..., scales=DETECTOR_SCALES)`,
`MERGE_COLUMNS`); the tables below use
that default. They count every heatmap peak above the threshold. The search takes every
peak from score 0.2 (`detector_threshold`; no cap on peaks per block), looks up its
boxcar S/N within the detector's precision (2 pooled DM rows and 4 columns of the
coarsest scale: `Detector.position_uncertainty`), drops a peak whose S/N there is below
`ml_min_snr` (6 by default), and one below the boxcar search's threshold (6.5) unless
its score reaches `detector_faint_threshold` (0.65), which removes most of the false
positives counted here (see the end-to-end evaluation below).

## Validation (drafts_ops/ml/evaluate.py)

Held-out simulated data (same generators, a seed never used in training). Classifier
columns: cutouts at a search's jittered DM / time / width for each injected burst.
Detector columns: one burst per DM-time block (192 columns, no RFI); a detection counts
when a peak lies within max(4, width) samples of the burst and within the DM error that
sweeps the band by less than max(4, width) samples (at least 3 DM trials); "+ classifier"
then requires probability >= 0.5 on the cutouts at the peak (width 2 samples).

{results_markdown(ev)}

Mean recall over the S/N >= 8 bins: {at8_text}
(target: >= 0.90 with <= 1 false positive per minute after classification).

## Limits

Trained on simulated Gaussian noise with simple RFI models: the detector on 64-channel
L-band-like setups and the survey bands' own DM-time data, the classifier on the survey
bands above; real data with other RFI, bandpass ripples or very different bands may behave
differently. The classifier's
probability is calibrated on held-out simulated candidates only (section "Classifier on
search candidates"), not on real data. The detector's input is a block's whole DM range
pooled to 64 rows (about 20 trials per row for FAST-like data to DM 3000): on survey data
it finds fewer bursts than the boxcar search on its own (0.93 against 0.96 at S/N >= 8,
section "End-to-end search evaluation"), and, seeing the same full-band DM-time data,
hardly any the boxcar search misses; it is meant to run with it (`--detector both`, where
it only adds candidates and scores). The classifier does
not depend on a candidate's centring within a few samples at boxcar widths up to 16
samples; at wider boxcars (cutouts decimated 16x or more, a narrow burst sub-pixel) its
score drops; and it passes most fragments of real bursts (a bright, scattered burst
detected again tens of pc cm^-3 away), which are burst emission at the wrong DM: the
search folds the arms it can explain before they reach the classifier
(`fold_measured_sidelobes`), and the rest are counted as false positives.{_stale_band_note(models)}
"""


def write_model_card(folder: Path, ev: Evaluation) -> Path:
    """Write ``folder/MODEL_CARD.md`` from the manifest and an evaluation."""
    manifest = read_manifest(folder)
    for name, info in manifest["models"].items():
        path = folder / name
        info["size_bytes"] = path.stat().st_size if path.exists() else 0
    text = model_card(manifest, ev)
    card = folder / "MODEL_CARD.md"
    old = card.read_text(encoding="utf-8") if card.exists() else ""
    for heading in KEPT_SECTIONS:  # measured by other commands
        kept = find_section(old, heading)
        if kept is not None:
            text = with_section(text, kept)
    return write_text_atomic(card, text)
