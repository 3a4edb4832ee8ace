"""Observation readers and writers: SIGPROC filterbank, PSRFITS search mode, HDF5 (FBH5).

Use :func:`open_observation`; it picks the format from the file's first bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from drafts_ops.core.errors import ObservationError
from drafts_ops.io.header import Header
from drafts_ops.io.reader import ObservationReader

Format = Literal["sigproc", "psrfits", "fbh5"]

_MAGIC: dict[Format, bytes] = {
    "sigproc": b"\x0c\x00\x00\x00HEADER_START",
    "psrfits": b"SIMPLE  =",
    "fbh5": b"\x89HDF\r\n\x1a\n",
}
_SUFFIXES: dict[str, Format] = {
    ".fil": "sigproc",
    ".fits": "psrfits",
    ".sf": "psrfits",
    ".h5": "fbh5",
    ".hdf5": "fbh5",
    ".fbh5": "fbh5",
}

PathLike = str | os.PathLike[str]


def detect_format(path: PathLike) -> Format:
    """The format of ``path`` from its first bytes (the suffix only names it in errors)."""
    path = Path(path)
    if not path.exists():
        raise ObservationError(path, "no such file")
    if path.is_dir():
        raise ObservationError(path, "is a directory, not an observation file")
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as err:
        raise ObservationError(path, f"cannot read: {err.strerror or err}") from None
    if not head:
        raise ObservationError(path, "empty file")
    for fmt, magic in _MAGIC.items():
        if head.startswith(magic):
            return fmt
    expected = _SUFFIXES.get(path.suffix.lower())
    hint = f" (its suffix says {expected}, but the content does not match)" if expected else ""
    raise ObservationError(path, f"not a SIGPROC, PSRFITS or HDF5 filterbank file{hint}")


def open_observation(paths: PathLike | Sequence[PathLike]) -> ObservationReader:
    """Open an observation for streaming.

    ``paths`` is one file, or several consecutive files of one observation (FAST writes
    about 6 s per file), which are read as one: PSRFITS by its own reader, other formats
    joined by :class:`~drafts_ops.io.sequence.SequenceReader` (files must follow each other
    without a gap).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise ObservationError(None, "no observation file given")
    formats = {detect_format(p) for p in paths}
    if len(paths) > 1 and formats != {"psrfits"}:  # consecutive files of one beam
        # lazy: a format's reader loads only for its files (h5py, astropy)
        from drafts_ops.io.sequence import SequenceReader

        readers = []
        try:
            for p in paths:
                readers.append(open_observation(p))
            return SequenceReader(readers)
        except BaseException:
            for reader in readers:
                reader.close()
            raise
    fmt = formats.pop()
    if fmt == "sigproc":
        from drafts_ops.io.sigproc import SigprocReader

        return SigprocReader(paths[0])
    if fmt == "psrfits":
        from drafts_ops.io.psrfits import PsrfitsReader

        return PsrfitsReader(paths)
    from drafts_ops.io.fbh5 import FBH5Reader

    return FBH5Reader(paths[0])


def format_from_suffix(path: PathLike) -> Format:
    """The format a file name asks for: .fil, .fits/.sf or .h5/.hdf5/.fbh5."""
    fmt = _SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(_SUFFIXES))
        raise ObservationError(path, f"unknown observation suffix (use one of {known})")
    return fmt


def write_observation(
    path: PathLike, header: Header, blocks: np.ndarray | Iterable[np.ndarray]
) -> Path:
    """Write total-intensity data in the format named by the suffix of ``path`` (atomic).

    ``blocks`` is one array ``[nchans, n]`` or an iterable of them (streamed for SIGPROC
    and FBH5; PSRFITS joins them and writes rows of up to 4096 spectra). Values are
    rounded and clipped to ``header.nbits``.
    """
    fmt = format_from_suffix(path)
    if fmt == "sigproc":
        # lazy: a format's reader loads only for its files (h5py, astropy)
        from drafts_ops.io.sigproc import write_sigproc

        return write_sigproc(path, header, blocks)
    if fmt == "fbh5":
        from drafts_ops.io.fbh5 import write_fbh5

        return write_fbh5(path, header, blocks)
    from drafts_ops.io.psrfits_writer import write_psrfits

    data = blocks if isinstance(blocks, np.ndarray) else np.concatenate(list(blocks), axis=-1)
    return write_psrfits(path, header, data)


__all__ = [
    "Format",
    "Header",
    "ObservationReader",
    "detect_format",
    "format_from_suffix",
    "open_observation",
    "write_observation",
]
