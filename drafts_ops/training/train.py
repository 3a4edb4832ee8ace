"""Training and ONNX export of the detector and the classifier (needs the ``train`` extra).

Both trainings are seeded end to end (data, initial weights, batch order) and run on CPU
in minutes. The data come from :mod:`drafts_ops.simulate.network_examples` (the project's
simulator plus the reference dedisperser), already preprocessed exactly as inference does.

Detector: CenterNet focal loss on a Gaussian heatmap (sigma 1 cell) around each burst
centre (true DM, arrival at the top of the band) plus L1 loss on the sub-cell offsets.
Classifier: binary cross-entropy; the DM-time input is blanked for 25% of the examples so
that the classifier also works on the freq-time cutout alone, and both inputs are shifted
together in time by up to :data:`CLASSIFIER_JITTER` columns.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import DraftsError
from drafts_ops.ml import ModelKind
from drafts_ops.ml import inputs as pp
from drafts_ops.ml.inference import DETECTOR_SCALES, load_classifier
from drafts_ops.ml.manifest import update_manifest
from drafts_ops.simulate import network_examples as data
from drafts_ops.training.harvest import (
    DETECTOR_HARVEST_PER_BIN,
    DETECTOR_HARVEST_SEEDS,
    DETECTOR_HARVEST_SUBBANDS,
    DetectorImages,
    balanced_indices,
    band_decimation,
    cached,
    harvest,
    harvest_detector_images,
)
from drafts_ops.training.labelled import LabelledSet, scores, with_labelled
from drafts_ops.training.networks import (
    ClassifierExport,
    ClassifierNet,
    DetectorExport,
    DetectorNet,
)

if TYPE_CHECKING:
    from drafts_ops.training.harvest import DetectorImages

OPSET = 17
#: Sigma (heatmap cells) of the Gaussian drawn around each burst centre.
HEATMAP_SIGMA = 1.0
#: Width (columns) of the random crops of the detector's training images.
TRAIN_CROP = 128
#: Optimiser steps of a full detector training.
DETECTOR_STEPS = 8000
#: Fraction of each detector batch drawn from the search's own survey-band DM-time data
#: (the rest: simulated 64-channel blocks).
DETECTOR_SURVEY_SHARE = 0.75
#: Fraction of classifier examples trained with the DM-time input blanked.
DM_TIME_DROPOUT = 0.25
#: Largest time shift (columns, either way) of a classifier example in training: the
#: search centres a candidate only to within a sample or two, and its decimation phase
#: varies, so the classifier must not depend on the exact centring.
CLASSIFIER_JITTER = 4


def require_torch():
    """Import torch, or explain how to get it."""
    try:
        import torch  # lazy: PyTorch is the optional train extra
    except ImportError as err:
        raise DraftsError(
            "training needs PyTorch: install the train extra (pip install 'drafts-ops[train]')"
        ) from err
    return torch


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced."""

    kind: ModelKind
    path: Path
    steps: int
    seed: int
    seconds_data: float
    seconds_train: float
    final_loss: float
    size_bytes: int
    network: Any = field(default=None, repr=False, compare=False)  # the trained torch module


# -- detector targets and loss -----------------------------------------------------------
def detector_targets(
    centres: list[tuple[float, float]], height: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heatmap ``[1, h, w]``, offsets ``[2, h, w]`` and offset mask ``[1, h, w]`` at stride 4.

    ``centres`` are (row, col) in detector-pixel coordinates (pixel centres at integers).
    """
    s = pp.DETECTOR_STRIDE
    h, w = height // s, width // s
    heat = np.zeros((1, h, w), np.float32)
    offset = np.zeros((2, h, w), np.float32)
    mask = np.zeros((1, h, w), np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    for row, col in centres:
        cy, cx = (row + 0.5) / s, (col + 0.5) / s
        i, j = math.floor(cy), math.floor(cx)
        if not (0 <= i < h and 0 <= j < w):
            continue
        g = np.exp(-((yy - i) ** 2 + (xx - j) ** 2) / (2 * HEATMAP_SIGMA**2))
        heat[0] = np.maximum(heat[0], g)
        offset[:, i, j] = (cy - i, cx - j)
        mask[0, i, j] = 1.0
    return heat, offset, mask


def _focal_loss(torch, logits, target):
    """CenterNet's penalty-reduced focal loss (alpha 2, beta 4), per positive centre."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = target.eq(1).float()
    neg = 1 - pos
    pos_loss = torch.log(p) * (1 - p) ** 2 * pos
    neg_loss = torch.log(1 - p) * p**2 * (1 - target) ** 4 * neg
    npos = pos.sum().clamp(min=1.0)
    return -(pos_loss.sum() + neg_loss.sum()) / npos


# -- training loops ------------------------------------------------------------------------
def _setup(seed: int, device: str):
    torch = require_torch()
    torch.manual_seed(seed)
    threads = int(os.environ.get("DRAFTS_TRAIN_THREADS", "1"))  # 2 threads thrash on a shared CPU
    torch.set_num_threads(threads)
    return torch, torch.device(device)


def _schedule(torch, optimiser, steps: int):
    return torch.optim.lr_scheduler.OneCycleLR(
        optimiser,
        max_lr=optimiser.param_groups[0]["lr"],
        total_steps=max(steps, 1),
        pct_start=0.15,
    )


def _optimise(net, opt, sched, steps: int, batch_loss, *, name: str, log) -> tuple[float, float]:
    """Run ``steps`` optimiser steps on ``batch_loss()``; (smoothed final loss, seconds)."""
    t1, loss_avg = time.perf_counter(), float("nan")
    net.train()
    for step in range(steps):
        loss = batch_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        loss_avg = loss.item() if step == 0 else 0.95 * loss_avg + 0.05 * loss.item()
        if (step + 1) % max(steps // 10, 1) == 0:
            log(f"{name} step {step + 1}/{steps}: loss {loss_avg:.4f}")
    return loss_avg, time.perf_counter() - t1


def _crop(torch, tensor, idx: np.ndarray, starts: np.ndarray, width: int):
    """Batch of ``tensor[i, ..., s:s + width]`` for each (i, s)."""
    return torch.stack([tensor[i, ..., s : s + width] for i, s in zip(idx, starts, strict=True)])


def train_detector(
    steps: int = DETECTOR_STEPS,
    seed: int = 0,
    out: str | Path = "models",
    device: str = "cpu",
    *,
    batch_size: int = 16,
    pool_size: int = 1600,
    survey_seeds: Sequence[int] | None = None,
    survey_per_bin: int | None = None,
    survey_share: float = DETECTOR_SURVEY_SHARE,
    pool_cache: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Train the DM-time detector and export ``out/detector.onnx`` (+ manifest entry).

    The pool: ``pool_size`` simulated 64-channel blocks (:func:`data.detector_pool`) and
    the search's own DM-time data of seeded survey-band observations
    (:func:`~drafts_ops.training.harvest.harvest_detector_images`; ``survey_seeds`` default
    :data:`~drafts_ops.training.harvest.DETECTOR_HARVEST_SEEDS`, ``()`` for none), both kept
    in ``pool_cache`` for the next run when given; ``survey_share`` of every batch comes
    from the survey-band images.
    """
    torch, dev = _setup(seed, device)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    seeds = DETECTOR_HARVEST_SEEDS if survey_seeds is None else tuple(survey_seeds)
    images, centres, synthetic, built_s = _detector_pool(
        seed, pool_size, seeds, survey_per_bin, pool_cache, log=log
    )
    n, height, width = images.shape
    t_data = time.perf_counter() - t0
    log(f"detector: {n} simulated DM-time images {height}x{width} in {t_data:.1f} s")
    net = DetectorNet().to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = _schedule(torch, opt, steps)
    share = survey_share if n > synthetic else 0.0
    batch_loss = _detector_loss(torch, dev, net, images, centres, synthetic=synthetic,
                                share=share, batch_size=batch_size, rng=rng)  # fmt: skip
    loss_avg, t_train = _optimise(net, opt, sched, steps, batch_loss, name="detector", log=log)
    path = export_detector(net, Path(out) / "detector.onnx")
    return _finish(
        "detector",
        path,
        pool_size=n,
        net=net,
        steps=steps,
        seed=seed,
        t_data=t_data,
        t_train=t_train,
        loss=loss_avg,
        log=log,
        time_scales=list(DETECTOR_SCALES),  # the crops' time averaging, for the card
        subband_view=DETECTOR_HARVEST_SUBBANDS if seeds else 1,  # the card says what it saw
        seconds_data_built=round(built_s, 1),  # making the pool, read back from a cache or not
    )


def _detector_loss(
    torch, dev, net, images: np.ndarray, centres: list, *, synthetic: int, share: float,
    batch_size: int, rng: np.random.Generator,
) -> Callable[[], Any]:  # fmt: skip
    """The detector's loss on a random batch of crops: ``share`` of each batch from the
    survey-band images (those after the first ``synthetic``), focal loss on the heatmap
    plus the L1 loss of the offsets at the bursts."""
    n, height, width = images.shape
    targets = [detector_targets(c, height, width) for c in centres]
    heat, offs, mask = (torch.from_numpy(np.stack([t[k] for t in targets])) for k in range(3))
    x_all = torch.from_numpy(images[:, None])
    stride = pp.DETECTOR_STRIDE

    def batch_loss():
        survey_idx = rng.integers(synthetic, max(n, synthetic + 1), batch_size)
        idx = np.where(rng.random(batch_size) < share, survey_idx,
                       rng.integers(0, synthetic, batch_size))  # fmt: skip
        cells = rng.integers(0, (width - TRAIN_CROP) // stride + 1, batch_size)
        x = _crop(torch, x_all, idx, cells * stride, TRAIN_CROP).to(dev)
        h, o, m = (_crop(torch, t, idx, cells, TRAIN_CROP // stride).to(dev)
                   for t in (heat, offs, mask))  # fmt: skip
        logits, offset = net(x)
        l_off = (torch.abs(offset - o) * m).sum() / m.sum().clamp(min=1.0)
        return _focal_loss(torch, logits, h) + l_off

    return batch_loss


def _detector_pool(
    seed: int, pool_size: int, seeds: Sequence[int], survey_per_bin: int | None,
    pool_cache: str | Path | None, *, log: Callable[[str], None],
) -> tuple[np.ndarray, list, int, float]:  # fmt: skip
    """The detector's images and burst centres: ``pool_size`` synthetic ones, then the
    survey-band images of ``seeds``; also how many are synthetic and the seconds making
    them took (read back from ``pool_cache`` or not)."""
    blocks = synthetic_detector_pool(seed, pool_size, pool_cache)
    images, centres, built_s = blocks.images, blocks.centres, blocks.seconds
    synthetic = len(images)
    if seeds:
        per_bin = DETECTOR_HARVEST_PER_BIN if survey_per_bin is None else survey_per_bin
        survey = harvest_detector_images(seeds, per_bin=per_bin, columns=images.shape[2],
                                         cache=pool_cache, log=log)  # fmt: skip
        images = np.concatenate([images, survey.images])
        centres = [*centres, *survey.centres]
        built_s += survey.seconds
        log(f"detector: {len(survey)} survey-band images ({', '.join(sorted(set(survey.bands)))})")
    return images, centres, synthetic, built_s


def train_classifier(
    steps: int = 3000,
    seed: int = 0,
    out: str | Path = "models",
    device: str = "cpu",
    *,
    batch_size: int = 32,
    pool_size: int = 3000,
    synthetic_size: int | None = None,
    pool_cache: str | Path | None = None,
    labelled: LabelledSet | None = None,
    label_share: float = 0.3,
    before_model: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Train the burst classifier on candidates harvested from the search itself
    (:func:`drafts_ops.training.harvest.harvest`: the survey bands, bursts and every RFI kind in
    the same files, the search's own cutouts), plus ``synthetic_size`` (default a third of
    ``pool_size``) synthetic cutouts (:func:`synthetic_pool`: pure noise and RFI at places
    no search candidate lies, so that the classifier does not call everything unfamiliar a
    burst), and export ``out/classifier.onnx``.

    Batches are half bursts, half negatives; the DM-time input is blanked for
    :data:`DM_TIME_DROPOUT` of the examples, and each example is shifted in time
    (:func:`shift_columns`, up to :data:`CLASSIFIER_JITTER` columns). ``pool_cache``: a
    folder that keeps the harvested pool for the next run with the same seed and size.

    ``labelled``: people's labels (:func:`~drafts_ops.training.labelled.labelled_set`);
    a quarter is held out, the rest joins the pool as about ``label_share`` of it, and the
    held-out part scores ``before_model`` (default the shipped classifier) and the new one.
    """

    torch, dev = _setup(seed, device)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    n_synthetic = pool_size // 3 if synthetic_size is None else synthetic_size
    ft, dt, labels = _classifier_pool(seed, pool_size, n_synthetic, pool_cache, log)
    held = None
    if labelled is not None:
        learn, held = labelled.split(seed)
        ft, dt, labels = with_labelled(ft, dt, labels, learn, label_share)
        log(f"classifier: {len(learn)} labelled candidates learnt from ({int(learn.labels.sum())} "
            f"bursts), {len(held)} held out to score the models")  # fmt: skip
    t_data = time.perf_counter() - t0
    ft_all = torch.from_numpy(ft[:, None])
    dt_all = torch.from_numpy(dt[:, None])
    y_all = torch.from_numpy(labels)

    net = ClassifierNet().to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = _schedule(torch, opt, steps)
    lossf = torch.nn.BCEWithLogitsLoss()

    def batch_loss():
        idx = torch.from_numpy(balanced_indices(labels, rng, batch_size))
        keep = torch.from_numpy((rng.random(batch_size) >= DM_TIME_DROPOUT).astype(np.float32))[
            :, None, None, None
        ]
        shifts = rng.integers(-CLASSIFIER_JITTER, CLASSIFIER_JITTER + 1, batch_size)
        ft_b, dt_b = (
            shift_columns(torch, ft_all[idx], shifts),
            shift_columns(torch, dt_all[idx], shifts),
        )
        logits = net(ft_b.to(dev), (dt_b * keep).to(dev))
        return lossf(logits, y_all[idx].to(dev))

    loss_avg, t_train = _optimise(net, opt, sched, steps, batch_loss, name="classifier", log=log)
    path = export_classifier(net, Path(out) / "classifier.onnx")
    recorded = {}
    if held is not None and len(held):
        recorded["labels"] = _held_out_scores(torch, net, dev, held, before_model=before_model,
                                              labelled=labelled, log=log)  # fmt: skip
    return _finish(
        "classifier",
        path,
        pool_size=len(labels),
        net=net,
        steps=steps,
        seed=seed,
        t_data=t_data,
        t_train=t_train,
        loss=loss_avg,
        log=log,
        **recorded,
    )


def _held_out_scores(torch, net, dev, held: LabelledSet, *, before_model, labelled,
                     log) -> dict:  # fmt: skip
    """The held-out labelled candidates scored by the model before and the new one."""
    before = load_classifier(before_model).predict_prepared(held.freq_time, held.dm_time)
    net.eval()
    with torch.no_grad():
        logits = net(torch.from_numpy(held.freq_time[:, None]).to(dev),
                     torch.from_numpy(held.dm_time[:, None]).to(dev))  # fmt: skip
        after = torch.sigmoid(logits).reshape(-1).cpu().numpy()
    doc = {"labelled": len(labelled), "held_out": len(held),
           "before": scores(before, held.labels), "after": scores(after, held.labels)}  # fmt: skip
    for when in ("before", "after"):
        s = doc[when]
        log(f"classifier on {s['n']} held-out labelled candidates, {when}: accuracy "
            f"{s['accuracy']:.2f}, burst recall {s['recall']}, false positives "
            f"{s['false_positive_fraction']}, log loss {s['log_loss']:.3f}")  # fmt: skip
    return doc


def _classifier_pool(
    seed: int, pool_size: int, n_synthetic: int, pool_cache: str | Path | None,
    log: Callable[[str], None],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The classifier's examples ``(freq_time, dm_time, labels)``: candidates harvested
    from the search, then ``n_synthetic`` synthetic cutouts."""
    pool = harvest(seed, pool_size, cache=pool_cache, log=log)
    ft_s, dt_s, y_s = synthetic_pool(seed, n_synthetic, pool_cache)
    log(f"classifier: {len(pool)} search candidates ({int(pool.labels.sum())} bursts) from "
        f"{pool.files} files, {pool.minutes:.1f} min of data, and {len(y_s)} synthetic "
        f"cutouts ({int(y_s.sum())} bursts)")  # fmt: skip
    return (np.concatenate([pool.freq_time, ft_s]).astype(np.float32),
            np.concatenate([pool.dm_time, dt_s]).astype(np.float32),
            np.concatenate([pool.labels, y_s]).astype(np.float32))  # fmt: skip


def shift_columns(torch, images, shifts: np.ndarray):
    """``images [B, 1, rows, cols]`` each rolled along time by its ``shifts[b]`` columns
    (the wrapped columns are noise: every input is standardised around its candidate)."""
    cols = images.shape[-1]
    index = (np.arange(cols)[None, :] - np.asarray(shifts)[:, None]) % cols
    index = torch.from_numpy(index).to(images.device)[:, None, None, :]
    return torch.gather(images, -1, index.expand_as(images))


def synthetic_pool(
    seed: int, n: int, cache: str | Path | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` synthetic 64-channel classifier examples (:func:`drafts_ops.simulate.network_examples.
    classifier_pool`: bursts at a search's jittered position, and noise, persistent,
    impulsive and drifting RFI cutouts placed where no search candidate would be), kept
    in ``cache`` (a folder) when given."""

    if n <= 0:
        empty = np.empty((0, pp.CLASSIFIER_SIZE, pp.CLASSIFIER_SIZE), np.float32)
        return empty, empty, np.empty(0, np.float32)
    path = Path(cache) / f"synthetic-{seed}-{n}.npz" if cache else None
    return cached(path, lambda: data.classifier_pool(np.random.default_rng([seed, 1]), n),
                  _load_examples, _save_examples, log=lambda _: None)  # fmt: skip


def synthetic_detector_pool(seed: int, n: int, cache: str | Path | None = None) -> DetectorImages:
    """``n`` simulated 64-channel detector images and their burst centres
    (:func:`drafts_ops.simulate.network_examples.detector_pool`) as
    :class:`~drafts_ops.training.harvest.DetectorImages`, kept in ``cache`` (a folder) when
    given."""

    def compute() -> DetectorImages:
        t0 = time.perf_counter()
        images, centres = data.detector_pool(np.random.default_rng([seed, 1]), n)
        return DetectorImages(images, centres, ["synthetic"] * len(images),
                              time.perf_counter() - t0)  # fmt: skip

    path = Path(cache) / f"detector-synthetic-{seed}-{n}.npz" if cache else None
    return cached(path, compute, DetectorImages.load, DetectorImages.save, log=lambda _: None)


def _load_examples(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(path) as npz:
        return npz["freq_time"], npz["dm_time"], npz["labels"]


def _save_examples(examples: tuple[np.ndarray, np.ndarray, np.ndarray], path: Path) -> None:

    ft, dt, labels = examples
    with atomic_path(path) as tmp, tmp.open("wb") as fh:
        np.savez(fh, freq_time=ft, dm_time=dt, labels=labels)


def _finish(
    kind, path, *, pool_size, net, steps, seed, t_data, t_train, loss, log, **recorded
) -> TrainResult:
    """Write the manifest entry (``recorded``: more fields of it) and report."""

    torch = require_torch()
    update_manifest(
        path.parent,
        path.name,
        steps=steps,
        seed=seed,
        pool_size=pool_size,
        seconds_data=round(t_data, 1),
        seconds_train=round(t_train, 1),
        cpu_seconds=round(time.process_time(), 1),
        final_loss=round(float(loss), 5),
        torch=torch.__version__,
        opset=OPSET,
        band_decimation=band_decimation(),  # the model card says what a model saw
        **recorded,
    )
    size = path.stat().st_size
    log(f"{kind}: wrote {path} ({size / 1024:.0f} kB), training {t_train:.0f} s")
    return TrainResult(kind, path, steps, seed, t_data, t_train, float(loss), size, net)


# -- export -------------------------------------------------------------------------------
def _export(model, args: tuple, path: Path, *, inputs, outputs, dynamic_axes) -> Path:

    torch = require_torch()
    model.eval()
    with atomic_path(path) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
        torch.onnx.export(
            model,
            args,
            str(tmp),
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            dynamo=False,
        )
    return path


def export_detector(net, path: str | Path) -> Path:
    """Export a :class:`DetectorNet` as ONNX: input ``dm_time [B, 1, 64, W]`` (W % 16 == 0),
    outputs ``heatmap [B, 1, 16, W/4]`` (0..1) and ``offset [B, 2, 16, W/4]`` (0..1)."""

    torch = require_torch()
    dummy = torch.zeros(1, 1, pp.DETECTOR_ROWS, 256)
    axes = {
        "dm_time": {0: "batch", 3: "width"},
        "heatmap": {0: "batch", 3: "cells"},
        "offset": {0: "batch", 3: "cells"},
    }
    return _export(
        DetectorExport(net),
        (dummy,),
        Path(path),
        inputs=["dm_time"],
        outputs=["heatmap", "offset"],
        dynamic_axes=axes,
    )


def export_classifier(net, path: str | Path) -> Path:
    """Export a :class:`ClassifierNet` as ONNX: inputs ``freq_time`` and ``dm_time``
    ``[B, 1, 64, 64]``, output ``probability [B]``."""

    torch = require_torch()
    size = pp.CLASSIFIER_SIZE
    dummy = (torch.zeros(1, 1, size, size), torch.zeros(1, 1, size, size))
    axes = {"freq_time": {0: "batch"}, "dm_time": {0: "batch"}, "probability": {0: "batch"}}
    return _export(
        ClassifierExport(net),
        dummy,
        Path(path),
        inputs=["freq_time", "dm_time"],
        outputs=["probability"],
        dynamic_axes=axes,
    )
