"""The simulator's noise kernels: inverse CDF, counter-based deviates, statistics."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from drafts_ops.simulate import render_kernels
from drafts_ops.simulate.noise import NoiseModel, bandpass_gain, stream_key

TABLE = render_kernels.normal_table()
KEY = np.uint64(7)


@pytest.mark.parametrize("p", [1e-300, 1e-20, 1e-9, 1e-3, 0.02, 0.3, 0.5, 0.7, 0.97, 1 - 1e-12])
def test_ndtri_matches_statistics_inv_cdf(p):
    assert render_kernels.ndtri(p) == pytest.approx(NormalDist().inv_cdf(p), rel=1e-14, abs=1e-14)


def test_ndtr_matches_statistics_cdf():
    x = np.array([-6.0, -2.5, -0.3, 0.0, 1.7, 4.0])
    expected = [NormalDist().cdf(v) for v in x]
    np.testing.assert_allclose(render_kernels.ndtr(x), expected, rtol=1e-9)  # erf loses tail digits


def _fill(nsamp, nchan, start=0, key=KEY):
    out = np.empty((nsamp, nchan), np.float32)
    zeros, ones = np.zeros(nchan, np.float32), np.ones(nchan, np.float32)
    render_kernels.fill_noise(out, start, key, zeros, ones, TABLE, np.float32(0), False)
    return out


@pytest.mark.parametrize("nchan", [1, 7, 64])
def test_fill_noise_is_the_counter_stream(nchan):
    """Row r, channel c holds deviate (start + r) * nchan + c, whatever the block split."""
    block = _fill(5, nchan, start=11)
    expected = [
        [
            render_kernels.element_normal(np.uint64(7), (11 + r) * nchan + c, TABLE)
            for c in range(nchan)
        ]
        for r in range(5)
    ]
    np.testing.assert_array_equal(block, np.array(expected, np.float32))
    whole = _fill(16, nchan)
    np.testing.assert_array_equal(whole[11:16], block)


def test_fill_noise_py_func_agrees():
    out = np.empty((3, 5), np.float32)
    zeros, ones = np.zeros(5, np.float32), np.ones(5, np.float32)
    render_kernels.fill_noise.py_func(
        out, 2, np.uint64(7), zeros, ones, TABLE, np.float32(0), False
    )
    np.testing.assert_array_equal(out, _fill(5, 5)[2:5])


def test_noise_is_standard_normal_and_uncorrelated():
    z = _fill(2000, 256).astype(np.float64)
    assert abs(z.mean()) < 5 / np.sqrt(z.size)
    assert z.std() == pytest.approx(1.0, abs=0.003)
    for threshold in (1.0, 2.0, 3.0, 4.0):
        expected = 2 * NormalDist().cdf(-threshold)
        observed = np.mean(np.abs(z) > threshold)
        assert observed == pytest.approx(expected, rel=6 / np.sqrt(expected * z.size))
    # neighbours in frequency (same hash) and in time are independent
    for a, b in ((z[:, :-1], z[:, 1:]), (z[:-1], z[1:])):
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 5 / np.sqrt(a.size)
    # the sum over channels (DM 0 series) has the expected rms
    assert z.sum(axis=1).std() / np.sqrt(256) == pytest.approx(1.0, abs=0.05)


def test_tails_reach_beyond_the_table():
    z = _fill(4000, 1024).ravel()
    beyond = np.abs(z) > -TABLE[1]
    assert 0 < beyond.sum() < 200  # expected 4000 * 1024 / 32768 = 125
    assert np.abs(z).max() > 4.5


def test_keys_differ_by_seed_and_stream():
    keys = {int(stream_key(s, k)) for s in range(4) for k in range(3)}
    assert len(keys) == 12


def test_bandpass_shapes():
    freqs = np.linspace(1200, 1500, 256)
    np.testing.assert_array_equal(bandpass_gain(freqs, "flat"), 1.0)
    gain = bandpass_gain(freqs, "smooth")
    assert gain.max() == pytest.approx(1.04, abs=0.01)
    assert gain[0] < 0.65 and gain[-1] < 0.65
    np.testing.assert_allclose(bandpass_gain(freqs[::-1], "smooth"), gain[::-1])


def test_noise_model_levels_follow_the_bandpass():
    freqs = np.linspace(1500, 1200, 64)
    model = NoiseModel.build(freqs, 8, seed=1, bandpass="smooth")
    gain = bandpass_gain(freqs, "smooth")
    np.testing.assert_allclose(model.mean, 128 * gain, rtol=1e-6)
    np.testing.assert_allclose(model.sigma, 16 * gain, rtol=1e-6)
    out = np.empty((20000, 64), np.uint8)
    model.fill(out, 0)
    np.testing.assert_allclose(out.mean(axis=0), 128 * gain, atol=0.5)
    np.testing.assert_allclose(out.std(axis=0), 16 * gain, rtol=0.03)
