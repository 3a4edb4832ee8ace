"""Preprocessing, heatmap decoding and model-manifest checks (no model files, no torch)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drafts_ops.core.errors import ModelError, ParameterError
from drafts_ops.ml import inputs as pp
from drafts_ops.ml.inference import decode_heatmap, load_classifier, load_detector
from drafts_ops.ml.manifest import sha256_file, update_manifest, verify_model


def test_resample_mean_matches_block_average(rng):
    a = rng.standard_normal((12, 256))
    out = pp.resample_axis(a, 64, axis=1)
    np.testing.assert_allclose(out, a.reshape(12, 64, 4).mean(axis=2), rtol=1e-5, atol=1e-6)


def test_resample_mean_fractional_conserves_sum(rng):
    a = rng.random((5, 100))
    out = pp.resample_axis(a, 37, axis=1)
    np.testing.assert_allclose(out.sum(axis=1) * 100 / 37, a.sum(axis=1), rtol=1e-5)


def test_resample_max_keeps_narrow_peak(rng):
    a = rng.standard_normal((256, 8))
    a[129, 3] = 50.0
    out = pp.resample_axis(a, 64, axis=0, reduce="max")
    np.testing.assert_allclose(out, a.reshape(64, 4, 8).max(axis=1), rtol=1e-6)
    assert out[32, 3] == pytest.approx(50.0)


def test_resample_grow_interpolates_linearly():
    a = np.array([[0.0, 1.0]])
    np.testing.assert_allclose(pp.resample_axis(a, 4, axis=1), [[0.0, 0.25, 0.75, 1.0]])


def test_standardise_rows_by_value(rng):
    img = rng.normal(5.0, 3.0, (4, 2001))
    z = pp.robust_standardise_rows(img)
    med = np.median(img, axis=1, keepdims=True)
    sigma = 1.4826 * np.median(np.abs(img - med), axis=1, keepdims=True)
    expect = np.clip((img - med) / sigma, -8, 32) / 4
    np.testing.assert_allclose(z, expect, rtol=1e-4, atol=1e-5)
    assert np.all(pp.robust_standardise_rows(np.ones((2, 10))) == 0)


def test_standardise_even_rows_batches_and_time_average(rng):
    """Rows standardised by their median (mean of the two middle values for an even row)
    and MAD on batches of images too, and the detector's time averaging equals the block
    mean."""
    imgs = rng.normal(5.0, 3.0, (3, 8, 64)).astype(np.float32)
    med = np.median(imgs, axis=-1, keepdims=True)
    sigma = 1.4826 * np.median(np.abs(imgs - med), axis=-1, keepdims=True)
    expect = np.clip((imgs - med) / sigma, -8, 32) / 4
    np.testing.assert_allclose(pp.robust_standardise_rows(imgs), expect, rtol=1e-5, atol=1e-6)
    long = rng.normal(5.0, 3.0, (2, 8192)).astype(np.float32)  # statistics from 1024 samples
    z = pp.robust_standardise_rows(long)
    assert np.all(np.abs(np.median(z, axis=1)) < 0.02)
    np.testing.assert_allclose(4 * z.std(axis=1), 1.0, atol=0.06)
    rows = rng.normal(size=(4, 96)).astype(np.float32)
    for factor in (1, 2, 4):
        np.testing.assert_allclose(pp.time_average(rows, factor),
                                   rows.reshape(4, -1, factor).mean(axis=2), rtol=1e-6)  # fmt: skip


def test_prepare_shapes_and_centre_crop(rng):
    ft = rng.standard_normal((256, 256))  # FETCH layout [time, freq]
    ft[128, :] += 10.0  # a burst at the central time sample, all channels
    out = pp.prepare_freq_time(ft)
    assert out.shape == (64, 64)
    assert np.argmax(out.mean(axis=0)) == 32  # time column 128 -> central crop column 32
    assert pp.prepare_dm_time_cutout(rng.standard_normal((256, 256))).shape == (64, 64)
    det = pp.prepare_dm_time(rng.standard_normal((200, 1000)), time_factor=3)
    assert det.shape == (64, pp.detector_width(1000, 3)) == (64, 336)


def test_detector_coordinates_round_trip():
    dm, t = np.array([0.0, 17.3, 199.0]), np.array([5.0, 400.5, 999.0])
    row, col = pp.input_to_detector_coords(dm, t, 200, 3)
    back = pp.detector_to_input_coords(row, col, 200, 3)
    np.testing.assert_allclose(back, (dm, t), atol=1e-9)


def test_bad_images_raise():
    with pytest.raises(ParameterError, match="2-D"):
        pp.prepare_dm_time(np.zeros(10))
    with pytest.raises(ParameterError, match="NaN"):
        pp.prepare_freq_time(np.full((8, 8), np.nan))


def test_decode_heatmap_peaks_and_offsets():
    heat = np.zeros((16, 32), np.float32)
    offset = np.zeros((2, 16, 32), np.float32)
    heat[5, 7], offset[:, 5, 7] = 0.9, (0.25, 0.5)
    heat[5, 8] = 0.6  # a neighbour of the stronger peak: suppressed
    heat[12, 30] = 0.4
    rows, cols, scores = decode_heatmap(heat, offset, threshold=0.3, max_peaks=10)
    np.testing.assert_allclose(scores, [0.9, 0.4], rtol=1e-6)
    np.testing.assert_allclose(rows, [4 * 5.25 - 0.5, 4 * 12 - 0.5])
    np.testing.assert_allclose(cols, [4 * 7.5 - 0.5, 4 * 30 - 0.5])


def test_manifest_verify(tmp_path):
    model = tmp_path / "classifier.onnx"
    model.write_bytes(b"not really a model")
    update_manifest(tmp_path, model.name, steps=3)
    entry = json.loads((tmp_path / "manifest.json").read_text())["models"][model.name]
    assert entry == {"sha256": sha256_file(model), "steps": 3}
    assert verify_model(model) == model
    model.write_bytes(b"not really a model!")
    with pytest.raises(ModelError, match="does not match the manifest"):
        verify_model(model)
    with pytest.raises(ModelError, match="model file not found"):
        load_detector(tmp_path / "detector.onnx")


def test_unlisted_or_unloadable_model(tmp_path):
    model = tmp_path / "classifier.onnx"
    model.write_bytes(b"junk")
    with pytest.raises(ModelError, match="manifest not found"):
        load_classifier(model)
    update_manifest(tmp_path, model.name)
    with pytest.raises(ModelError, match="ONNX Runtime cannot load"):
        load_classifier(model)
    (tmp_path / "other.onnx").write_bytes(b"x")
    with pytest.raises(ModelError, match="not listed"):
        verify_model(tmp_path / "other.onnx")


def test_suppress_duplicates_keeps_strongest_per_neighbourhood():
    from drafts_ops.ml.inference import DetectorPeak, suppress_duplicates

    peaks = [
        DetectorPeak(10.0, 100.0, 0.6),
        DetectorPeak(11.0, 104.0, 0.9),  # same burst at another scale, stronger
        DetectorPeak(10.5, 300.0, 0.4),  # far in time: kept
        DetectorPeak(40.0, 101.0, 0.5),  # far in DM: kept
    ]
    kept = suppress_duplicates(peaks, radius_dm=2.0, radius_columns=8.0)
    assert [p.score for p in kept] == [0.9, 0.5, 0.4]


def test_close_bursts_stay_apart_at_the_scale_that_resolves_them():
    # two bursts 40 samples apart, each found at x1; a x16 pass sees one blob between them
    from drafts_ops.ml.inference import DetectorPeak, suppress_duplicates

    first, second = DetectorPeak(10.0, 100.0, 0.9, 1), DetectorPeak(10.0, 140.0, 0.8, 1)
    blob = DetectorPeak(10.0, 120.0, 0.7, 16)
    kept = suppress_duplicates([first, second, blob], radius_dm=2.0, radius_columns=8.0)
    assert kept == [first, second]  # the blob is within 8 x16 columns of both
    assert suppress_duplicates([blob, second], 2.0, 8.0) == [second]


def _suppressed_pairwise(peaks, radius_dm, radius_columns):
    """The greedy rule written out pair by pair (the Python loop the kernel replaced)."""
    kept = []
    for peak in sorted(peaks, key=lambda p: -p.score):
        if all(abs(peak.dm_index - k.dm_index) > radius_dm
               or abs(peak.sample - k.sample) > radius_columns * max(peak.factor, k.factor)
               for k in kept):  # fmt: skip
            kept.append(peak)
    return kept


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_suppression_keeps_the_peaks_of_the_pairwise_rule(seed):
    # hundreds of peaks over five scales, as a FAST-like block gives, with tied scores
    from drafts_ops.ml.inference import DetectorPeak, suppress_duplicates

    rng = np.random.default_rng(seed)
    n = 600
    peaks = [DetectorPeak(float(d), float(t), float(s), int(f)) for d, t, s, f in zip(
        rng.uniform(0, 1279, n), rng.uniform(0, 35000, n),
        rng.choice(np.linspace(0.2, 1.0, 41), n), rng.choice([1, 2, 4, 8, 16], n),
        strict=True)]  # fmt: skip
    kept = suppress_duplicates(peaks, radius_dm=40.0, radius_columns=8.0)
    assert kept == _suppressed_pairwise(peaks, 40.0, 8.0)
    assert 0 < len(kept) < n  # the rule both keeps and drops peaks here
    assert suppress_duplicates([], 40.0, 8.0) == []


@pytest.mark.parametrize("ndm", [40, 64, 1279])
def test_pooling_rows_first_gives_the_same_detector_input(ndm):
    """The detector pools a block's DM axis once for every tile and time scale: that must
    equal preparing each tile from the unpooled block."""
    block = np.random.default_rng(ndm).standard_normal((ndm, 700)).astype(np.float32)
    pooled = pp.resample_axis(block, pp.DETECTOR_ROWS, 0, "max")
    assert pooled.dtype == np.float32 and pooled.shape == (pp.DETECTOR_ROWS, 700)
    for a, b, factor in ((0, 700, 1), (96, 500, 2), (13, 610, 4)):
        np.testing.assert_array_equal(pp.prepare_dm_time(pooled[:, a:b], factor),
                                      pp.prepare_dm_time(block[:, a:b], factor))  # fmt: skip


def test_standardise_rows_bit_for_bit_numpy(rng):
    """The compiled standardisation gives exactly the numpy expressions the networks were
    trained with: float32 median (mean of the two middle values), 1.4826 x MAD from every
    ``step``-th sample of long rows, clip, scale; on strided views, batches and flat rows."""

    def numpy_rows(img):
        img = np.asarray(img, np.float32)
        step = max(1, img.shape[-1] // pp.STATISTICS_POINTS)
        part = img[..., ::step]
        med = np.median(part, axis=-1, keepdims=True)
        sigma = pp.MAD_TO_SIGMA * np.median(np.abs(part - med), axis=-1, keepdims=True)
        flat = ~(sigma > 0)
        sigma = np.where(flat, np.abs(img - med).std(axis=-1, keepdims=True), sigma)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.subtract(img, med, dtype=np.float32) / sigma
        z[np.broadcast_to(~(sigma > 0), z.shape)] = 0.0
        return np.clip(z, *pp.CLIP_SIGMA) / np.float32(pp.INPUT_SCALE)

    wide = rng.normal(50.0, 3.0, (64, 9000)).astype(np.float32)
    sparse = np.zeros((3, 300), np.float32)
    sparse[1, ::50] = 3.0
    sparse[2] = rng.normal(size=300)
    for img in (wide[:, 1000:5100], wide[:, :4096], rng.normal(size=(3, 5, 64)), sparse,
                rng.normal(size=(2, 7))):  # fmt: skip
        got = pp.robust_standardise_rows(img)
        assert got.dtype == np.float32 and got.shape == np.shape(img)
        np.testing.assert_array_equal(got, numpy_rows(img))
    assert np.all(pp.robust_standardise_rows(sparse)[0] == 0)
