"""DM plan against hand-computed values (28.fil-like GBT band, FAST-like band)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import (
    DISPERSION_CONSTANT,
    DMPlan,
    decimation_factors,
    dispersion_delay_s,
    fixed_step_dm_trials,
    max_delays,
    smearing_s,
    tolerance_dm_trials,
)
from drafts_ops.io.header import Header

#: 28.fil: 336 channels from 1465 MHz down in 1 MHz steps, tsamp 1.26646875 ms.
GBT = Header(nchans=336, fch1=1465.0, foff=-1.0, tsamp=1.26646875e-3, nbits=8, nsamples=5120)


def test_dispersion_constant_and_delay_by_hand():
    assert DISPERSION_CONSTANT == 4.148808e3
    # 4148.808 * 475 * (1130**-2 - 1465**-2) = 0.62512516 s
    assert dispersion_delay_s(475.0, 1130.0, 1465.0) == pytest.approx(0.6251251609, rel=1e-9)
    assert dispersion_delay_s(475.0, 1465.0, 1465.0) == 0.0


def test_gbt_delay_table_by_hand():
    plan = DMPlan.from_header(GBT, 0.0, 475.0, 475.0)
    np.testing.assert_array_equal(plan.dms, [0.0, 475.0])
    assert plan.f_ref == 1465.0
    delays = plan.delays
    assert delays.dtype == np.int32 and delays.shape == (2, 336)
    assert not delays[0].any()
    # channel 335 = 1130 MHz: 0.62512516 s / 1.26646875 ms = 493.597 -> 494 samples
    assert delays[1, 335] == 494
    # channel 165 = 1300 MHz: 0.24787577 s -> 195.722 -> 196 samples
    assert delays[1, 165] == 196
    assert delays[1, 0] == 0
    assert plan.max_delay == 494
    assert np.all(np.diff(delays[1]) >= 0)  # descending frequency: growing delay


@pytest.mark.parametrize("ascending", [False, True])
def test_delay_table_is_the_rounded_formula_and_max_delays_its_largest_column(ascending):
    """The compiled table holds the rounded delays of ``dispersion_delay_s`` exactly
    (plans, sub-band rows and cutouts all rest on these integers), on a FAST raw band
    whose 3000 trials put many delays near half a sample."""
    freqs = 1500.0 - np.arange(4096) * (500.0 / 4096)
    freqs = freqs[::-1].copy() if ascending else freqs
    dms = np.linspace(0.0, 3000.0, 3001)
    for tsamp in (49.152e-6, 4 * 49.152e-6):
        seconds = dispersion_delay_s(dms[:, None], freqs[None, :], float(freqs.max()))
        table = DMPlan.build(dms, freqs, tsamp).delays
        np.testing.assert_array_equal(table, np.rint(seconds / tsamp).astype(np.int32))
        np.testing.assert_array_equal(max_delays(dms, freqs, tsamp), table.max(axis=1))


def test_ascending_band_mirrors_descending():
    down = DMPlan.from_header(GBT, 100.0, 100.0, 1.0)
    up = DMPlan.from_header(GBT.replace(fch1=1130.0, foff=1.0), 100.0, 100.0, 1.0)
    np.testing.assert_array_equal(up.delays[0], down.delays[0][::-1])
    # 100 pc cm^-3 at 1130 MHz: 0.131605 s = 103.915 samples -> 104
    assert up.delays[0, 0] == 104 and up.f_ref == 1465.0


def test_tolerance_trials_gbt():
    dms = tolerance_dm_trials(0.0, 1000.0, tsamp=GBT.tsamp, fch1=1465.0, foff=-1.0, nchans=336)
    # dedisp: f = (1465 - (168 - 0.5)) / 1000 GHz = 1.2975 GHz; a = 8.3 / f^3; b^2 = a^2 n^2/16
    a2 = (8.3 / 1.2975**3) ** 2
    b2 = a2 * 336**2 / 16
    c = (1266.46875**2 + 40.0**2) * (1.25**2 - 1)
    assert dms[0] == 0.0
    assert dms[1] == pytest.approx(math.sqrt(c / (a2 + b2)), rel=1e-12)  # 2.97719
    assert dms[1] == pytest.approx(2.977188, abs=1e-6)
    assert len(dms) == 208
    assert dms[-2] < 1000.0 <= dms[-1]
    steps = np.diff(dms)
    assert np.all(steps > 0) and steps[-1] > 3 * steps[0]  # steps widen with DM (smearing)


def test_tolerance_trials_narrower_with_tighter_tolerance():
    kw = {"tsamp": 393.216e-6, "fch1": 1500.0, "foff": -500 / 512, "nchans": 512}
    loose = tolerance_dm_trials(0.0, 2048.0, dm_tol=1.25, **kw)
    tight = tolerance_dm_trials(0.0, 2048.0, dm_tol=1.1, **kw)
    assert len(tight) > len(loose) > 100


@pytest.mark.parametrize(
    ("dm_min", "dm_max", "step", "expected"),
    [
        (0.0, 2048.0, 1.0, 2049),
        (10.0, 12.0, 0.1, 21),  # inclusive end despite 0.1 rounding
        (5.0, 5.0, 1.0, 1),
        (0.0, 9.5, 2.0, 5),
    ],
)
def test_fixed_step_inclusive_end(dm_min, dm_max, step, expected):
    dms = fixed_step_dm_trials(dm_min, dm_max, step)
    assert len(dms) == expected
    assert dms[0] == dm_min
    assert dms[-1] == pytest.approx(dm_min + step * (expected - 1))


@pytest.mark.parametrize(
    ("dm_min", "dm_max", "step"),
    [(-1.0, 10.0, 1.0), (10.0, 5.0, 1.0), (0.0, 10.0, 0.0), (0.0, math.inf, 1.0)],
)
def test_bad_ranges_raise(dm_min, dm_max, step):
    with pytest.raises(ParameterError):
        fixed_step_dm_trials(dm_min, dm_max, step)


def test_bad_tolerance_parameters_raise():
    kw = {"fch1": 1500.0, "foff": -1.0, "nchans": 64}
    with pytest.raises(ParameterError):
        tolerance_dm_trials(0.0, 10.0, tsamp=1e-3, dm_tol=1.0, **kw)
    with pytest.raises(ParameterError):
        tolerance_dm_trials(0.0, 10.0, tsamp=0.0, pulse_width_s=0.0, **kw)


def test_smearing_by_hand():
    # 8.3 us * 500 * 1 MHz / 1.13^3 = 2.8761 ms
    assert smearing_s(500.0, -1.0, 1130.0) == pytest.approx(8.3e-6 * 500 / 1.13**3)
    assert float(smearing_s(500.0, -1.0, 1130.0)) == pytest.approx(2.87614e-3, rel=1e-5)


def test_decimation_plan_by_hand():
    dms = np.array([0.0, 100.0, 300.0, 600.0, 1200.0, 5000.0])
    factors = decimation_factors(
        dms, tsamp=GBT.tsamp, foff=-1.0, fmin=1130.0, pulse_width_s=40e-6, tolerance=1.25
    )
    # width = sqrt(tsamp^2 + 40us^2 + (5.7523 us * DM)^2); factor = 2^floor(log2(w / 1.25 tsamp))
    # DM 300: w = 2.14 ms -> ratio 1.35 -> 1; DM 600: 3.68 ms -> 2.32 -> 2
    # DM 1200: 7.02 ms -> 4.43 -> 4; DM 5000: 28.8 ms -> 18.2 -> capped at 16
    np.testing.assert_array_equal(factors, [1, 1, 1, 2, 4, 16])
    plan = DMPlan.from_header(GBT, 0.0, 1200.0, 300.0, decimate=True, decimation_tol=1.25)
    np.testing.assert_array_equal(plan.decimation, [1, 1, 2, 2, 4])  # DM 900: 5.19 ms -> 2
    assert plan.summary()["max_decimation"] == 4
    # default tolerance 2.0: ratio w / (2 tsamp): DM 600 1.45 -> 1, 900 2.05 -> 2, 1200 2.77 -> 2
    plan = DMPlan.from_header(GBT, 0.0, 1200.0, 300.0, decimate=True)
    np.testing.assert_array_equal(plan.decimation, [1, 1, 1, 2, 2])
    np.testing.assert_array_equal(plan.decimated().decimation, plan.decimation)
    assert np.all(plan.undecimated().decimation == 1)
    assert plan.undecimated().delays is plan.delays


def test_plan_helpers():
    plan = DMPlan.from_header(GBT, 0.0, 10.0, 1.0)
    assert plan.ndm == 11 and plan.nchan == 336
    assert plan.nearest_trial(4.4) == 4 and plan.nearest_trial(4.6) == 5
    assert plan.output_length(1000) == 1000 - plan.max_delay
    assert plan.output_length(3) == 0


def test_plan_validation():
    with pytest.raises(ParameterError):
        DMPlan.build(np.array([]), np.array([1400.0]), 1e-3)
    with pytest.raises(ParameterError):
        DMPlan.build(np.array([1.0]), np.array([-5.0]), 1e-3)
    with pytest.raises(ParameterError):
        DMPlan.build(np.array([1.0]), np.array([1400.0]), 0.0)


def test_selected_trials_give_the_same_rows_as_the_whole_plan():
    from drafts_ops.dedisp import dedisperse

    rng = np.random.default_rng(3)
    plan = DMPlan.build(np.linspace(0.0, 300.0, 40), 1500.0 - np.arange(64) * 4.0, 1e-3)
    data = rng.normal(size=(64, 2000)).astype(np.float32)
    whole = dedisperse(data, plan, algorithm="brute")
    index = np.array([3, 4, 5, 17, 39])
    part = plan.select_trials(index)
    assert part.ndm == 5 and part.max_delay == plan.delays[index].max()
    out = dedisperse(data[:, : whole.shape[1] + part.max_delay], part, algorithm="brute")
    np.testing.assert_allclose(out, whole[index], rtol=1e-5, atol=1e-4)
    with pytest.raises(ParameterError, match="not trials"):
        plan.select_trials(np.array([40]))
