"""PSRFITS search-mode reading (one file or several consecutive files); writing is
:mod:`drafts_ops.io.psrfits_writer`.

astropy.io.fits parses the headers; the rows of the ``SUBINT`` table are read through a
memory map of the table, so a block touches only the rows it needs. Each row holds
``NSBLK`` spectra ``[NSBLK, NPOL, NCHAN]`` of ``NBITS`` samples (sub-byte samples packed
most-significant bits first) plus per-row ``DAT_FREQ``, ``DAT_WTS``, ``DAT_OFFS`` and
``DAT_SCL``. A sample's value is ``((raw + TZERO) - ZERO_OFF) * DAT_SCL + DAT_OFFS``,
times ``DAT_WTS``; total intensity is the sum of the first two polarisations (AA + BB)
unless ``POL_TYPE`` is ``IQUV``, where it is the first (I).
"""

from __future__ import annotations

import math
import mmap
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.errors import ObservationError
from drafts_ops.io import bits
from drafts_ops.io.header import (
    packed_from_string,
    telescope_id_from_name,
)
from drafts_ops.io.reader import ObservationReader, advise_mapping, checked_header
from drafts_ops.io.transpose import transpose_into

#: Largest span of spectra :meth:`PsrfitsReader.read_spectra` gathers across rows, bytes.
SPECTRA_BUFFER_BYTES = 64 * 1024**2
#: NBITS a PSRFITS search-mode file may hold here.
PSRFITS_NBITS = (1, 2, 4, 8)
_TFORM = re.compile(r"^\s*(\d*)\s*([LXBIJKAEDCMPQ])")
_TYPE_BYTES = {"L": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 8}
_TYPE_BYTES.update({"M": 16, "P": 8, "Q": 16})
_FLOAT_TYPES = {"E": ">f4", "D": ">f8"}
#: ``POL_TYPE`` of a file that does not say, by ``NPOL``.
DEFAULT_POL_TYPES = {1: "AA+BB", 2: "AABB", 4: "AABBCRCI"}


@dataclass(frozen=True)
class _Column:
    """Where one binary-table column lies in a row."""

    offset: int
    repeat: int
    code: str
    zero: float

    @property
    def nbytes(self) -> int:
        return (self.repeat + 7) // 8 if self.code == "X" else self.repeat * _TYPE_BYTES[self.code]


@dataclass
class _File:
    """One PSRFITS file: its layout, timing and memory-mapped table rows."""

    path: Path
    rows: np.ndarray  # uint8 [nrows, NAXIS1], memory-mapped
    columns: dict[str, _Column]
    nsblk: int
    nchan: int
    npol: int
    nbits: int
    tbin: float
    chan_bw: float
    zero_off: float
    pol_type: str
    imjd: int
    seconds: float  # start of the first sample, seconds after imjd (NSUBOFFS included)
    freqs: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def nrows(self) -> int:
        return self.rows.shape[0]

    @property
    def nsamples(self) -> int:
        return self.nrows * self.nsblk

    @property
    def npol_used(self) -> int:
        return 1 if self.npol == 1 or self.pol_type == "IQUV" else 2

    @property
    def tstart(self) -> float:
        return self.imjd + self.seconds / 86400.0

    def seconds_after(self, other: _File) -> float:
        """Start of this file minus start of ``other``, seconds (full precision)."""
        return (self.imjd - other.imjd) * 86400.0 + (self.seconds - other.seconds)


def _key(path: Path, hdr: Any, name: str, kind: type, default: Any = None) -> Any:
    """A header keyword as ``kind``; missing (without default) or garbage is an error."""
    try:
        value = hdr.get(name, None)
    except Exception as err:  # astropy: unparsable card (VerifyError) and the like
        raise ObservationError(path, f"PSRFITS keyword {name} is unreadable ({err})") from None
    if value is None or (isinstance(value, str) and not value.strip() and kind is not str):
        if default is None:
            raise ObservationError(path, f"PSRFITS header lacks {name}")
        return default
    try:
        if kind is str:
            return str(value).strip()
        if kind is int:
            number = float(value)
            if not number.is_integer():
                raise ValueError
            return int(number)
        number = float(value)
        if not math.isfinite(number):
            raise ValueError
        return number
    except (TypeError, ValueError):
        raise ObservationError(path, f"PSRFITS keyword {name} = {value!r} is not valid") from None


def _columns(path: Path, hdr: Any, naxis1: int) -> dict[str, _Column]:
    """Byte layout of every column of a binary table row, by upper-case name."""
    out: dict[str, _Column] = {}
    offset = 0
    for i in range(1, _key(path, hdr, "TFIELDS", int) + 1):
        tform = _key(path, hdr, f"TFORM{i}", str)
        match = _TFORM.match(tform)
        if not match:
            raise ObservationError(path, f"SUBINT column {i} has an unknown format {tform!r}")
        column = _Column(
            offset, int(match[1] or 1), match[2], _key(path, hdr, f"TZERO{i}", float, 0.0)
        )
        out[_key(path, hdr, f"TTYPE{i}", str, f"COL{i}").upper()] = column
        offset += column.nbytes
    if offset != naxis1:
        raise ObservationError(path, f"SUBINT columns take {offset} bytes but NAXIS1 = {naxis1}")
    return out


def _read_headers(path: Path) -> tuple[Any, Any, int]:
    """Primary header, SUBINT header and the byte offset of the SUBINT data."""
    from astropy.io import fits

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with fits.open(path, memmap=False, lazy_load_hdus=True) as hdul:
                primary = hdul[0].header.copy()
                names = [hdu.name for hdu in hdul]
                if "SUBINT" not in names:
                    raise ObservationError(
                        path, "FITS file has no SUBINT table: not PSRFITS search-mode data"
                    )
                subint = hdul["SUBINT"]
                return primary, subint.header.copy(), int(subint.fileinfo()["datLoc"])
    except ObservationError:
        raise
    except Exception as err:  # astropy raises many types on corrupt input
        raise ObservationError(
            path, f"unreadable FITS file ({type(err).__name__}: {err})"
        ) from None


def _open_file(path: Path) -> _File:
    primary, hdr, data_loc = _read_headers(path)
    mode = _key(path, primary, "OBS_MODE", str, "SEARCH").upper()
    if mode != "SEARCH":
        raise ObservationError(path, f"PSRFITS OBS_MODE is {mode!r}: only SEARCH mode is read")
    nbits = _key(path, hdr, "NBITS", int)
    if nbits not in PSRFITS_NBITS:
        raise ObservationError(path, f"NBITS = {nbits} is not supported (use 1, 2, 4 or 8)")
    npol = _key(path, hdr, "NPOL", int)
    if npol not in (1, 2, 4):
        raise ObservationError(path, f"NPOL = {npol} is not supported (use 1, 2 or 4)")
    nchan, nsblk = _key(path, hdr, "NCHAN", int), _key(path, hdr, "NSBLK", int)
    tbin = _key(path, hdr, "TBIN", float)
    if nchan <= 0 or nsblk <= 0 or tbin <= 0:
        raise ObservationError(
            path, f"NCHAN = {nchan}, NSBLK = {nsblk}, TBIN = {tbin} s: all must be positive"
        )
    naxis1, nrows = _key(path, hdr, "NAXIS1", int), _key(path, hdr, "NAXIS2", int)
    columns = _columns(path, hdr, naxis1)
    _check_data_column(path, columns, nsblk * npol * nchan * nbits)
    if nrows <= 0:
        raise ObservationError(path, "SUBINT table has no rows")
    size = path.stat().st_size
    if data_loc + naxis1 * nrows > size:
        raise ObservationError(
            path,
            f"truncated: {nrows} SUBINT rows of {naxis1} bytes need "
            f"{data_loc + naxis1 * nrows} bytes, the file has {size}",
        )
    rows = np.memmap(path, dtype=np.uint8, mode="r", offset=data_loc, shape=(nrows, naxis1))
    nsuboffs = _key(path, hdr, "NSUBOFFS", int, 0)
    seconds = _key(path, primary, "STT_SMJD", float, 0.0) + _key(
        path, primary, "STT_OFFS", float, 0.0
    )
    file = _File(
        path=path,
        rows=rows,
        columns=columns,
        nsblk=nsblk,
        nchan=nchan,
        npol=npol,
        nbits=nbits,
        tbin=tbin,
        chan_bw=_key(path, hdr, "CHAN_BW", float, 0.0),
        zero_off=_key(path, hdr, "ZERO_OFF", float, 0.0),
        pol_type=_key(path, hdr, "POL_TYPE", str, DEFAULT_POL_TYPES.get(npol, "")).upper(),
        imjd=_key(path, primary, "STT_IMJD", int, 0),
        seconds=seconds + nsuboffs * nsblk * tbin,
        freqs=np.empty(0),
    )
    file.freqs = _frequencies(file, primary, hdr)
    file.meta = _metadata(file, primary)
    return file


def _check_data_column(path: Path, columns: dict[str, _Column], nbits_per_row: int) -> None:
    data = columns.get("DATA")
    if data is None:
        raise ObservationError(path, "SUBINT table has no DATA column")
    if data.code != "B":
        raise ObservationError(path, f"DATA column has type {data.code!r}; expected bytes (B)")
    if nbits_per_row % 8 or data.nbytes != nbits_per_row // 8:
        raise ObservationError(
            path,
            f"DATA column holds {data.nbytes} bytes per row, but NSBLK x NPOL x NCHAN x NBITS "
            f"= {nbits_per_row} bits",
        )


def _float_column(file: _File, name: str, row: int) -> np.ndarray | None:
    """One row of a float column as float64, or None when the table lacks the column."""
    column = file.columns.get(name)
    if column is None:
        return None
    if column.code not in _FLOAT_TYPES:
        raise ObservationError(file.path, f"column {name} has type {column.code!r}, not E or D")
    raw = file.rows[row, column.offset : column.offset + column.nbytes]
    return np.asarray(raw).view(_FLOAT_TYPES[column.code]).astype(np.float64)


def _frequencies(file: _File, primary: Any, hdr: Any) -> np.ndarray:
    """Channel centre frequencies (MHz) in file order, from DAT_FREQ of the first row."""
    freqs = _float_column(file, "DAT_FREQ", 0)
    if freqs is not None and freqs.size != file.nchan:
        raise ObservationError(file.path, f"DAT_FREQ has {freqs.size} values for {file.nchan}")
    if freqs is None or (file.nchan > 1 and np.all(freqs == freqs[0])):
        # No usable DAT_FREQ: the primary header's band centre and channel width.
        chan_bw = _key(file.path, hdr, "CHAN_BW", float)
        centre = _key(file.path, primary, "OBSFREQ", float)
        return centre + chan_bw * (np.arange(file.nchan) - (file.nchan - 1) / 2)
    if file.nchan == 1:
        return freqs
    steps = np.diff(freqs)
    if not np.all(np.isfinite(freqs)) or not np.allclose(steps, steps.mean(), rtol=1e-3):
        raise ObservationError(file.path, "DAT_FREQ channel frequencies are not evenly spaced")
    return freqs


def _metadata(file: _File, primary: Any) -> dict[str, Any]:
    """Header fields other than the layout: source, pointing, telescope."""
    path = file.path
    meta: dict[str, Any] = {
        "source_name": _key(path, primary, "SRC_NAME", str, ""),
        "telescope_id": telescope_id_from_name(_key(path, primary, "TELESCOP", str, "")),
        "rawdatafile": path.name,
    }
    for name, field_name in (("RA", "src_raj"), ("DEC", "src_dej")):
        text = _key(path, primary, name, str, "")
        try:
            meta[field_name] = packed_from_string(text) if text else 0.0
        except ValueError:
            raise ObservationError(path, f"PSRFITS {name} = {text!r} is not hh:mm:ss") from None
    for name, field_name in (("TEL_AZ", "az_start"), ("TEL_ZEN", "za_start")):
        value = _float_column(file, name, 0) if name in file.columns else None
        if value is not None and value.size and np.isfinite(value[0]):
            meta[field_name] = float(value[0])
    return meta


def _check_consistent(first: _File, other: _File, previous: _File) -> None:
    """Raise when ``other`` cannot continue the observation after ``previous``."""
    for name in ("nchan", "nbits", "npol", "nsblk", "pol_type"):
        if getattr(other, name) != getattr(first, name):
            raise ObservationError(
                other.path,
                f"{name.upper()} = {getattr(other, name)} differs from "
                f"{getattr(first, name)} in {first.path.name}: not the same observation",
            )
    if not math.isclose(other.tbin, first.tbin, rel_tol=1e-9):
        raise ObservationError(
            other.path, f"TBIN = {other.tbin} s differs from {first.tbin} s in {first.path.name}"
        )
    width = abs(first.freqs[1] - first.freqs[0]) if first.nchan > 1 else 1.0
    if not np.allclose(other.freqs, first.freqs, rtol=0, atol=1e-3 * width):
        raise ObservationError(
            other.path, f"channel frequencies (DAT_FREQ) differ from those of {first.path.name}"
        )
    gap = other.seconds_after(previous) - previous.nsamples * previous.tbin
    if abs(gap) > 0.5 * first.tbin:
        kind = "gap" if gap > 0 else "overlap"
        raise ObservationError(
            other.path,
            f"not contiguous with {previous.path.name}: it starts {gap:+.6g} s from where "
            f"that file ends ({kind} of {abs(gap) / first.tbin:.1f} samples)",
        )


class PsrfitsReader(ObservationReader):
    """Reader of PSRFITS search-mode data: one file, or consecutive files as one observation.

    Files are ordered by start time (the given order breaks ties) and must agree in
    channels, frequencies, sampling, bits and polarisations, and follow each other without a
    gap or overlap; otherwise :class:`ObservationError` names the offending file.
    """

    def __init__(self, paths: Sequence[str | Path] | str | Path) -> None:
        if isinstance(paths, (str, Path)):
            paths = [paths]
        if not paths:
            raise ObservationError(None, "no PSRFITS file given")
        opened = [_open_file(Path(p)) for p in paths]
        self.files = sorted(opened, key=lambda f: f.seconds_after(opened[0]))
        first = self.files[0]
        for previous, other in zip(self.files, self.files[1:], strict=False):
            _check_consistent(first, other, previous)
        self.path = first.path
        self.paths = [f.path for f in self.files]
        self._starts = np.cumsum([0] + [f.nsamples for f in self.files])
        if first.nchan > 1:
            foff = (first.freqs[-1] - first.freqs[0]) / (first.nchan - 1)
        else:
            foff = first.chan_bw
        self.header = checked_header(
            first.path,
            nchans=first.nchan,
            fch1=float(first.freqs[0]),
            foff=float(foff),
            tsamp=first.tbin,
            nbits=first.nbits,
            nsamples=int(self._starts[-1]),
            nifs=first.npol,
            tstart=first.tstart,
            **first.meta,
        )
        self._identity_ok = first.npol_used == 1 and all(
            f.zero_off == 0 and f.columns["DATA"].zero == 0 for f in self.files
        )
        self._params_cache: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        self._spectra: np.ndarray | None = None  # read_spectra's buffer across rows

    @property
    def starts(self) -> np.ndarray:
        """First sample of each file in the observation, then the total (``[nfiles + 1]``)."""
        return self._starts

    def _params(self, index: int, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scales and offsets ``[npol_used, nchan]`` and weights ``[nchan]`` of one row."""
        key = (index, row)
        if key in self._params_cache:
            return self._params_cache[key]  # type: ignore[return-value]
        file = self.files[index]
        npol, nchan = file.npol_used, file.nchan
        values = []
        for name, default in (("DAT_SCL", 1.0), ("DAT_OFFS", 0.0)):
            column = _float_column(file, name, row)
            if column is None:
                column = np.full(nchan, default)
            if column.size == nchan:  # one value per channel, shared by the polarisations
                column = np.tile(column, file.npol)
            if column.size != nchan * file.npol:
                raise ObservationError(file.path, f"{name} has {column.size} values per row")
            values.append(column.reshape(file.npol, nchan)[:npol].astype(np.float32))
        weights = _float_column(file, "DAT_WTS", row)
        weights = np.ones(nchan) if weights is None else weights
        if weights.size != nchan:
            raise ObservationError(file.path, f"DAT_WTS has {weights.size} values per row")
        params = (values[0], values[1], weights.astype(np.float32))
        if not all(np.isfinite(p).all() for p in params):
            first = int(self._starts[index]) + row * file.nsblk
            raise ObservationError(
                file.path,
                f"non-finite DAT_SCL/DAT_OFFS/DAT_WTS in row {row} "
                f"(samples {first}..{first + file.nsblk - 1})",
            )
        if len(self._params_cache) > 64:
            self._params_cache.clear()
        self._params_cache[key] = params
        return params

    def _pieces(self, start: int, nsamp: int) -> list[tuple[int, int, int, int]]:
        """``(file index, row, first, stop)`` spans of rows that cover the samples."""
        out = []
        stop = start + nsamp
        index = int(np.searchsorted(self._starts, start, side="right")) - 1
        while start < stop:
            file = self.files[index]
            local = start - int(self._starts[index])
            row, first = divmod(local, file.nsblk)
            last = min(file.nsblk, first + stop - start)
            out.append((index, row, first, last))
            start += last - first
            if row == file.nrows - 1 and last == file.nsblk:
                index += 1
        return out

    def _samples(self, index: int, row: int, first: int, last: int) -> np.ndarray:
        """Unpacked samples ``[last - first, NPOL, NCHAN]`` (uint8) of one row."""
        file = self.files[index]
        spectrum = file.npol * file.nchan * file.nbits // 8
        offset = file.columns["DATA"].offset
        raw = file.rows[row, offset + first * spectrum : offset + last * spectrum]
        samples = np.asarray(raw) if file.nbits == 8 else bits.unpack(raw, file.nbits, "big")
        return samples.reshape(last - first, file.npol, file.nchan)

    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        pieces = self._pieces(start, nsamp)
        params = [self._params(index, row) for index, row, _, _ in pieces]
        native = raw and self._identity_ok and all(_is_identity(*p) for p in params)
        out = np.empty((self.header.nchans, nsamp), dtype=np.uint8 if native else np.float32)
        col = 0
        for (index, row, first, last), (scale, offset, weight) in zip(pieces, params, strict=True):
            samples = self._samples(index, row, first, last)
            n = last - first
            if native:
                transpose_into(out[:, col : col + n], samples[:, 0, :])
            else:
                spectra = self._calibrate(index, samples, scale, offset, weight)
                transpose_into(out[:, col : col + n], spectra)
            col += n
        return out

    def read_spectra(self, start: int, nsamp: int) -> np.ndarray | None:
        """Spectra ``[n, nchans]`` (uint8) of 8-bit samples searched as stored (one
        polarisation used, ``DAT_SCL`` 1, ``DAT_OFFS`` 0, ``DAT_WTS`` 1, no zero offset,
        as FAST writes them): a view of the memory map within one ``SUBINT`` row, else
        gathered from the rows into a buffer this reader reuses (up to
        :data:`SPECTRA_BUFFER_BYTES`; longer spans ``None``); ``None`` for other samples.
        Clipped to the file."""
        h = self.header
        if h.nbits != 8 or not self._identity_ok:
            return None
        n = max(min(start + nsamp, h.nsamples) - start, 0)
        pieces = self._pieces(start, n)
        if not all(_is_identity(*self._params(index, row)) for index, row, _, _ in pieces):
            return None
        if len(pieces) == 1:
            return self._samples(*pieces[0])[:, 0, :]
        if n * h.nchans > SPECTRA_BUFFER_BYTES:
            return None
        if self._spectra is None or self._spectra.shape[0] < n:
            self._spectra = np.empty((n, h.nchans), np.uint8)
        out, at = self._spectra[:n], 0
        for piece in pieces:
            samples = self._samples(*piece)[:, 0, :]
            out[at : at + samples.shape[0]] = samples
            at += samples.shape[0]
        return out

    def _calibrate(
        self,
        index: int,
        samples: np.ndarray,
        scale: np.ndarray,
        offset: np.ndarray,
        weight: np.ndarray,
    ) -> np.ndarray:
        """Total intensity ``[n, nchan]`` float32 from raw samples ``[n, npol, nchan]``."""
        file = self.files[index]
        npol = file.npol_used
        values = samples[:, :npol, :].astype(np.float32)
        zero = file.columns["DATA"].zero - file.zero_off
        if zero:
            values += np.float32(zero)
        values *= scale[None]
        values += offset[None]
        total = values[:, 0, :] if npol == 1 else values.sum(axis=1)
        total *= weight[None]
        return total

    def release(self, stop: int) -> None:
        """Drop the mapped pages of the rows wholly before sample ``stop`` (madvise), so
        that a stream's resident memory stays bounded (the base class's hint)."""
        for index, file in enumerate(self.files):
            rows = min(max(int(stop) - int(self._starts[index]), 0) // file.nsblk, file.nrows)
            if rows == 0:
                break
            lead = file.rows.offset % mmap.ALLOCATIONGRANULARITY  # numpy maps from there
            end = lead + rows * file.rows.shape[1]
            advise_mapping(file.rows, "MADV_DONTNEED", 0, end - end % mmap.PAGESIZE)

    def close(self) -> None:
        """Drop the memory maps."""
        for file in self.files:
            file.rows = None  # type: ignore[assignment]


def _is_identity(scale: np.ndarray, offset: np.ndarray, weight: np.ndarray) -> bool:
    return bool(np.all(scale == 1) and np.all(offset == 0) and np.all(weight == 1))
