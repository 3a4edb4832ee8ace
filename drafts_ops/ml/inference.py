"""Inference with the shipped ONNX models (ONNX Runtime only; no torch).

>>> clf = load_classifier()                       # models/classifier.onnx, hash-checked
>>> p = clf.predict(freq_time, dm_time)           # cutouts [256, 256] -> probability
>>> det = load_detector()
>>> peaks = det.detect(dm_time_block, threshold=0.5)   # [ndm, nt] -> list[DetectorPeak]

Preprocessing (resampling, robust standardisation) is applied here, from
:mod:`drafts_ops.ml.inputs`, exactly as during training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import DraftsError, ModelError, ParameterError
from drafts_ops.core.resources import resource_dir
from drafts_ops.detect.cluster_kernels import keep_apart
from drafts_ops.ml import inputs as pp
from drafts_ops.ml.manifest import verify_model

CLASSIFIER_FILE = "classifier.onnx"
DETECTOR_FILE = "detector.onnx"
#: Detector tile width (columns after time averaging) and overlap between tiles.
TILE_COLUMNS = 4096
TILE_OVERLAP = 512
#: Time-averaging factors the detector runs at by default (merged afterwards). Up to 16:
#: at FAST-like 196.608 us a burst at DM 2500 is smeared over ~10 ms by its channels; with
#: scales to x4 (0.8 ms columns) held-out recall fell with DM there (1.00 below DM 1000,
#: 0.71 at DM 2500-3000).
DETECTOR_SCALES: tuple[int, ...] = (1, 2, 4, 8, 16)
#: Peaks closer than 2 pooled rows and this many columns of the coarser of their two scales
#: are one detection.
MERGE_COLUMNS = 8
#: How far a peak may lie from its burst's boxcar S/N peak: this many pooled DM rows and
#: columns of the coarsest time scale (:meth:`Detector.position_uncertainty`). Measured
#: on validation seed 4242 (FAST-like, DM 0-3000: 22 trials per row), the network put
#: bursts above DM 2000 up to 33 trials (1.5 rows) and bursts wider than 10 ms up to 57
#: samples (3.6 columns of x16) from their S/N peak; one row and two columns lost them.
POSITION_ROWS = 2
POSITION_COLUMNS = 4


@dataclass(frozen=True)
class DetectorPeak:
    """One detection, in the coordinates of the DM-time array given to :meth:`Detector.detect`.

    Attributes
    ----------
    dm_index : float
        Fractional row (DM-trial index) of the burst centre.
    sample : float
        Fractional column (time sample, arrival at the top of the band) of the centre.
    score : float
        Heatmap value at the peak, 0..1.
    factor : int
        Samples per network column of the pass that found it (its time scale).
    """

    dm_index: float
    sample: float
    score: float
    factor: int = 1


def _session(path: Path):
    # lazy: ONNX Runtime takes ~0.3 s to import, and most commands never run a model
    import onnxruntime as ort
    from numba import config

    options = ort.SessionOptions()
    # as many threads as the search's kernels (NUMBA_NUM_THREADS): inference runs between
    # them, never beside them
    options.intra_op_num_threads = int(config.NUMBA_NUM_THREADS)
    options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own (non-DraftsError) types
        raise ModelError(f"{path}: ONNX Runtime cannot load the model ({err})") from err


def _model_path(path: str | Path | None, name: str) -> Path:
    """``path`` (a model file, or a folder holding ``name``), else the shipped model."""
    if path is not None:
        return Path(path) / name if Path(path).is_dir() else Path(path)

    try:
        return resource_dir("models") / name
    except DraftsError as err:
        raise ModelError(f"cannot find the shipped {name}: {err}") from err


class Classifier:
    """Burst probability from FETCH-style cutouts (see :func:`load_classifier`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._session = _session(path)

    def predict(
        self, freq_time: np.ndarray, dm_time: np.ndarray | None = None
    ) -> float | np.ndarray:
        """Probability that the cutout holds an astrophysical burst.

        Parameters
        ----------
        freq_time : ndarray [nt, nchan] or [B, nt, nchan]
            Dedispersed cutout(s) in FETCH layout (time, frequency), as
            :func:`drafts_ops.detect.cutouts.freq_time_cutout` returns; any size
            (normally 256 x 256).
        dm_time : ndarray [ndm, nt] or [B, ndm, nt], optional
            DM-time cutout(s) around the candidate (DM rising along axis 0). Without it the
            classifier judges the waterfall alone (it was trained that way too, though it
            is more reliable with both).

        Returns
        -------
        float for one cutout, ndarray [B] for a batch.
        """
        ft = np.asarray(freq_time)
        single = ft.ndim == 2
        fts = ft[None] if single else ft
        if fts.ndim != 3:
            raise ParameterError(
                f"freq-time cutouts must be [nt, nchan] or [B, nt, nchan], got {ft.shape}"
            )
        x_ft = np.stack([pp.prepare_freq_time(img) for img in fts])[:, None]
        if dm_time is None:
            x_dm = np.zeros_like(x_ft)
        else:
            dts = np.asarray(dm_time)
            dts = dts[None] if dts.ndim == 2 else dts
            if dts.ndim != 3 or len(dts) != len(fts):
                raise ParameterError(
                    f"dm_time {np.shape(dm_time)} does not pair with freq_time {ft.shape}"
                )
            x_dm = np.stack([pp.prepare_dm_time_cutout(img) for img in dts])[:, None]
        prob = self.predict_prepared(x_ft[:, 0], x_dm[:, 0])
        return float(prob[0]) if single else prob

    def predict_prepared(self, freq_time: np.ndarray, dm_time: np.ndarray) -> np.ndarray:
        """Probabilities ``[B]`` of already preprocessed inputs ``[B, 64, 64]``
        (:func:`~drafts_ops.ml.inputs.prepare_freq_time` / ``prepare_dm_time_cutout``)."""
        x_ft = np.ascontiguousarray(freq_time, np.float32)[:, None]
        x_dm = np.ascontiguousarray(dm_time, np.float32)[:, None]
        (prob,) = self._session.run(None, {"freq_time": x_ft, "dm_time": x_dm})
        return np.asarray(prob, dtype=np.float64).reshape(-1)


class Detector:
    """CenterNet-style burst finder on DM-time blocks (see :func:`load_detector`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._session = _session(path)

    def heatmap(self, dm_time: np.ndarray, time_factor: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Raw network outputs for a block: heatmap [H/4, W/4] and offsets [2, H/4, W/4]."""
        x = pp.prepare_dm_time(dm_time, time_factor)[None, None]
        heat, offset = self._session.run(None, {"dm_time": x})
        return heat[0, 0], offset[0]

    def detect(
        self,
        dm_time: np.ndarray,
        threshold: float = 0.5,
        time_factor: int = 1,
        max_peaks: int = 50,
        scales: tuple[int, ...] = DETECTOR_SCALES,
    ) -> list[DetectorPeak]:
        """Burst centres in a DM-time block.

        Parameters
        ----------
        dm_time : ndarray [ndm, nt]
            Dedispersed block: rows are DM trials (ascending), columns samples. Any size
            with ndm >= 2 and nt >= 2; the DM axis is resampled to 64 rows. Blocks longer
            than :data:`TILE_COLUMNS` columns are processed in overlapping tiles.
        threshold : float
            Minimum heatmap score (0..1) of a reported peak.
        time_factor : int
            Average this many samples per detector column (1: full resolution).
        max_peaks : int
            Keep at most this many peaks, highest score first.
        scales : tuple of int
            Run the network at each of these extra time-averaging factors (times
            ``time_factor``) and merge the peaks: wide or scattered bursts stand out better
            when averaged. Peaks closer than 2 detector rows in DM and
            :data:`MERGE_COLUMNS` columns of the coarser of their two scales in time are
            merged (the highest score is kept).

        Returns
        -------
        list of DetectorPeak, highest score first, in the coordinates of ``dm_time``.
        """
        dm_time = np.asarray(dm_time)
        if dm_time.ndim != 2:
            raise ParameterError(f"DM-time block must be 2-D [ndm, nt], got {dm_time.shape}")
        return self.detect_pooled(pool_dm_rows(dm_time), dm_time.shape[0], threshold,
                                  time_factor, max_peaks, scales)  # fmt: skip

    def detect_pooled(  # noqa: PLR0917
        self,
        rows: np.ndarray,
        ndm: int,
        threshold: float = 0.5,
        time_factor: int = 1,
        max_peaks: int | None = 50,
        scales: tuple[int, ...] = DETECTOR_SCALES,
    ) -> list[DetectorPeak]:
        """:meth:`detect` on a block already pooled by :func:`pool_dm_rows` (``rows``) from
        ``ndm`` DM trials: the search pools its block before the boxcar search overwrites
        it with S/N, and runs the network after that search: ONNX Runtime's threads spin
        for a while after each call, and the boxcar search started right after them took
        ~20 ms (6 %) longer per FAST-like block than after a pause. ``max_peaks`` None:
        every peak (the search gates them by their boxcar S/N instead)."""
        if time_factor < 1:
            raise ParameterError(f"time_factor = {time_factor} must be >= 1")
        found = [
            DetectorPeak(self._rows_to_dm(peak.dm_index, ndm), peak.sample, peak.score, factor)
            for factor in (time_factor * scale for scale in scales)
            for peak in self._detect_scale(rows, threshold, factor)
        ]
        radius_dm = 2 * max(ndm / pp.DETECTOR_ROWS, 1.0)
        kept = suppress_duplicates(found, radius_dm, MERGE_COLUMNS)
        return kept if max_peaks is None else kept[:max_peaks]

    @staticmethod
    def position_uncertainty(
        ndm: int, scales: tuple[int, ...] = DETECTOR_SCALES
    ) -> tuple[int, int]:
        """How far (DM trials, samples) a peak's position may lie from the burst's S/N
        peak in a block of ``ndm`` trials: :data:`POSITION_ROWS` pooled rows' DM trials
        (each of the network's 64 rows is the maximum over ``ndm / 64`` trials, so it
        cannot place a burst more finely than a row, and it misplaces high-DM bursts by
        more) and :data:`POSITION_COLUMNS` columns of the coarsest time scale."""
        rows = max(1, math.ceil(POSITION_ROWS * ndm / pp.DETECTOR_ROWS))
        return rows, POSITION_COLUMNS * max(scales)

    @staticmethod
    def _rows_to_dm(row_index: float, ndm: int) -> float:
        """DM index of the original block for a (fractional) row of the pooled block."""
        dm_index, _ = pp.detector_to_input_coords(np.asarray(row_index), np.asarray(0.0),
                                                  ndm, 1)  # fmt: skip
        return float(dm_index)

    def _detect_scale(
        self, dm_time: np.ndarray, threshold: float, time_factor: int
    ) -> list[DetectorPeak]:
        nt = dm_time.shape[1]
        span = TILE_COLUMNS * time_factor
        margin = TILE_OVERLAP * time_factor // 2
        peaks: list[DetectorPeak] = []
        for start in range(0, max(nt - 2 * margin, 1), span - 2 * margin):
            stop = min(start + span, nt)
            lo = start + margin if start > 0 else 0  # each tile owns its middle part
            hi = stop - margin if stop < nt else nt
            for peak in self._detect_tile(dm_time[:, start:stop], threshold, time_factor):
                sample = peak.sample + start
                if lo - 0.5 <= sample < hi - 0.5:
                    peaks.append(DetectorPeak(peak.dm_index, sample, peak.score))
            if stop >= nt:
                break
        return peaks

    def _detect_tile(
        self, dm_time: np.ndarray, threshold: float, time_factor: int
    ) -> list[DetectorPeak]:
        heat, offset = self.heatmap(dm_time, time_factor)
        rows, cols, scores = decode_heatmap(heat, offset, threshold, heat.size)
        ncols = -(-dm_time.shape[1] // time_factor)
        keep = cols < ncols - 0.5  # drop peaks that fall in the right-hand padding
        dm_index, sample = pp.detector_to_input_coords(
            rows[keep], cols[keep], dm_time.shape[0], time_factor
        )
        return [
            DetectorPeak(float(d), float(s), float(p))
            for d, s, p in zip(dm_index, sample, scores[keep], strict=True)
        ]


def pool_dm_rows(dm_time: np.ndarray) -> np.ndarray:
    """The detector's rows of a DM-time block ``[ndm, nt]``: the DM axis max-pooled to
    :data:`~drafts_ops.ml.inputs.DETECTOR_ROWS` once for every tile and time scale
    (pooling rows commutes with taking columns; each time scale then averages the pooled
    rows, the order in which the training images are made too); a block of one trial as
    it is."""
    if dm_time.shape[0] < 2:
        return np.asarray(dm_time, np.float32)
    return pp.resample_axis(dm_time, pp.DETECTOR_ROWS, 0, "max")


def suppress_duplicates(
    peaks: list[DetectorPeak], radius_dm: float, radius_columns: float
) -> list[DetectorPeak]:
    """Peaks sorted by score, dropping any within ``radius_dm`` trials and ``radius_columns``
    columns of the coarser of the two peaks' scales of a higher-scoring one (two bursts
    tens of samples apart stay apart at the fine scales that resolve them).

    Compiled (:func:`~drafts_ops.detect.kernels.keep_apart`): a FAST-like block has
    500-800 peaks of score >= 0.2 over the five scales, and the pairwise test in Python
    took 0.11 s per minute of FAST-like data (0.004 s compiled), growing with the square
    of the peaks.
    """

    if not peaks:
        return []
    order = np.argsort([-p.score for p in peaks], kind="stable")
    ranked = [peaks[i] for i in order]
    keep = keep_apart(
        np.array([p.dm_index for p in ranked], np.float64),
        np.array([p.sample for p in ranked], np.float64),
        np.array([p.factor for p in ranked], np.float64),
        float(radius_dm), float(radius_columns),
    )  # fmt: skip
    return [p for p, k in zip(ranked, keep, strict=True) if k]


def decode_heatmap(
    heat: np.ndarray, offset: np.ndarray, threshold: float, max_peaks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local maxima (3 x 3) of a heatmap above ``threshold``, refined by the offsets.

    Returns (row, col, score) arrays in detector-pixel coordinates (pixel centres at
    integers), highest score first. Cell ``i`` spans pixels ``[4i - 0.5, 4i + 3.5)`` and
    an offset ``o`` in 0..1 places the centre at ``4 (i + o) - 0.5``.
    """
    padded = np.pad(heat, 1, mode="constant", constant_values=-np.inf)
    h, w = heat.shape
    neighbours = np.stack([padded[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)])
    is_peak = (heat >= neighbours.max(axis=0)) & (heat >= threshold)
    ii, jj = np.nonzero(is_peak)
    order = np.argsort(-heat[ii, jj], kind="stable")[:max_peaks]
    ii, jj = ii[order], jj[order]
    stride = pp.DETECTOR_STRIDE
    rows = stride * (ii + offset[0, ii, jj]) - 0.5
    cols = stride * (jj + offset[1, ii, jj]) - 0.5
    return rows.astype(np.float64), cols.astype(np.float64), heat[ii, jj].astype(np.float64)


def load_classifier(path: str | Path | None = None) -> Classifier:
    """The burst classifier; ``path`` defaults to the shipped ``models/classifier.onnx``.

    Raises :class:`~drafts_ops.core.errors.ModelError` when the file is missing or its sha256
    differs from ``manifest.json`` beside it.
    """
    return Classifier(verify_model(_model_path(path, CLASSIFIER_FILE)))


def load_detector(path: str | Path | None = None) -> Detector:
    """The DM-time detector; ``path`` defaults to the shipped ``models/detector.onnx``.

    Raises :class:`~drafts_ops.core.errors.ModelError` when the file is missing or its sha256
    differs from ``manifest.json`` beside it.
    """
    return Detector(verify_model(_model_path(path, DETECTOR_FILE)))
