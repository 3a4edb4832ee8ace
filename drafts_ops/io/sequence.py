"""Consecutive files of one beam read as one stream (any format).

A survey writes a beam as a sequence of files (FAST: about 6 s each); a burst whose sweep
crosses from one file into the next is only whole in the joined data. :func:`contiguity`
says whether one file continues another (same channels, sampling and bits, same beam and
source, starting where the other ends); :class:`SequenceReader` reads several such files
as one observation. PSRFITS sequences have their own reader (one file list, one
calibration); this one joins files of any format through their own readers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from drafts_ops.core.errors import ObservationError
from drafts_ops.io.header import Header
from drafts_ops.io.reader import ObservationReader

SECONDS_PER_DAY = 86400.0


def contiguity(previous: Header, following: Header) -> str | None:
    """Why ``following`` does not continue ``previous`` (one line), or ``None`` if it does:
    same channels, sampling, bits, beam and source, and it starts within half a sample of
    where ``previous`` ends (``tstart`` in MJD)."""
    for name in ("nchans", "nbits", "nifs", "ibeam", "source_name"):
        if getattr(previous, name) != getattr(following, name):
            return f"{name} {getattr(following, name)!r} differs from {getattr(previous, name)!r}"
    for name in ("tsamp", "fch1", "foff"):
        if not math.isclose(getattr(previous, name), getattr(following, name), rel_tol=1e-9):
            return f"{name} {getattr(following, name)!r} differs from {getattr(previous, name)!r}"
    end = previous.tstart + previous.nsamples * previous.tsamp / SECONDS_PER_DAY
    gap_s = (following.tstart - end) * SECONDS_PER_DAY
    if abs(gap_s) > 0.5 * previous.tsamp:
        kind = "gap" if gap_s > 0 else "overlap"
        return f"it starts {gap_s:+.6g} s from where the other ends ({kind})"
    return None


class SequenceReader(ObservationReader):
    """Consecutive files of one beam as one observation (their readers, joined in time).

    The header is the first file's with the samples of all; reads across a boundary
    join the pieces. Raises :class:`ObservationError` naming a file that does not
    continue the one before it (:func:`contiguity`).
    """

    def __init__(self, readers: Sequence[ObservationReader]) -> None:
        if not readers:
            raise ObservationError(None, "no observation file given")
        for before, after in itertools.pairwise(readers):
            problem = contiguity(before.header, after.header)
            if problem:
                raise ObservationError(
                    after.path, f"does not continue {before.path.name}: {problem}"
                )
        self.readers = list(readers)
        self.path = readers[0].path
        counts = [r.header.nsamples for r in readers]
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.header = readers[0].header.replace(nsamples=int(self.starts[-1]))
        self.float_samples = any(r.float_samples for r in readers)

    def _pieces(self, start: int, nsamp: int):
        """``(reader, local start, local count)`` of the files that hold ``[start, +nsamp)``."""
        for reader, first, last in zip(self.readers, self.starts[:-1], self.starts[1:],
                                       strict=True):  # fmt: skip
            a, b = max(start, int(first)), min(start + nsamp, int(last))
            if b > a:
                yield reader, a - int(first), b - a

    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        parts = [r.read_block(a, n, raw=raw) for r, a, n in self._pieces(start, nsamp)]
        if len(parts) == 1:
            return parts[0]
        dtype = np.result_type(*parts)
        return np.concatenate([p.astype(dtype, copy=False) for p in parts], axis=1)

    def read_spectra(self, start: int, nsamp: int) -> np.ndarray | None:
        """A view inside one file (see the base class); ``None`` across a boundary."""
        pieces = list(self._pieces(start, nsamp))
        if len(pieces) != 1:
            return None
        reader, a, n = pieces[0]
        return reader.read_spectra(a, n)

    def release(self, stop: int) -> None:
        for reader, first in zip(self.readers, self.starts[:-1], strict=False):
            reader.release(int(stop) - int(first))

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
