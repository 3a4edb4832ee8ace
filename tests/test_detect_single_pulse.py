"""Boxcar search: kernels against numpy by value, Heimdall S/N of injected pulses."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.detect import boxcar_kernels, statistics_kernels
from drafts_ops.detect.single_pulse import Giants, boxcar_widths, find_giants


def _reference_boxcar(series, widths):
    """Numpy: best sum/sqrt(w) over widths, boxcar [t - w//2, t - w//2 + w)."""
    ndm, nt = series.shape
    best = np.full((ndm, nt), -np.inf)
    best_w = np.zeros((ndm, nt), np.int32)
    for w in widths:
        sums = np.stack([np.convolve(row, np.ones(w), mode="valid") for row in series])
        snr = np.full((ndm, nt), -np.inf)
        snr[:, w // 2 : w // 2 + nt - w + 1] = sums / np.sqrt(w)
        better = snr > best
        best[better], best_w[better] = snr[better], w
    return best, best_w


def test_boxcar_widths_are_geometric():
    assert boxcar_widths(1).tolist() == [1]
    assert boxcar_widths(40).tolist() == [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 40]
    assert boxcar_widths(64).tolist()[-3:] == [32, 45, 64]
    widths = boxcar_widths(4096)
    assert np.all(widths[2:] / widths[1:-1] <= 1.5)  # dense: a few per cent of S/N at most
    with pytest.raises(ParameterError):
        boxcar_widths(0)


def _search(series, widths, window=512, valid=None, py_func=False):
    snr = np.empty(series.shape, np.float32)
    index = np.empty(series.shape, np.int8)
    rows = np.full(series.shape[0], series.shape[1], np.int64) if valid is None else valid
    kernel = boxcar_kernels.search_rows.py_func if py_func else boxcar_kernels.search_rows
    kernel(series, rows, np.asarray(widths, np.int64), window, 1024, snr, index)
    return snr, index


def test_search_kernel_matches_numpy_in_white_noise(rng):
    """Unit white noise, flat baseline: measured per-width noise is sqrt(w), so the fused
    kernel's S/N equals the plain boxcar S/N (numpy) up to the noise estimate (~5 %)."""
    series = rng.normal(size=(3, 20000)).astype(np.float32)
    widths = np.array([1, 2, 4, 8, 16], np.int64)
    expected, expected_w = _reference_boxcar(series.astype(np.float64), widths)
    snr, index = _search(series, widths, window=20000)
    peak = expected > 4.0  # compare where it matters: bright samples
    np.testing.assert_allclose(snr[peak], expected[peak], rtol=0.08, atol=0.25)
    assert np.mean(widths[index[peak]] == expected_w[peak]) > 0.9


def test_search_kernel_py_func_equals_compiled(rng):
    series = rng.normal(size=(4, 3000)).astype(np.float32) + np.linspace(0, 5, 3000)
    valid = np.array([3000, 2500, 1, 0], np.int64)
    compiled = _search(series, [1, 2, 3, 4, 6], valid=valid)
    python = _search(series, [1, 2, 3, 4, 6], valid=valid, py_func=True)
    np.testing.assert_allclose(compiled[0], python[0], rtol=1e-5, atol=1e-5)
    assert np.all(np.isneginf(compiled[0][1, 2500:])) and np.all(np.isneginf(compiled[0][2:]))


@pytest.mark.parametrize("widths", [[1, 2, 3, 4], [1, 2, 3, 4, 6], [1, 2, 4000]])
def test_search_kernel_in_place_equals_separate_output(rng, widths):
    """The pipeline writes the S/N over the dedispersed rows themselves; the kernel keeps
    its best-so-far in two buffers that swap per width, so an even and an odd number of
    usable widths (and a width wider than a row, skipped) must all leave the same S/N."""
    series = (rng.normal(size=(5, 3000)) + np.linspace(0, 3, 3000)).astype(np.float32)
    series[2, 1500:1508] += 4.0
    valid = np.array([3000, 2500, 3000, 1, 0], np.int64)
    snr, index = _search(series, widths, valid=valid)
    in_place, in_place_index = series.copy(), np.empty(series.shape, np.int8)
    boxcar_kernels.search_rows(in_place, valid, np.asarray(widths, np.int64), 512, 1024, in_place,
                        in_place_index)  # fmt: skip
    np.testing.assert_array_equal(in_place, snr)
    np.testing.assert_array_equal(in_place_index, index)
    python = _search(series, widths, valid=valid, py_func=True)
    np.testing.assert_allclose(snr, python[0], rtol=1e-5, atol=1e-5)
    assert np.array_equal(index[:3, 100:2400], python[1][:3, 100:2400])
    assert np.all(np.isneginf(snr[1, 2500:])) and np.all(np.isneginf(snr[3:]))
    assert np.argmax(snr[2]) in range(1500, 1508)


@pytest.mark.parametrize("kind", ["normal", "ties", "sorted", "constant"])
def test_median_selection_equals_numpy(rng, kind):
    """The kernels' medians (baselines, boxcar noise, channel statistics) come from a
    branchless quickselect: every rank of noise, integer data full of ties, sorted and
    constant data, odd and even sizes, with the selected value in place and the smaller
    values before it."""
    for n in (1, 2, 3, 17, 18, 100, 1023, 1024):
        values = {"normal": rng.normal(size=n), "ties": np.round(rng.normal(size=n) * 2),
                  "sorted": np.arange(n, 0, -1.0), "constant": np.full(n, 3.0)}[kind]  # fmt: skip
        for k in {0, n // 3, n // 2, n - 1}:
            v = values.copy()
            assert statistics_kernels._select(v, k) == np.partition(values, k)[k]
            assert v[k] == np.partition(values, k)[k]
            assert np.all(v[:k] <= v[k]) and np.all(v[k + 1 :] >= v[k])
            assert np.array_equal(np.sort(v), np.sort(values))
        assert statistics_kernels._median(values.copy()) == np.median(values)


@pytest.mark.parametrize("width", [1, 4, 16])
def test_injected_boxcar_snr_follows_heimdall_convention(rng, width):
    """Amplitude A over w samples in unit noise: S/N = A w / sqrt(w) = A sqrt(w)."""
    amplitude = 12.0 / np.sqrt(width)  # expected S/N 12 at every width
    ndm, nt, at = 64, 4096, 2000
    series = rng.normal(size=(ndm, nt)).astype(np.float32)
    series[:, at - width // 2 : at - width // 2 + width] += amplitude
    giants = find_giants(series, threshold=6.0, max_width=64, baseline_window=512)
    assert len(giants) >= ndm
    near = np.flatnonzero(np.abs(giants.sample - at) <= width)
    # the brightest giant of each row near the pulse (noise can split a run in two)
    order = near[np.lexsort((-giants.snr[near], giants.dm_index[near]))]
    rows, first = np.unique(giants.dm_index[order], return_index=True)
    assert rows.size == ndm
    peak, best = giants.snr[order[first]], giants.width[order[first]]
    # mean over 64 noise realisations; the max over shifts and widths biases up slightly
    assert np.mean(peak) == pytest.approx(12.0, rel=0.06)
    values, counts = np.unique(best, return_counts=True)
    assert values[np.argmax(counts)] == width


def test_pure_noise_has_few_giants(rng):
    series = rng.normal(size=(50, 4096)).astype(np.float32)
    giants = find_giants(series, threshold=6.5, max_width=32)
    assert len(giants) <= 2  # ~50 x 4096 x 6 widths trials at 6.5 sigma


def test_baseline_and_noise_are_removed(rng):
    nt = 8192
    ramp = np.linspace(0.0, 40.0, nt) + 10.0 * np.sin(np.arange(nt) / 900.0)
    series = (3.0 * rng.normal(size=(3, nt)) + ramp).astype(np.float32)
    flat, _ = _search(series, [1], window=512)  # width 1: the normalised series itself
    assert abs(float(np.median(flat))) < 0.05
    assert flat.std() == pytest.approx(1.0, abs=0.05)


def test_keep_window_and_offset(rng):
    series = rng.normal(size=(4, 1000)).astype(np.float32)
    series[:, 100] += 20.0
    series[:, 700] += 20.0
    giants = find_giants(series, threshold=8.0, max_width=4, sample_offset=5000, keep=(500, 1000))
    assert set(giants.sample.tolist()) == {5700}


def _row_with_two_bumps(dip: float) -> np.ndarray:
    """One DM row's S/N: bright RFI (46 at sample 110) falling to ``dip`` at 180, a burst's
    bump (20 at 190), then below threshold; a second row stays below it."""
    row = np.zeros(400, np.float32)
    row[100:111] = np.linspace(7.0, 46.0, 11)
    row[110:181] = np.linspace(46.0, dip, 71)
    row[180:191] = np.linspace(dip, 20.0, 11)
    row[190:200] = np.linspace(20.0, 7.0, 10)
    return np.vstack([row, np.full(400, 3.0, np.float32)])


def test_a_burst_within_bright_rfis_run_above_threshold_is_a_giant_of_its_own():
    from drafts_ops.detect.single_pulse import RUN_PEAK_PROMINENCE, giants_above

    snr = _row_with_two_bumps(dip=9.7)  # as a S/N 28 burst beside RFI on validation seed 4242
    width = np.ones(snr.shape, np.int32)
    assert giants_above(snr, width, 6.5).sample.tolist() == [110, 190]
    assert giants_above(snr, width, 6.5, prominence=np.inf).sample.tolist() == [110]
    shallow = _row_with_two_bumps(dip=20.0 - 0.9 * RUN_PEAK_PROMINENCE)
    assert giants_above(shallow, width, 6.5).sample.tolist() == [110]  # a wiggle, not a peak
    assert giants_above(snr, width, 6.5, keep=(150, 400)).sample.tolist() == [190]


def test_noise_within_a_bright_run_adds_few_giants(rng):
    from drafts_ops.detect.single_pulse import giants_above

    envelope = 40.0 * np.exp(-0.5 * ((np.arange(4096) - 2048) / 600.0) ** 2) + 8.0
    snr = (envelope + rng.normal(size=(200, 4096))).astype(np.float32)
    width = np.ones(snr.shape, np.int32)
    runs = len(giants_above(snr, width, 6.5, prominence=np.inf))  # one giant per run
    # white noise, one sample per boxcar: the roughest S/N series a run can have
    assert len(giants_above(snr, width, 6.5)) < 1.05 * runs
    assert len(giants_above(snr, width, 6.5, prominence=3.0)) > 4 * runs


def test_giants_save_load(tmp_path, rng):
    g = Giants(np.array([1, 2], np.int32), np.array([10, 20]), np.array([1, 4], np.int32),
               np.array([7.0, 9.5], np.float32))  # fmt: skip
    back = Giants.load(g.save(tmp_path / "g.npz"))
    for name in ("dm_index", "sample", "width", "snr"):
        np.testing.assert_array_equal(getattr(back, name), getattr(g, name))
    (tmp_path / "bad.npz").write_text("nope")
    with pytest.raises(ObservationError):
        Giants.load(tmp_path / "bad.npz")


def test_detector_peak_takes_the_burst_snr_within_its_precision(rng):
    """A neural-detector peak placed up to 1.5 pooled DM rows (FAST-like 1418 trials pooled
    to 64 rows: 23 trials a row) and 3.5 columns of x16 from a burst, as the network
    places high-DM and wide bursts, reports the burst's own DM, time and S/N."""
    from drafts_ops.detect.single_pulse import giants_at
    from drafts_ops.ml.inference import Detector

    snr = rng.normal(0.0, 1.0, (1418, 400)).astype(np.float32)
    widths = np.full(snr.shape, 2, np.int8)
    snr[700, 200] = 15.0  # the burst's S/N peak; its bow-tie falls off in DM and time
    snr[690:711, 196:205] = np.maximum(snr[690:711, 196:205], 6.0)
    dm_radius, radius = Detector.position_uncertainty(1418)
    for dm_index, sample in ((714.4, 195.0), (700 - 34.0, 200 + 56.0), (700 + 34.0, 200 - 56.0)):
        peak = giants_at(snr, widths, np.array([dm_index]), np.array([sample]),
                         np.array([0.8]), radius=radius, dm_radius=dm_radius)  # fmt: skip
        assert (peak.dm_index[0], peak.sample[0], peak.snr[0]) == (700, 200, 15.0)
        assert peak.score[0] == pytest.approx(0.8)
    near = giants_at(snr, widths, np.array([714.4]), np.array([195.0]), np.array([0.8]))
    assert near.snr[0] < 8  # one trial and two samples around the peak miss the burst
