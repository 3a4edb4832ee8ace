"""Image preparation shared by training and inference (numpy, and one compiled kernel for
the rows' standardisation).

The networks never see raw data: every image goes through the functions here, at training
time and at inference time alike, so the two cannot drift apart.

Classifier input (FETCH-style cutouts, any size, normally 256 x 256, candidate centred):
    * freq-time, given in FETCH layout [time, frequency]: transposed to [frequency, time],
      frequency area-averaged to 64 sub-bands, the central 64 time columns kept (full
      time resolution: averaging would dilute narrow bursts), then each channel robustly
      standardised (median and MAD-sigma of its row); flat (flagged) channels become zero.
    * DM-time: DM axis max-pooled to 64 rows (a bow-tie narrower than 4 DM rows keeps its
      peak), the central 64 time columns kept, each DM row robustly standardised.
    * both are clipped to [-8, 32] sigma and divided by 4.

Detector input (a DM-time block [ndm, nt]):
    * the DM axis is max-pooled (or linearly interpolated, when ndm < 64) to 64 rows;
    * the time axis is averaged in blocks of ``time_factor`` samples and padded on the
      right to a multiple of 16 columns with the row median;
    * each row is robustly standardised, clipped and scaled as above.
"""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.statistics_kernels import standardise_rows_into

#: Side of the classifier's square inputs after resampling.
CLASSIFIER_SIZE = 64
#: Rows (DM bins) of the detector input.
DETECTOR_ROWS = 64
#: Output stride of the detector heads (input pixels per heatmap cell).
DETECTOR_STRIDE = 4
#: The detector's input width must be a multiple of this.
DETECTOR_WIDTH_MULTIPLE = 16
#: Clip range (in robust sigma) and scale applied after standardisation.
CLIP_SIGMA = (-8.0, 32.0)
INPUT_SCALE = 4.0

#: MAD-to-sigma factor the shipped networks were trained with (rounded Gaussian value).
MAD_TO_SIGMA = 1.4826
#: Samples of a row from which its median and MAD are taken (evenly strided beyond this).
STATISTICS_POINTS = 1024


def max_pool_edges(n_in: int, n_out: int) -> np.ndarray:
    """Input bins of :func:`resample_axis`'s max-pooling (``n_out < n_in``): output bin
    ``k`` is the largest of inputs ``[edges[k], edges[k + 1])`` (``n_out + 1`` edges)."""
    return np.append(np.floor(np.arange(n_out) * n_in / n_out).astype(np.int64), n_in)


def resample_axis(
    a: np.ndarray, n_out: int, axis: int, reduce: Literal["mean", "max"] = "mean"
) -> np.ndarray:
    """Resample ``a`` to ``n_out`` bins along ``axis`` (float32).

    Shrinking with ``reduce="mean"`` averages over the exact fractional extent of each
    output bin (area resampling; bin ``k`` covers input coordinates
    ``[k * n_in / n_out, (k + 1) * n_in / n_out)``); ``reduce="max"`` takes the largest
    input bin starting in that range (keeps a burst that is narrower than an output bin at
    full strength). Growing interpolates linearly between bin centres.
    """
    n_in = np.shape(a)[axis]
    if n_out <= 0 or n_in == 0:
        raise ParameterError(f"cannot resample an axis of {n_in} bins to {n_out}")
    if n_out == n_in:
        return np.asarray(a, dtype=np.float32)
    if n_out < n_in and reduce == "max":  # exact in float32: no float64 copy of a block
        edges = max_pool_edges(n_in, n_out)
        front = np.moveaxis(np.asarray(a, dtype=np.float32), axis, 0)
        pooled = np.empty((n_out, *front.shape[1:]), np.float32)
        for k, (lo, hi) in enumerate(itertools.pairwise(edges)):
            np.max(front[lo:hi], axis=0, out=pooled[k])  # 20x faster than reduceat here
        return np.moveaxis(pooled, 0, axis)
    a = np.asarray(a, dtype=np.float64)
    moved = np.moveaxis(a, axis, -1)
    if n_out > n_in:
        centres = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        lo = np.clip(np.floor(centres).astype(np.int64), 0, n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        w = np.clip(centres - lo, 0.0, 1.0)
        out = moved[..., lo] * (1 - w) + moved[..., hi] * w
    else:
        csum = np.concatenate([np.zeros((*moved.shape[:-1], 1)), np.cumsum(moved, -1)], -1)
        edges = np.arange(n_out + 1) * n_in / n_out
        out = np.diff(_integral(csum, edges), axis=-1) * (n_out / n_in)
    return np.moveaxis(out, -1, axis).astype(np.float32)


def _integral(csum: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral of a piecewise-constant signal from 0 to ``x`` given its cumulative sums."""
    k = np.minimum(np.floor(x).astype(np.int64), csum.shape[-1] - 2)
    frac = x - k
    return csum[..., k] + frac * (csum[..., k + 1] - csum[..., k])


def time_average(img: np.ndarray, factor: int) -> np.ndarray:
    """Average each row of ``img [n, factor * m]`` over blocks of ``factor`` samples
    (float32 ``[n, m]``; a sum of strided views, as exact as ``reshape(...).mean``).

    Not :func:`~drafts_ops.detect.preprocess.decimate_block`: its parallel kernel, run
    between ONNX Runtime's calls while the runtime's threads still spin, made the
    detector's ``detect()`` ~30 % slower (FAST-like 1418 x 32768 block: 240-340 ms against
    190-245 ms)."""
    if factor == 1:
        return np.asarray(img, dtype=np.float32)
    out = np.array(img[:, 0::factor], dtype=np.float32)
    for k in range(1, factor):
        out += img[:, k::factor]
    out /= np.float32(factor)
    return out


def robust_standardise_rows(img: np.ndarray) -> np.ndarray:
    """Subtract each row's median and divide by its MAD-sigma; flat rows become zero.

    Works on the last axis of any array; returns float32, clipped and scaled for the
    networks (see the module docstring). Rows longer than :data:`STATISTICS_POINTS` take
    their median and MAD from that many evenly strided samples (the detector's 4096-column
    tiles: 4x cheaper, and still 5x more samples than a training crop's 192). One compiled
    pass per row (:func:`~drafts_ops.detect.kernels.standardise_rows_into`; numpy's
    medians took 2.0-2.5 ms of a 64 x 4096 tile, the kernel ~0.6 ms), bit for bit the numpy
    expressions it replaces.
    """

    img = np.asarray(img, dtype=np.float32)
    rows = img.reshape(-1, img.shape[-1])  # a view where it can be: no copy of a tile
    z = np.empty(rows.shape, np.float32)
    step = max(1, rows.shape[-1] // STATISTICS_POINTS)
    stats = standardise_rows_into(rows, step, MAD_TO_SIGMA, *CLIP_SIGMA, INPUT_SCALE, z)
    flat = ~(stats[:, 1] > 0)
    if flat.any():  # MAD zero (sparse spikes, or a constant row): the row's std, or zeros
        z[flat] = _standardise_by_std(rows[flat], stats[flat, :1])
    return z.reshape(img.shape)


def _standardise_by_std(rows: np.ndarray, med: np.ndarray) -> np.ndarray:
    """Rows whose MAD is zero, standardised by the std of their deviations from their
    median ``med`` ``[nrow, 1]`` (constant rows: zeros)."""
    sigma = np.abs(rows - med).std(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.subtract(rows, med, dtype=np.float32)
        z /= sigma
    z[np.broadcast_to(~(sigma > 0), z.shape)] = 0.0
    np.clip(z, *CLIP_SIGMA, out=z)
    z /= np.float32(INPUT_SCALE)
    return z


def _check_image(img: np.ndarray, name: str) -> np.ndarray:
    img = np.asarray(img)
    if img.ndim != 2 or min(img.shape) < 2:
        raise ParameterError(f"{name} must be a 2-D image of at least 2 x 2, got {img.shape}")
    if not np.all(np.isfinite(img)):
        raise ParameterError(f"{name} contains NaN or infinite values")
    return img


def centre_columns(img: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` central columns of ``img`` (linearly stretched when it has fewer)."""
    nt = img.shape[1]
    if nt < n:
        return resample_axis(img, n, 1)
    start = (nt - n) // 2
    return np.asarray(img[:, start : start + n], dtype=np.float32)


def prepare_freq_time(freq_time: np.ndarray) -> np.ndarray:
    """Classifier freq-time input ``[64 (freq), 64 (time)]`` from a FETCH-layout cutout
    ``[nt (time), nchan (frequency)]`` (as ``data_freq_time`` in FETCH files)."""
    img = _check_image(freq_time, "freq-time cutout").T
    img = centre_columns(resample_axis(img, CLASSIFIER_SIZE, 0), CLASSIFIER_SIZE)
    return robust_standardise_rows(img)


def prepare_dm_time_cutout(dm_time: np.ndarray) -> np.ndarray:
    """Classifier DM-time input ``[64 (DM), 64 (time)]`` from a cutout ``[ndm, nt]``."""
    img = _check_image(dm_time, "DM-time cutout")
    img = centre_columns(resample_axis(img, CLASSIFIER_SIZE, 0, "max"), CLASSIFIER_SIZE)
    return robust_standardise_rows(img)


def detector_width(nt: int, time_factor: int) -> int:
    """Width of the detector input for ``nt`` samples averaged by ``time_factor``."""
    cols = -(-nt // time_factor)
    return -(-cols // DETECTOR_WIDTH_MULTIPLE) * DETECTOR_WIDTH_MULTIPLE


def prepare_dm_time(dm_time: np.ndarray, time_factor: int = 1) -> np.ndarray:
    """Detector input ``[64, W]`` from a DM-time block ``[ndm, nt]`` (see module docstring)."""
    img = _check_image(dm_time, "DM-time block")
    if time_factor < 1:
        raise ParameterError(f"time_factor = {time_factor} must be >= 1")
    img = resample_axis(img, DETECTOR_ROWS, 0, "max")
    nt = img.shape[1]
    cols = -(-nt // time_factor)
    width = detector_width(nt, time_factor)
    if cols * time_factor != nt:  # partial last block: pad with the row median first
        pad = np.repeat(np.median(img, axis=1, keepdims=True), cols * time_factor - nt, axis=1)
        img = np.concatenate([img, pad], axis=1)
    img = time_average(img, time_factor)
    if width > cols:
        pad = np.repeat(np.median(img, axis=1, keepdims=True), width - cols, axis=1)
        img = np.concatenate([img, pad], axis=1)
    return robust_standardise_rows(img)


def detector_to_input_coords(
    row: np.ndarray, col: np.ndarray, ndm: int, time_factor: int
) -> tuple[np.ndarray, np.ndarray]:
    """Map continuous detector-pixel coordinates (pixel centres at integers) back to
    (DM index, sample) of the original ``[ndm, nt]`` array."""
    dm_index = (np.asarray(row, dtype=np.float64) + 0.5) * ndm / DETECTOR_ROWS - 0.5
    sample = np.asarray(col, dtype=np.float64) * time_factor + (time_factor - 1) / 2
    return dm_index, sample


def input_to_detector_coords(
    dm_index: np.ndarray, sample: np.ndarray, ndm: int, time_factor: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`detector_to_input_coords` (used to place training targets)."""
    row = (np.asarray(dm_index, dtype=np.float64) + 0.5) * DETECTOR_ROWS / ndm - 0.5
    col = (np.asarray(sample, dtype=np.float64) - (time_factor - 1) / 2) / time_factor
    return row, col
