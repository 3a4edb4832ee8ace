"""Preprocessing: robust normalisation, channel masks, zero-DM, decimation (by value)."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.preprocess import (
    auto_mask,
    channel_statistics,
    decimate_frequency,
    decimate_mask,
    decimate_time,
    normalise_channels,
    preprocess_block,
    static_mask,
    zero_dm_subtract,
)
from drafts_ops.io.header import Header

HEADER = Header(nchans=8, fch1=1500.0, foff=-1.0, tsamp=1e-3, nbits=8, nsamples=100)


def _noise(rng, nchan=64, nt=4000):
    # per-channel offsets and gains, as a bandpass gives
    gains = rng.uniform(2.0, 20.0, nchan)[:, None]
    return (100.0 + 10.0 * np.arange(nchan)[:, None] + gains * rng.normal(size=(nchan, nt))).astype(
        np.float32
    )


@pytest.mark.parametrize("method", ["mad", "iqr"])
def test_normalise_channels_gives_zero_median_unit_robust_std(rng, method):
    data = _noise(rng)
    out = normalise_channels(data, method)
    assert out.dtype == np.float32 and out.shape == data.shape
    np.testing.assert_allclose(np.median(out, axis=1), 0.0, atol=1e-5)
    mad = 1.4826 * np.median(np.abs(out - np.median(out, axis=1, keepdims=True)), axis=1)
    np.testing.assert_allclose(mad, 1.0, atol=0.06)
    np.testing.assert_allclose(out.std(axis=1), 1.0, atol=0.06)


def test_normalise_constant_channel_is_zero(rng):
    data = _noise(rng, 4, 100)
    data[2] = 7.0
    out = normalise_channels(data)
    assert np.all(out[2] == 0) and np.isfinite(out).all()


def test_normalise_coarse_data_falls_back_to_std():
    data = np.zeros((2, 1000), np.float32)
    data[:, ::50] = 1.0  # MAD is 0, the standard deviation is not
    out = normalise_channels(data)
    np.testing.assert_allclose(out[0, 0], 1.0 / data[0].std(), rtol=1e-5)


def test_static_mask():
    mask = static_mask(8, [0, 3, -1])
    assert mask.tolist() == [True, False, False, True, False, False, False, True]
    with pytest.raises(ParameterError):
        static_mask(8, [8])


def test_auto_mask_finds_noisy_and_impulsive_channels(rng):
    data = rng.normal(128.0, 18.0, size=(64, 4000)).astype(np.float32)
    data[5] *= 3.0  # a channel with three times the noise
    data[40, rng.integers(0, 4000, 40)] += 400.0  # impulsive RFI in one channel
    data[50] = 128.0  # dead channel
    bad = auto_mask(data)
    assert set(np.flatnonzero(bad)) == {5, 40, 50}
    stats = channel_statistics(data)
    assert stats["kurtosis"][40] > 10 and abs(stats["kurtosis"][0]) < 0.5


def test_preprocess_block_masks_bad_channel(rng):
    data = rng.normal(128.0, 18.0, size=(32, 2000)).astype(np.float32)
    data[7] *= 5.0
    out, bad = preprocess_block(data, mask=static_mask(32, [3]))
    assert np.flatnonzero(bad).tolist() == [3, 7]
    assert np.all(out[[3, 7]] == 0)
    assert abs(np.median(out[0])) < 1e-5


def test_zero_dm_removes_broadband_signal(rng):
    data = rng.normal(size=(16, 500)).astype(np.float32)
    broadband = 5.0 * np.sin(np.arange(500) / 10.0)
    mask = static_mask(16, [2])
    out = zero_dm_subtract(data + broadband, mask)
    expected = data - data[~mask].mean(axis=0)
    expected[2] = 0
    np.testing.assert_allclose(out, expected, atol=1e-4)


def test_decimate_time_values_and_header():
    data = np.arange(8 * 10, dtype=np.float32).reshape(8, 10)
    out, header = decimate_time(data, HEADER, 3)
    np.testing.assert_allclose(out, data[:, :9].reshape(8, 3, 3).mean(axis=2))
    assert header.tsamp == pytest.approx(3e-3) and header.nsamples == 33


def test_decimate_frequency_values_and_header():
    data = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    out, header = decimate_frequency(data, HEADER, 2)
    np.testing.assert_allclose(out, data.reshape(4, 2, 4).mean(axis=1))
    assert header.nchans == 4 and header.foff == -2.0 and header.fch1 == 1499.5
    np.testing.assert_allclose(header.chan_freqs, HEADER.chan_freqs.reshape(4, 2).mean(axis=1))
    assert decimate_mask(np.array([1, 1, 1, 0, 0, 0, 1, 0], bool), 2).tolist() == [
        True, False, False, False,
    ]  # fmt: skip


def test_bad_input_raises():
    with pytest.raises(ParameterError):
        normalise_channels(np.zeros(5))
    with pytest.raises(ParameterError):
        decimate_time(np.zeros((8, 10)), HEADER, 0)
    with pytest.raises(ParameterError):
        auto_mask(np.ones((4, 10)), stats=("nonsense",))


@pytest.mark.parametrize("spread", [0.4, 3.0, 40.0, 3000.0, 30000.0])
def test_uint16_median_and_mad_from_histograms_equal_the_selections(rng, spread, monkeypatch):
    """uint16 data (the sums a decimating search keeps for its cutouts) take their
    per-channel median and MAD from histograms: the same figures as selecting them,
    for narrow, wide (the selection fallback) and constant channels, odd and even
    counts, every stride."""
    from drafts_ops.detect import preprocess
    from drafts_ops.detect.statistics_kernels import channel_median_mad_int, channel_median_scale

    data = np.clip(rng.normal(1600.0, spread, (9, 2049)), 0, 65535).astype(np.uint16)
    data[0] = 77
    for nvalid, points in ((2049, 4096), (2048, 4096), (2049, 100), (1000, 7)):
        got = channel_median_mad_int(data, nvalid, points)
        np.testing.assert_array_equal(got, channel_median_scale(data, nvalid, points, False))
    assert got[0, 1] == 0.0  # the constant channel

    def selection(*args):
        raise AssertionError("uint16 data went to the selection kernel")

    monkeypatch.setattr(preprocess, "channel_median_scale", selection)
    np.testing.assert_array_equal(preprocess.channel_location_scale(data, 1000, "mad", 7), got)


def test_decimated_blocks_take_their_statistics_from_histograms(rng, monkeypatch):
    """A decimating search's blocks (float32 averages of integer samples) are normalised
    with the median and MAD of their integer levels' histograms: the same normalised data
    as with the selections, bit for bit, for factors that are not powers of two too; data
    that are not such averages fall back to the selections."""
    from drafts_ops.detect import preprocess
    from drafts_ops.detect.statistics_kernels import channel_median_mad_int, channel_median_scale

    for factor in (16, 24, 3):
        sums = np.clip(np.rint(rng.normal(100.0 * factor, 8.0 * factor, (16, 5000))), 0,
                       255 * factor).astype(np.float32)  # fmt: skip
        averages = sums * np.float32(1.0 / factor)
        averages[3] += np.float32(0.013)  # not averages of integers: selected
        for points in (4096, 7):
            got = channel_median_mad_int(averages, 5000, points, factor)
            np.testing.assert_array_equal(got, channel_median_scale(averages, 5000, points, False))
        expected = np.empty_like(averages)
        preprocess.prepare_block(averages, 5000, expected, auto=False)
        with monkeypatch.context() as patch:
            patch.setattr(preprocess, "channel_median_scale", None)  # must not be needed
            got = np.empty_like(averages)
            preprocess.prepare_block(averages, 5000, got, auto=False, sums_of=factor)
        np.testing.assert_array_equal(got, expected)


def _impulsive_block(rng, nchan=48, nt=40000):
    """8-bit noise with a bandpass, a dead channel, a broadband impulse and a slow
    broadband ripple (what zero-DM subtraction removes)."""
    gains = rng.uniform(3.0, 8.0, nchan)[:, None]
    data = 60.0 + 2.0 * np.arange(nchan)[:, None] + gains * rng.normal(size=(nchan, nt))
    data[5] = 42.0  # no spread: masked
    data[:, 20000:20004] += 60.0  # broadband impulse: blanked
    data += (3.0 * np.sin(np.arange(nt) / 700.0)).astype(np.float32)
    return np.clip(np.rint(data), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("zero_dm", [False, True])
def test_8bit_preparation_is_the_float_preparation_quantised(rng, zero_dm):
    """Into a uint8 ``out`` the block's normalised samples (impulses blanked, zero-DM
    subtracted, masked channels at the zero level) arrive as ``128 + rint(x * 127 /
    clip_pixels)``, exactly the levels of the float32 preparation; written over the uint8
    data themselves they are the same; ``quantised_levels`` turns them back into
    normalised units within half a step."""
    from drafts_ops.detect.preprocess import prepare_block, quantised_levels

    data = _impulsive_block(rng)
    nvalid = data.shape[1] - 300  # the rest: padding at the zero level
    options = {"zero_dm": zero_dm, "clip_sigma": 10.0, "clip_pixels": 6.0}
    normalised = np.empty(data.shape, np.float32)
    bad = prepare_block(data, nvalid, normalised, **options)
    assert bad[5] and bad.sum() == 1
    assert np.all(normalised[:, 20000:20004] == 0.0)  # the impulse blanked
    levels = np.empty(data.shape, np.uint8)
    assert np.array_equal(prepare_block(data, nvalid, levels, **options), bad)
    expected = np.clip(np.rint(normalised * np.float32(127 / 6.0)) + 128, 0, 255)
    np.testing.assert_array_equal(levels, expected.astype(np.uint8))
    assert np.all(levels[5] == 128) and np.all(levels[:, nvalid:] == 128)
    in_place = data.copy()
    prepare_block(in_place, nvalid, in_place, **options)
    np.testing.assert_array_equal(in_place, levels)
    offset, scale = quantised_levels(6.0)
    back = (levels.astype(np.float64) - offset) * scale
    assert np.abs(back - normalised).max() <= scale / 2 + 1e-6
    if zero_dm:  # the ripple is gone from the band mean
        assert np.abs(normalised[~bad, :nvalid].mean(axis=0)).max() < 1e-3


def test_8bit_preparation_needs_a_clipping_limit(rng):
    from drafts_ops.detect.preprocess import prepare_block, quantised_levels

    data = _impulsive_block(rng, nt=100)
    with pytest.raises(ParameterError, match="clip_pixels > 0"):
        prepare_block(data, 100, np.empty(data.shape, np.uint8))
    with pytest.raises(ParameterError, match="clipping limit"):
        quantised_levels(0.0)
