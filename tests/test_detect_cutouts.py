"""FETCH-layout cutouts: shape, centring, dedispersion at the candidate DM."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import delay_table
from drafts_ops.detect.cutouts import (
    cutout_span,
    dm_time_cutout,
    freq_time_cutout,
    time_decimation_factor,
)

FREQS = 1500.0 - 2.0 * np.arange(64)  # descending, MHz
TSAMP = 1e-3


def _dispersed_pulse(rng, dm: float, sample: int, width: int, nt: int = 2000) -> np.ndarray:
    data = rng.normal(size=(FREQS.size, nt)).astype(np.float32)
    delays = delay_table(np.array([dm]), FREQS, TSAMP)[0]
    for c, d in enumerate(delays):
        data[c, sample + d : sample + d + width] += 3.0
    return data


def test_decimation_factor_follows_fetch():
    assert [time_decimation_factor(w) for w in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 8]


def test_freq_time_cutout_is_dedispersed_and_centred(rng):
    data = _dispersed_pulse(rng, dm=300.0, sample=700, width=2)
    ft = freq_time_cutout(data, FREQS, TSAMP, 300.0, 700, 2, size=64)
    assert ft.shape == (64, 64) and ft.dtype == np.float32
    assert abs(float(ft.mean())) < 1e-5 and abs(float(ft.std()) - 1) < 1e-4
    profile = ft.mean(axis=1)
    assert int(profile.argmax()) in (32, 33)
    # dedispersed: every frequency row lights up at the pulse (top and bottom of band alike)
    assert ft[32:34, :8].mean() > 2 and ft[32:34, -8:].mean() > 2


def test_freq_time_cutout_orders_high_frequency_first(rng):
    data = rng.normal(size=(FREQS.size, 2000)).astype(np.float32)
    delays = delay_table(np.array([100.0]), FREQS, TSAMP)[0]
    for c in range(8):  # a burst only in the 8 highest channels
        data[c, 500 + delays[c]] += 8.0
    ft = freq_time_cutout(data, FREQS, TSAMP, 100.0, 500, 1, size=64)
    flipped = freq_time_cutout(data[::-1], FREQS[::-1], TSAMP, 100.0, 500, 1, size=64)
    np.testing.assert_allclose(ft, flipped, atol=1e-5)
    assert ft[32, :8].mean() > 4 and abs(ft[32, -8:].mean()) < 1.5


def test_dm_time_cutout_peaks_at_candidate_dm(rng):
    data = _dispersed_pulse(rng, dm=300.0, sample=700, width=4)
    dt = dm_time_cutout(data, FREQS, TSAMP, 300.0, 700, 4, size=64, ndm=65)
    assert dt.shape == (65, 64) and dt.dtype == np.float32
    row, col = np.unravel_index(int(dt.argmax()), dt.shape)
    assert abs(row - 32) <= 2 and abs(col - 32) <= 1  # factor 2: 128 raw samples in 64 pixels


def test_cutout_pads_at_file_edges(rng):
    data = _dispersed_pulse(rng, dm=50.0, sample=10, width=1, nt=400)
    ft = freq_time_cutout(data, FREQS, TSAMP, 50.0, 10, 1, size=64)
    assert np.isfinite(ft).all() and int(ft.mean(axis=1).argmax()) == 32


def test_cutout_span_covers_window_and_largest_delay():
    start, stop = cutout_span(FREQS, TSAMP, 300.0, 700, 4, size=64)
    max_delay = delay_table(np.array([600.0]), FREQS, TSAMP).max()
    assert start == 700 - 64 and stop == start + 128 + max_delay


def test_bad_parameters_raise():
    with pytest.raises(ParameterError):
        freq_time_cutout(np.zeros((64, 100)), FREQS, TSAMP, -1.0, 50, 1)
    with pytest.raises(ParameterError):
        freq_time_cutout(np.zeros((64, 100)), FREQS, TSAMP, 1.0, 50, 1, chan_mask=np.ones(3, bool))


def test_real_pulse_matches_fetch_file(real_data):
    """On 28.fil the cutouts put the pulse where FETCH's test.h5 has it."""
    from drafts_ops.io import open_observation

    with open_observation(real_data / "28.fil") as reader, h5py.File(real_data / "test.h5") as f:
        h = reader.header
        sample = round(float(f.attrs["tcand"]) / h.tsamp)
        dm, width = float(f.attrs["dm"]), int(f.attrs["width"])
        start, stop = cutout_span(h.chan_freqs, h.tsamp, dm, sample, width)
        block = reader.read_block(start, stop - start)
        ft = freq_time_cutout(block, h.chan_freqs, h.tsamp, dm, sample - start, width)
        dt = dm_time_cutout(block, h.chan_freqs, h.tsamp, dm, sample - start, width)
        assert ft.shape == f["data_freq_time"].shape and dt.shape == f["data_dm_time"].shape
        fetch_peak = int(f["data_freq_time"][:].mean(axis=1).argmax())
        assert abs(int(ft.mean(axis=1).argmax()) - fetch_peak) <= 1
        row, col = np.unravel_index(int(dt.argmax()), dt.shape)
        assert abs(row - 127) <= 3 and abs(col - fetch_peak) <= 1


@pytest.mark.parametrize(("dm", "sample", "width"), [(300.0, 700, 1), (300.0, 900, 8),
                                                     (120.0, 40, 16), (40.0, 1950, 6)])  # fmt: skip
def test_cutouts_equal_the_dedispersed_series_decimated(rng, monkeypatch, dm, sample, width):
    """The strided computation equals its definition: the normalised window dedispersed at
    every sample by the production operator, then averaged over the decimation factor (also
    where the window runs off either end of the data)."""
    from drafts_ops.dedisp.operator import dedisperse
    from drafts_ops.dedisp.plan import DMPlan
    from drafts_ops.detect.cutouts import CUTOUT_STATS_SAMPLES, cutout_pair

    data = (rng.normal(size=(FREQS.size, 2000)) * rng.uniform(1, 9, (FREQS.size, 1))).astype(
        np.float32
    )
    mask = np.zeros(FREQS.size, bool)
    mask[5:9] = True
    ft, dt = cutout_pair(data, FREQS, TSAMP, dm, sample, width, size=64, chan_mask=mask)
    factor = time_decimation_factor(width)
    nwin, start = 64 * factor, sample - 32 * factor
    plan = DMPlan.build(np.linspace(0.0, 2 * dm, 64), FREQS, TSAMP)
    span = nwin + plan.max_delay
    lo, hi = max(start, 0), min(start + span, data.shape[1])
    head = data[:, lo : min(lo + CUTOUT_STATS_SAMPLES, hi)].astype(np.float64)
    med = np.median(head, axis=1)
    sigma = 1.482602218505602 * np.median(np.abs(head - med[:, None]), axis=1)
    window = np.zeros((FREQS.size, span), np.float32)
    window[:, lo - start : hi - start] = (data[:, lo:hi] - med[:, None]) / sigma[:, None]
    window[mask] = 0.0
    series = dedisperse(window, plan, mode="production", algorithm="brute")[:, :nwin]
    expected_dt = series.reshape(64, 64, factor).mean(axis=2)
    expected_dt = (expected_dt - expected_dt.mean()) / expected_dt.std()
    np.testing.assert_allclose(dt, expected_dt, atol=2e-4)
    delays = delay_table(np.array([dm]), FREQS, TSAMP)[0]
    shifted = np.stack([window[c, d : d + nwin] for c, d in enumerate(delays)])
    waterfall = shifted.reshape(FREQS.size, 64, factor).mean(axis=2).T  # 64 channels: no rebin
    np.testing.assert_allclose(ft, (waterfall - waterfall.mean()) / waterfall.std(), atol=2e-4)
    # the file's own time-major layout (a transposed view, as an 8-bit file's memory map)
    # gives the same images: each chunk of channels is transposed only as far as it needs
    spectra = np.ascontiguousarray(data.T)
    for chunk in (None, 3000):  # one chunk of channels, or many
        if chunk:
            monkeypatch.setattr("drafts_ops.detect.cutouts.CHUNK_FLOATS", chunk)
        ft_t, dt_t = cutout_pair(spectra.T, FREQS, TSAMP, dm, sample, width, size=64,
                                 chan_mask=mask)  # fmt: skip
        np.testing.assert_array_equal(ft_t, ft)
        np.testing.assert_allclose(dt_t, dt, atol=1e-5)  # chunks add in another order


@pytest.mark.parametrize("nchan", [4096, 1024, 336, 257, 64, 3])
def test_frequency_rebinning_averages_by_overlap(nchan):
    """The sparse rebinning kernel equals the dense overlap-average matrix (each output
    channel the mean of the input channels it covers, by fraction of overlap)."""
    from drafts_ops.detect.cutout_kernels import rebin_rows_into
    from drafts_ops.detect.cutouts import _rebin_weights

    edges_in, edges_out = np.linspace(0, 1, nchan + 1), np.linspace(0, 1, 257)
    overlap = np.clip(np.minimum(edges_out[1:, None], edges_in[None, 1:])
                      - np.maximum(edges_out[:-1, None], edges_in[None, :-1]), 0, None)  # fmt: skip
    dense = overlap / overlap.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(nchan)
    data = rng.normal(size=(nchan, 256)).astype(np.float32)
    order = rng.permutation(nchan)
    out = np.empty((256, 256), np.float32)
    rebin_rows_into(data, order, *_rebin_weights(nchan, 256), out)
    np.testing.assert_allclose(out, dense @ data[order].astype(np.float64), atol=1e-5)


@pytest.mark.parametrize(("sample", "width"), [(600, 1), (1000, 8), (40, 4), (1990, 16)])
def test_the_waterfall_read_at_each_pulse_equals_the_phased_one(rng, sample, width):
    """``freq_time_cutout`` reads each channel only where its pulse lies (the merge's
    measurements); it equals the waterfall summed from the window's start in phase-major
    order (the cutout pair's path, with one DM row), on channel-major data and on a
    transposed view of time-major spectra, at the file's edges too."""
    from drafts_ops.detect.cutouts import _cutouts

    data = np.clip(_dispersed_pulse(rng, 150.0, sample, width) * 20 + 128, 0, 255).astype(np.uint8)
    mask = np.zeros(FREQS.size, bool)
    mask[[5, 40]] = True
    for view in (data, np.ascontiguousarray(data.T).T):
        phased, _ = _cutouts(view, FREQS, TSAMP, 150.0, sample, width, 256, 0, mask)
        alone = freq_time_cutout(view, FREQS, TSAMP, 150.0, sample, width, chan_mask=mask)
        np.testing.assert_allclose(alone, phased, atol=1e-5)
