"""SIGPROC filterbank (``.fil``) reading and writing.

The header is a sequence of length-prefixed keyword strings between ``HEADER_START`` and
``HEADER_END``, each followed by its binary value; data follow as spectra
``[nsamples, nifs, nchans]`` of ``nbits`` samples, sub-byte samples packed LSB first.
Reads are memory-mapped: a block touches only its own bytes.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import ObservationError
from drafts_ops.io import bits
from drafts_ops.io.header import HEADER_KEYWORDS, KEYWORDS_BY_NAME, Header
from drafts_ops.io.reader import (
    ObservationReader,
    advise_mapping,
    checked_header,
    spectra_for_writing,
    transposed,
)

MAGIC = b"HEADER_START"
_MAX_KEYWORD_LEN = 80
_MAX_STRING_LEN = 4096
_MAX_HEADER_BYTES = 1 << 16

#: Keywords some writers add that are not Header fields: name → struct format of the value.
_EXTRA_KEYWORDS: dict[str, str] = {"signed": "b", "nsamples": "i", "nbins": "i", "npuls": "q"}
_FORMATS = {"int": "i", "double": "d"}
#: Header fields that must be present in a filterbank file.
REQUIRED_KEYWORDS = ("nchans", "fch1", "foff", "tsamp", "nbits")


def _read_string(fh: BinaryIO, path: Path, *, value_of: str | None = None) -> str:
    """One length-prefixed string: a keyword, or (``value_of`` given) a keyword's value."""
    raw = fh.read(4)
    if len(raw) < 4:
        raise ObservationError(path, "SIGPROC header ends before HEADER_END")
    (length,) = struct.unpack("<i", raw)
    limit = _MAX_KEYWORD_LEN if value_of is None else _MAX_STRING_LEN
    what = "keyword" if value_of is None else f"value of {value_of}"
    if not 0 <= length <= limit or (value_of is None and length == 0):
        raise ObservationError(
            path, f"corrupt SIGPROC header: {what} has length {length} at byte {fh.tell() - 4}"
        )
    text = fh.read(length)
    if len(text) < length:
        raise ObservationError(path, f"SIGPROC header ends inside the {what}")
    if value_of is not None:
        return text.decode("latin-1")
    try:
        return text.decode("ascii")
    except UnicodeDecodeError:
        raise ObservationError(
            path, f"corrupt SIGPROC header: non-ASCII keyword {text!r}"
        ) from None


def _read_value(fh: BinaryIO, fmt: str, path: Path, name: str) -> Any:
    size = struct.calcsize("<" + fmt)
    raw = fh.read(size)
    if len(raw) < size:
        raise ObservationError(path, f"SIGPROC header ends inside the value of {name}")
    return struct.unpack("<" + fmt, raw)[0]


def read_sigproc_header(path: str | Path) -> tuple[dict[str, Any], int]:
    """Parse the keyword section of a SIGPROC file.

    Returns the keyword values (Header fields, plus ``signed`` when present) and the byte
    offset where the data start.
    """
    path = Path(path)
    values: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    try:
        fh = path.open("rb")
    except OSError as err:
        raise ObservationError(path, f"cannot open: {err.strerror or err}") from None
    with fh:
        if _read_string(fh, path) != "HEADER_START":
            raise ObservationError(path, "not a SIGPROC filterbank: no HEADER_START")
        while True:
            if fh.tell() > _MAX_HEADER_BYTES:
                raise ObservationError(path, "SIGPROC header has no HEADER_END")
            name = _read_string(fh, path)
            if name == "HEADER_END":
                if "signed" in extras:
                    values["signed"] = extras["signed"]
                return values, fh.tell()
            if name in KEYWORDS_BY_NAME:
                kw = KEYWORDS_BY_NAME[name]
                if kw.kind == "string":
                    values[name] = _read_string(fh, path, value_of=name)
                else:
                    values[name] = _read_value(fh, _FORMATS[kw.kind], path, name)
            elif name in _EXTRA_KEYWORDS:
                extras[name] = _read_value(fh, _EXTRA_KEYWORDS[name], path, name)
            else:
                raise ObservationError(path, f"unknown SIGPROC header keyword {name!r}")


class SigprocReader(ObservationReader):
    """Memory-mapped reader of a SIGPROC filterbank file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        values, self.data_offset = read_sigproc_header(self.path)
        self.signed = bool(values.pop("signed", 0))
        missing = [k for k in REQUIRED_KEYWORDS if k not in values]
        if missing:
            raise ObservationError(self.path, f"SIGPROC header lacks {', '.join(missing)}")
        nbits, nchans, nifs = values["nbits"], values["nchans"], values.get("nifs", 1)
        if nbits not in bits.SAMPLE_DTYPES:
            raise ObservationError(
                self.path, f"nbits = {nbits} is not supported (use 1, 2, 4, 8, 16 or 32)"
            )
        if nchans <= 0 or nifs <= 0:
            raise ObservationError(self.path, f"nchans = {nchans}, nifs = {nifs}: must be > 0")
        if self.signed and nbits not in (8, 16):
            raise ObservationError(self.path, f"signed samples of {nbits} bits are not supported")
        bits_per_spectrum = nchans * nifs * nbits
        if bits_per_spectrum % 8:
            raise ObservationError(
                self.path, f"{nchans} channels x {nifs} IFs of {nbits} bits is not whole bytes"
            )
        self.spectrum_bytes = bits_per_spectrum // 8
        data_bytes = self.path.stat().st_size - self.data_offset
        if data_bytes == 0:
            raise ObservationError(self.path, "file holds a header but no data")
        nsamples, leftover = divmod(data_bytes, self.spectrum_bytes)
        if leftover:
            raise ObservationError(
                self.path,
                f"truncated data: {data_bytes} bytes is not a whole number of "
                f"{self.spectrum_bytes}-byte spectra ({leftover} bytes left over)",
            )
        self.header = checked_header(self.path, nsamples=nsamples, **values)
        self.float_samples = nbits == 32
        self._dtype = bits.SAMPLE_DTYPES[nbits]
        if self.signed:
            self._dtype = np.dtype(np.int8) if nbits == 8 else np.dtype("<i2")
        self._raw = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self.data_offset)

    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        h = self.header
        chunk = self._raw[start * self.spectrum_bytes : (start + nsamp) * self.spectrum_bytes]
        if h.nbits >= 8:  # a view of the memory map: no copy before the transpose below
            samples = np.asarray(chunk).view(self._dtype)
        else:
            samples = bits.unpack(chunk, h.nbits, "little")
        samples = samples.reshape(nsamp, h.nifs, h.nchans)
        if h.nifs == 1:
            spectra = samples[:, 0, :]
        else:  # total intensity: the first two IFs (AA + BB)
            spectra = samples[:, :2, :].sum(axis=1, dtype=np.float32)
        dtype = spectra.dtype if raw else np.float32
        return transposed(spectra, dtype)

    def read_spectra(self, start: int, nsamp: int) -> np.ndarray | None:
        """A view ``[n, nchans]`` of the memory map (8-, 16- or 32-bit, one IF), clipped to
        the file. Float samples are not checked for NaN/inf here: the search checks what
        it reads this way (``drafts_ops.search.samples``)."""
        h = self.header
        if h.nbits < 8 or h.nifs != 1:
            return None
        stop = min(start + nsamp, h.nsamples)
        chunk = self._raw[start * self.spectrum_bytes : stop * self.spectrum_bytes]
        return np.asarray(chunk).view(self._dtype).reshape(max(stop - start, 0), h.nchans)

    def prefetch(self, start: int, nsamp: int) -> None:
        """Ask the kernel to read samples ``[start, start + nsamp)`` ahead (madvise)."""
        a, b = self._map_range(start, start + nsamp)
        if b > a:
            advise_mapping(self._raw, "MADV_WILLNEED", a, b - a)

    def release(self, stop: int) -> None:
        """Drop the mapped pages of samples before ``stop`` from this process (madvise)."""
        _, end = self._map_range(0, stop)
        if end > 0:
            advise_mapping(self._raw, "MADV_DONTNEED", 0, end)

    def _map_range(self, start: int, stop: int) -> tuple[int, int]:
        """Page-aligned byte range of the memory map holding samples ``[start, stop)``
        (numpy maps from an allocation-granularity boundary below the data offset)."""
        lead = self.data_offset % mmap.ALLOCATIONGRANULARITY
        n = self.header.nsamples
        a = lead + min(max(start, 0), n) * self.spectrum_bytes
        b = lead + min(max(stop, 0), n) * self.spectrum_bytes
        return a - a % mmap.PAGESIZE, b - b % mmap.PAGESIZE

    def close(self) -> None:
        """Drop the memory map (blocks already returned stay valid: they are copies)."""
        self._raw = None  # type: ignore[assignment]


def encode_header(header: Header) -> bytes:
    """The SIGPROC header bytes (``HEADER_START`` ... ``HEADER_END``) for ``header``."""

    def string(text: str) -> bytes:
        data = text.encode("latin-1", errors="replace")
        return struct.pack("<i", len(data)) + data

    out = [string("HEADER_START")]
    for kw in HEADER_KEYWORDS:
        value = getattr(header, kw.name)
        if kw.kind == "string":
            if not value:
                continue
            out.append(string(kw.name) + string(value))
        else:
            out.append(string(kw.name) + struct.pack("<" + _FORMATS[kw.kind], value))
    out.append(string("HEADER_END"))
    return b"".join(out)


def write_sigproc(
    path: str | Path, header: Header, blocks: np.ndarray | Iterable[np.ndarray]
) -> Path:
    """Write a filterbank file atomically.

    ``blocks`` is one array or an iterable of arrays (streamed) of shape ``[nchans, n]``
    (or ``[nifs, nchans, n]`` when ``header.nifs > 1``), holding values of the header's
    ``nbits`` (rounded and clipped by :func:`bits.quantise`). The header's ``nsamples`` is
    ignored: the file holds what was given.
    """
    path = Path(path)
    if isinstance(blocks, np.ndarray):
        blocks = [blocks]
    if (header.nchans * header.nifs * header.nbits) % 8:
        raise ObservationError(path, "a spectrum of these nchans, nifs, nbits is not whole bytes")
    with atomic_path(path) as tmp, tmp.open("wb") as fh:
        fh.write(encode_header(header))
        for block in blocks:
            spectra = spectra_for_writing(path, header, block)
            fh.write(bits.pack(spectra, header.nbits, "little"))
    return path
