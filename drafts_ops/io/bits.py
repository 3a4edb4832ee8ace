"""Bit packing and unpacking in one place.

SIGPROC packs sub-byte samples least-significant bits first (as sigproc's ``filterbank``
and dedisp read them); PSRFITS packs them most-significant bits first (PSRFITS standard).
The table :data:`SAMPLE_DTYPES` maps nbits to the numpy type of an unpacked sample.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

BitOrder = Literal["little", "big"]

#: nbits → dtype of one unpacked sample (sub-byte samples unpack to uint8).
SAMPLE_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint8),
    4: np.dtype(np.uint8),
    8: np.dtype(np.uint8),
    16: np.dtype("<u2"),
    32: np.dtype("<f4"),
}


def unpack(packed: np.ndarray, nbits: int, bitorder: BitOrder = "little") -> np.ndarray:
    """Unpack a 1-D uint8 byte array of ``nbits`` samples into one value per sample.

    For nbits < 8 each byte holds ``8 // nbits`` samples; ``bitorder="little"`` takes the
    least significant bits as the first sample. For 8, 16 and 32 bits the bytes are viewed
    as uint8, little-endian uint16 and little-endian float32.
    """
    packed = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)
    if nbits >= 8:
        return packed.view(SAMPLE_DTYPES[nbits])
    per_byte = 8 // nbits
    mask = (1 << nbits) - 1
    shifts = np.arange(per_byte, dtype=np.uint8) * nbits
    if bitorder == "big":
        shifts = shifts[::-1]
    return ((packed[:, None] >> shifts[None, :]) & mask).reshape(-1).astype(np.uint8)


def pack(samples: np.ndarray, nbits: int, bitorder: BitOrder = "little") -> np.ndarray:
    """Inverse of :func:`unpack`: samples (already in range) → bytes (1-D uint8)."""
    if nbits >= 8:
        return np.ascontiguousarray(samples, dtype=SAMPLE_DTYPES[nbits]).view(np.uint8).reshape(-1)
    per_byte = 8 // nbits
    flat = np.ascontiguousarray(samples, dtype=np.uint8).reshape(-1, per_byte)
    shifts = np.arange(per_byte, dtype=np.uint8) * nbits
    if bitorder == "big":
        shifts = shifts[::-1]
    mask = np.uint8((1 << nbits) - 1)
    return np.bitwise_or.reduce((flat & mask) << shifts[None, :], axis=1).astype(np.uint8)


def quantise(values: np.ndarray, nbits: int) -> np.ndarray:
    """Round and clip values into the range of an ``nbits`` sample (float32 passes).

    Integer input of the sample type itself is returned as is (no copy).
    """
    values = np.asarray(values)
    if nbits == 32:
        return values.astype(np.float32, copy=False)
    dtype = SAMPLE_DTYPES[nbits]
    top = (1 << nbits) - 1
    if values.dtype.kind in "ui":
        if values.dtype == dtype and nbits in (8, 16):
            return values
        return np.clip(values, 0, top).astype(dtype)
    return np.clip(np.rint(values), 0, top).astype(dtype)
