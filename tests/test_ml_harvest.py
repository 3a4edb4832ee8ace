"""Classifier examples harvested from the search: labels, balance, validation tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from drafts_ops.ml import inputs as pp
from drafts_ops.simulate import BurstSpec, RFISpec, SimulationConfig, write_simulation
from drafts_ops.simulate.bands import SurveyBand
from drafts_ops.training.classifier_validation import validate_classifier
from drafts_ops.training.harvest import (
    CandidatePool,
    balanced_indices,
    harvest_file,
    harvest_setup,
    interleaved_observations,
)

SIZE = pp.CLASSIFIER_SIZE


def test_balanced_batches_are_half_bursts():
    labels = np.array([1.0] * 5 + [0.0] * 95, np.float32)
    idx = balanced_indices(labels, np.random.default_rng(0), 1000)
    assert idx.size == 1000 and labels[idx].mean() == pytest.approx(0.5)
    only = balanced_indices(np.zeros(10, np.float32), np.random.default_rng(0), 8)
    assert only.size == 8 and only.max() < 10


def test_observations_alternate_between_bands():
    setup = harvest_setup(seed=3, per_bin=2)
    names = [band.name for band, _ in interleaved_observations(setup)]
    assert names[:4] == list(setup.bands)  # every band within the first files
    assert interleaved_observations(setup) == interleaved_observations(setup)  # seeded


def test_validation_tables_follow_the_probabilities():
    n = 8
    pool = CandidatePool(
        freq_time=np.zeros((n, SIZE, SIZE), np.float32),
        dm_time=np.zeros((n, SIZE, SIZE), np.float32),
        labels=np.array([1, 1, 1, 1, 0, 0, 0, 0], np.float32),
        causes=["burst"] * 4 + ["impulsive", "impulsive", "burst fragment", "noise"],
        snr=np.full(n, 9.0),
        injected_snr=np.array([7.0, 9.0, 25.0, 25.0] + [np.nan] * 4),
        bands=["gbt"] * n,
        minutes=1.0,
        files=1,
    )
    probs = np.array([0.2, 0.95, 0.95, 0.6, 0.05, 0.7, 0.05, 0.05])
    v = validate_classifier(pool, probs, seed=1)
    recall = {(r["lo"], r["hi"]): r["recall"] for r in v.recall_by_snr if r["n"]}
    assert recall == {(6.0, 8.0): 0.0, (8.0, 10.0): 1.0, (20.0, 30.0): 1.0}
    fp = {r["cause"]: r["fp_fraction"] for r in v.fp_by_cause}
    assert fp == {"burst fragment": 0.0, "impulsive": 0.5, "noise": 0.0}
    top = v.reliability[-1]
    assert (top["n"], top["burst_fraction"]) == (2, 1.0)
    assert sum(r["n"] for r in v.reliability) == n
    assert 0.0 <= v.expected_calibration_error <= 1.0
    assert "| impulsive | 2 | 0.50 |" in v.markdown()


def test_harvested_candidates_are_labelled_by_the_truth(tmp_path):
    band = SurveyBand("tiny", 64, 1500.0, -4.0, 1e-3)
    bursts = (BurstSpec(t_s=1.5, dm=120.0, snr=25.0, width_s=2e-3),
              BurstSpec(t_s=3.5, dm=250.0, snr=25.0, width_s=1e-3))  # fmt: skip
    rfi = (RFISpec(kind="impulsive", count=3, strength=6.0),)
    config = SimulationConfig(**band.simulation_fields(), duration_s=6.0, seed=12,
                              bursts=bursts, rfi=rfi)  # fmt: skip
    path = write_simulation(tmp_path / "tiny.fil", config)
    # impulse clipping off, so that the impulses give negatives
    pool = harvest_file(path, band, tmp_path, dm_max=300.0, options={"clip_impulses": 0.0})
    assert len(pool) >= 3 and pool.freq_time.shape[1:] == (SIZE, SIZE)
    assert int(pool.labels.sum()) == 2  # one candidate per burst
    assert sorted(pool.injected_snr[pool.labels > 0].tolist()) == [25.0, 25.0]
    negatives = [c for c, y in zip(pool.causes, pool.labels, strict=True) if y == 0]
    assert negatives and set(negatives) == {"impulsive"}
    assert pool.bands == ["tiny"] * len(pool) and pool.files == 1
    assert not list(tmp_path.glob("tiny-harvest"))  # the search outputs are removed


def test_harvest_cache_reads_back_the_same_pool(tmp_path):
    from drafts_ops.training.harvest import harvest

    lines = []
    first = harvest(3, 5, per_bin=1, cache=tmp_path, log=lines.append)
    again = harvest(3, 5, per_bin=1, cache=tmp_path, log=lines.append)
    assert lines[-1].startswith("harvest: reading") and len(first) >= 5
    assert np.array_equal(first.freq_time, again.freq_time)
    assert (first.causes, first.bands, first.files) == (again.causes, again.bands, again.files)
    assert np.array_equal(first.labels, again.labels) and again.minutes == first.minutes


def test_cli_evaluate_classifier_writes_its_tables(tmp_path, capsys):
    from drafts_ops.cli import build_parser
    from drafts_ops.ml.card import generated_section

    card = tmp_path / "CARD.md"
    shutil.copy(Path(__file__).resolve().parents[1] / "models" / "MODEL_CARD.md", card)
    args = build_parser().parse_args(["evaluate", "classifier", "--examples", "5", "--seed", "3",
                                      "--out", str(tmp_path), "--card", str(card),
                                      "--pool-cache", str(tmp_path / "pool")])  # fmt: skip
    assert args.func(args) == 0
    text = (tmp_path / "classifier_evaluation.md").read_text()
    assert text.startswith("# Classifier on search candidates") and "| injected S/N |" in text
    section = generated_section(card.read_text(), "classifier-candidates")
    assert section.startswith("Held-out seed 3:") and section in text
    assert len(list((tmp_path / "pool").glob("harvest-3-5-*.npz"))) == 1
    capsys.readouterr()
    assert args.func(args) == 0  # the second evaluation reads the kept candidates
    assert "harvest: reading" in capsys.readouterr().err
    assert (tmp_path / "classifier_evaluation.md").read_text() == text


def test_detector_images_put_the_label_on_the_burst(tmp_path):
    """The survey-band detector images are the search's DM-time data pooled as inference
    pools it, and each burst's label lands on its brightest pixel."""
    from drafts_ops.ml import inputs as pp
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation
    from drafts_ops.simulate.bands import survey_band
    from drafts_ops.training.harvest import DetectorImages, detector_crops, pooled_dm_time

    band = survey_band("gbt")
    burst = BurstSpec(t_s=4.0, dm=900.0, snr=40.0, width_s=3e-3)
    config = SimulationConfig(**band.simulation_fields(), duration_s=10.0, seed=3,
                              bursts=(burst,))  # fmt: skip
    path = write_simulation(tmp_path / "gbt.fil", config)
    views, plan = pooled_dm_time(path, band, tmp_path / "work", 1500.0, subbands=4)
    pooled, raised = views["full"], views["sub4"]
    dms = np.asarray(plan.dms)
    assert pooled.shape == raised.shape == (pp.DETECTOR_ROWS, plan.header.nsamples)
    # the --detector-subbands view: the full band's rows raised to the sub-bands' (scaled to
    # the full band's noise) wherever those are higher; the same rows from the same pass
    assert np.all(raised >= pooled) and np.mean(raised > pooled) > 0.1
    alone, _ = pooled_dm_time(path, band, tmp_path / "work1", 1500.0)
    assert list(alone) == ["full"] and np.array_equal(alone["full"], pooled)
    row, col = pp.input_to_detector_coords(np.interp(burst.dm, dms, np.arange(dms.size)),
                                           burst.t_s / plan.header.tsamp, dms.size, 1)  # fmt: skip
    peak_row, peak_col = np.unravel_index(np.argmax(pooled), pooled.shape)
    assert abs(peak_row - row) <= 1.5 and abs(peak_col - col) <= 3
    images, centres = detector_crops(pooled, np.array([(row, col)]), np.random.default_rng(0), 192)
    assert images.shape[1:] == (pp.DETECTOR_ROWS, 192) and len(centres) == len(images)
    (r, c), *_ = centres[0]
    assert images[0][round(r), round(c)] == images[0].max()  # standardised as inference does
    # crops averaged in time as inference's coarser scales average: the label follows
    coarse, centres4 = detector_crops(pooled, np.array([(row, col)]), np.random.default_rng(0),
                                      192, scales=(4,))  # fmt: skip
    (r4, c4), *_ = centres4[0]
    assert np.unravel_index(np.argmax(coarse[0]), coarse[0].shape) == (round(r4), round(c4))
    assert coarse[0].shape == (pp.DETECTOR_ROWS, 192)
    too_short = detector_crops(pooled[:, :700], np.array([(row, 300.0)]),
                               np.random.default_rng(0), 192, scales=(4,))  # fmt: skip
    assert too_short[1] == []  # 4 x 192 samples do not fit in 700
    saved = DetectorImages(images, centres, ["gbt"] * len(images)).save(tmp_path / "d.npz")
    back = DetectorImages.load(saved)
    assert back.centres == centres and np.array_equal(back.images, images)


def test_harvest_caches_are_named_by_the_bands_decimation(monkeypatch, tmp_path):
    """A pool harvested with FAST raw at x8 x8 is not read back for a search at x8 x2."""
    import dataclasses

    from drafts_ops.simulate import bands
    from drafts_ops.training import harvest as hv

    names = []
    monkeypatch.setattr(hv, "cached", lambda path, *args, **kw: names.append(path.name))
    hv.harvest(3, 5, cache=tmp_path)
    hv.harvest_detector_images((1,), cache=tmp_path)
    coarse = dataclasses.replace(bands.SURVEY_BANDS["fast-raw"], freq_decimation=8)
    monkeypatch.setitem(bands.SURVEY_BANDS, "fast-raw", coarse)
    hv.harvest(3, 5, cache=tmp_path)
    hv.harvest_detector_images((1,), cache=tmp_path)
    assert "fast-raw8x2" in names[0] and "fast-raw8x2" in names[1]
    assert names[2] == names[0].replace("fast-raw8x2", "fast-raw8x8")
    assert names[3] == names[1].replace("fast-raw8x2", "fast-raw8x8")
