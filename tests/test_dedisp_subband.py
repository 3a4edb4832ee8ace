"""Sub-band dedispersion and time decimation of the production operator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from drafts_ops.dedisp import DMPlan, dedisperse
from drafts_ops.dedisp.plan import dispersion_delay_s, smearing_s
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.dedisp.subband import build_subband_plan, speedup_estimate, subband_cpu
from drafts_ops.dedisp.tiling import plan_cpu_tiling
from drafts_ops.validation.snr_loss import best_boxcar

#: Documented bound on the sub-band S/N loss against brute force (README.md).
SNR_LOSS_BOUND = 0.05


def band_plan(nchan: int = 64, dm_max: float = 300.0, *, ascending: bool = False) -> DMPlan:
    freqs = 1500.0 - np.arange(nchan) * (500.0 / nchan)
    if ascending:
        freqs = freqs[::-1].copy()
    return DMPlan.build(np.arange(0.0, dm_max + 1), freqs, 1e-3)


def burst(plan: DMPlan, dm: float, t0: float, sigma: float, nsamp: int) -> np.ndarray:
    """Gaussian pulse (sd ``sigma`` samples) at exact, unrounded delays, smeared in each
    channel by the dispersion across it (a boxcar, averaged on 16 sub-steps)."""
    delay = dispersion_delay_s(dm, plan.freqs, plan.f_ref) / plan.tsamp
    smear = smearing_s(dm, abs(plan.freqs[1] - plan.freqs[0]), plan.freqs) / plan.tsamp
    t = np.arange(nsamp)[None, :] - t0 - delay[:, None]
    steps = (np.arange(16) + 0.5) / 16 - 0.5
    pulse = sum(np.exp(-0.5 * ((t - u * smear[:, None]) / sigma) ** 2) for u in steps) / 16
    return pulse.astype(np.float32)


def test_exact_when_every_trial_is_nominal(rng):
    plan = band_plan(40, 150.0)
    data = rng.integers(0, 200, (1, 40, plan.max_delay + 100)).astype(np.uint8)
    sub = build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 6, tol_min=0, beta=0)
    assert sub.max_error == 0
    out = np.empty((1, plan.ndm, 100), np.float32)
    y = np.empty((1, sub.buffer_len(100)), np.float32)
    tiling = plan_cpu_tiling(
        "t", data.shape, ndm=plan.ndm, max_delay=plan.max_delay, itemsize=1, dtype="uint8"
    )
    subband_cpu(data, plan.delays, out, tiling, sub=sub, y=y, chunk=100)
    np.testing.assert_array_equal(out[0], dedisperse_reference(data[0], plan.delays))


@pytest.mark.parametrize("ascending", [False, True])
def test_nominal_trials_equal_brute_force(rng, ascending):
    plan = band_plan(64, 300.0, ascending=ascending)
    data = rng.integers(0, 200, (64, plan.max_delay + 200)).astype(np.uint8)
    out = dedisperse(data, plan, algorithm="subband")
    ref = dedisperse_reference(data, plan.delays)
    sub = build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 8)
    out8 = np.empty((1, plan.ndm, 200), np.float32)
    y = np.empty((1, sub.buffer_len(64)), np.float32)
    tiling = plan_cpu_tiling(
        "t", (1, *data.shape), ndm=plan.ndm, max_delay=plan.max_delay, itemsize=1, dtype="uint8"
    )
    subband_cpu(data[None], plan.delays, out8, tiling, sub=sub, y=y, chunk=64)  # 4 passes
    # A trial whose internal sub-band delays equal its nominal DMs' is computed exactly.
    exact = np.ones(plan.ndm, bool)
    for s in range(sub.nsub):
        c0, c1 = sub.edges[s], sub.edges[s + 1]
        ref_c = sub.row_ref[sub.row_map[:, s]]
        nominal = sub.row_trial[sub.row_map[:, s]]
        inner = plan.delays[:, c0:c1] - plan.delays[np.arange(plan.ndm), ref_c][:, None]
        inner_nominal = plan.delays[nominal, c0:c1] - plan.delays[nominal, ref_c][:, None]
        exact &= np.all(inner == inner_nominal, axis=1)
    assert exact.any() and not exact.all()
    np.testing.assert_array_equal(out8[0][exact], ref[exact])
    assert out.shape == ref.shape
    assert speedup_estimate(sub, 64, 200) > 1.5


@pytest.mark.parametrize(("dm", "sigma"), [(37.3, 1.0), (151.6, 2.0), (262.2, 1.0)])
def test_subband_finds_bursts_with_bounded_snr_loss(dm, sigma):
    plan = band_plan(64, 300.0)
    nout, t0 = 160, 60.0
    data = burst(plan, dm, t0, sigma, nout + plan.max_delay)
    brute = best_boxcar(dedisperse(data, plan, algorithm="brute"), plan.nchan)
    fast = best_boxcar(dedisperse(data, plan, algorithm="subband"), plan.nchan)
    assert abs(plan.dms[fast.dm_index] - dm) <= 2.0
    assert abs(fast.sample + fast.width / 2 - t0) <= 2 + fast.width / 2
    assert 1 - fast.snr / brute.snr < SNR_LOSS_BOUND


def test_simulated_bursts_lose_little_snr():
    simulate = pytest.importorskip("drafts_ops.simulate.burst")
    assert simulate.burst_signal is not None
    from drafts_ops.validation.snr_loss import snr_loss_survey

    plan = band_plan(64, 300.0)
    loss = snr_loss_survey(plan, np.array([12.4, 88.8, 203.1]), (1e-3, 4e-3), nout=128)
    assert np.all(loss < SNR_LOSS_BOUND)
    assert np.all(np.abs(loss) < 0.5)  # sub-band may even win slightly where rounding helps


def test_decimated_trials_follow_the_documented_rule(rng):
    plan0 = band_plan(16, 80.0)
    factors = np.where(plan0.dms < 30, 1, np.where(plan0.dms < 60, 2, 4)).astype(np.int32)
    plan = DMPlan.build(plan0.dms, plan0.freqs, plan0.tsamp, factors)
    nout = 101  # not a multiple of 2 or 4: last window partial
    data = rng.integers(0, 100, (16, plan.max_delay + nout)).astype(np.uint8)
    out = dedisperse(data, plan)
    full = dedisperse_reference(data, plan.delays)
    for d in range(plan.ndm):
        f = int(factors[d])
        if f == 1:
            np.testing.assert_array_equal(out[d], full[d])
            continue
        ncoarse = -(-data.shape[1] // f)
        padded = np.zeros((16, ncoarse * f))
        padded[:, : data.shape[1]] = data
        counts = np.full(ncoarse, f)
        counts[-1] = data.shape[1] - (ncoarse - 1) * f
        coarse = padded.reshape(16, ncoarse, f).sum(axis=2) / counts
        row = dedisperse_reference(coarse, (plan.delays[d : d + 1] // f))[0]
        np.testing.assert_allclose(out[d], np.repeat(row, f)[:nout], rtol=1e-5)


def test_subband_scratch_stays_within_its_budget_when_a_tile_does_not_fit(monkeypatch, rng):
    """A plan with many stage-1 rows (2048-4096 channels to DM 3000) gets shorter passes,
    not a scratch buffer larger than the budget; the output does not change."""
    from drafts_ops.dedisp import operator
    from drafts_ops.dedisp.subband import MIN_CHUNK, auto_subband_plan
    from drafts_ops.dedisp.workspace import WorkspacePool

    plan = band_plan(64, 300.0)
    data = rng.integers(0, 200, (64, plan.max_delay + 6000)).astype(np.uint8)
    expected = dedisperse(data, plan, algorithm="subband", pool=WorkspacePool())
    sub = auto_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp,
                            operator.SUBBAND_PLAN_NOUT)  # fmt: skip
    budget = 4 * sub.buffer_len(2 * MIN_CHUNK)  # room for 1024-sample passes, not a tile
    monkeypatch.setattr(operator, "SUBBAND_SCRATCH_BYTES", budget)
    pool = WorkspacePool()
    out = dedisperse(data, plan, algorithm="subband", pool=pool)
    assert pool.nbytes <= budget
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_plan_rows_describe_their_trials():
    """Each stage-1 row serves consecutive trials of one sub-band: its smallest offset and
    offset spread are those of its trials, and ``max_error`` is the largest difference
    between a trial's delays inside its sub-band and its row's nominal trial's."""
    plan = band_plan(64, 300.0)
    sub = build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 8)
    error = 0
    for s in range(sub.nsub):
        c0, c1 = sub.edges[s], sub.edges[s + 1]
        rows = sub.row_map[:, s]
        assert np.all(np.diff(rows) >= 0) and np.all(np.diff(np.unique(rows)) == 1)
        assert np.all((sub.row_c0[rows] == c0) & (sub.row_c1[rows] == c1))
        inner = plan.delays[:, c0:c1] - sub.offsets[:, s][:, None]
        nominal = sub.row_trial[rows]
        error = max(error, int(np.abs(inner - inner[nominal]).max()))
        for r in np.unique(rows):
            served = sub.offsets[rows == r, s]
            assert sub.row_omin[r] == served.min()
            assert sub.row_extra[r] == served.max() - served.min()
    assert sub.max_error == error > 0


def _spy_stage1(monkeypatch):
    from drafts_ops.dedisp import subband

    scratch = []
    real = subband.subband_stage1

    def spy(*args):
        scratch.append(args[5].dtype)  # y, the stage-1 scratch
        return real(*args)

    monkeypatch.setattr(subband, "subband_stage1", spy)
    return scratch


def test_8_bit_data_run_stage1_in_16_bit_integers_with_the_same_sums(rng, monkeypatch):
    """uint8 data: stage 1 adds in uint16 (half the scratch bytes; 2x faster on the
    FAST-like plan), and every output equals the float32 computation (exact sums)."""
    from drafts_ops.dedisp.subband import integer_stage1

    plan = band_plan(64, 300.0)
    data = rng.integers(0, 256, (64, plan.max_delay + 300)).astype(np.uint8)
    data[:, :40] = 255  # the largest sums a sub-band can make
    sub = build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 8)
    assert integer_stage1(sub, np.uint8) and not integer_stage1(sub, np.float32)
    scratch = _spy_stage1(monkeypatch)
    out = dedisperse(data, plan, algorithm="subband")
    assert set(scratch) == {np.dtype(np.uint16)}
    expected = dedisperse(data.astype(np.float32), plan, algorithm="subband")
    assert set(scratch[-1:]) == {np.dtype(np.float32)}
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out[0, :20], np.full(20, 255.0 * 64))


def test_8_bit_sub_bands_too_wide_for_16_bits_keep_float_scratch(monkeypatch):
    """Sub-bands of 300 channels of 255 would overflow uint16 (76 500): stage 1 stays in
    float32 and the sums stay exact."""
    from collections import OrderedDict

    from drafts_ops.dedisp import subband

    plan = DMPlan.build(np.arange(0.0, 20.0), 1500.0 - np.arange(600) * 0.5, 1e-3)
    wide = subband.build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 2)
    monkeypatch.setattr(subband, "_PLAN_CACHE", OrderedDict())
    monkeypatch.setattr(subband, "auto_subband_plan", lambda *args, **kwargs: wide)
    scratch = _spy_stage1(monkeypatch)
    data = np.full((600, plan.max_delay + 64), 255, np.uint8)
    out = dedisperse(data, plan, algorithm="subband")
    assert set(scratch) == {np.dtype(np.float32)}
    np.testing.assert_array_equal(out, np.full(out.shape, 255.0 * 600))


@pytest.mark.parametrize(("algorithm", "decimated"),
                         [("subband", False), ("subband", True), ("brute", False)])  # fmt: skip
def test_offset_and_scale_give_what_the_samples_stand_for(rng, algorithm, decimated):
    """Quantised input ``(data - offset) * scale``: the operator's output is that of the
    float samples (folded into the sub-band kernel's writes, one more pass elsewhere)."""
    plan = band_plan(64, 300.0)
    if decimated:
        factors = np.where(plan.dms < 150, 1, 2).astype(np.int32)
        plan = DMPlan.build(plan.dms, plan.freqs, plan.tsamp, factors)
    data = rng.integers(0, 256, (64, plan.max_delay + 256)).astype(np.uint8)
    samples = ((data.astype(np.float64) - 128.0) * 0.05).astype(np.float32)
    out = dedisperse(data, plan, algorithm=algorithm, offset=128.0, scale=0.05)
    expected = dedisperse(samples, plan, algorithm=algorithm)
    np.testing.assert_allclose(out, expected, atol=2e-3)
    assert np.abs(expected).max() > 5  # not a comparison of zeros


def _pooling(nchan_edges, ndm: int, nout: int, group: int = 7):
    from drafts_ops.dedisp.subband import BandPooling

    channels = np.asarray(nchan_edges, np.int64)
    groups = np.append(np.arange(0, ndm, group), ndm)  # the last group shorter
    rows = np.full((channels.size - 1, groups.size - 1, nout), np.nan, np.float32)
    weights = np.arange(1.0, channels.size, dtype=np.float32)
    return BandPooling(channels, groups, rows, weights)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_band_pooling_hands_back_each_bands_pooled_sums(rng, monkeypatch, dtype):
    """``pooling``: the output is unchanged, and each band's rows are the largest over
    each group of trials of ``(sum - channels * offset) * scale * weight`` over the band's
    channels, the operator's output on those channels alone (the others zeroed: the same
    stage-1 rows), in every pass of a block split into several."""
    from collections import OrderedDict

    from drafts_ops.dedisp import operator, subband

    plan = band_plan(64, 300.0)
    eight = subband.build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 8)
    monkeypatch.setattr(subband, "_PLAN_CACHE", OrderedDict())
    monkeypatch.setattr(subband, "auto_subband_plan", lambda *args, **kwargs: eight)
    monkeypatch.setattr(operator, "SUBBAND_SCRATCH_BYTES", 1)  # passes of MIN_CHUNK samples
    data = rng.integers(0, 256, (64, plan.max_delay + 1200)).astype(dtype)
    nout = data.shape[1] - plan.max_delay
    affine = {"offset": 100.0, "scale": 0.5}
    pooling = _pooling([0, 16, 40, 64], plan.ndm, nout)
    out = dedisperse(data, plan, algorithm="subband", pooling=pooling, **affine)
    assert pooling.filled
    np.testing.assert_array_equal(out, dedisperse(data, plan, algorithm="subband", **affine))
    groups = pooling.trial_edges
    for q, (c0, c1) in enumerate(itertools.pairwise(pooling.channel_edges)):
        alone = np.zeros_like(data)
        alone[c0:c1] = data[c0:c1]
        sums = dedisperse(alone, plan, algorithm="subband")
        band = (sums - (c1 - c0) * affine["offset"]) * affine["scale"] * pooling.weights[q]
        expected = np.maximum.reduceat(band, groups[:-1], axis=0)
        np.testing.assert_allclose(pooling.rows[q], expected, rtol=1e-6)


@pytest.mark.parametrize("case", ["unaligned", "decimated", "brute", "batch", "shape"])
def test_band_pooling_is_left_to_the_caller_where_the_operator_cannot(rng, monkeypatch, case):
    """A band edge inside a stage-1 sub-band, per-trial decimation, another algorithm, a
    batch of blocks or rows of the wrong shape: ``filled`` stays false, the output right."""
    from collections import OrderedDict

    from drafts_ops.dedisp import subband

    plan = band_plan(64, 300.0)
    eight = subband.build_subband_plan(plan.delays, plan.dms, plan.freqs, plan.tsamp, 8)
    monkeypatch.setattr(subband, "_PLAN_CACHE", OrderedDict())
    monkeypatch.setattr(subband, "auto_subband_plan",
                        lambda delays, *args, **kwargs: eight if delays.shape == plan.delays.shape
                        else subband.build_subband_plan(delays, *args[:3], 8))  # fmt: skip
    if case == "decimated":
        factors = np.where(plan.dms < 150, 1, 2).astype(np.int32)
        plan = DMPlan.build(plan.dms, plan.freqs, plan.tsamp, factors)
    data = rng.integers(0, 256, (64, plan.max_delay + 600)).astype(np.uint8)
    nout = data.shape[1] - plan.max_delay
    edges = [0, 11, 64] if case == "unaligned" else [0, 32, 64]
    pooling = _pooling(edges, plan.ndm, nout + (case == "shape"))
    if case == "batch":
        data = np.stack([data, data])
    algorithm = "brute" if case == "brute" else "subband"
    out = dedisperse(data, plan, algorithm=algorithm, pooling=pooling)
    assert not pooling.filled
    np.testing.assert_array_equal(out, dedisperse(data, plan, algorithm=algorithm))
