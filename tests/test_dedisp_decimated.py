"""The decimated fast path: sub-band on per-DM decimated trials (the bench's production-fast)."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp import dedisperse
from drafts_ops.dedisp.decimate import decimate_time
from drafts_ops.dedisp.plan import DMPlan, fixed_step_dm_trials, smearing_s
from drafts_ops.detect.single_pulse import block_snr
from drafts_ops.search import SearchConfig
from drafts_ops.search.run import run_search
from drafts_ops.validation.snr_loss import best_boxcar, simulated_burst, snr_loss_survey

#: Documented bound (README): bursts at least as wide as their smearing at the band bottom.
MATCHED_LOSS_BOUND = 0.05


def coarse_band() -> DMPlan:
    """128 channels 1500..1004 MHz, tsamp 393.216 us, DM 0-1000 step 2 (decimation 1..16)."""
    freqs = 1500.0 - 3.90625 * np.arange(128)
    return DMPlan.build(fixed_step_dm_trials(0.0, 1000.0, 2.0), freqs, 393.216e-6).decimated()


def test_hierarchical_decimation_is_the_mean_of_raw_windows(rng):
    data = rng.integers(0, 255, (2, 3, 37)).astype(np.uint8)
    half = np.empty((2, 3, 19), np.float32)
    decimate_time(data, 2, 1, 37, half)
    quarter = np.empty((2, 3, 10), np.float32)
    decimate_time(half, 2, 2, 37, quarter)
    eighth = np.empty((2, 3, 5), np.float32)
    decimate_time(quarter, 2, 4, 37, eighth)
    direct = np.empty((2, 3, 5), np.float32)
    decimate_time(data, 8, 1, 37, direct)
    for f, got in ((2, half), (4, quarter), (8, eighth), (8, direct)):
        want = [data[..., j : j + f].mean(axis=-1) for j in range(0, 37, f)]
        np.testing.assert_allclose(got, np.stack(want, axis=-1), rtol=1e-5)


def test_plan_decimation_covers_every_factor():
    plan = coarse_band()
    assert np.unique(plan.decimation).tolist() == [1, 2, 4, 8, 16]
    assert np.all(np.diff(plan.decimation) >= 0)  # coarser with DM


@pytest.mark.parametrize("dm", [57.3, 311.9, 806.4])
def test_fast_path_finds_bursts_at_the_right_dm_and_time(dm):
    plan = coarse_band()
    width = float(max(smearing_s(dm, 3.90625, plan.freqs.min()), plan.tsamp))
    lead, nout = 64, 256
    data = simulated_burst(plan, dm, lead * plan.tsamp, width, nout + plan.max_delay)
    out = dedisperse(data, plan, algorithm="subband")
    found = best_boxcar(out, plan.nchan, decimation=plan.decimation)
    f = int(plan.decimation[found.dm_index])
    assert abs(plan.dms[found.dm_index] - dm) <= 2 * 2.0 * f  # a few trials of its group
    centre = found.sample + found.width / 2
    assert abs(centre - lead) <= found.width / 2 + f
    loss = snr_loss_survey(plan, np.array([dm]), (width,))[0, 0]
    assert loss < MATCHED_LOSS_BOUND


def test_decimated_noise_keeps_unit_snr(rng):
    """Repeated coarse noise: with per-boxcar noise measured on the data, S/N stays ~N(0, 1)
    (white noise assumed per sample would inflate it 4x at factor 16)."""
    f = np.array([1, 4, 16, 16])
    rows = [np.repeat(rng.normal(size=4096 // k), k) for k in f]
    dmt = np.stack(rows).astype(np.float32)
    snr, _ = block_snr(dmt, max_width=32, baseline_window=512)
    assert np.nanmax(snr) < 6.0  # a white-noise threshold stays meaningful
    assert np.nanmax(snr) > 2.5  # and is not suppressed either


def test_decimate_needs_production_mode():
    with pytest.raises(ParameterError, match="decimate needs dedisp_mode"):
        SearchConfig(decimate=True, dedisp_mode="prototype")
    assert SearchConfig(decimate=True, dedisp_mode="production").decimate


def test_pipeline_finds_the_real_pulse_with_decimation(real_data, tmp_path):
    cfg = SearchConfig(
        dm_max=1500.0,
        dedisp_mode="production",
        algorithm="subband",
        decimate=True,
        write_h5=False,
        write_plots=False,
    )
    result = run_search(real_data / "28.fil", tmp_path, cfg)
    assert max(result.plan.decimation) >= 2
    best = result.candidates[0]
    assert abs(best.dm - 475.0) <= 5.0
    assert abs(best.tcand_s - 2.029) <= 0.01
    assert best.snr >= 10.0
    assert len(result.candidates) <= 3  # decimated rows do not flood with noise candidates
