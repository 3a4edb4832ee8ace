"""Classical single-pulse search on DM–time data (Heimdall's stages).

baseline removal → boxcar matched filter over sqrt(2)-spaced widths, each normalised by the
noise measured on its own output → threshold → "giants" (one peak per run of samples above
threshold per DM trial), all in one fused kernel per DM trial
(:func:`drafts_ops.detect.kernels.search_rows`).

S/N follows the Heimdall / PRESTO convention: in white noise of ``sigma`` per sample, a
boxcar of ``w`` samples has noise ``sigma * sqrt(w)`` and ``S/N = sum / (sigma *
sqrt(w))``; measuring each width's noise keeps that meaning in red noise too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.detect.boxcar_kernels import search_rows
from drafts_ops.detect.cluster_kernels import run_peaks


def boxcar_widths(max_width: int) -> np.ndarray:
    """Boxcar widths spaced by sqrt(2) up to ``max_width`` samples (int64): 1, 2, 3, 4, 6,
    8, 11, 16, 23, 32, 45, 64, ... and ``max_width`` itself.

    The one home of the search's boxcar set. Consecutive widths differ by at most sqrt(2),
    so a pulse's best boxcar loses at most a few per cent of S/N to width quantisation
    (``drafts_ops.validation.snr_loss`` measures it).
    """
    if int(max_width) < 1:
        raise ParameterError(f"maximum boxcar width {max_width} must be >= 1 sample")
    top = int(max_width)
    steps = int(np.floor(2 * np.log2(top))) + 1
    widths = {round(2 ** (k / 2)) for k in range(steps)} | {top}
    return np.array(sorted(w for w in widths if w <= top), dtype=np.int64)


def baseline_window(baseline_s: float, tsamp: float, max_width: int) -> int:
    """Running-baseline window of the boxcar search, samples: ``baseline_s`` (s) at
    sampling ``tsamp`` (s), at least 4 of the widest boxcar."""
    return max(round(baseline_s / tsamp), 4 * int(max_width))


def trials_threshold(threshold: float, factor: float) -> float:
    """The S/N threshold with ``factor`` times more independent trials and the same false
    alarms as ``threshold`` (Gaussian noise): ``Q(new) = Q(threshold) / factor``, with
    ``Q`` the normal tail. Sub-band searches add ``factor = nsub`` (6.5 -> 6.71 for 4)."""
    if not (threshold > 0 and factor >= 1):
        raise ParameterError(f"threshold {threshold} and trials factor {factor} must be >= 1")
    target = _log_normal_tail(threshold) - math.log(factor)
    lo, hi = float(threshold), float(threshold) + math.sqrt(2.0 * math.log(factor)) + 1.0
    for _ in range(60):  # bisection on log Q, which falls monotonically
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _log_normal_tail(mid) > target else (lo, mid)
    return 0.5 * (lo + hi)


def _log_normal_tail(x: float) -> float:
    """``log Q(x)``, the normal tail, also where ``Q`` underflows (asymptotic series)."""
    q = 0.5 * math.erfc(x / math.sqrt(2.0))
    if q > 1e-300:
        return math.log(q)
    return -0.5 * x * x - math.log(x * math.sqrt(2.0 * math.pi)) + math.log1p(-1 / x**2 + 3 / x**4)


@dataclass(frozen=True, eq=False)
class Giants:
    """Threshold crossings: the peaks of runs of samples above threshold in each DM trial
    (one per run, more where a run has prominent local maxima: :func:`giants_above`).

    Attributes (all ``[n]``): ``dm_index`` (trial index), ``sample`` (arrival at the top of
    the band, samples from the first sample of the file), ``width`` (boxcar, samples),
    ``snr``, ``score`` (neural-detector score; NaN for boxcar giants) and ``band`` (0: the
    full band; ``k >= 1``: sub-band ``k`` of a sub-band search, counted in file channel
    order, its S/N measured on that sub-band alone).
    """

    dm_index: np.ndarray = field(repr=False)
    sample: np.ndarray = field(repr=False)
    width: np.ndarray = field(repr=False)
    snr: np.ndarray = field(repr=False)
    score: np.ndarray | None = field(default=None, repr=False)
    band: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.score is None:
            object.__setattr__(self, "score", np.full(self.snr.shape, np.nan, np.float32))
        if self.band is None:
            object.__setattr__(self, "band", np.zeros(self.snr.shape, np.int8))
        arrays = (self.dm_index, self.sample, self.width, self.snr, self.score, self.band)
        sizes = {a.shape for a in arrays}
        if len(sizes) != 1 or len(next(iter(sizes))) != 1:
            raise ParameterError(f"giant arrays must be 1-D and equally long, got {sizes}")

    def __len__(self) -> int:
        return int(self.snr.size)

    def select(self, keep: np.ndarray) -> Giants:
        """The giants where boolean ``keep`` is True (or at the indices ``keep``, in order)."""
        return Giants(*(getattr(self, n)[keep] for n in _GIANT_FIELDS))

    @classmethod
    def empty(cls) -> Giants:
        return cls(np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int32),
                   np.empty(0, np.float32))  # fmt: skip

    @classmethod
    def concatenate(cls, parts: list[Giants]) -> Giants:
        """All giants of several blocks in one record."""
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, n) for p in parts]) for n in _GIANT_FIELDS))

    def save(self, path: str | Path) -> Path:
        """Write to ``.npz`` atomically."""
        with atomic_path(path) as tmp, tmp.open("wb") as fh:
            np.savez(fh, **{n: getattr(self, n) for n in _GIANT_FIELDS})
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Giants:
        """Read a file written by :meth:`save`."""
        try:
            with np.load(path) as npz:
                return cls(*(npz[n] for n in _GIANT_FIELDS if n in npz))
        except (OSError, KeyError, ValueError) as err:
            raise ObservationError(path, f"not a giants file: {err}") from None


_GIANT_FIELDS = ("dm_index", "sample", "width", "snr", "score", "band")


def block_snr(
    dm_time: np.ndarray,
    *,
    max_width: int = 32,
    baseline_window: int = 1024,
    valid: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Baseline-removed boxcar search of a block ``[ndm, nt]`` with measured noise.

    The fused kernel :func:`~drafts_ops.detect.kernels.search_rows`: per DM row a running
    median baseline, then for each width of :func:`boxcar_widths` the boxcar sums
    normalised by their own robust noise. ``valid [ndm]``: samples of each row that are
    data (default all). Returns the best S/N and its width (samples) per (DM, sample).
    """
    x = np.ascontiguousarray(_as_series(dm_time))
    widths = boxcar_widths(min(max_width, x.shape[1]))
    rows = np.full(x.shape[0], x.shape[1], np.int64) if valid is None else np.asarray(valid)
    snr = np.empty(x.shape, np.float32)
    index = np.empty(x.shape, np.int8)
    search_rows(x, rows.astype(np.int64), widths, int(baseline_window), NOISE_POINTS, snr, index)
    return snr, widths[index]


#: S/N by which a local maximum within a run above threshold must stand above the dips on
#: either side of it to be a giant of its own, besides the run's highest (Heimdall keeps
#: only the highest): a burst that arrives while bright RFI's S/N in the same DM row is
#: still above threshold. Validation seed 4242, GBT-like: a S/N 28 burst 0.1 s after a
#: drifting signal's streak (S/N 46 in the burst's DM row) gives giants (and a candidate
#: of S/N 18) for any value up to 8, none from 12. In white noise (the roughest S/N series:
#: width 1, around a bright envelope) 6 gives 2 % more giants than one per run, 3 gives 8x.
RUN_PEAK_PROMINENCE = 6.0

#: Strided samples from which each DM row's baseline and boxcar noise are measured.
NOISE_POINTS = 1024


def find_giants(
    dm_time: np.ndarray,
    *,
    threshold: float = 6.5,
    max_width: int = 32,
    baseline_window: int = 1024,
    sample_offset: int = 0,
    keep: tuple[int, int] | None = None,
) -> Giants:
    """Classical search of one dedispersed block ``[ndm, nt]``.

    Parameters
    ----------
    dm_time
        Dedispersed series, one row per DM trial.
    threshold
        S/N threshold (Heimdall convention).
    max_width
        Widest boxcar, samples; widths from :func:`boxcar_widths`.
    baseline_window
        Running-median window for baseline removal, samples.
    sample_offset
        File sample of column 0 (added to the reported samples).
    keep
        Report only giants with column index in ``[keep[0], keep[1])`` (the block's own
        samples when blocks are padded); default all.
    """
    snr, width = block_snr(dm_time, max_width=max_width, baseline_window=baseline_window)
    return giants_above(snr, width, threshold, sample_offset=sample_offset, keep=keep)


def giants_above(
    snr: np.ndarray,
    width: np.ndarray,
    threshold: float,
    *,
    widths: np.ndarray | None = None,
    sample_offset: int = 0,
    keep: tuple[int, int] | None = None,
    band: int = 0,
    prominence: float = RUN_PEAK_PROMINENCE,
) -> Giants:
    """Giants of :func:`block_snr` output: the peak of each run above ``threshold``, and
    the other local maxima of a run that stand ``prominence`` (S/N) above the dips beside
    them (:func:`~drafts_ops.detect.kernels.run_peaks`).

    ``width`` holds widths in samples, or indices into ``widths`` when that is given (the
    streaming search's int8 width index); ``band`` is recorded with each (see
    :class:`Giants`).
    """
    lo, hi = keep if keep is not None else (0, snr.shape[1])
    dms, samples = run_peaks(snr, np.float32(threshold), int(lo), int(hi), np.float32(prominence))
    chosen = width[dms, samples]
    if widths is not None:
        chosen = np.asarray(widths)[chosen]
    return Giants(
        dms.astype(np.int32),
        samples + int(sample_offset),
        chosen.astype(np.int32),
        snr[dms, samples].astype(np.float32),
        band=np.full(dms.size, band, np.int8),
    )


def giants_at(
    snr: np.ndarray,
    width: np.ndarray,
    dm_index: np.ndarray,
    sample: np.ndarray,
    score: np.ndarray,
    *,
    sample_offset: int = 0,
    radius: int = 2,
    dm_radius: int = 1,
    widths: np.ndarray | None = None,
) -> Giants:
    """Giants at given (fractional) positions, e.g. neural-detector peaks.

    Each takes the best boxcar S/N within ``radius`` samples and ``dm_radius`` DM trials
    of its position (the precision of the positions: for the neural detector
    :meth:`~drafts_ops.ml.inference.Detector.position_uncertainty`), at the place of that
    S/N (``snr``, ``width`` from :func:`block_snr`; ``width`` holds indices into
    ``widths`` when that is given, as in :func:`giants_above`), and carries its ``score``.
    """
    ndm, nt = snr.shape
    rows = np.clip(np.rint(np.asarray(dm_index, np.float64)).astype(np.int64), 0, ndm - 1)
    cols = np.clip(np.rint(np.asarray(sample, np.float64)).astype(np.int64), 0, nt - 1)
    best_d, best_t = rows.copy(), cols.copy()
    for i, (d0, t0) in enumerate(zip(rows, cols, strict=True)):
        d_lo, t_lo = max(d0 - dm_radius, 0), max(t0 - radius, 0)
        patch = snr[d_lo : d0 + dm_radius + 1, t_lo : t0 + radius + 1]
        dd, tt = np.unravel_index(int(np.argmax(patch)), patch.shape)
        best_d[i], best_t[i] = d_lo + dd, t_lo + tt
    best = snr[best_d, best_t]
    chosen = width[best_d, best_t]
    if widths is not None:
        chosen = np.asarray(widths)[chosen]
    return Giants(
        best_d.astype(np.int32),
        best_t + int(sample_offset),
        np.maximum(chosen, 1).astype(np.int32),
        np.where(np.isfinite(best), best, 0.0).astype(np.float32),
        np.asarray(score, np.float32),
    )


def _as_series(series: np.ndarray) -> np.ndarray:
    x = np.asarray(series)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ParameterError(f"expected DM-time data [ndm, nt] with nt > 0, got {x.shape}")
    return x.astype(np.float32, copy=False)
