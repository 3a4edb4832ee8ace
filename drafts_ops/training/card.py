"""The model card's sections that training writes: the recipe the shipped models were
trained with (from the code's constants and each model's manifest entry), the table of
trained models, and a note on models trained at another FAST raw decimation than the
search now uses (:mod:`drafts_ops.ml.card` explains the markers)."""

from __future__ import annotations

from pathlib import Path

from drafts_ops.ml import inputs
from drafts_ops.ml.card import card_path, write_generated
from drafts_ops.ml.inference import DETECTOR_SCALES
from drafts_ops.ml.manifest import read_manifest
from drafts_ops.simulate import network_examples as examples
from drafts_ops.training.harvest import DETECTOR_HARVEST_SEEDS, HARVEST_SEARCH, band_decimation
from drafts_ops.training.train import (
    CLASSIFIER_JITTER,
    DETECTOR_SURVEY_SHARE,
    DM_TIME_DROPOUT,
    HEATMAP_SIGMA,
    TRAIN_CROP,
)


def fast_raw_decimation(info: dict) -> str:
    """The FAST raw band's search decimation a model was trained at (its manifest entry's
    ``band_decimation``, recorded by ``drafts train``)."""
    t, f = info.get("band_decimation", {}).get("fast-raw", (None, None))
    return f"x{t} t x{f} f" if t else "decimation not recorded"


def crop_scales(info: dict, inference: tuple[int, ...] = DETECTOR_SCALES) -> str:
    """The time-averaging factors of a detector's training crops (its manifest entry's
    ``time_scales``), beside those inference runs at."""
    trained = tuple(info.get("time_scales", ()))
    names = ", ".join(str(f) for f in trained)
    if trained == tuple(inference):
        return f"{names} (those inference runs at)"
    if not trained:
        return "not recorded"
    unseen = ", ".join(str(f) for f in inference if f not in trained)
    return f"{names}; inference also runs at {unseen}, which the network never saw in training"


def subband_view(info: dict) -> str:
    """Whether a detector also saw the ``--detector-subbands`` input (its manifest entry's
    ``subband_view``)."""
    n = int(info.get("subband_view", 1))
    if n <= 1:
        return "no (full band only)"
    return (f"yes: as many crops of the input `--detector-subbands {n}` gives (the "
            f"rows raised to the {n} sub-bands' where those are higher), from the same "
            "pass")  # fmt: skip


def _range(key: str, unit: str = "") -> str:
    lo, hi = examples.BURST_RANGES[key]
    return f"{lo:g} to {hi:g}{unit}"


def recipe_section(manifest: dict) -> str:
    """The recipe table: what the networks see and how they were trained."""
    models = manifest.get("models", {})
    det, clf = models.get("detector.onnx", {}), models.get("classifier.onnx", {})
    lo, hi = inputs.CLIP_SIGMA
    rows = [
        ("classifier input", f"{inputs.CLASSIFIER_SIZE} x {inputs.CLASSIFIER_SIZE} per image"),
        ("detector input rows", f"{inputs.DETECTOR_ROWS} (DM axis max-pooled)"),
        (
            "standardised rows",
            f"clipped to [{lo:g}, {hi:g}] sigma, divided by {inputs.INPUT_SCALE:g}",
        ),
        ("synthetic blocks", f"{examples.NCHAN} channels, {examples.DETECTOR_COLUMNS} columns"),
        ("synthetic burst S/N", _range("snr")),
        ("synthetic FWHM", _range("width_samples", " samples")),
        ("synthetic scattering", "none (half) or " + _range("scattering_samples", " samples")),
        ("synthetic spectral index", _range("spectral_index")),
        ("synthetic DM (classifier)", _range("dm", " pc cm^-3")),
        ("detector pool", f"{det.get('pool_size', '?')} images"),
        ("detector survey seeds", ", ".join(str(s) for s in DETECTOR_HARVEST_SEEDS)),
        ("detector survey share", f"{DETECTOR_SURVEY_SHARE:.0%} of every batch"),
        ("detector FAST raw search", fast_raw_decimation(det)),
        ("detector crop scales", crop_scales(det)),
        ("detector sub-band view", subband_view(det)),
        ("detector crops", f"{TRAIN_CROP} columns; heatmap sigma {HEATMAP_SIGMA:g} cell"),
        ("classifier pool", f"{clf.get('pool_size', '?')} examples"),
        ("classifier harvest", f"full band and {HARVEST_SEARCH['search_subbands']} sub-bands"),
        ("classifier FAST raw search", fast_raw_decimation(clf)),
        ("classifier time jitter", f"up to {CLASSIFIER_JITTER} columns"),
        ("classifier DM-time dropout", f"{DM_TIME_DROPOUT:.0%} of examples"),
        ("detector scales at inference", ", ".join(str(f) for f in DETECTOR_SCALES)),
    ]
    lines = ["| what | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def training_section(manifest: dict) -> str:
    """The table of trained models (size, steps, seed, seconds, loss, sha256)."""
    rows = ["| model | size | steps | seed | data (s) | training (s) | CPU (s) | final loss "
            "| sha256 |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, info in sorted(manifest["models"].items()):
        rows.append(
            f"| {name} | {info.get('size_bytes', 0) / 1024:.0f} kB | {info.get('steps')} | "
            f"{info.get('seed')} | {info.get('seconds_data')} | {info.get('seconds_train')} | "
            f"{info.get('cpu_seconds', '?')} | {info.get('final_loss')} | `{info['sha256']}` |"
        )
    return "\n".join(rows) + _pool_built(manifest)


def _pool_built(manifest: dict) -> str:
    """What making the detector's pool cost where the recorded run read it from
    ``--pool-cache`` (its manifest entry's ``seconds_data_built``)."""
    info = manifest.get("models", {}).get("detector.onnx", {})
    built = info.get("seconds_data_built")
    if built is None or built <= float(info.get("seconds_data", 0.0)) + 60:
        return ""
    return ("\n\nThe detector's data seconds are those of a run that read its pool from "
            "`--pool-cache`: making it (simulating and searching the survey seeds' "
            f"observations, and the 64-channel blocks) took {built / 60:.0f} minutes more on "
            "2 cores.")  # fmt: skip


def stale_bands_section(manifest: dict) -> str:
    """A note naming the models trained at another FAST raw decimation than the search now
    uses (empty when none is)."""
    now = band_decimation()["fast-raw"]
    stale = {name: info["band_decimation"]["fast-raw"]
             for name, info in sorted(manifest.get("models", {}).items())
             if info.get("band_decimation", {}).get("fast-raw", now) != now}  # fmt: skip
    if not stale:
        return ""
    seen = "; ".join(f"{name} at x{t} t x{f} f" for name, (t, f) in stale.items())
    return (f"These models saw the FAST raw band searched at another decimation ({seen}, "
            f"their manifest entries' `band_decimation`) than the search now uses (x{now[0]} "
            f"t x{now[1]} f) and were not retrained for it: the held-out FAST raw figures "
            "are measured with them.")  # fmt: skip


def write_training_sections(folder: str | Path) -> Path:
    """Rewrite the recipe, training and stale-bands sections of ``folder``'s card from its
    manifest (the card is copied from the shipped one first when ``folder`` has none)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    for name, info in manifest["models"].items():
        path = folder / name
        info["size_bytes"] = path.stat().st_size if path.exists() else 0
    return write_generated(card_path(folder), {
        "recipe": recipe_section(manifest),
        "training": training_section(manifest),
        "stale-bands": stale_bands_section(manifest),
    })  # fmt: skip
