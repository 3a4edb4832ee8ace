"""HDF5 filterbank files in the Breakthrough Listen FBH5 layout (blimpy's ``.h5``).

The file carries attributes ``CLASS = "FILTERBANK"`` and ``VERSION = "1.0"``; the dataset
``data`` has shape ``[nsamples, nifs, nchans]`` and carries the SIGPROC header keywords as
attributes (``fch1``, ``foff``, ``nchans``, ``tsamp``, ``tstart``, ``source_name``, ...).
Samples of 8, 16 and 32 bits are stored as uint8, uint16 and float32; samples of 1, 2 and
4 bits are stored unpacked, one uint8 per sample. Blocks are read by h5py slicing, so only
the chunks a block needs are read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import ObservationError
from drafts_ops.io import bits
from drafts_ops.io.header import HEADER_KEYWORDS, Header
from drafts_ops.io.reader import (
    ObservationReader,
    checked_header,
    spectra_for_writing,
    transposed,
)

FBH5_CLASS = "FILTERBANK"
FBH5_VERSION = "1.0"
#: Header attributes an FBH5 ``data`` dataset must carry.
REQUIRED_ATTRS = ("fch1", "foff", "tsamp")


def _text(value: Any) -> Any:
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("latin-1")
    if isinstance(value, np.ndarray) and value.size == 1:
        return _text(value.reshape(()).item())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _header_values(path: Path, dataset: Any) -> dict[str, Any]:
    """Header fields from the dataset's attributes, checked against its shape."""
    attrs = {name: _text(dataset.attrs[name]) for name in dataset.attrs}
    missing = [name for name in REQUIRED_ATTRS if name not in attrs]
    if missing:
        raise ObservationError(path, f"FBH5 data attributes lack {', '.join(missing)}")
    nsamples, nifs, nchans = dataset.shape
    for name, actual in (("nchans", nchans), ("nifs", nifs)):
        if name in attrs and attrs[name] != actual:
            raise ObservationError(
                path, f"attribute {name} = {attrs[name]!r} but the data hold {actual}"
            )
    values = {kw.name: attrs[kw.name] for kw in HEADER_KEYWORDS if kw.name in attrs}
    values.update(nchans=nchans, nifs=nifs, nsamples=nsamples)
    values.setdefault("nbits", _NBITS_OF_DTYPE.get(dataset.dtype.str))
    return values


_NBITS_OF_DTYPE = {"|u1": 8, "<u2": 16, ">u2": 16, "<f4": 32, ">f4": 32}


class FBH5Reader(ObservationReader):
    """Reader of an FBH5 (Breakthrough Listen HDF5) filterbank file."""

    def __init__(self, path: str | Path) -> None:
        import h5py

        with contextlib.suppress(ImportError):  # bitshuffle/LZ4 filters of BL files
            import hdf5plugin  # noqa: F401
        self.path = Path(path)
        try:
            self._file = h5py.File(self.path, "r")
        except (OSError, ValueError, RuntimeError) as err:
            raise ObservationError(self.path, f"unreadable HDF5 file ({err})") from None
        try:
            self._open()
        except (OSError, ValueError, RuntimeError, KeyError, TypeError) as err:
            self._file.close()
            raise ObservationError(self.path, f"corrupt FBH5 file ({err})") from None
        except BaseException:
            self._file.close()
            raise

    def _open(self) -> None:
        dataset = self._file.get("data")
        if dataset is None or not hasattr(dataset, "shape"):
            hint = " (a FETCH candidate file?)" if "data_freq_time" in self._file else ""
            raise ObservationError(self.path, f"HDF5 file has no 'data' dataset{hint}")
        if dataset.ndim != 3:
            raise ObservationError(
                self.path, f"FBH5 data has shape {dataset.shape}; expected [nsamples, nifs, nchans]"
            )
        kind = dataset.dtype.kind
        if kind not in "uif" or dataset.dtype.itemsize > 8:
            raise ObservationError(self.path, f"FBH5 data type {dataset.dtype} is not numeric")
        self.header = checked_header(self.path, **_header_values(self.path, dataset))
        self.float_samples = kind == "f"
        self._data = dataset

    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        nifs = min(self.header.nifs, 2)
        try:
            spectra = self._data[start : start + nsamp, :nifs, :]
        except (OSError, ValueError) as err:
            raise ObservationError(
                self.path, f"cannot read samples {start}..{start + nsamp - 1}: {err}"
            ) from None
        # total intensity: the first two IFs (AA + BB)
        spectra = spectra[:, 0, :] if nifs == 1 else spectra.sum(axis=1, dtype=np.float32)
        dtype = spectra.dtype.newbyteorder("=") if raw else np.float32
        return transposed(spectra, dtype)

    def close(self) -> None:
        """Close the HDF5 file."""
        self._file.close()


def write_fbh5(
    path: str | Path,
    header: Header,
    blocks: np.ndarray | Iterable[np.ndarray],
    *,
    chunk_samples: int = 1024,
) -> Path:
    """Write an FBH5 file atomically.

    ``blocks`` is one array or an iterable of arrays (streamed) of shape ``[nchans, n]``
    (or ``[nifs, nchans, n]`` when ``header.nifs > 1``), holding values of the header's
    ``nbits`` (rounded and clipped by :func:`bits.quantise`); the header's ``nsamples`` is
    ignored. ``chunk_samples`` sets the HDF5 chunk length along time.
    """
    import h5py

    path = Path(path)
    if isinstance(blocks, np.ndarray):
        blocks = [blocks]
    dtype = bits.SAMPLE_DTYPES[header.nbits]
    shape = (0, header.nifs, header.nchans)
    chunks = (max(1, chunk_samples), header.nifs, header.nchans)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as h5:
        h5.attrs["CLASS"] = FBH5_CLASS
        h5.attrs["VERSION"] = FBH5_VERSION
        data = h5.create_dataset(
            "data", shape=shape, maxshape=(None, *shape[1:]), dtype=dtype, chunks=chunks
        )
        for kw in HEADER_KEYWORDS:
            data.attrs[kw.name] = getattr(header, kw.name)
        for axis, label in enumerate(("time", "feed_id", "frequency")):
            data.dims[axis].label = label
        for block in blocks:
            spectra = spectra_for_writing(path, header, block)
            end = data.shape[0]
            data.resize(end + spectra.shape[0], axis=0)
            data[end:] = spectra
    return path
