"""The reader interface every format implements, and block streaming with overlap."""

from __future__ import annotations

import mmap
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.io import bits
from drafts_ops.io.blocks import block_spans
from drafts_ops.io.header import Header
from drafts_ops.io.transpose import transpose_into


def advise_mapping(
    array: np.ndarray, advice: str, offset: int = 0, length: int | None = None
) -> None:
    """``madvise`` the memory map behind a numpy memmap ``array`` (``advice`` names an
    ``mmap.MADV_*`` flag; byte range ``offset``.. ``offset + length`` of the map, to its
    end when ``length`` is None); nothing where the array is not mapped or the platform
    lacks the advice."""
    mapping = getattr(array, "_mmap", None)
    flag = getattr(mmap, advice, None)
    if mapping is None or flag is None or not hasattr(mapping, "madvise"):
        return
    if length is None:
        mapping.madvise(flag, offset)
    else:
        mapping.madvise(flag, offset, length)


class ObservationReader(ABC):
    """An opened observation: a :class:`Header` and blocks of total-intensity data.

    Subclasses implement :meth:`_read` for one span of samples. Memory use is bounded by the
    block size: nothing reads the whole file unless asked for all of it.
    """

    path: Path
    header: Header
    #: True where the file stores floats that may be NaN/inf; blocks are then checked.
    float_samples: bool = False

    @abstractmethod
    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        """Samples ``[start, start + nsamp)`` as ``[nchans, nsamp]`` (already clipped)."""

    def read_block(self, start: int, nsamp: int, *, raw: bool = False) -> np.ndarray:
        """Read ``nsamp`` spectra from sample ``start`` as an array ``[nchans, n]``.

        The span is clipped to the end of the file. ``raw=False`` gives float32 total
        intensity; ``raw=True`` gives the unpacked samples in their native type (uint8 for
        nbits <= 8, uint16, float32) where the format stores unscaled integers, so that a
        dedispersion operator can adapt the dtype itself without a float copy. Where values
        must be combined or calibrated first (several IFs/polarisations; PSRFITS scales,
        offsets, weights or zero offset other than the identity) ``raw=True`` also gives
        float32. Float data holding NaN or inf raise :class:`ObservationError` naming the
        samples.
        """
        if start < 0 or nsamp < 0:
            raise ParameterError(f"{self.path}: cannot read {nsamp} samples from {start}")
        stop = min(start + nsamp, self.header.nsamples)
        if stop <= start:
            return np.zeros((self.header.nchans, 0), dtype=np.float32)
        block = self._read(start, stop - start, raw)
        if self.float_samples:
            check_finite(self.path, block, start)
        return block

    def read_spectra(self, start: int, nsamp: int) -> np.ndarray | None:
        """Samples ``[start, start + nsamp)`` in the file's own layout ``[n, nchans]`` and
        dtype, without a transposed copy: a memory-map view, or where the format stores
        its spectra in pieces (PSRFITS rows) and the span crosses pieces, a copy in a
        buffer the reader reuses (valid until its next ``read_spectra``); ``None`` where
        the format cannot (packed bits, several IFs, calibrated PSRFITS). Lets the search
        read, sum and average straight from the file's spectra. Float samples come
        unchecked: a caller checks them for NaN/inf (:meth:`read_block` does)."""
        return None

    def read_all(self, *, raw: bool = False) -> np.ndarray:
        """The whole observation ``[nchans, nsamples]`` (small files and tests only)."""
        return self.read_block(0, self.header.nsamples, raw=raw)

    def iter_blocks(
        self, nsamp: int, overlap: int = 0, *, raw: bool = False, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Stream the observation in blocks.

        Yields ``(start_sample, block)`` with ``block`` of shape ``[nchans, <= nsamp +
        overlap]``: ``nsamp`` new samples followed by ``overlap`` samples that the next
        block starts with. With ``overlap`` equal to the maximum dispersion delay, every
        block dedisperses to exactly ``nsamp`` output samples that tile the file without
        gaps or repeats. Blocks shorter than the overlap plus one are not yielded after the
        first one (they hold no new output sample). ``stop`` streams only the first ``stop``
        samples (default: all). Blocks come from :func:`~drafts_ops.io.blocks.block_spans`, the one
        block iterator; the dedispersion stream, the validation report and the injection
        all read through this.
        """
        if nsamp <= 0:
            raise ParameterError(f"{self.path}: block size must be positive, got {nsamp}")
        if overlap < 0:
            raise ParameterError(f"{self.path}: overlap must be >= 0, got {overlap}")
        total = self.header.nsamples if stop is None else min(int(stop), self.header.nsamples)
        for span in block_spans(0, total, nsamp, after=overlap):
            if span.start > 0 and total - span.start <= overlap:
                break  # only samples the previous block already dedispersed
            yield span.start, self.read_block(span.start, span.read_stop - span.start, raw=raw)

    def prefetch(self, start: int, nsamp: int) -> None:  # noqa: B027 (optional hook)
        """Hint that samples ``[start, start + nsamp)`` will be read soon (streaming).

        Memory-mapped readers ask the kernel to read them ahead, so that the disk works
        while the current chunk is computed on; the default does nothing.
        """

    def release(self, stop: int) -> None:  # noqa: B027 (optional hook, not abstract)
        """Hint that samples before ``stop`` will not be read again (streaming).

        Memory-mapped readers drop those pages from the process so that a long stream's
        resident memory stays bounded; the default does nothing.
        """

    def close(self) -> None:  # noqa: B027 (optional hook, not abstract)
        """Release file handles (memory maps close with their arrays)."""

    def __enter__(self) -> ObservationReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        h = self.header
        return (
            f"{type(self).__name__}({str(self.path)!r}, nchans={h.nchans}, "
            f"nsamples={h.nsamples}, tsamp={h.tsamp:g} s, fch1={h.fch1:g} MHz)"
        )


def transposed(array: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """A 2-D ``array [a, b]`` → C-contiguous ``[b, a]`` of ``dtype`` (see transpose_into)."""
    out = np.empty(array.shape[::-1], dtype=dtype)
    transpose_into(out, array)
    return out


def check_finite(path: Path | str, block: np.ndarray, start: int) -> None:
    """Raise :class:`ObservationError` naming the samples of ``block`` that hold NaN/inf."""
    good = np.isfinite(block)
    if good.all():
        return
    bad = np.flatnonzero(~good.all(axis=0)) + start
    raise ObservationError(
        path,
        f"non-finite values (NaN or inf) in samples {bad[0]}..{bad[-1]} "
        f"({bad.size} spectra affected in the block read from sample {start})",
    )


def checked_header(path: Path | str, **fields: object) -> Header:
    """Build a Header, turning its validation error into one that names ``path``."""
    try:
        return Header(**fields)  # type: ignore[arg-type]
    except ObservationError as err:
        raise ObservationError(path, err.problem) from None
    except TypeError as err:
        raise ObservationError(path, f"bad header: {err}") from None


def spectra_for_writing(path: Path | str, header: Header, block: np.ndarray) -> np.ndarray:
    """A block to write, ``[nchans, n]`` or ``[nifs, nchans, n]``, as quantised spectra.

    Returns ``[n, nifs, nchans]`` (file order of SIGPROC and FBH5) in the sample type of
    ``header.nbits``; a wrong shape raises :class:`ObservationError` naming ``path``.
    """
    block = np.asarray(block)
    if block.ndim == 2 and header.nifs == 1:
        block = block[None]
    if block.ndim != 3 or block.shape[:2] != (header.nifs, header.nchans):
        want = "[nchans, n]" if header.nifs == 1 else "[nifs, nchans, n]"
        raise ObservationError(
            path, f"block of shape {block.shape} does not match the header: want {want}"
        )
    quantised = bits.quantise(block, header.nbits)
    out = np.empty((block.shape[2], header.nifs, header.nchans), dtype=quantised.dtype)
    for i in range(header.nifs):
        transpose_into(out[:, i, :], quantised[i])
    return out
