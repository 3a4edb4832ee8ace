"""Streaming a file through the production operator: blocks tile the output exactly once."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp import DMPlan, dedisperse, stream_dedisperse
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc


def write_file(path, data: np.ndarray, *, foff: float = -6.25, tsamp: float = 1e-3) -> Header:
    header = Header(
        nchans=data.shape[0], fch1=1500.0, foff=foff, tsamp=tsamp, nbits=8,
        nsamples=data.shape[1], source_name="stream-test",
    )  # fmt: skip
    write_sigproc(path, header, data)
    return header


@pytest.mark.parametrize(
    ("batch_blocks", "algorithm"), [(1, "brute"), (2, "brute"), (3, "subband")]
)
def test_stream_tiles_the_file_exactly(tmp_path, rng, batch_blocks, algorithm):
    data = rng.integers(0, 60, (32, 1500)).astype(np.uint8)
    header = write_file(tmp_path / "x.fil", data)
    plan = DMPlan.from_header(header, 0.0, 120.0, 2.0)
    whole = dedisperse(data, plan, algorithm=algorithm)
    with open_observation(tmp_path / "x.fil") as reader:
        parts = list(
            stream_dedisperse(
                reader, plan, batch_blocks=batch_blocks, block_nsamp=256, algorithm=algorithm
            )
        )
    starts = [s for s, _ in parts]
    assert starts == list(range(0, whole.shape[1], 256))
    np.testing.assert_array_equal(np.concatenate([p for _, p in parts], axis=1), whole)


def test_pulse_straddling_a_block_edge_is_found_once(tmp_path, rng):
    nchan, nsamp, block = 32, 2000, 300
    header_probe = Header(
        nchans=nchan, fch1=1500.0, foff=-6.25, tsamp=1e-3, nbits=8, nsamples=nsamp
    )
    plan = DMPlan.from_header(header_probe, 0.0, 100.0, 1.0)
    dm_index, t_arrival = 70, 2 * block - 1  # top-of-band arrival: last sample of block 1
    data = rng.integers(0, 8, (nchan, nsamp)).astype(np.uint8)
    data[np.arange(nchan), t_arrival + plan.delays[dm_index]] += 200
    write_file(tmp_path / "p.fil", data)
    hits = []
    with open_observation(tmp_path / "p.fil") as reader:
        for start, dmt in stream_dedisperse(reader, plan, batch_blocks=2, block_nsamp=block):
            row = dmt[dm_index]
            hits += [start + int(t) for t in np.flatnonzero(row > 150 * nchan)]
    assert hits == [t_arrival]


def test_stream_rejects_mismatched_plans_and_short_files(tmp_path, rng):
    data = rng.integers(0, 60, (32, 50)).astype(np.uint8)
    header = write_file(tmp_path / "s.fil", data)
    plan = DMPlan.from_header(header, 0.0, 300.0, 10.0)
    assert plan.max_delay >= 50
    with open_observation(tmp_path / "s.fil") as reader:
        with pytest.raises(OperatorError, match=r"s\.fil: 50 samples"):
            list(stream_dedisperse(reader, plan))
        other = DMPlan.build(plan.dms, plan.freqs[:8], plan.tsamp)
        with pytest.raises(OperatorError, match="32 channels, DM plan has 8"):
            list(stream_dedisperse(reader, other))


def test_released_pages_read_back_unchanged(tmp_path, rng):
    data = rng.integers(0, 255, (64, 40000)).astype(np.uint8)  # 2.5 MB: many pages
    write_file(tmp_path / "r.fil", data)
    with open_observation(tmp_path / "r.fil") as reader:
        before = reader.read_block(0, 30000, raw=True)
        reader.release(30000)
        np.testing.assert_array_equal(reader.read_block(0, 40000, raw=True), data)
    np.testing.assert_array_equal(before, data[:, :30000])
