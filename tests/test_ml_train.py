"""A few training steps of each model, exported to ONNX and run back through ONNX Runtime."""

from __future__ import annotations

import builtins
import json

import numpy as np
import pytest

from drafts_ops.core.errors import DraftsError

pytestmark = pytest.mark.train


def test_train_detector_few_steps_exports_matching_onnx(tmp_path):
    torch = pytest.importorskip("torch", reason="training needs the train extra (torch)")
    from drafts_ops.ml import inputs as pp
    from drafts_ops.ml.inference import DETECTOR_SCALES, load_detector
    from drafts_ops.training.train import train_detector

    result = train_detector(steps=2, seed=3, out=tmp_path, pool_size=2, survey_seeds=(),
                            log=lambda _: None)  # fmt: skip
    assert result.path == tmp_path / "detector.onnx" and result.size_bytes < 5 * 2**20
    entry = json.loads((tmp_path / "manifest.json").read_text())["models"]["detector.onnx"]
    assert entry["steps"] == 2 and entry["seed"] == 3 and entry["opset"] == 17
    # the model card says at which decimation the FAST raw band was searched for training
    assert entry["band_decimation"]["fast-raw"] == [8, 2]
    # and at which time scales its survey-band crops were averaged
    assert entry["time_scales"] == list(DETECTOR_SCALES)
    assert entry["subband_view"] == 1  # no survey-band images: no --detector-subbands crops
    det = load_detector(result.path)  # hash-checked against the manifest just written
    assert isinstance(det.detect(np.random.default_rng(0).standard_normal((70, 300))), list)

    # the exported graph computes what the trained torch network computes, for any width
    x = np.random.default_rng(1).standard_normal((2, 1, pp.DETECTOR_ROWS, 96)).astype(np.float32)
    with torch.no_grad():
        heat, offset = result.network.eval()(torch.from_numpy(x))
    heat_onnx, offset_onnx = det._session.run(None, {"dm_time": x})
    np.testing.assert_allclose(heat_onnx, torch.sigmoid(heat).numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(offset_onnx, offset.numpy(), rtol=1e-4, atol=1e-5)


def test_synthetic_detector_pool_is_kept_and_read_back(tmp_path, monkeypatch):
    from drafts_ops.simulate import network_examples as data
    from drafts_ops.training.train import synthetic_detector_pool

    made = synthetic_detector_pool(5, 2, tmp_path)
    assert made.images.shape[0] == 2 and len(made.centres) == 2 and made.seconds > 0
    assert (tmp_path / "detector-synthetic-5-2.npz").exists()
    monkeypatch.setattr(data, "detector_pool", lambda *a: pytest.fail("not read back"))
    again = synthetic_detector_pool(5, 2, tmp_path)
    assert np.array_equal(again.images, made.images) and again.centres == made.centres
    assert again.seconds == pytest.approx(made.seconds)  # what making them cost, kept


def test_train_classifier_few_steps(tmp_path):
    pytest.importorskip("torch", reason="training needs the train extra (torch)")
    from drafts_ops.ml.inference import load_classifier
    from drafts_ops.training.train import train_classifier

    result = train_classifier(steps=2, seed=4, out=tmp_path, pool_size=2, log=lambda _: None)
    clf = load_classifier(result.path)
    rng = np.random.default_rng(0)
    prob = clf.predict(rng.standard_normal((3, 256, 256)), rng.standard_normal((3, 256, 256)))
    assert prob.shape == (3,) and np.all((prob >= 0) & (prob <= 1))


def test_detector_targets_place_centre():
    from drafts_ops.training.train import detector_targets

    heat, offset, mask = detector_targets([(21.0, 30.5)], 64, 128)
    assert heat.shape == (1, 16, 32) and mask.sum() == 1
    i, j = np.unravel_index(np.argmax(heat[0]), heat[0].shape)
    assert (i, j) == (5, 7) and heat[0, i, j] == 1.0  # (21 + 0.5) / 4 = 5.375, 31 / 4 = 7.75
    np.testing.assert_allclose(offset[:, 5, 7], [0.375, 0.75])


def test_train_without_torch_says_install_extra(monkeypatch):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    from drafts_ops.cli import main

    with pytest.raises(DraftsError, match="install the train extra"):
        from drafts_ops.training.train import require_torch

        require_torch()
    assert main(["train", "detector", "--steps", "1"]) == 2


def test_classifier_training_shift_moves_each_example_by_its_own_columns():
    torch = pytest.importorskip("torch", reason="training needs the train extra (torch)")
    from drafts_ops.training.train import shift_columns

    images = torch.zeros((2, 1, 3, 8))
    images[:, :, :, 4] = 1.0  # a burst in column 4 of both examples
    moved = shift_columns(torch, images, np.array([2, -3]))
    assert moved.shape == images.shape
    assert moved[0, 0, :, 6].tolist() == [1.0] * 3 and moved[0].sum() == 3
    assert moved[1, 0, :, 1].tolist() == [1.0] * 3 and moved[1].sum() == 3
