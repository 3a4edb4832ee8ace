"""Sub-band classical search (``search_subbands``): band-limited bursts searched where they
are, the full band still searched, the threshold raised for the extra trials."""

from __future__ import annotations

import math

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp import dedisperse
from drafts_ops.dedisp.plan import DMPlan, dispersion_delay_s
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.single_pulse import trials_threshold
from drafts_ops.detect.writers import read_csv, write_csv
from drafts_ops.search import SearchConfig, merge_block_results, plan_search, search_segment

QUIET = {"dm_min": 0.0, "dm_max": 1500.0, "write_h5": False, "write_plots": False,
         "classify": False}  # fmt: skip
NARROW = {"band_centre_mhz": 1300.0, "band_fwhm_mhz": 30.0}  # a tenth of 1200-1500 MHz


def _tail(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2.0))


@pytest.mark.parametrize("factor", [2, 4, 16])
def test_trials_threshold_keeps_the_false_alarm_count(factor):
    raised = trials_threshold(6.5, factor)
    assert raised > 6.5
    assert factor * _tail(raised) == pytest.approx(_tail(6.5), rel=1e-6)
    assert trials_threshold(6.5, 1) == pytest.approx(6.5)
    assert 50.0 < trials_threshold(50.0, factor) < 50.2  # where the tail underflows a float


def test_channel_ranges_add_up_to_the_full_band():
    rng = np.random.default_rng(1)
    freqs = 1500.0 - np.arange(96) * 3.0
    plan = DMPlan.build(np.linspace(0, 400, 24), freqs, 1e-3)
    data = rng.normal(size=(96, 3000)).astype(np.float32)
    nout = data.shape[1] - plan.max_delay
    total = np.zeros((plan.ndm, nout), np.float32)
    for c0, c1 in ((0, 30), (30, 61), (61, 96)):
        part = plan.channel_range(c0, c1)
        total += dedisperse(data[c0:c1, : nout + part.max_delay], part, algorithm="brute")
    full = dedisperse(data, plan, algorithm="brute")
    np.testing.assert_allclose(total, full, atol=1e-4)
    with pytest.raises(ParameterError):
        plan.channel_range(10, 10)


def _search(tmp_path, burst, **options):
    from drafts_ops.simulate import SimulationConfig, write_simulation

    cfg = SimulationConfig(nchans=256, fch1=1500 - 300 / 512, foff=-300 / 256, tsamp=512e-6,
                           duration_s=4.0, seed=5, bursts=(burst,))  # fmt: skip
    path = write_simulation(tmp_path / "sim.fil", cfg)
    plan = plan_search(path, SearchConfig(**{**QUIET, **options}))
    parts = [search_segment(range(len(plan.blocks)), path, plan, tmp_path)]
    return merge_block_results(parts, plan, tmp_path)


def _at(cands, t=2.0, dm=600.0):
    return [c for c in cands if abs(c.tcand_s - t) < 0.02 and abs(c.dm - dm) < 60]


def test_a_faint_band_limited_burst_is_found_by_its_sub_band(tmp_path):
    from drafts_ops.simulate import BurstSpec

    burst = BurstSpec(t_s=2.0, dm=600.0, snr=4.0, width_s=2e-3, **NARROW)
    assert not _search(tmp_path / "a", burst)  # full band: below threshold
    found = _at(_search(tmp_path / "b", burst, search_subbands=4))
    assert found, "the sub-band search did not find the band-limited burst"
    best = found[0]
    assert best.subband == 3  # 1275-1350 MHz: the third quarter from the top (file order)
    assert best.snr > trials_threshold(6.5, 4)


def test_a_full_band_burst_keeps_its_full_band_snr(tmp_path):
    from drafts_ops.simulate import BurstSpec

    burst = BurstSpec(t_s=2.0, dm=600.0, snr=15.0, width_s=2e-3)
    alone = _search(tmp_path / "a", burst, algorithm="brute", auto_decimation=False)
    split = _search(tmp_path / "b", burst, algorithm="brute", search_subbands=4)
    assert _at(alone) and _at(split)
    assert alone[0].subband is None and split[0].subband == 0
    assert split[0].snr == pytest.approx(alone[0].snr, rel=1e-4)
    assert (split[0].dm, split[0].sample) == (alone[0].dm, alone[0].sample)


def test_sub_band_column_round_trips(tmp_path):
    cand = Candidate(tcand_s=1.0, dm=100.0, snr=8.0, width_samples=4, width_s=4e-3,
                     dm_index=3, sample=1000, subband=2)  # fmt: skip
    (back,) = read_csv(write_csv([cand], tmp_path / "c.csv"))
    assert back.subband == 2
    plain = read_csv(write_csv([cand.replace(subband=None)], tmp_path / "d.csv"))
    assert plain[0].subband is None
    assert "subband" not in (tmp_path / "d.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("options", [{"search_subbands": 0},
                                     {"search_subbands": 4, "detector": "ml"}])  # fmt: skip
def test_impossible_sub_band_options_are_refused(options):
    with pytest.raises(ParameterError, match="search_subbands"):
        SearchConfig(**options)


def test_more_sub_bands_than_channels_is_refused_naming_the_file(tmp_path):
    from drafts_ops.simulate import SimulationConfig, write_simulation

    path = write_simulation(tmp_path / "small.fil", SimulationConfig(
        nchans=16, fch1=1500.0, foff=-4.0, tsamp=1e-3, duration_s=2.0, seed=1))  # fmt: skip
    with pytest.raises(ParameterError, match=r"small\.fil.*32 sub-bands"):
        plan_search(path, SearchConfig(search_subbands=32, dm_max=100.0))
    assert plan_search(path, SearchConfig(search_subbands=16, dm_max=100.0)).subband_plans()


# -- the neural detector on the sub-bands (detector_subbands) ---------------------------


def test_the_detector_finds_a_band_limited_burst_in_its_sub_band(tmp_path):
    """Full band S/N ~5 (below the detector's floor of 6): only the sub-band view finds it,
    at its sub-band S/N above the floor raised for the extra trials."""
    from drafts_ops.simulate import BurstSpec

    burst = BurstSpec(t_s=2.0, dm=600.0, snr=3.0, width_s=2e-3, **NARROW)
    assert not _search(tmp_path / "a", burst, detector="both")
    (found,) = _search(tmp_path / "b", burst, detector="both", detector_subbands=4)
    # a burst over 1285-1315 MHz pins its DM loosely: a DM error moves the arrival
    # extrapolated to the top of the band (1500 MHz)
    shift = dispersion_delay_s(600.0 - found.dm, 1300.0, 1500.0 - 300 / 512)
    assert found.tcand_s == pytest.approx(2.0 + float(shift), abs=5e-3)
    assert abs(found.dm - 600.0) < 100.0
    assert found.subband == 3 and found.detector_score >= 0.65
    assert found.snr > trials_threshold(SearchConfig().ml_min_snr, 4)


class _RecordingDetector:
    """Stands in for the network: records the rows it is shown, finds nothing."""

    def __init__(self):
        self.rows = []

    def detect_pooled(self, rows, ndm, threshold=0.5, max_peaks=50):
        self.rows.append(np.array(rows))
        return []

    @staticmethod
    def position_uncertainty(ndm):
        return 1, 2


def test_the_detector_sees_the_brightest_of_full_band_and_sub_band_rows(tmp_path, monkeypatch):
    """Input: pixel by pixel the maximum of the full band's pooled rows and each sub-band's
    scaled to the full band's noise (``sqrt(nchans / sub-band channels)``). With an
    operator that cannot pool them as it dedisperses (brute force), the sub-bands are
    dedispersed a few pooled rows of trials at a time (a small chunk forces several)."""
    from drafts_ops.ml.inference import pool_dm_rows
    from drafts_ops.search import dedispersion, streaming, subbands
    from drafts_ops.simulate import BurstSpec

    calls = []  # (channels, DM trials, output) of every dedispersion
    real = dedispersion.dedisperse_block

    def spy(data, dm_plan, config, out=None, **affine):
        result = real(data, dm_plan, config, out=out, **affine)
        calls.append((dm_plan.nchan, dm_plan.dms.copy(), np.array(result)))
        return result

    fake = _RecordingDetector()
    monkeypatch.setattr(dedispersion, "dedisperse_block", spy)
    monkeypatch.setattr(streaming, "shipped_detector", lambda: fake)
    monkeypatch.setattr(subbands, "SUBBAND_ROWS_CHUNK_MIB", 0.2)
    burst = BurstSpec(t_s=2.0, dm=600.0, snr=3.5, width_s=2e-3, **NARROW)
    _search(tmp_path, burst, detector="ml", detector_subbands=4, algorithm="brute")
    plan = plan_search(tmp_path / "sim.fil", SearchConfig(**QUIET, detector="ml",
                                                         detector_subbands=4))  # fmt: skip
    nchan = plan.header.nchans
    ends = [i for i, call in enumerate(calls) if call[0] == nchan] + [len(calls)]
    (_, _, full), *chunks = calls[: ends[1]]  # the first block: full band, then the runs
    runs = len(chunks) // 4
    assert runs > 1 and len(chunks) == 4 * runs  # each sub-band in several runs of trials
    views = [pool_dm_rows(full)]
    for k, (c0, c1) in enumerate(plan.subband_channels()):
        mine = chunks[k * runs : (k + 1) * runs]
        assert all(n == c1 - c0 for n, _, _ in mine)
        np.testing.assert_array_equal(np.concatenate([d for _, d, _ in mine]), plan.dms)
        band = np.concatenate([out for _, _, out in mine])
        views.append(pool_dm_rows(band) * np.float32(math.sqrt(nchan / (c1 - c0))))
    np.testing.assert_allclose(fake.rows[0], np.max(views, axis=0), rtol=1e-6)
    assert (fake.rows[0] > views[0]).mean() > 0.5  # the sub-bands do change what it sees


def test_the_sub_band_operator_pools_the_detectors_sub_band_rows_on_the_way(tmp_path, monkeypatch):
    """The production sub-band operator forms each trial band by band and hands back the
    bands' pooled rows: the detector's input is the same maximum, with each sub-band's
    rows those of the full band's dedispersion of that sub-band's channels alone (the
    other channels zeroed: the same stage-1 rows), and no sub-band is dedispersed again."""
    from drafts_ops.ml.inference import pool_dm_rows
    from drafts_ops.search import dedispersion, streaming
    from drafts_ops.simulate import BurstSpec

    calls = []  # (kernel input, plan, affine, output, pooling filled)
    real = dedispersion.dedisperse_block

    def spy(data, dm_plan, config, out=None, pooling=None, **affine):
        result = real(data, dm_plan, config, out=out, pooling=pooling, **affine)
        filled = pooling is not None and pooling.filled
        calls.append((np.array(data), dm_plan, affine, np.array(result), filled))
        return result

    fake = _RecordingDetector()
    monkeypatch.setattr(dedispersion, "dedisperse_block", spy)
    monkeypatch.setattr(streaming, "shipped_detector", lambda: fake)
    burst = BurstSpec(t_s=2.0, dm=600.0, snr=3.5, width_s=2e-3, **NARROW)
    _search(tmp_path, burst, detector="ml", detector_subbands=4)
    plan = plan_search(tmp_path / "sim.fil", SearchConfig(**QUIET, detector="ml",
                                                         detector_subbands=4))  # fmt: skip
    assert len(calls) == len(plan.blocks) and all(call[4] for call in calls)
    data, dm_plan, affine, full, _ = calls[0]
    assert data.dtype == np.uint8 and affine["offset"] != 0  # quantised: the affine applies
    nchan = plan.header.nchans
    views = [pool_dm_rows(full)]
    for c0, c1 in plan.subband_channels():
        alone = np.zeros_like(data)
        alone[c0:c1] = data[c0:c1]
        sums = dedisperse(alone, dm_plan, algorithm="subband")  # raw sums of the channels
        band = (sums - (c1 - c0) * affine["offset"]) * affine["scale"]
        views.append(pool_dm_rows(band) * np.float32(math.sqrt(nchan / (c1 - c0))))
    np.testing.assert_allclose(fake.rows[0], np.max(views, axis=0), rtol=1e-5, atol=1e-4)
    assert (fake.rows[0] > views[0]).mean() > 0.5  # the sub-bands do change what it sees


def test_sub_bands_need_fewer_dm_trials_the_less_they_sweep():
    from drafts_ops.search.subbands import subband_trial_stride

    freqs = 1500.0 - np.arange(1024) * 500 / 1024  # FAST-like, file order: top first
    strides = [subband_trial_stride(freqs, c, c + 256) for c in (0, 256, 512, 768)]
    assert strides == sorted(strides, reverse=True) and strides[-1] >= 2 and strides[0] <= 8
    assert subband_trial_stride(freqs, 0, 1024) == 1


def test_the_sub_band_view_leaves_the_full_band_search_as_it_was(tmp_path):
    """The full band is dedispersed as without the sub-bands (not as their sum, which the
    production sub-band algorithm approximates differently): the boxcar candidates of
    ``--detector both`` keep their S/N bit for bit."""
    from drafts_ops.simulate import BurstSpec

    burst = BurstSpec(t_s=2.0, dm=600.0, snr=15.0, width_s=2e-3)
    (alone,) = _at(_search(tmp_path / "a", burst, detector="both"))
    (split,) = _at(_search(tmp_path / "b", burst, detector="both", detector_subbands=4))
    assert alone.subband is None and split.subband == 0
    assert (split.snr, split.dm, split.sample) == (alone.snr, alone.dm, alone.sample)


@pytest.mark.parametrize(("options", "words"), [
    ({"detector_subbands": 0}, "detector_subbands = 0"),
    ({"detector_subbands": 4}, "needs the neural detector"),
    ({"detector": "both", "detector_subbands": 4, "search_subbands": 2}, "must agree"),
])  # fmt: skip
def test_impossible_detector_sub_band_options_are_refused(options, words):
    with pytest.raises(ParameterError, match=words):
        SearchConfig(**options)
    SearchConfig(detector="both", detector_subbands=4, search_subbands=4)  # one split: fine
