"""Injected bursts: dispersion, smearing, scattering, spectra, and the S/N definition."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan, delay_table, dispersion_delay_s, smearing_s
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.detect.single_pulse import boxcar_widths
from drafts_ops.simulate import BurstSpec, SimulationConfig, burst_signal, simulate_array
from drafts_ops.simulate.burst import FWHM_PER_SIGMA
from drafts_ops.simulate.noise import NoiseModel

FREQS = 1500.0 - 4.6875 * np.arange(64)  # 64 channels, 1500 -> 1204.7 MHz
TSAMP = 1e-3


def best_boxcar_snr(series: np.ndarray, rms: float, max_width: int = 200, every: bool = False):
    """(snr, width, centre index) of the best boxcar over the search's widths (or every
    integer width) and all starts."""
    best = (-np.inf, 0, 0)
    csum = np.concatenate([[0.0], np.cumsum(series, dtype=np.float64)])
    top = min(max_width, series.size)
    for w in range(1, top + 1) if every else boxcar_widths(top):
        sums = (csum[w:] - csum[:-w]) / (rms * np.sqrt(w))
        i = int(np.argmax(sums))
        if sums[i] > best[0]:
            best = (float(sums[i]), w, i + (w - 1) / 2)
    return best


@pytest.mark.parametrize(
    "burst",
    [
        BurstSpec(t_s=0.5, dm=300.0, snr=20.0, width_s=1e-3),
        BurstSpec(t_s=0.7, dm=150.0, snr=12.0, width_s=4e-3, scattering_s=3e-3),
        BurstSpec(
            t_s=0.2, dm=500.0, snr=15.0, spectral_index=-3.0, band_centre_mhz=1400, band_fwhm_mhz=80
        ),
    ],
)
def test_noise_free_signal_has_exactly_the_target_snr(burst):
    """The S/N definition: best boxcar of the signal dedispersed at the true DM."""
    signal = burst_signal(FREQS, TSAMP, burst, 0, 2000)
    delays = delay_table(np.array([burst.dm]), FREQS, TSAMP)
    series = dedisperse_reference(signal, delays)[0]
    snr, _, _ = best_boxcar_snr(series, np.sqrt(FREQS.size))
    assert snr == pytest.approx(burst.snr, rel=1e-6)  # the search's boxcar set
    # the search's sqrt(2)-spaced widths lose less than 5 % to every integer width
    ideal, _, _ = best_boxcar_snr(series, np.sqrt(FREQS.size), every=True)
    assert burst.snr <= ideal < 1.05 * burst.snr


@pytest.mark.parametrize("foff", [-4.6875, 4.6875])
@pytest.mark.parametrize("nbits", [8, 32])
def test_dedispersed_burst_peaks_at_true_dm_time_and_snr(foff, nbits):
    """Numpy reference dedispersion over a trial grid recovers DM, time and S/N."""
    bursts = (
        BurstSpec(t_s=0.4, dm=350.0, snr=20.0, width_s=1e-3),
        BurstSpec(t_s=1.6, dm=120.0, snr=25.0, width_s=2e-3),
    )
    config = SimulationConfig(
        nchans=64,
        fch1=1500.0 if foff < 0 else 1500.0 - 63 * 4.6875,
        foff=foff,
        tsamp=TSAMP,
        nbits=nbits,
        duration_s=3.0,
        seed=11,
        bursts=bursts,
    )
    header, data, _ = simulate_array(config)
    noise = NoiseModel.build(header.chan_freqs, nbits, 11, "smooth")
    z = (data - noise.mean[:, None]) / noise.sigma[:, None]
    plan = DMPlan.from_header(header, 0.0, 500.0, dm_step=2.0)
    out = dedisperse_reference(z, plan.delays)
    rms = np.sqrt(header.nchans)
    for burst in bursts:
        k = round(burst.t_s / TSAMP)
        window = out[:, k - 40 : k + 40]
        near = slice(max(plan.nearest_trial(burst.dm) - 10, 0), plan.nearest_trial(burst.dm) + 11)
        snr, dm_index, centre = max(
            (s, d, c)
            for d, row in enumerate(window[near], start=near.start)
            for s, _, c in [best_boxcar_snr(row, rms, 30)]
        )
        assert abs(dm_index - plan.nearest_trial(burst.dm)) <= 1
        assert abs(k - 40 + centre - burst.t_s / TSAMP) <= 2
        assert snr == pytest.approx(burst.snr, rel=0.15)


def test_arrival_times_follow_the_dispersion_law():
    burst = BurstSpec(t_s=0.3, dm=400.0, snr=50.0, width_s=2e-3)
    signal = burst_signal(FREQS, TSAMP, burst, 0, 2000).astype(np.float64)
    t = np.arange(2000) * TSAMP
    centroid = (signal * t).sum(axis=1) / signal.sum(axis=1)
    expected = burst.t_s + dispersion_delay_s(burst.dm, FREQS, FREQS.max())
    np.testing.assert_allclose(centroid, expected, atol=1e-6)


def test_width_includes_in_channel_smearing():
    """Time variance per channel = intrinsic^2 + smear^2 / 12 + tsamp^2 / 12."""
    tsamp = 1e-4
    burst = BurstSpec(t_s=0.05, dm=1000.0, snr=50.0, width_s=0.5e-3)
    signal = burst_signal(FREQS, tsamp, burst, 0, 30000).astype(np.float64)
    t = np.arange(30000) * tsamp
    weight = signal / signal.sum(axis=1, keepdims=True)
    mean = (weight * t).sum(axis=1)
    var = (weight * (t - mean[:, None]) ** 2).sum(axis=1)
    smear = smearing_s(burst.dm, 4.6875, FREQS)
    expected = (burst.width_s / FWHM_PER_SIGMA) ** 2 + smear**2 / 12 + tsamp**2 / 12
    np.testing.assert_allclose(var, expected, rtol=0.01)
    assert smear[-1] / smear[0] == pytest.approx((FREQS[0] / FREQS[-1]) ** 3)


def test_scattering_tail_scales_as_f_to_the_minus_4():
    tsamp = 2e-4
    tau = 4e-3
    burst = BurstSpec(t_s=0.01, dm=0.0, snr=50.0, width_s=0.0, scattering_s=tau)
    signal = burst_signal(FREQS, tsamp, burst, 0, 2000).astype(np.float64)
    expected_tau = tau * (FREQS / FREQS.max()) ** -4
    for c in (0, 31, 63):
        peak = int(np.argmax(signal[c]))
        tail = signal[c, peak + 3 : peak + 3 + int(3 * expected_tau[c] / tsamp)]
        slope = np.polyfit(np.arange(tail.size) * tsamp, np.log(tail), 1)[0]
        assert -1 / slope == pytest.approx(expected_tau[c], rel=0.01)
    # scattering moves the centroid by tau and conserves fluence
    t = np.arange(2000) * tsamp
    centroid = (signal * t).sum(axis=1) / signal.sum(axis=1)
    np.testing.assert_allclose(centroid - burst.t_s, expected_tau, rtol=0.01, atol=tsamp / 10)
    np.testing.assert_allclose(signal.sum(axis=1), signal[0].sum(), rtol=1e-4)


@pytest.mark.parametrize("index", [-4.0, -1.5, 0.0, 2.0])
def test_spectral_index_sets_the_fluence_per_channel(index):
    burst = BurstSpec(t_s=0.2, dm=100.0, snr=30.0, spectral_index=index)
    fluence = burst_signal(FREQS, TSAMP, burst, 0, 1000).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(fluence / fluence[0], (FREQS / FREQS[0]) ** index, rtol=1e-5)


def test_band_limited_envelope():
    burst = BurstSpec(t_s=0.2, dm=100.0, snr=30.0, band_centre_mhz=1350.0, band_fwhm_mhz=60.0)
    fluence = burst_signal(FREQS, TSAMP, burst, 0, 1000).astype(np.float64).sum(axis=1)
    sigma = 60.0 / FWHM_PER_SIGMA
    expected = np.exp(-0.5 * ((FREQS - 1350.0) / sigma) ** 2)
    np.testing.assert_allclose(fluence / fluence.max(), expected / expected.max(), atol=1e-5)
    half = FREQS[fluence > fluence.max() / 2]
    assert half.max() - half.min() == pytest.approx(60.0, abs=2 * 4.6875)


def test_burst_signal_window_is_a_slice_of_the_whole():
    burst = BurstSpec(t_s=0.3, dm=250.0, snr=20.0, width_s=3e-3, scattering_s=1e-3)
    whole = burst_signal(FREQS, TSAMP, burst, 0, 1500)
    part = burst_signal(FREQS, TSAMP, burst, 400, 300)
    np.testing.assert_array_equal(part, whole[:, 400:700])
    assert part.dtype == np.float32 and part.shape == (64, 300)


def test_burst_signal_bad_input():
    burst = BurstSpec(t_s=0.1, dm=10.0, snr=10.0)
    with pytest.raises(ParameterError, match="tsamp"):
        burst_signal(FREQS, 0.0, burst, 0, 10)
    with pytest.raises(ParameterError, match="positive"):
        burst_signal(-FREQS, TSAMP, burst, 0, 10)
    with pytest.raises(ParameterError, match="chan_bw_mhz"):
        burst_signal(FREQS[:1], TSAMP, burst, 0, 10)
    huge = BurstSpec(t_s=0.1, dm=10.0, snr=10.0, scattering_s=100.0)
    with pytest.raises(ParameterError, match="too large"):
        burst_signal(FREQS, 1e-5, huge, 0, 10)


def test_smeared_cdf_rows_follow_the_gaussian_and_the_boxcar():
    """The compiled pulse CDF: a Gaussian's (erf) where a channel does not smear, a linear
    ramp across the boxcar for a zero-width pulse, symmetric about the centre otherwise."""
    import math

    from drafts_ops.simulate import render_kernels

    grid = np.linspace(-3e-3, 3e-3, 601)
    out = np.empty((3, grid.size))
    start = np.zeros(3)
    render_kernels.smeared_cdf_rows(start, grid, 5e-4, np.array([0.0, 2e-3, 2e-3]), 1e-9, out[:2])
    render_kernels.smeared_cdf_rows(start[2:], grid, 0.0, np.array([2e-3]), 1e-9, out[2:])
    gauss = [0.5 * math.erfc(-x / 5e-4 / math.sqrt(2)) for x in grid]
    np.testing.assert_allclose(out[0], gauss, atol=1e-12)
    np.testing.assert_allclose(out[1] + out[1][::-1], 1.0, atol=1e-12)  # symmetric pulse
    assert out[1][300] == pytest.approx(0.5) and out[1][0] < 1e-4 and out[1][-1] > 1 - 1e-4
    np.testing.assert_allclose(out[2], np.clip((grid + 1e-3) / 2e-3, 0, 1), atol=1e-12)
