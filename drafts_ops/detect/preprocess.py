"""Preprocessing of a filterbank block before dedispersion.

Every function takes ``data`` as ``[nchan, nt]`` (channels in file order) and returns a new
array; nothing is changed in place. Normalised data has, per channel, median 0 and robust
standard deviation 1, so a masked channel is simply set to 0 and adds nothing to a sum.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Literal

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.preprocess_kernels import (
    QUANTISED_ZERO,
    decimate_into,
    normalise_into,
    normalised_mean_series,
    quantise_normalised_in_place,
    quantise_normalised_into,
)
from drafts_ops.detect.statistics_kernels import (
    channel_median_mad_int,
    channel_median_mad_u8,
    channel_median_scale,
    channel_moments,
)
from drafts_ops.io.header import Header

NormMethod = Literal["mad", "iqr"]

#: Standard deviation of a Gaussian per unit MAD and per unit IQR.
MAD_TO_STD = 1.482602218505602
IQR_TO_STD = 1.0 / 1.3489795003921634


def robust_location_scale(
    data: np.ndarray,
    method: NormMethod = "mad",
    axis: int = -1,
    *,
    keepdims: bool = False,
    dtype: type[np.floating] = np.float32,
    mad_to_std: float = MAD_TO_STD,
) -> tuple[np.ndarray, np.ndarray]:
    """Median and robust standard deviation along ``axis`` (MAD or IQR, Gaussian-scaled).

    The one home of the project's robust noise statistics. ``dtype`` is the precision of the
    computation; ``mad_to_std`` the MAD-to-sigma factor (the neural models were trained with
    the rounded 1.4826, see :mod:`drafts_ops.ml.inputs`).
    """
    x = np.asarray(data, dtype=dtype)
    if method == "mad":
        med = np.median(x, axis=axis, keepdims=True)
        scale = mad_to_std * np.median(np.abs(x - med), axis=axis, keepdims=True)
    elif method == "iqr":
        q25, med, q75 = np.percentile(x, [25.0, 50.0, 75.0], axis=axis, keepdims=True)
        scale = IQR_TO_STD * (q75 - q25)
    else:
        raise ParameterError(f"unknown normalisation method {method!r} (use 'mad' or 'iqr')")
    if keepdims:
        return med, scale
    return np.squeeze(med, axis=axis), np.squeeze(scale, axis=axis)


def normalise_channels(data: np.ndarray, method: NormMethod = "mad") -> np.ndarray:
    """Per-channel ``(x - median) / robust_std`` over the block, float32.

    Where the robust scale is 0 (coarsely quantised data, mostly one value) the plain
    standard deviation is used; constant channels come out as zeros, not infinities.
    """
    x = _as_block(data)
    med, scale = robust_location_scale(x, method, axis=1)
    if np.any(scale <= 0):
        scale = np.where(scale > 0, scale, x.std(axis=1))
    safe = np.where(scale > 0, scale, np.inf).astype(np.float32)
    return ((x - med[:, None]) / safe[:, None]).astype(np.float32)


def static_mask(nchan: int, channels: Iterable[int]) -> np.ndarray:
    """Boolean mask ``[nchan]`` (True = bad) from channel indices (negative ones count back)."""
    mask = np.zeros(nchan, dtype=bool)
    for ch in channels:
        if not -nchan <= int(ch) < nchan:
            raise ParameterError(f"masked channel {ch} is outside 0..{nchan - 1}")
        mask[int(ch)] = True
    return mask


#: Pieces over which the channel kurtosis is taken (median) and the fewest samples a piece
#: needs (fewer: one piece).
KURTOSIS_PIECES = 8
KURTOSIS_MIN_SAMPLES = 256


def channel_statistics(data: np.ndarray, nvalid: int | None = None) -> dict[str, np.ndarray]:
    """Per-channel statistics used by :func:`auto_mask` (each ``[nchan]``, float64).

    ``std`` and ``mean`` of the raw samples; ``kurtosis``: excess kurtosis of each channel's
    samples over time (0 for Gaussian noise; large for impulsive RFI, negative for a
    sinusoid), the median over :data:`KURTOSIS_PIECES` consecutive pieces, so that RFI
    recurring through the data counts and one bright band-limited burst (a few samples
    far above the noise in a few channels: a huge kurtosis in one piece) does not get its
    own channels masked; ``sk``: the spectral-kurtosis estimator ``(M+1)/(M-1) (M S2/S1^2 - 1)``
    (Nita & Gary 2010), which is ~1/N for a channel that integrates N Gaussian samples.
    One pass over ``data[:, :nvalid]`` in its own dtype (no float copy of the block).
    """
    x = _as_block_any(data, contiguous=False)  # channel_moments takes any strides
    m = x.shape[1] if nvalid is None else int(nvalid)
    pieces = KURTOSIS_PIECES if m >= KURTOSIS_PIECES * KURTOSIS_MIN_SAMPLES else 1
    edges = np.linspace(0, m, pieces + 1).astype(np.int64)
    parts = [channel_moments(x[:, a:b], b - a) for a, b in itertools.pairwise(edges)]
    sizes = np.diff(edges).astype(np.float64)[:, None]
    part_mean = np.stack([q[:, 0] for q in parts])  # one pass: whole-data moments combined
    part_square = np.stack([q[:, 1] ** 2 for q in parts]) + part_mean**2
    mean = (sizes * part_mean).sum(axis=0) / m
    std = np.sqrt(np.maximum((sizes * part_square).sum(axis=0) / m - mean**2, 0.0))
    kurt = np.median(np.stack([q[:, 2] for q in parts]), axis=0)
    s1, s2 = m * mean, m * (std**2 + mean**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        sk = np.where(s1 != 0, (m + 1.0) / max(m - 1.0, 1.0) * (m * s2 / s1**2 - 1.0), 0.0)
    return {"mean": mean, "std": std, "kurtosis": kurt, "sk": sk}


def iqr_outliers(values: np.ndarray, threshold: float = 3.0) -> np.ndarray:
    """True where ``values`` lie more than ``threshold`` robust sigmas (IQR) from the median."""
    values = np.asarray(values, dtype=np.float64)
    q25, med, q75 = np.percentile(values, [25.0, 50.0, 75.0])
    scale = IQR_TO_STD * (q75 - q25)
    if scale <= 0:
        return values != med
    return np.abs(values - med) > threshold * scale


#: Channel statistics :func:`auto_mask` tests by default. ``mean`` and ``sk`` depend on the
#: offset and scaling a backend applied (8-bit data is often equalised to mean 128), so they
#: are opt-in.
DEFAULT_MASK_STATS: tuple[str, ...] = ("std", "kurtosis")


def auto_mask(
    data: np.ndarray,
    threshold: float = 5.0,
    stats: Iterable[str] = DEFAULT_MASK_STATS,
    *,
    nvalid: int | None = None,
) -> np.ndarray:
    """Bad channels ``[nchan]`` from channel statistics (True = bad).

    A channel is bad when it is constant, or when one of ``stats`` (names from
    :func:`channel_statistics`: ``std``, ``kurtosis``, ``sk``, ``mean``) is an outlier across
    channels by more than ``threshold`` robust (IQR) sigmas.
    """
    if not threshold > 0:
        raise ParameterError(f"mask threshold {threshold} must be positive")
    values = channel_statistics(data, nvalid)
    unknown = sorted(set(stats) - set(values))
    if unknown:
        raise ParameterError(f"unknown channel statistic(s) {unknown}; use {sorted(values)}")
    bad = values["std"] == 0
    for name in stats:
        bad |= iqr_outliers(values[name], threshold)
    return bad


def zero_dm_subtract(data: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Subtract the mean over unmasked channels from every sample (Eatough et al. 2009).

    Removes broadband, undispersed signals (and some of a burst at very low DM).
    """
    x = _as_block(data)
    good = ~_check_mask(mask, x.shape[0]) if mask is not None else np.ones(x.shape[0], bool)
    if not good.any():
        return x.copy()
    out = x - x[good].mean(axis=0, keepdims=True)
    out[~good] = 0
    return out.astype(np.float32)


def decimate_time(data: np.ndarray, header: Header, factor: int) -> tuple[np.ndarray, Header]:
    """Average ``factor`` consecutive samples; drop the remainder. Returns data and header.

    The new header has ``tsamp * factor`` and ``nsamples // factor``; ``tstart`` stays, so
    new sample ``i`` starts at old sample ``i * factor``.
    """
    x = _as_block(data)
    factor = _check_factor(factor, x.shape[1], "time")
    n = x.shape[1] // factor
    out = x[:, : n * factor].reshape(x.shape[0], n, factor).mean(axis=2, dtype=np.float64)
    new = header.replace(tsamp=header.tsamp * factor, nsamples=header.nsamples // factor)
    return out.astype(np.float32), new


def decimate_frequency(data: np.ndarray, header: Header, factor: int) -> tuple[np.ndarray, Header]:
    """Average groups of ``factor`` adjacent channels (remainder dropped).

    The new header has ``nchans // factor`` channels of width ``foff * factor`` centred on
    the mean frequency of each group, in the same order as the input.
    """
    x = _as_block(data)
    if x.shape[0] != header.nchans:
        raise ParameterError(f"data has {x.shape[0]} channels, header {header.nchans}")
    factor = _check_factor(factor, x.shape[0], "frequency")
    n = x.shape[0] // factor
    out = x[: n * factor].reshape(n, factor, x.shape[1]).mean(axis=1, dtype=np.float64)
    fch1 = header.fch1 + header.foff * (factor - 1) / 2.0
    new = header.replace(nchans=n, foff=header.foff * factor, fch1=fch1)
    return out.astype(np.float32), new


def decimate_mask(mask: np.ndarray, factor: int) -> np.ndarray:
    """Mask of frequency-decimated channels: a group is bad when all its channels are bad."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.size // factor
    return mask[: n * factor].reshape(n, factor).all(axis=1)


def preprocess_block(
    data: np.ndarray,
    *,
    method: NormMethod = "mad",
    mask: np.ndarray | None = None,
    auto: bool = True,
    threshold: float = 5.0,
    zero_dm: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The search's preprocessing (:func:`prepare_block`) of a whole block into a new array.

    Returns the float32 block and the channel mask (True = bad).
    """
    x = _as_block_any(data)
    out = np.empty(x.shape, np.float32)
    bad = prepare_block(x, x.shape[1], out, method=method, mask=mask, auto=auto,
                        threshold=threshold, zero_dm=zero_dm)  # fmt: skip
    return out, bad


def _as_block(data: np.ndarray) -> np.ndarray:
    x = np.asarray(data)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ParameterError(f"expected a block [nchan, nt] with nt > 0, got shape {x.shape}")
    return x.astype(np.float32, copy=False)


def _check_mask(mask: np.ndarray, nchan: int) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (nchan,):
        raise ParameterError(f"channel mask of shape {mask.shape} does not fit {nchan} channels")
    return mask


def _check_factor(factor: int, length: int, axis: str) -> int:
    factor = int(factor)
    if factor < 1 or factor > length:
        raise ParameterError(f"{axis} decimation factor {factor} must be in 1..{length}")
    return factor


#: Samples per channel (strided) from which a block's median and noise are estimated.
NORM_POINTS = 4096
#: Samples over which channel statistics and the automatic mask are computed: long blocks
#: are normalised and masked piece by piece (a drifting or intermittent signal dominates a
#: channel's kurtosis over seconds, not over a whole minute).
NORM_CHUNK = 16384


def prepare_block(
    data: np.ndarray,
    nvalid: int,
    out: np.ndarray,
    *,
    method: NormMethod = "mad",
    mask: np.ndarray | None = None,
    auto: bool = True,
    threshold: float = 5.0,
    zero_dm: bool = False,
    clip_sigma: float = 0.0,
    clip_pixels: float = 0.0,
    sums_of: int = 0,
) -> np.ndarray:
    """Normalise and mask ``data[:, :nvalid]`` into ``out`` (zero beyond nvalid).

    The streaming search's preprocessing in one pass over the block, in the block's own
    dtype (uint8 / uint16 / float32, no float64 copy): per channel, median and robust sigma
    from :data:`NORM_POINTS` strided samples; the static ``mask`` or'ed with
    :func:`auto_mask` and with channels of zero spread, in pieces of :data:`NORM_CHUNK`
    samples; masked channels become 0; every normalised sample held within
    ``±clip_pixels`` (when > 0: a bright narrow-band RFI pixel, e.g. of a signal drifting
    through the band faster than channel statistics can see, then adds no more than a
    noise outlier, while a burst keeps at least ``clip_pixels`` per pixel); broadband
    impulses blanked (:func:`impulse_flags`, when ``clip_sigma`` > 0); optional zero-DM
    subtraction. ``sums_of``: the samples each of ``data``'s averages took (a decimating
    search; their statistics then come from histograms, :func:`channel_location_scale`).

    ``out`` float32 receives the normalised samples; ``out`` uint8 (``clip_pixels`` > 0)
    receives them as 8-bit levels, :func:`quantised_levels` saying what they stand for,
    and may be ``data`` itself (uint8 data are then overwritten; no second buffer).
    Returns the channels masked in any piece (True = bad).
    """
    x = _as_block_any(data, contiguous=False)  # the kernels take any strides
    quantised = out.dtype == np.uint8
    if out.shape[0] != x.shape[0] or out.shape[1] < nvalid or out.dtype not in (
        np.float32, np.uint8
    ):  # fmt: skip
        raise ParameterError(f"prepare_block: out {out.shape} does not fit {x.shape} data")
    if quantised and not clip_pixels > 0:
        raise ParameterError("prepare_block: 8-bit output needs clip_pixels > 0")
    in_place = quantised and same_samples(out, x)
    if quantised and not in_place and np.may_share_memory(out, x):
        raise ParameterError("prepare_block: 8-bit out overlaps data without being it")
    nvalid = int(min(nvalid, x.shape[1]))
    static = np.zeros(x.shape[0], bool) if mask is None else _check_mask(mask, x.shape[0])
    bad_any = static.copy()
    limit = clip_pixels if clip_pixels > 0 else np.inf
    level = 1.0 / quantised_levels(limit)[1] if quantised else 0.0  # 8-bit levels per unit
    for a in range(0, nvalid, NORM_CHUNK):  # local statistics: RFI that comes and goes
        b = nvalid if nvalid - a < 2 * NORM_CHUNK else a + NORM_CHUNK
        piece = x[:, a:b]
        offset, weight, bad = _piece_scaling(
            piece, static, method=method, auto=auto, threshold=threshold, sums_of=sums_of
        )
        bad_any |= bad
        zero, gate = _impulses_and_zero_dm(
            piece, offset, weight, limit=limit, clip_sigma=clip_sigma, zero_dm=zero_dm
        )
        if in_place:
            quantise_normalised_in_place(out[:, a:b], b - a, offset, weight, limit, zero, gate,
                                         level)  # fmt: skip
        elif quantised:
            quantise_normalised_into(piece, b - a, offset, weight, limit, zero, gate, level,
                                     out[:, a:b])  # fmt: skip
        else:
            normalise_into(piece, b - a, offset, weight, limit, zero, gate, out[:, a:b])
        if b == nvalid:
            break
    out[:, nvalid:] = QUANTISED_ZERO if quantised else 0.0
    return bad_any


def same_samples(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` start at the same sample with the same layout (address,
    dtype, strides): the same samples, one perhaps a leading part of the other."""
    return (a.dtype == b.dtype and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])  # fmt: skip


def _piece_scaling(
    piece: np.ndarray, static: np.ndarray, *, method: NormMethod, auto: bool, threshold: float,
    sums_of: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Per channel of one piece: ``(offset, weight, bad)``, median, 1 / robust sigma (0 for
    a bad channel) and the mask (static, zero spread, :func:`auto_mask`)."""
    n = piece.shape[1]
    stats = channel_location_scale(piece, n, method, sums_of=sums_of)
    if np.any(stats[:, 1] <= 0):  # coarsely quantised channels: fall back to the std
        std = channel_moments(piece, n)[:, 1]
        stats[:, 1] = np.where(stats[:, 1] > 0, stats[:, 1], std)
    bad = static | (stats[:, 1] <= 0)
    if auto and n > 1:
        bad |= auto_mask(piece, threshold)
    weight = np.where(bad, 0.0, 1.0 / np.where(stats[:, 1] > 0, stats[:, 1], 1.0))
    return stats[:, 0], weight, bad


def _impulses_and_zero_dm(
    piece: np.ndarray, offset: np.ndarray, weight: np.ndarray, *, limit: float,
    clip_sigma: float, zero_dm: bool,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(zero, gate)`` float32 ``[n]`` for :func:`~drafts_ops.detect.kernels.normalise_into`:
    the zero-DM series to subtract (0 without ``zero_dm``) and 0 at the samples of a
    broadband impulse (:func:`impulse_flags`, ``clip_sigma`` > 0), 1 elsewhere; both from
    the mean over the unmasked channels of the normalised piece, computed from the raw one."""
    n = piece.shape[1]
    zero, gate = np.zeros(n, np.float32), np.ones(n, np.float32)
    if (clip_sigma > 0 or zero_dm) and np.any(weight != 0):
        series = normalised_mean_series(piece, n, offset, weight, limit)
        if clip_sigma > 0:
            gate[impulse_flags(series, clip_sigma)] = 0.0
        if zero_dm:  # the mean of what is left: 0 where blanked
            zero[:] = series * gate
    return zero, gate


def quantised_levels(limit: float) -> tuple[float, float]:
    """``(offset, scale)`` of the 8-bit samples :func:`prepare_block` writes for normalised
    samples held within ``±limit``: a level ``q`` stands for ``(q - offset) * scale``
    (pass both to ``dedisperse``). Levels are ``128 + rint(x * 127 / limit)``: rounding
    adds noise of rms ``scale / sqrt(12)`` to each sample (0.014 of the unit noise at
    ``limit`` 6), S/N lower by 0.01 %; levels 0..255 stand for ``-128 * scale`` ..
    ``127 * scale``: a sample beyond them (zero-DM subtraction can push one past
    ``limit``) is held there."""
    if not limit > 0 or not np.isfinite(limit):
        raise ParameterError(f"8-bit samples need a finite clipping limit > 0, not {limit}")
    return float(QUANTISED_ZERO), float(limit) / (255 - QUANTISED_ZERO)


#: Samples blanked on each side of a clipped impulse, after growing it over the samples
#: next to it that still lie more than :data:`CLIP_EXTEND_SIGMA` robust sigmas out (its
#: wings: a 5 ms impulse is tens of samples wide, and its wings alone make DM-0 candidates).
CLIP_MARGIN = 1
CLIP_EXTEND_SIGMA = 2.0


def _grow(core: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """``core`` grown over the contiguous runs of ``wide`` that touch it."""
    grown = core.copy()
    edges = np.flatnonzero(np.diff(np.concatenate([[0], wide.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):  # runs of ``wide``
        if core[start:stop].any():
            grown[start:stop] = True
    return grown


def impulse_flags(series: np.ndarray, sigma: float) -> np.ndarray:
    """The time samples to blank (True) for the band-mean ``series`` of normalised data:
    where it lies more than ``sigma`` robust standard deviations from its median, with the
    wings around it (down to :data:`CLIP_EXTEND_SIGMA`) and :data:`CLIP_MARGIN` samples
    either side.

    A broadband zero-DM impulse is tens to thousands of sigma in this mean; a dispersed
    burst spreads over its sweep and stays far below (a burst at DM ~0 that bright is
    clipped too: use ``clip_sigma=0`` for nearby pulsars). Without this, each impulse
    leaves a seconds-long plateau across the high-DM trials that raises their measured
    noise and hides the bursts there.
    """
    nt = series.size
    if nt < 8:
        return np.zeros(nt, bool)
    median = float(np.median(series))
    scale = 1.4826 * float(np.median(np.abs(series - median)))
    if scale <= 0:
        return np.zeros(nt, bool)
    deviation = np.abs(series - median)
    flagged = deviation > sigma * scale
    if flagged.any():  # grow each impulse over its wings, then a margin
        flagged = _grow(flagged, deviation > CLIP_EXTEND_SIGMA * scale)
        idx = np.flatnonzero(flagged)
        for k in range(1, CLIP_MARGIN + 1):
            flagged[np.clip(idx - k, 0, nt - 1)] = True
            flagged[np.clip(idx + k, 0, nt - 1)] = True
    return flagged


def channel_location_scale(
    data: np.ndarray, nvalid: int, method: NormMethod = "mad", max_points: int = NORM_POINTS,
    *, sums_of: int = 0,
) -> np.ndarray:  # fmt: skip
    """Per-channel median and robust sigma ``float64 [nchan, 2]`` of ``data[:, :nvalid]``.

    8-bit data with ``method="mad"``: exact, from a histogram of every sample. Otherwise
    from at most ``max_points`` evenly strided samples (MAD, or IQR). The MAD of uint16
    data (the sums a decimating search keeps) and of float32 averages of ``sums_of``
    integer samples (a decimating search's blocks) comes from histograms of their integer
    levels: the same figures, several times faster.
    """
    if data.dtype == np.uint8 and method == "mad":
        return channel_median_mad_u8(data, int(nvalid))
    if method == "mad" and (data.dtype == np.uint16 or (data.dtype == np.float32 and sums_of > 1)):
        return channel_median_mad_int(data, int(nvalid), int(max_points), max(int(sums_of), 1))
    return channel_median_scale(data, int(nvalid), int(max_points), method == "iqr")


def decimate_block(data: np.ndarray, time_factor: int, freq_factor: int) -> np.ndarray:
    """Average ``time_factor`` samples x ``freq_factor`` channels (remainders dropped).

    Reads ``data`` in its own dtype (no float copy of the full-resolution block); returns
    float32 ``[nchan // freq_factor, nt // time_factor]``.
    """
    x = _as_block_any(data)
    tf = _check_factor(time_factor, x.shape[1], "time")
    ff = _check_factor(freq_factor, x.shape[0], "frequency")
    out = np.empty((x.shape[0] // ff, x.shape[1] // tf), np.float32)
    decimate_into(x, tf, ff, out)
    return out


def _as_block_any(data: np.ndarray, *, contiguous: bool = True) -> np.ndarray:
    """A 2-D block in a dtype the kernels read (uint8/uint16/float32; others as float32),
    C-contiguous unless ``contiguous`` is False (kernels that take any strides: a piece of
    a block is then not copied)."""
    x = np.asarray(data)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ParameterError(f"expected a block [nchan, nt] with nt > 0, got shape {x.shape}")
    if x.dtype not in (np.uint8, np.uint16, np.float32):
        x = x.astype(np.float32)
    return np.ascontiguousarray(x) if contiguous else x
