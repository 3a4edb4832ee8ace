"""Sub-band classical search (``search_subbands``): band-limited bursts searched where they
are, the full band still searched, the threshold raised for the extra trials."""

from __future__ import annotations

import math

import numpy as np
import pytest

from drafts_ops.dedisp import dedisperse
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.single_pulse import trials_threshold
from drafts_ops.detect.writers import read_csv, write_csv
from drafts_ops.errors import ParameterError
from drafts_ops.pipeline import SearchConfig, merge_block_results, plan_search, search_segment

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
    alone = _search(tmp_path / "a", burst, algorithm="brute")
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
    with pytest.raises(ParameterError, match=r"small\.fil.*search_subbands = 32"):
        plan_search(path, SearchConfig(search_subbands=32, dm_max=100.0))
    assert plan_search(path, SearchConfig(search_subbands=16, dm_max=100.0)).subband_plans()
