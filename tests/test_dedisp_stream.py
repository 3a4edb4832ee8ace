"""Streaming dedispersion and ``drafts dedisperse``: blocks tile the one-shot result."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from drafts_ops.cli import main
from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.prototype import dedisperse_prototype
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.dedisp.stream import dedisperse_file, iter_dedispersed
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc

HEADER = Header(nchans=32, fch1=1400.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=0)


@pytest.fixture
def small_fil(tmp_path, rng):
    """A 32-channel 8-bit file with a burst at DM 150, t = 1.2 s (top of band)."""
    data = rng.integers(60, 100, (32, 2500)).astype(np.float32)
    burst = DMPlan.build(np.array([150.0]), HEADER.chan_freqs, HEADER.tsamp)
    data[np.arange(32), 1200 + burst.delays[0]] = 250
    return write_sigproc(tmp_path / "small.fil", HEADER, data), data


@pytest.mark.parametrize("block_size", [500, 37])
def test_cli_npy_equals_one_shot(small_fil, tmp_path, capsys, block_size):
    path, data = small_fil
    out = tmp_path / "dmt.npy"
    argv = ["dedisperse", str(path), "--dm-max", "200", "--dm-step", "5", "--out", str(out)]
    assert main([*argv, "--block-size", str(block_size)]) == 0
    summary = json.loads(capsys.readouterr().out)
    plan = DMPlan.from_header(HEADER.replace(nsamples=2500), 0.0, 200.0, 5.0)
    assert summary["ndm"] == 41 and summary["max_delay_samples"] == plan.max_delay
    dmt = np.load(out)
    np.testing.assert_allclose(dmt, dedisperse_reference(data, plan.delays), rtol=1e-5)
    d, t = np.unravel_index(np.argmax(dmt), dmt.shape)
    assert plan.dms[d] == 150.0 and t == 1200


def test_cli_h5_output_has_axes(small_fil, tmp_path):
    path, data = small_fil
    out = tmp_path / "dmt.h5"
    argv = ["dedisperse", str(path), "--dm-min", "100", "--dm-max", "160", "--dm-step", "10"]
    assert main([*argv, "--out", str(out), "--block-size", "700", "--mode", "prototype"]) == 0
    with h5py.File(out) as fh:
        dms = fh["dms"][:]
        np.testing.assert_array_equal(dms, np.arange(100.0, 161.0, 10.0))
        assert fh.attrs["tsamp"] == 1e-3 and fh.attrs["f_ref_mhz"] == 1400.0
        assert fh.attrs["mode"] == "prototype"
        plan = DMPlan.build(dms, HEADER.chan_freqs, 1e-3)
        np.testing.assert_allclose(fh["dmt"][:], dedisperse_prototype(data, plan), rtol=1e-6)


def test_tolerance_plan_by_default(small_fil, tmp_path, capsys):
    path, _ = small_fil
    assert main(["dedisperse", str(path), "--dm-max", "50", "--out", str(tmp_path / "a.npy")]) == 0
    summary = json.loads(capsys.readouterr().out)
    expected = DMPlan.from_header(HEADER, 0.0, 50.0)
    assert summary["ndm"] == expected.ndm > 1
    assert np.load(tmp_path / "a.npy").shape[0] == expected.ndm


def test_iter_dedispersed_tiles_without_gaps(small_fil):
    path, _ = small_fil
    plan = DMPlan.from_header(HEADER, 0.0, 100.0, 20.0)
    with open_observation(path) as reader:
        starts = [(s, b.shape[1]) for s, b in iter_dedispersed(reader, plan, 600)]
    assert [s for s, _ in starts] == [0, 600, 1200, 1800, 2400]
    assert sum(n for _, n in starts) == 2500 - plan.max_delay


def test_errors_name_the_file(small_fil, tmp_path, capsys):
    path, _ = small_fil
    argv = ["dedisperse", str(path), "--dm-max", "100000", "--out", str(tmp_path / "x.npy")]
    assert main([*argv, "--dm-step", "1000"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "maximum dispersion delay" in err
    assert not (tmp_path / "x.npy").exists()
    with open_observation(path) as reader, pytest.raises(ParameterError, match="must end in"):
        dedisperse_file(reader, DMPlan.from_header(HEADER, 0, 10, 1.0), tmp_path / "x.csv")


def test_production_mode_matches_prototype_through_the_cli(small_fil, tmp_path):
    path, _ = small_fil
    argv = ["dedisperse", str(path), "--dm-max", "50"]
    assert main([*argv, "--mode", "prototype", "--out", str(tmp_path / "a.npy")]) == 0
    assert main([*argv, "--mode", "production", "--out", str(tmp_path / "b.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "a.npy"), rtol=1e-5)


def test_real_28fil_peak(real_data):
    """The GBT pulse: DM 475, t = 2.029 s at the top of the band."""
    with open_observation(real_data / "28.fil") as reader:
        data, header = reader.read_all(), reader.header
    std = data.std(axis=1, keepdims=True)
    norm = ((data - np.median(data, axis=1, keepdims=True)) / np.where(std > 0, std, 1)).astype(
        np.float32
    )
    plan = DMPlan.from_header(header, 0.0, 1000.0, 1.0)
    dmt = dedisperse_prototype(norm, plan)
    boxcar = dmt[:, :-1] + dmt[:, 1:]  # width 2 samples
    d, t = np.unravel_index(np.argmax(boxcar), boxcar.shape)
    assert abs(plan.dms[d] - 475.0) <= 5.0
    assert abs(t * header.tsamp - 2.029) <= 0.01
    snr = boxcar[d, t] / np.sqrt(2 * header.nchans)
    assert 12 < snr < 20  # about 16 (Heimdall 16.8)
