"""The readers' transposing copy (file spectra -> channel-major blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.io import transpose


@pytest.mark.parametrize("shape", [(58392, 1024), (1003, 517), (4097, 24), (9000, 7)])
@pytest.mark.parametrize("offset", [0, 3])
def test_byte_blocks_transpose_exactly(shape, offset):
    """uint8 spectra at any byte offset (a memory map past a SIGPROC header), of sizes that
    are not multiples of 8, arrive channel-major exactly as numpy's transpose."""
    rng = np.random.default_rng(sum(shape) + offset)
    buffer = rng.integers(0, 256, size=shape[0] * shape[1] + offset, dtype=np.uint8)
    spectra = buffer[offset:].reshape(shape)
    out = np.empty(shape[::-1], np.uint8)
    transpose.transpose_into(out, spectra)
    np.testing.assert_array_equal(out, spectra.T)


def test_byte_blocks_of_a_channel_range_and_other_dtypes_transpose_exactly():
    """A range of channels of the spectra (rows not adjacent, as the cutouts read them)
    goes through the 8 x 8 byte path; float32 through the element path."""
    rng = np.random.default_rng(1)
    spectra = rng.integers(0, 256, size=(3000, 1024), dtype=np.uint8)
    part = spectra[:, 136:400]
    assert transpose._transpose_bytes(np.empty((264, 3000), np.uint8), part)
    out = np.empty((264, 3000), np.uint8)
    transpose.transpose_into(out, part)
    np.testing.assert_array_equal(out, part.T)
    floats = spectra.astype(np.float32)
    assert not transpose._transpose_bytes(np.empty((1024, 3000), np.float32), floats)
    out32 = np.empty((1024, 3000), np.float32)
    transpose.transpose_into(out32, floats)
    np.testing.assert_array_equal(out32, floats.T)


def test_a_transposed_view_is_copied_without_the_tiled_kernels(monkeypatch):
    """A block that is already stored as the spectra are (a transposed view: the
    simulator's time-major noise) is copied as it lies: the tiled transposes, 30x slower
    there (2 s per 1.6 GB of FAST raw written), are not used."""

    def refuse(*args):
        raise AssertionError("tiled transpose used for a plain copy")

    monkeypatch.setattr(transpose, "transpose_into_kernel", refuse)
    monkeypatch.setattr(transpose, "transpose_bytes_kernel", refuse)
    spectra = np.random.default_rng(2).integers(0, 256, size=(5000, 1024), dtype=np.uint8)
    out = np.empty((5000, 1024), np.uint8)
    transpose.transpose_into(out, spectra.T)
    np.testing.assert_array_equal(out, spectra)


def test_a_time_major_block_is_written_as_its_channel_major_copy(tmp_path):
    """``write_sigproc`` writes a block stored time-major (a transposed view) byte for byte
    as the same block stored channel-major."""
    from drafts_ops.io.header import Header
    from drafts_ops.io.sigproc import write_sigproc

    header = Header(nchans=512, fch1=1500.0, foff=-1.0, tsamp=1e-3, nbits=8, nsamples=3000)
    spectra = np.random.default_rng(3).integers(0, 256, size=(3000, 512), dtype=np.uint8)
    a = write_sigproc(tmp_path / "a.fil", header, spectra.T)
    b = write_sigproc(tmp_path / "b.fil", header, np.ascontiguousarray(spectra.T))
    assert a.read_bytes() == b.read_bytes()
