"""Consecutive files of one beam: a burst whose sweep crosses from one file into the next
is found exactly once, at its time and DM, whichever way the files are searched."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops import search
from drafts_ops.dedisp.plan import delay_table
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc

HEADER = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=6000,
                tstart=60000.0)  # fmt: skip
#: (DM pc cm^-3, arrival at the top of the band in the joined stream, samples). The first
#: arrives 100 samples before file A ends; its sweep (246 samples at DM 300) ends in B.
BURSTS = ((300.0, 5900), (150.0, 2000), (150.0, 9000))
CONFIG = search.SearchConfig(dm_max=400.0, classify=False, write_h5=False,
                               write_plots=False)  # fmt: skip


def write_boundary_files(root) -> dict:
    """Files ``a.fil`` and ``b.fil`` (one beam, b continuing a) and ``joined.fil`` (both)
    in ``root``, with :data:`BURSTS`."""
    rng = np.random.default_rng(11)
    data = rng.normal(100.0, 10.0, size=(64, 12000))
    for dm, at in BURSTS:
        for c, d in enumerate(delay_table(np.array([dm]), HEADER.chan_freqs, 1e-3)[0]):
            data[c, at + d : at + d + 3] += 30.0
    data = np.clip(np.rint(data), 0, 255)
    later = HEADER.tstart + 6000 * HEADER.tsamp / 86400.0
    return {
        "a": write_sigproc(root / "a.fil", HEADER, data[:, :6000]),
        "b": write_sigproc(root / "b.fil", HEADER.replace(tstart=later), data[:, 6000:]),
        "joined": write_sigproc(root / "joined.fil", HEADER.replace(nsamples=12000), data),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_boundary_files(tmp_path_factory.mktemp("boundary"))


def _found(candidates, sample: int, dm: float) -> list:
    return [c for c in candidates if abs(c.sample - sample) <= 3 and abs(c.dm - dm) <= 15]


def test_a_file_alone_cannot_reach_a_burst_that_sweeps_into_the_next(files, tmp_path):
    alone = search.run_search(files["a"], tmp_path / "a", CONFIG).candidates
    assert not _found(alone, 5900, 300.0)
    assert len(_found(alone, 2000, 150.0)) == 1


def test_each_file_with_its_neighbours_reports_each_burst_once(files, tmp_path):
    pair = [files["a"], files["b"]]
    first = search.run_search(pair, tmp_path / "a", CONFIG, own=0).candidates
    second = search.run_search(pair, tmp_path / "b", CONFIG, own=1).candidates
    joined = search.run_search(files["joined"], tmp_path / "j", CONFIG).candidates
    assert len(_found(first, 5900, 300.0)) == 1  # the next file's head completes its sweep
    assert not _found(second, 5900 - 6000, 300.0)  # ... and it is reported once
    assert len(_found(second, 9000 - 6000, 150.0)) == 1  # relative to the file's start
    assert all(c.file == str(files["b"]) for c in second)
    assert all(c.sample < 6000 for c in first) and all(c.sample >= 0 for c in second)
    both = {(c.sample, round(c.dm, 3)) for c in first} | {
        (c.sample + 6000, round(c.dm, 3)) for c in second}  # fmt: skip
    assert both == {(c.sample, round(c.dm, 3)) for c in joined}


def test_lead_in_searches_what_the_previous_file_could_not(files, tmp_path):
    """The previous file was searched before this one existed (no look-ahead): this file's
    search reports the arrivals in that file's last delay(d) samples, before its start."""
    pair = [files["a"], files["b"]]
    second = search.run_search(pair, tmp_path / "b", CONFIG, own=1, lead_in=True).candidates
    (straddling,) = _found(second, 5900 - 6000, 300.0)
    assert straddling.tcand_s == pytest.approx(-0.1, abs=0.004)
    assert not _found(second, 2000 - 6000, 150.0)  # the previous file's own search had it


def test_a_block_read_across_a_file_boundary_holds_every_sample(tmp_path):
    """Joined files whose boundary lies past a block's first chunk of file pages: every
    DM range's levels equal those of the one file they were cut from (the chunk across the
    boundary is read as a copy; it was left at the kernel's zero, and a search of two such
    files found none of the bursts the one file gave)."""
    from drafts_ops.io import open_observation
    from drafts_ops.search import range_pass
    from drafts_ops.search.buffers import BlockBuffers

    rng = np.random.default_rng(3)
    data = np.clip(np.rint(rng.normal(100.0, 10.0, size=(64, 24000))), 0, 255)
    half = range_pass.TRANSPOSE_CHUNK + 3000
    later = HEADER.tstart + half * HEADER.tsamp / 86400.0
    parts = [
        write_sigproc(tmp_path / "a.fil", HEADER, data[:, :half]),
        write_sigproc(tmp_path / "b.fil", HEADER.replace(tstart=later), data[:, half:]),
    ]
    whole = write_sigproc(tmp_path / "whole.fil", HEADER, data)
    config = search.SearchConfig(dm_max=1500.0, classify=False)
    levels = {}
    for name, source in (("whole", whole), ("joined", parts)):
        plan = search.plan_search(source, config)
        with open_observation(source) as reader:
            levels[name] = [
                range_pass.read_levels(reader, plan, plan.ranges[block.range_index], block,
                                       BlockBuffers()).copy()
                for block in plan.blocks
            ]  # fmt: skip
    assert len({block.range_index for block in plan.blocks}) >= 2  # x1 and averaging ranges
    for whole_block, joined_block in zip(levels["whole"], levels["joined"], strict=True):
        np.testing.assert_array_equal(whole_block, joined_block)
