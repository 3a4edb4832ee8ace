"""Write → read round trips for every format, bit depth and channel order; cross-format
agreement; block streaming with overlap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from drafts_ops.io import detect_format, open_observation
from drafts_ops.io.fbh5 import FBH5Reader, write_fbh5
from drafts_ops.io.psrfits import PsrfitsReader
from drafts_ops.io.psrfits_writer import write_psrfits
from drafts_ops.io.sigproc import SigprocReader, write_sigproc
from tests._io_util import make_header, random_samples

WRITERS = {
    "sigproc": (write_sigproc, ".fil", SigprocReader),
    "fbh5": (write_fbh5, ".h5", FBH5Reader),
    "psrfits": (write_psrfits, ".fits", PsrfitsReader),
}
NBITS = {"sigproc": (1, 2, 4, 8, 16, 32), "fbh5": (1, 2, 4, 8, 16, 32), "psrfits": (1, 2, 4, 8)}
CASES = [(fmt, nbits) for fmt, depths in NBITS.items() for nbits in depths]
RAW_DTYPES = {1: np.uint8, 2: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.float32}


@pytest.mark.parametrize("descending", [True, False], ids=["descending", "ascending"])
@pytest.mark.parametrize(("fmt", "nbits"), CASES)
def test_round_trip_identical(tmp_path, rng, fmt, nbits, descending):
    writer, suffix, reader_type = WRITERS[fmt]
    header = make_header(16, nbits, descending=descending)
    data = random_samples(rng, (16, 96), nbits)
    path = writer(tmp_path / f"obs{suffix}", header, data)

    assert detect_format(path) == fmt
    with open_observation(path) as reader:
        assert isinstance(reader, reader_type)
        h = reader.header
        assert (h.nchans, h.nbits, h.nsamples, h.fch1, h.foff, h.tsamp) == (
            16,
            nbits,
            96,
            header.fch1,
            header.foff,
            header.tsamp,
        )
        np.testing.assert_allclose(h.chan_freqs, header.chan_freqs)
        got = reader.read_all()
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, data)
        raw = reader.read_all(raw=True)
        assert raw.dtype == RAW_DTYPES[nbits]
        np.testing.assert_array_equal(raw, data.astype(RAW_DTYPES[nbits]))
        np.testing.assert_array_equal(reader.read_block(17, 30), data[:, 17:47])


@pytest.mark.parametrize("fmt", ["sigproc", "fbh5"])
@pytest.mark.parametrize("nifs", [2, 4])
def test_multiple_ifs_summed_to_total_intensity(tmp_path, rng, fmt, nifs):
    writer, suffix, _ = WRITERS[fmt]
    header = make_header(8, 8, nifs=nifs)
    data = random_samples(rng, (nifs, 8, 40), 8)
    path = writer(tmp_path / f"pol{suffix}", header, data)
    with open_observation(path) as reader:
        assert reader.header.nifs == nifs
        np.testing.assert_array_equal(reader.read_all(), data[0] + data[1])


def test_streamed_writes_equal_one_array(tmp_path, rng):
    header = make_header(16, 4)
    data = random_samples(rng, (16, 120), 4)
    pieces = [data[:, i : i + 25] for i in range(0, 120, 25)]
    for fmt in ("sigproc", "fbh5"):
        writer, suffix, _ = WRITERS[fmt]
        path = writer(tmp_path / f"streamed{suffix}", header, iter(pieces))
        with open_observation(path) as reader:
            np.testing.assert_array_equal(reader.read_all(), data)


def test_cross_format_identical_blocks_and_headers(tmp_path, rng):
    header = make_header(32, 8, telescope_id=21)
    data = random_samples(rng, (32, 256), 8)
    paths = [
        writer(tmp_path / f"cross{suffix}", header, data) for writer, suffix, _ in WRITERS.values()
    ]
    readers = [open_observation(p) for p in paths]
    reference = readers[0]
    ref_blocks = list(reference.iter_blocks(100, 30))
    for reader in readers[1:]:
        a, b = reference.header, reader.header
        for name in ("nchans", "fch1", "foff", "tsamp", "nbits", "nsamples", "nifs"):
            assert getattr(b, name) == getattr(a, name), name
        for name in ("source_name", "telescope_id", "telescope"):
            assert getattr(b, name) == getattr(a, name), name
        assert math.isclose(b.tstart, a.tstart, rel_tol=0, abs_tol=1e-9)  # < 0.1 ms
        assert math.isclose(b.src_raj, a.src_raj, abs_tol=1e-5)
        assert math.isclose(b.src_dej, a.src_dej, abs_tol=1e-5)
        blocks = list(reader.iter_blocks(100, 30))
        assert [s for s, _ in blocks] == [s for s, _ in ref_blocks]
        for (_, x), (_, y) in zip(blocks, ref_blocks, strict=True):
            np.testing.assert_array_equal(x, y)
    for reader in readers:
        reader.close()


@pytest.mark.parametrize(("nsamp", "overlap"), [(64, 0), (64, 20), (50, 49), (300, 10), (7, 13)])
def test_iter_blocks_overlap_tiles_exactly(tmp_path, rng, nsamp, overlap):
    total = 233
    data = random_samples(rng, (8, total), 8)
    path = write_sigproc(tmp_path / "tile.fil", make_header(8, 8), data)
    covered = np.zeros(total, dtype=int)
    outputs = []
    with open_observation(path) as reader:
        for start, block in reader.iter_blocks(nsamp, overlap):
            assert block.shape[1] <= nsamp + overlap
            np.testing.assert_array_equal(block, data[:, start : start + block.shape[1]])
            n_out = block.shape[1] - overlap  # what a dedisperser gets from this block
            assert n_out > 0 or start == 0
            covered[start : start + max(n_out, 0)] += 1
            outputs.append(block[:, : max(n_out, 0)])
    # every output sample appears exactly once, in order, up to the last full overlap
    assert np.all(covered[: total - overlap] == 1)
    assert np.all(covered[total - overlap :] == 0)
    np.testing.assert_array_equal(np.concatenate(outputs, axis=1), data[:, : total - overlap])


@pytest.mark.parametrize("suffix", [".fil", ".h5", ".fits"])
def test_write_observation_picks_format_by_suffix(tmp_path, rng, suffix):
    from drafts_ops.io import write_observation

    data = random_samples(rng, (16, 64), 8)
    path = write_observation(
        tmp_path / f"w{suffix}", make_header(16, 8), iter([data[:, :40], data[:, 40:]])
    )
    with open_observation(path) as reader:
        assert reader.header.nsamples == 64
        np.testing.assert_array_equal(reader.read_all(), data)
