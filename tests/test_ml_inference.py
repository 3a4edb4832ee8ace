"""The shipped ONNX models: hash checks, and calls on simulated and real data."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from drafts_ops.core.errors import ModelError
from drafts_ops.core.resources import resource_dir
from drafts_ops.ml import inference
from drafts_ops.ml.inference import load_classifier, load_detector
from drafts_ops.ml.manifest import read_manifest, sha256_file
from drafts_ops.simulate import network_examples as data


@pytest.fixture(scope="module")
def classifier():
    return load_classifier()


@pytest.fixture(scope="module")
def detector():
    return load_detector()


def test_shipped_models_match_manifest_and_are_small():
    folder = resource_dir("models")
    manifest = read_manifest(folder)["models"]
    for name in ("detector.onnx", "classifier.onnx"):
        assert sha256_file(folder / name) == manifest[name]["sha256"]
        assert (folder / name).stat().st_size < 5 * 2**20
    assert (folder / "MODEL_CARD.md").read_text().count(manifest["detector.onnx"]["sha256"]) == 1


def test_corrupt_or_missing_model_raises(tmp_path):
    folder = resource_dir("models")
    for name in ("classifier.onnx", "manifest.json"):
        shutil.copy(folder / name, tmp_path / name)
    blob = bytearray((tmp_path / "classifier.onnx").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (tmp_path / "classifier.onnx").write_bytes(bytes(blob))
    with pytest.raises(ModelError, match=r"sha256 .* does not match"):
        load_classifier(tmp_path / "classifier.onnx")
    with pytest.raises(ModelError, match=r"detector\.onnx: model file not found"):
        load_detector(tmp_path / "detector.onnx")


def test_classifier_burst_and_noise(classifier):
    rng = np.random.default_rng(7)
    ft, dt, _, burst = data.classifier_example(rng, "burst", snr=20.0)
    assert burst is not None
    assert classifier.predict(ft, dt) >= 0.5
    assert classifier.predict(ft) >= 0.5  # the waterfall alone
    noise_ft, noise_dt, _, _ = data.classifier_example(rng, "noise")
    assert classifier.predict(noise_ft, noise_dt) < 0.5
    batch = classifier.predict(np.stack([ft, noise_ft]), np.stack([dt, noise_dt]))
    assert batch.shape == (2,) and batch[0] >= 0.5 > batch[1]


def test_classifier_on_real_fetch_candidate(classifier, real_data):
    h5py = pytest.importorskip("h5py")
    with h5py.File(real_data / "test.h5", "r") as f:
        ft, dt = f["data_freq_time"][:], f["data_dm_time"][:]
    assert classifier.predict(ft, dt) >= 0.5


def test_detector_finds_injected_burst(detector, monkeypatch):
    rng = np.random.default_rng(11)
    block = data.detector_example(
        rng, n_bursts=1, rfi=(), columns=512, snr=15.0, width_s=2e-3, scattering_s=0.0
    )
    burst = block.bursts[0]
    peaks = detector.detect(block.dm_time, threshold=0.5)
    assert peaks, "no detection of an S/N 15 burst"
    best = peaks[0]
    assert abs(best.dm_index - data.dm_index(block.dms, burst.dm)) <= max(3, 0.05 * block.dms.size)
    assert abs(best.sample - block.sample(burst)) <= 4 + burst.width_s / block.setup.tsamp
    assert 0.5 <= best.score <= 1.0
    # the same block in overlapping tiles of 192 columns gives the same detection
    monkeypatch.setattr(inference, "TILE_COLUMNS", 192)
    monkeypatch.setattr(inference, "TILE_OVERLAP", 64)
    tiled = detector.detect(block.dm_time, threshold=0.5)
    assert abs(tiled[0].sample - best.sample) <= 2 and abs(tiled[0].dm_index - best.dm_index) <= 2
    quiet = data.detector_example(rng, n_bursts=0, rfi=(), columns=512)
    assert detector.detect(quiet.dm_time, threshold=0.5) == []


@pytest.mark.parametrize("seed", [13, 15, 16])
def test_detector_finds_a_burst_smeared_over_many_samples(detector, seed):
    # a high-DM burst at fine sampling (FAST-like: ~10 ms of channel smearing at 0.2 ms) is
    # as wide in samples as this block stretched 16x in time: the default scales reach it
    rng = np.random.default_rng(seed)
    block = data.detector_example(
        rng, n_bursts=1, rfi=(), columns=512, snr=15.0, width_s=2e-3, scattering_s=0.0
    )
    # (the stretched noise is correlated over 16 samples, which white noise at x1 never is:
    # it gives peaks of its own at x1, so the burst's peak is looked up by place)
    burst, stretch = block.bursts[0], 16
    peaks = detector.detect(np.repeat(block.dm_time, stretch, axis=1), threshold=0.3)
    at_burst = [p for p in peaks
                if abs(p.dm_index - data.dm_index(block.dms, burst.dm)) <= 3
                and abs(p.sample / stretch - block.sample(burst)) <= 4]  # fmt: skip
    assert at_burst, "no detection of a burst 16x wider in samples"
    assert at_burst[0].score >= 0.5
    assert at_burst[0].factor >= 4, "found only at the fine scales"


def test_detector_merges_peaks_by_the_coarser_of_their_scales(detector, monkeypatch):
    # two bursts 40 samples apart found at x1 and x2, and one blob between them at x16
    found = {1: [(100.0, 0.9)], 2: [(140.0, 0.8)], 16: [(120.0, 0.7)]}

    def passes(dm_time, threshold, factor):
        return [inference.DetectorPeak(10.0, t, score) for t, score in found.get(factor, [])]

    monkeypatch.setattr(detector, "_detect_scale", passes)
    peaks = detector.detect(np.zeros((64, 2048), np.float32), scales=(1, 2, 16))
    assert [(p.sample, p.factor) for p in peaks] == [(100.0, 1), (140.0, 2)]


def test_classifier_on_real_pulse_in_28fil(classifier, real_data):
    from drafts_ops.detect.cutouts import cutout_span, dm_time_cutout, freq_time_cutout
    from drafts_ops.detect.preprocess import auto_mask
    from drafts_ops.io import open_observation

    dm, width = 475.28, 4  # the pulse (PROVENANCE.md); FETCH width 2 = 2**2 samples
    with open_observation(real_data / "28.fil") as reader:
        h = reader.header
        sample = round(2.02888 / h.tsamp)
        start, stop = cutout_span(h.chan_freqs, h.tsamp, dm, sample, width)
        block = reader.read_block(max(start, 0), stop - max(start, 0))
    args = (block, h.chan_freqs, h.tsamp, dm, sample - max(start, 0), width)
    mask = auto_mask(block)
    ft = freq_time_cutout(*args, chan_mask=mask)
    dt = dm_time_cutout(*args, chan_mask=mask)
    assert classifier.predict(ft, dt) >= 0.5
    # the same file 1.5 s later holds no pulse
    args = (block, h.chan_freqs, h.tsamp, dm, sample - max(start, 0) - 1200, width)
    assert (
        classifier.predict(
            freq_time_cutout(*args, chan_mask=mask), dm_time_cutout(*args, chan_mask=mask)
        )
        < 0.5
    )


def test_classifier_does_not_depend_on_exact_centring(classifier, tmp_path):
    """The search places a candidate only to within a sample or two, at a width from its
    boxcar set: a band-limited burst (13% of the FAST-like band, scattered) must be called
    a burst at every nearby centring and width, not at some and rejected at others."""
    from drafts_ops.detect.candidates import Candidate
    from drafts_ops.search import SearchConfig, make_cutouts, plan_search
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation
    from drafts_ops.simulate.bands import survey_band

    burst = BurstSpec(t_s=1.5, dm=458.0, snr=20.0, width_s=2e-4, scattering_s=8e-4,
                      band_centre_mhz=1357.6, band_fwhm_mhz=63.7)  # fmt: skip
    config = SimulationConfig(**survey_band("fast").simulation_fields(), duration_s=3.5,
                              seed=4, nbits=8, bursts=(burst,))  # fmt: skip
    path = write_simulation(tmp_path / "burst.fil", config)
    plan = plan_search(path, SearchConfig(dm_max=1000, write_h5=False, write_plots=False))
    ts, centre = plan.header.tsamp, round(burst.t_s / plan.header.tsamp)
    trial = plan.dm_plan().nearest_trial(burst.dm)
    cands = [Candidate(tcand_s=(centre + shift) * ts, dm=burst.dm, snr=20.0, width_samples=w,
                       width_s=w * ts, dm_index=trial, sample=centre + shift)
             for w in (8, 16) for shift in (-1, 0, 1, 3)]  # fmt: skip
    ft, dt = (
        np.load(make_cutouts(cands, path, plan, tmp_path))[k] for k in ("freq_time", "dm_time")
    )
    probs = classifier.predict(ft.astype(np.float32), dt.astype(np.float32))
    assert np.all(probs >= 0.5), np.round(probs, 2)
