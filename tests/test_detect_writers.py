"""Candidate files: CSV, Heimdall .cand, FETCH .h5 (layout of test.h5), PNG."""

from __future__ import annotations

import csv
import os
import warnings

import h5py
import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.plots import plot_candidate
from drafts_ops.detect.writers import (
    CAND_COLUMNS,
    fetch_name,
    read_csv,
    write_cand,
    write_csv,
    write_fetch_h5,
)
from drafts_ops.io.header import Header

HEADER = Header(
    nchans=336, fch1=1465.0, foff=-1.0, tsamp=0.00126646875, nbits=8, nsamples=5120,
    tstart=58682.620316710374, source_name="src1", telescope_id=7, rawdatafile="28.fil",
)  # fmt: skip


def _cand(**changes) -> Candidate:
    values = {
        "tcand_s": 2.03, "dm": 475.0, "snr": 15.2, "width_samples": 4,
        "width_s": 4 * HEADER.tsamp, "dm_index": 130, "sample": 1603, "members": 18,
        "first_sample": 1590, "last_sample": 1620, "file": "28.fil",
    }  # fmt: skip
    values.update(changes)
    return Candidate(**values)


def test_candidate_record_defaults_and_validation():
    c = Candidate(tcand_s=1.0, dm=10.0, snr=7.0, width_samples=8, width_s=8e-3, dm_index=3,
                  sample=1000)  # fmt: skip
    assert (c.first_sample, c.last_sample, c.filter_index) == (1000, 1000, 3)
    assert c.replace(classifier_prob=0.9).classifier_prob == 0.9
    with pytest.raises(TypeError):
        c.replace(colour="red")
    with pytest.raises(ParameterError):
        _cand(dm=-1.0)


def test_csv_columns_and_round_trip(tmp_path):
    cands = [_cand(), _cand(snr=9.0, sample=3000, tcand_s=3000 * HEADER.tsamp)]
    path = write_csv(cands, tmp_path / "candidates.csv")
    with path.open() as fh:
        header = next(csv.reader(fh))
    assert header[:5] == ["tcand_s", "dm", "snr", "width_samples", "width_s"]
    assert "classifier_prob" not in header and "detector_score" not in header
    assert read_csv(path) == cands
    scored = [c.replace(classifier_prob=0.75, detector_score=0.5) for c in cands]
    path = write_csv(scored, tmp_path / "scored.csv")
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert float(rows[0]["classifier_prob"]) == 0.75 and float(rows[1]["detector_score"]) == 0.5
    assert read_csv(path) == scored


def test_cand_file_columns(tmp_path):
    path = write_cand([_cand(), _cand(width_samples=1, snr=7.25)], tmp_path / "x.cand")
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    assert len(CAND_COLUMNS) == 9 and all(len(r) == 9 for r in rows)
    snr, sample, time_s, filt, dm_index, dm, members, first, last = rows[0]
    assert float(snr) == pytest.approx(15.2) and int(sample) == 1603
    assert float(time_s) == pytest.approx(2.03) and int(filt) == 2  # log2(4)
    assert (int(dm_index), float(dm), int(members)) == (130, 475.0, 18)
    assert (int(first), int(last)) == (1590, 1620)
    assert rows[1][3] == "0"


def test_fetch_h5_has_the_layout_of_test_h5(tmp_path, real_data):
    rng = np.random.default_rng(1)
    ft = rng.normal(size=(256, 256)).astype(np.float32)
    dt = rng.normal(size=(256, 256)).astype(np.float32)
    cand = _cand()
    path = write_fetch_h5(cand, HEADER, ft, dt, tmp_path / f"{fetch_name(cand, HEADER)}.h5")
    with h5py.File(real_data / "test.h5") as ref, h5py.File(path) as ours:
        assert sorted(ours.attrs) == sorted(ref.attrs)
        for key in ref.attrs:
            assert type(ours.attrs[key]) is type(ref.attrs[key]), key
        assert sorted(ours) == sorted(ref)
        for name in ref:
            assert ours[name].shape == ref[name].shape and ours[name].dtype == ref[name].dtype
            assert [d.label for d in ours[name].dims] == [d.label for d in ref[name].dims]
        np.testing.assert_array_equal(ours["data_freq_time"][:], ft)
        np.testing.assert_array_equal(ours["data_dm_time"][:], dt)
        assert ours.attrs["tcand"] == 2.03 and ours.attrs["width"] == 4
        assert ours.attrs["dm"] == 475.0 and ours.attrs["snr"] == pytest.approx(15.2)
        assert ours.attrs["cand_id"] == path.stem
        assert ours.attrs["nchans"] == 336 and ours.attrs["tstart"] == ref.attrs["tstart"]


def test_png_is_written(tmp_path):
    rng = np.random.default_rng(2)
    ft = rng.normal(size=(256, 256)).astype(np.float32)
    dt = rng.normal(size=(256, 256)).astype(np.float32)
    path = plot_candidate(
        _cand(classifier_prob=0.8), ft, dt, tsamp=HEADER.tsamp, fmax_mhz=1465.0,
        fmin_mhz=1130.0, path=tmp_path / "plots" / "c.png",
    )  # fmt: skip
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert list((tmp_path / "plots").iterdir()) == [path]  # no temporary left behind


def test_png_of_zero_dm_candidate_has_a_sane_dm_axis(tmp_path):
    """A DM-0 (RFI) candidate's DM-time cutout spans DM 0..0: no degenerate axis warning."""
    rng = np.random.default_rng(3)
    ft = rng.normal(size=(64, 64)).astype(np.float32)
    dt = rng.normal(size=(64, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = plot_candidate(
            _cand(dm=0.0, dm_index=0), ft, dt, tsamp=HEADER.tsamp, fmax_mhz=1465.0,
            fmin_mhz=1130.0, path=tmp_path / "c0.png",
        )  # fmt: skip
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_reused_plotter_draws_each_candidate_as_a_fresh_figure_would(tmp_path):
    """Nothing of one candidate (DM axis, colour scale, title) leaks into the next PNG."""
    from drafts_ops.detect.plots import CandidatePlotter

    rng = np.random.default_rng(4)
    images = [rng.normal(scale=s, size=(2, 64, 64)).astype(np.float32) for s in (1.0, 5.0)]
    cands = [_cand(dm=0.0, dm_index=0), _cand(classifier_prob=0.3)]
    band = {"tsamp": HEADER.tsamp, "fmax_mhz": 1465.0, "fmin_mhz": 1130.0}
    pairs = list(enumerate(zip(cands, images, strict=True)))
    with CandidatePlotter(**band) as plotter:
        reused = [plotter.plot(c, ft, dt, tmp_path / f"r{i}.png") for i, (c, (ft, dt)) in pairs]
    for i, (cand, (ft, dt)) in pairs:
        fresh = plot_candidate(cand, ft, dt, path=tmp_path / f"fresh{i}.png", **band)
        assert reused[i].read_bytes() == fresh.read_bytes()


def test_pngs_are_written_while_the_next_is_drawn(tmp_path):
    """The plotter hands each drawn PNG to a writer thread and goes on: a write's error
    (here, a directory where the file should be) comes from ``finish``, not from ``plot``,
    and the PNGs drawn before it are written."""
    from drafts_ops.detect.plots import CandidatePlotter

    rng = np.random.default_rng(5)
    ft, dt = rng.normal(size=(2, 64, 64)).astype(np.float32)
    (tmp_path / "blocked.png").mkdir()
    plotter = CandidatePlotter(tsamp=HEADER.tsamp, fmax_mhz=1465.0, fmin_mhz=1130.0)
    first = plotter.plot(_cand(), ft, dt, tmp_path / "first.png")
    plotter.plot(_cand(), ft, dt, tmp_path / "blocked.png")  # returns: the write comes later
    with pytest.raises(OSError):
        plotter.finish()
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_helper_process_draws_pngs_identical_to_this_process(tmp_path):
    """With a helper process both processes draw some of the PNGs, byte-identical to one
    process's; a helper that dies is replaced by this process for the PNGs it had not
    written."""
    from drafts_ops.detect import plots

    rng = np.random.default_rng(6)
    images = rng.normal(size=(12, 2, 64, 64)).astype(np.float32)
    cands = [_cand(dm=100.0 + 10 * i, classifier_prob=0.9) for i in range(len(images))]
    band = {"tsamp": HEADER.tsamp, "fmax_mhz": 1465.0, "fmin_mhz": 1130.0}
    jobs = list(enumerate(zip(cands, images, strict=True)))
    with plots.CandidatePlotter(**band) as alone:
        expected = [alone.plot(c, ft, dt, tmp_path / f"a{i}.png") for i, (c, (ft, dt)) in jobs]
    assert alone.drawn == {"here": 12, "helper": 0}
    shared = plots.CandidatePlotter(**band, helper=True)
    paths = [shared.plot(c, ft, dt, tmp_path / f"s{i}.png") for i, (c, (ft, dt)) in jobs[:8]]
    shared._finish_helper()  # the first eight, shared; the helper stopped
    assert shared.drawn["helper"] > 0 and shared.drawn["here"] > 0
    shared._helper = plots._start_helper(HEADER.tsamp, 1465.0, 1130.0)  # killed while busy
    for i, (cand, (ft, dt)) in jobs[8:]:
        paths.append(shared.plot(cand, ft, dt, tmp_path / f"s{i}.png"))
        if i == 8:
            for process in list(shared._helper._processes.values()):
                process.kill()
    shared.finish()
    for mine, theirs in zip(paths, expected, strict=True):
        assert mine.read_bytes() == theirs.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_helper_process_is_wanted_only_where_it_pays():
    from drafts_ops.detect.plots import HELPER_MIN_PNGS, wants_helper

    assert not wants_helper(HELPER_MIN_PNGS - 1)
    assert wants_helper(HELPER_MIN_PNGS) == ((os.cpu_count() or 1) >= 2)
