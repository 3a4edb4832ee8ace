"""Windows of candidates found by a time-averaging DM range (issue 50): their pulse is
measured at the searched resolution, their cutouts are made from sums of the range's
samples read only as far as each channel needs, and equal those made from averages."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.detect.candidates import Candidate
from drafts_ops.io import open_observation
from drafts_ops.search import SearchConfig, plan_search
from drafts_ops.search import windows as windows_module
from drafts_ops.search.samples import read_window
from drafts_ops.search.windows import CutoutMaker

BAND = {"nchans": 256, "fch1": 1499.4140625, "foff": -1.171875, "tsamp": 512e-6}
BURST_DM, BURST_T = 1500.0, 3.0


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A 12 s 8-bit file with a burst at DM 1500 and its plan in DM ranges."""
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

    burst = BurstSpec(t_s=BURST_T, dm=BURST_DM, snr=40.0, width_s=4 * 512e-6)
    config = SimulationConfig(**BAND, duration_s=12.0, seed=5, bursts=(burst,))
    path = write_simulation(tmp_path_factory.mktemp("windows") / "burst.fil", config)
    plan = plan_search(path, SearchConfig(dm_max=2000.0, classify=False))
    return path, plan


def _candidate(plan) -> Candidate:
    """The burst as the search reports it: nearest trial, arrival at the band's top."""
    index = int(np.argmin(np.abs(plan.dm_plan().dms - BURST_DM)))
    sample = round(BURST_T / plan.header.tsamp)
    factor = plan.factor_of(index)
    return Candidate(tcand_s=BURST_T, dm=float(plan.dm_plan().dms[index]), snr=40.0,
                     width_samples=4 * factor, width_s=4 * factor * plan.header.tsamp,
                     dm_index=index, sample=sample)  # fmt: skip


def test_the_burst_lies_in_a_time_averaging_range(searched):
    _, plan = searched
    assert plan.factor_of(_candidate(plan).dm_index) > 1


def test_window_sums_add_each_channels_samples_up_to_its_stop(searched):
    path, plan = searched
    factor = 4
    start, stop = 1000, 1600
    stops = np.linspace(start + 50, stop + 100, plan.header.nchans).astype(np.int64)
    with open_observation(path) as reader:
        sums = read_window(reader, plan, start, stop, factor, row_stops=stops)
        raw = reader.read_block(start * factor, (stop - start) * factor, raw=True)
    expected = raw.astype(np.int64).reshape(raw.shape[0], -1, factor).sum(axis=2)
    assert sums.dtype == np.uint16 and sums.shape == expected.shape
    for c in range(0, plan.header.nchans, 17):
        n = min(stops[c] - start, stop - start)
        np.testing.assert_array_equal(sums[c, :n], expected[c, :n])
        assert not sums[c, n:].any()


@pytest.fixture(scope="module")
def float_searched(searched, tmp_path_factory):
    """The same observation as 32-bit floats that are not integers (calibrated data)."""
    from drafts_ops.io.sigproc import write_sigproc

    path, plan = searched
    with open_observation(path) as reader:
        data = reader.read_all() * np.float32(0.37) + np.float32(0.011)
        header = reader.header.replace(nbits=32)
    floats = write_sigproc(tmp_path_factory.mktemp("floats") / "burst32.fil", header, data)
    return floats, plan_search(floats, plan.config)


def test_window_averages_of_wider_samples_stop_at_each_channels_stop(float_searched):
    """A 32-bit file's window triangle: float32 averages up to each channel's stop, nothing
    read beyond (a 4096-channel float window of DM 2500 is ~1 GB; read whole, the old
    code's merge and cutouts of the 10 s FAST raw bench file peaked at 6.7 GB)."""
    path, plan = float_searched
    factor, start, stop = 4, 1000, 1600
    stops = np.linspace(start + 50, stop + 100, plan.header.nchans).astype(np.int64)
    with open_observation(path) as reader:
        averages = read_window(reader, plan, start, stop, factor, row_stops=stops)
        raw = reader.read_block(start * factor, (stop - start) * factor, raw=True)
    expected = raw.reshape(raw.shape[0], -1, factor).mean(axis=2)
    assert averages.dtype == np.float32 and averages.shape == expected.shape
    for c in range(0, plan.header.nchans, 17):
        n = min(stops[c] - start, stop - start)
        np.testing.assert_allclose(averages[c, :n], expected[c, :n], rtol=1e-5)
        assert not averages[c, n:].any()


@pytest.mark.parametrize("source", ["searched", "float_searched"])
def test_cutouts_from_the_triangle_equal_those_of_the_whole_window(source, request, monkeypatch):
    """Cutouts of a time-averaging range's candidate from its window's triangle (sums of
    8-bit samples, averages of 32-bit ones) equal those from averages of the whole
    window."""
    path, plan = request.getfixturevalue(source)
    cand = _candidate(plan)
    with open_observation(path) as reader:
        from_triangle = CutoutMaker(reader, plan).cutouts(cand)
        monkeypatch.setattr(windows_module, "read_window", lambda *a, **k: None)
        from_window = CutoutMaker(reader, plan).cutouts(cand)
    for a, b in zip(from_triangle, from_window, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-4)
    assert from_triangle[1].max() > 5.0  # the burst's bow-tie is there


def test_the_pulse_is_measured_at_the_searched_resolution(searched, monkeypatch):
    """The merge's measurements read the file's own samples, not the range's averages."""
    path, plan = searched
    cand = _candidate(plan)

    def refuse(*args, **kwargs):
        raise AssertionError("a measurement read averaged samples")

    monkeypatch.setattr(windows_module, "read_window", refuse)
    monkeypatch.setattr(windows_module, "read_averaged", refuse)
    with open_observation(path) as reader:
        maker = CutoutMaker(reader, plan)
        shape = maker.pulse_shape(cand)
        outside = maker.snr_outside(cand, 1400.0, 1500.0)
    assert shape.snr > 10.0
    assert shape.f_lo_mhz < 1300.0 < shape.f_hi_mhz  # a full-band burst
    assert outside > 5.0


def _measurements(maker: CutoutMaker, cand: Candidate) -> tuple[float, ...]:
    shape = maker.pulse_shape(cand)
    outside = maker.snr_outside(cand, 1400.0, 1500.0)
    within = maker.snr_within(cand, 1300.0, 1400.0)
    return shape.f_lo_mhz, shape.f_hi_mhz, shape.width_samples, shape.snr, outside, within


@pytest.mark.parametrize("source", ["searched", "float_searched"])
@pytest.mark.parametrize("seconds", [BURST_T, 0.01, 11.99])
def test_the_merge_measures_from_the_sweep_what_it_measured_from_the_window(
    source, seconds, request, monkeypatch
):
    """The merge's measurements read only each channel's sweep (a channel band), a chunk of
    the file at a time with each chunk's pages released after it (a 4096-channel 32-bit
    window of a high-DM candidate, read through one view, kept ~1.6 GB mapped), and give
    what they gave from the whole window, bit for bit: at the burst, and for candidates
    whose window is cut by the file's start or end."""
    from drafts_ops.search import samples as samples_module

    path, plan = request.getfixturevalue(source)
    cand = _candidate(plan)
    cand = Candidate(**{**cand.__dict__, "sample": round(seconds / plan.header.tsamp)})
    chunk = 300
    itemsize = plan.raw_header.nbits // 8
    monkeypatch.setattr(samples_module, "DECIMATION_CHUNK_BYTES", chunk * 256 * itemsize)
    monkeypatch.setattr(windows_module, "WINDOW_VIEW_SHARE", 0.0)  # every window as a band
    asked, released = [], []
    with open_observation(path) as reader:
        spectra, release = reader.read_spectra, reader.release
        monkeypatch.setattr(
            reader, "read_spectra", lambda a, n: asked.append((a, n)) or spectra(a, n)
        )
        monkeypatch.setattr(reader, "release", lambda stop: released.append(stop) or release(stop))
        from_band = _measurements(CutoutMaker(reader, plan), cand)
        assert asked and max(n for _, n in asked) <= chunk
        assert all(a + n in released for a, n in asked)  # each chunk released after it
        monkeypatch.setattr(windows_module, "read_band", lambda *a, **k: None)
        from_window = _measurements(CutoutMaker(reader, plan), cand)
    assert from_band == from_window
    if seconds == BURST_T:
        assert from_band[3] > 10.0  # the burst is measured
