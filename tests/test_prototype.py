"""The prototype dedisperser against the numpy reference, by value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp.brute_kernels import accumulate_span, dedisperse_span, dedisperse_thread
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.prototype import dedisperse_prototype, launch_geometry
from drafts_ops.dedisp.reference import dedisperse_reference


def _plan(nchan: int, descending: bool, dm_max: float = 60.0, ndm: int = 7) -> DMPlan:
    freqs = 1200.0 + 300.0 * np.arange(nchan) / nchan
    return DMPlan.build(np.linspace(0, dm_max, ndm), freqs[::-1] if descending else freqs, 1e-3)


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("nchan", [13, 64])
def test_prototype_equals_reference(rng, nchan, descending):
    plan = _plan(nchan, descending)
    data = rng.integers(0, 256, (nchan, plan.max_delay + 1001)).astype(np.float32)
    out = dedisperse_prototype(data, plan, block=3, samples_per_thread=37)
    ref = dedisperse_reference(data, plan.delays)
    assert out.shape == ref.shape == (plan.ndm, 1001)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_prototype_default_geometry_and_uint8(rng):
    plan = _plan(40, True, dm_max=200.0, ndm=11)
    raw = rng.integers(0, 256, (40, plan.max_delay + 3000), dtype=np.uint8)
    ref = dedisperse_reference(raw, plan.delays)
    np.testing.assert_allclose(dedisperse_prototype(raw, plan.delays), ref, rtol=1e-5)
    np.testing.assert_allclose(dedisperse_prototype(raw.astype(np.float32), plan), ref, rtol=1e-5)


def test_zero_mean_data_matches_reference_within_float32(rng):
    plan = _plan(29, True)
    data = rng.standard_normal((29, plan.max_delay + 500)).astype(np.float32)
    out = dedisperse_prototype(data, plan, block=4, samples_per_thread=8)
    np.testing.assert_allclose(out, dedisperse_reference(data, plan.delays), atol=2e-5 * 29)


def test_py_func_body_equals_reference(rng):
    """The plain-Python kernel body (no numba) computes the same thing."""
    plan = _plan(5, True, dm_max=300.0, ndm=3)
    data = rng.random((5, plan.max_delay + 20)).astype(np.float32)
    out = np.full((3, 20), np.nan, np.float32)
    grid, block = launch_geometry(3, 20, 2, 3)
    for bx in range(grid[0]):
        for by in range(grid[1]):
            for tx in range(block[0]):
                dedisperse_thread.py_func((bx, by), (tx, 0), block, data, plan.delays, out, 3)
    np.testing.assert_allclose(out, dedisperse_reference(data, plan.delays), rtol=1e-6)
    span = np.full((3, 20), np.nan, np.float32)
    dedisperse_span.py_func(data, plan.delays, span, 2, 5, 9)
    np.testing.assert_allclose(span[2, 5:9], out[2, 5:9], rtol=1e-6)
    assert np.isnan(span[2, :5]).all() and np.isnan(span[:2]).all()


@pytest.mark.parametrize("func", [accumulate_span, accumulate_span.py_func])
def test_accumulate_span_adds_a_channel_range(rng, func):
    plan = _plan(9, False, dm_max=200.0, ndm=4)
    data = rng.random((9, plan.max_delay + 50)).astype(np.float32)
    ref = dedisperse_reference(data, plan.delays)
    out = np.ones((4, 50), np.float32)
    func(data, plan.delays, out, 3, 10, 30, 0, 4)
    func(data, plan.delays, out, 3, 10, 30, 4, 9)
    np.testing.assert_allclose(out[3, 10:30], 1 + ref[3, 10:30], rtol=1e-6)
    assert (out[3, :10] == 1).all() and (out[:3] == 1).all()


def test_burst_peaks_at_nearest_trial_and_sample():
    nchan, tsamp, t0, dm_true = 64, 1e-3, 300, 151.3
    freqs = 1500.0 - 4.0 * np.arange(nchan)
    truth = DMPlan.build(np.array([dm_true]), freqs, tsamp)
    data = np.zeros((nchan, 1500), np.float32)
    data[np.arange(nchan), t0 + truth.delays[0]] = 1.0
    plan = DMPlan.build(np.arange(0.0, 301.0, 2.0), freqs, tsamp)
    out = dedisperse_prototype(data, plan)
    d, t = np.unravel_index(np.argmax(out), out.shape)
    assert plan.dms[d] == pytest.approx(152.0)
    assert t == t0
    assert out[d, t] > 0.6 * nchan  # channels off by one sample (0.7 DM error) drop out


def test_debug_prints_chosen_thread(rng, capsys):
    plan = _plan(6, True, ndm=3)
    data = rng.random((6, plan.max_delay + 40)).astype(np.float32)
    out = dedisperse_prototype(
        data, plan, block=4, samples_per_thread=5, debug=True, debug_threads=[((2, 1), 3)]
    )
    text = capsys.readouterr().out
    # block (2, 1) thread 3 computes DM row 2, samples (1 * 4 + 3) * 5 = 35 .. 39
    assert "block (2, 1) thread (3, 0)" in text
    assert "wrote 5 of out" in text
    assert f"out[2, 35]={out[2, 35]:.7g}" in text
    assert f"out[2, 39]={out[2, 39]:.7g}" in text


def test_debug_pick_outside_grid_is_an_error(rng):
    plan = _plan(6, True, ndm=3)
    data = rng.random((6, plan.max_delay + 40)).astype(np.float32)
    with pytest.raises(OperatorError, match="outside"):
        dedisperse_prototype(
            data, plan, block=4, samples_per_thread=5, debug=True, debug_threads=[((3, 0), 0)]
        )


def test_dump_dir_writes_inputs_and_outputs(rng, tmp_path):
    plan = _plan(6, False, ndm=3)
    data = rng.random((6, plan.max_delay + 30)).astype(np.float32)
    out = dedisperse_prototype(data, plan, dump_dir=tmp_path / "dump")
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert files == [
        "dedisperse_thread.data.in.npy",
        "dedisperse_thread.delays.in.npy",
        "dedisperse_thread.launch.json",
        "dedisperse_thread.out.out.npy",
    ]
    np.testing.assert_array_equal(np.load(tmp_path / "dump/dedisperse_thread.data.in.npy"), data)
    np.testing.assert_array_equal(
        np.load(tmp_path / "dump/dedisperse_thread.delays.in.npy"), plan.delays
    )
    np.testing.assert_array_equal(np.load(tmp_path / "dump/dedisperse_thread.out.out.npy"), out)
    meta = json.loads((tmp_path / "dump/dedisperse_thread.launch.json").read_text())
    assert meta["backend"] == "cpu" and meta["grid"][0] == 3
    assert meta["args"]["data"] == {"shape": list(data.shape), "dtype": "float32"}


@pytest.mark.parametrize(
    ("data_shape", "delays", "match"),
    [
        ((4, 10), np.zeros((2, 3), np.int32), "do not match"),
        ((4, 10), np.full((2, 4), 10, np.int32), "maximum delay"),
        ((4, 10), np.full((2, 4), -1, np.int32), "non-negative"),
    ],
)
def test_bad_inputs_raise_operator_error(data_shape, delays, match):
    with pytest.raises(OperatorError, match=match):
        dedisperse_prototype(np.zeros(data_shape, np.float32), delays)
