"""The readers' transposing copy (file spectra -> channel-major blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.io import reader


@pytest.mark.parametrize("shape", [(58392, 1024), (1003, 517), (4097, 24), (9000, 7)])
@pytest.mark.parametrize("offset", [0, 3])
def test_byte_blocks_transpose_exactly(shape, offset):
    """uint8 spectra at any byte offset (a memory map past a SIGPROC header), of sizes that
    are not multiples of 8, arrive channel-major exactly as numpy's transpose."""
    rng = np.random.default_rng(sum(shape) + offset)
    buffer = rng.integers(0, 256, size=shape[0] * shape[1] + offset, dtype=np.uint8)
    spectra = buffer[offset:].reshape(shape)
    out = np.empty(shape[::-1], np.uint8)
    reader.transpose_into(out, spectra)
    np.testing.assert_array_equal(out, spectra.T)


def test_byte_blocks_of_a_channel_range_and_other_dtypes_transpose_exactly():
    """A range of channels of the spectra (rows not adjacent, as the cutouts read them)
    goes through the 8 x 8 byte path; float32 through the element path."""
    rng = np.random.default_rng(1)
    spectra = rng.integers(0, 256, size=(3000, 1024), dtype=np.uint8)
    part = spectra[:, 136:400]
    assert reader._transpose_bytes(np.empty((264, 3000), np.uint8), part)
    out = np.empty((264, 3000), np.uint8)
    reader.transpose_into(out, part)
    np.testing.assert_array_equal(out, part.T)
    floats = spectra.astype(np.float32)
    assert not reader._transpose_bytes(np.empty((1024, 3000), np.float32), floats)
    out32 = np.empty((1024, 3000), np.float32)
    reader.transpose_into(out32, floats)
    np.testing.assert_array_equal(out32, floats.T)
