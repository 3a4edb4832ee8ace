"""The model card: hand-written prose with generated sections between markers, each
rewritten by the command that measures it and nothing else; the README's sensitivity
table agrees with the card's generated one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.ml.card import SECTIONS, generated_section, with_generated, write_generated
from drafts_ops.ml.inference import DETECTOR_SCALES
from drafts_ops.training.card import (
    recipe_section,
    stale_bands_section,
    training_section,
    write_training_sections,
)

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "models" / "MODEL_CARD.md"


def _manifest() -> dict:
    return json.loads((ROOT / "models" / "manifest.json").read_text())


def test_the_shipped_card_has_every_generated_section_once():
    text = CARD.read_text()
    for name in SECTIONS:
        assert text.count(f"<!-- generated: {name} (") == 1, name
        assert generated_section(text, name) is not None, name


def test_a_section_is_replaced_and_nothing_else_changes():
    text = CARD.read_text()
    once = with_generated(text, "validation", "| new | table |")
    assert generated_section(once, "validation") == "| new | table |\n"
    assert with_generated(once, "validation", generated_section(text, "validation")) == text
    assert with_generated(once, "validation", "| new | table |") == once  # idempotent
    before, after = (
        text.split("<!-- generated: validation"),
        once.split("<!-- generated: validation"),
    )
    assert before[0] == after[0]  # the prose before it is untouched
    assert before[1].split("<!-- end generated: validation -->")[1] == \
        after[1].split("<!-- end generated: validation -->")[1]  # fmt: skip


def test_a_card_without_the_markers_is_refused_not_rewritten(tmp_path):
    card = tmp_path / "MODEL_CARD.md"
    card.write_text("# Card\n\nhand-written\n")
    with pytest.raises(ParameterError, match=r"MODEL_CARD.md: no generated section 'end-to-end'"):
        write_generated(card, {"end-to-end": "table"})
    assert card.read_text() == "# Card\n\nhand-written\n"
    with pytest.raises(ParameterError, match="unknown model-card section"):
        with_generated(CARD.read_text(), "limits", "x")


def test_training_rewrites_its_sections_and_keeps_the_rest(tmp_path):
    shutil.copy(ROOT / "models" / "manifest.json", tmp_path / "manifest.json")
    shutil.copy(CARD, tmp_path / "MODEL_CARD.md")
    text = write_training_sections(tmp_path).read_text()
    old = CARD.read_text()
    for name in ("validation", "classifier-candidates", "end-to-end"):
        assert generated_section(text, name) == generated_section(old, name)
    assert (
        "## Inference cost" in text
        and text.split("## Inference cost")[1].split("## Limits")[0]
        == old.split("## Inference cost")[1].split("## Limits")[0]
    )
    sha = _manifest()["models"]["detector.onnx"]["sha256"]
    assert sha in generated_section(text, "training")


def test_a_folder_without_a_card_gets_the_shipped_prose(tmp_path):
    shutil.copy(ROOT / "models" / "manifest.json", tmp_path / "manifest.json")
    text = write_training_sections(tmp_path).read_text()
    assert text.startswith("# drafts-ops neural models") and "## Limits" in text


def test_recipe_names_the_fast_raw_decimation_each_model_saw():
    manifest = _manifest()
    manifest["models"]["detector.onnx"]["band_decimation"] = {"fast-raw": [8, 8]}
    manifest["models"]["classifier.onnx"]["band_decimation"] = {"fast-raw": [8, 2]}
    recipe = recipe_section(manifest)
    assert "| detector FAST raw search | x8 t x8 f |" in recipe
    assert "| classifier FAST raw search | x8 t x2 f |" in recipe
    assert "another decimation (detector.onnx at x8 t x8 f," in stale_bands_section(manifest)
    manifest["models"]["detector.onnx"]["band_decimation"] = {"fast-raw": [8, 2]}
    assert stale_bands_section(manifest) == ""


def test_recipe_names_time_scales_the_detector_never_saw_in_training():
    manifest = _manifest()
    manifest["models"]["detector.onnx"]["time_scales"] = list(DETECTOR_SCALES[:-1])
    recipe = recipe_section(manifest)
    assert f"inference also runs at {DETECTOR_SCALES[-1]}, which the network never saw" in recipe
    manifest["models"]["detector.onnx"]["time_scales"] = list(DETECTOR_SCALES)
    assert "never saw" not in recipe_section(manifest)


def test_recipe_says_whether_the_detector_saw_the_subband_view():
    manifest = _manifest()
    manifest["models"]["detector.onnx"]["subband_view"] = 4
    assert "input `--detector-subbands 4` gives" in recipe_section(manifest)
    manifest["models"]["detector.onnx"]["subband_view"] = 1
    assert "| detector sub-band view | no (full band only) |" in recipe_section(manifest)


def test_training_table_says_what_making_a_cached_detector_pool_cost():
    manifest = _manifest()
    entry = manifest["models"]["detector.onnx"]
    entry.update(seconds_data=2.0, seconds_data_built=1252.3)
    text = " ".join(training_section(manifest).split())
    assert "read its pool from `--pool-cache`: making it" in text and "took 21 minutes" in text
    entry.update(seconds_data=1252.3)  # made in the recorded run itself: nothing to add
    assert "making it" not in training_section(manifest)


def _at_least_8(card_text: str, column: str) -> str:
    """The card's end-to-end recall at injected S/N >= 8 in ``column``."""
    section = generated_section(card_text, "end-to-end")
    table = section.split("Recall by injected S/N")[1]
    header = next(line for line in table.splitlines() if line.startswith("| injected S/N"))
    names = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in table.splitlines() if line.startswith("| >= 8 |"))
    return [c.strip() for c in row.strip("|").split("|")][names.index(column)]


def test_the_readme_sensitivity_table_is_the_cards():
    """The README copies one row per search from the card's generated table: they agree."""
    readme = (ROOT / "README.md").read_text()
    card = CARD.read_text()
    for label, column in (("classical + classifier", "classical + classifier"),
                          ("both detectors + classifier", "both + classifier")):  # fmt: skip
        row = re.search(rf"^\| {re.escape(label)} \|(.*)$", readme, flags=re.M)
        assert row, label
        cells = [c.strip() for c in row.group(1).strip("|").split("|")]
        assert cells[4] == _at_least_8(card, column), (label, cells)
