"""Reading the searched samples: raw samples averaged to the searched resolution, and
the samples a decimating search keeps for its cutouts.

:func:`read_searched` reads a span of searched samples from an open reader (without
decimation the raw samples in their own dtype, a transposed view of the file's spectra
where it can; with decimation float32 averages, decimated in chunks). A decimating pass
keeps what its blocks read (:class:`DecimatedReader`, :class:`SearchedSamples`), so each
raw sample is read once, and the cutouts read them back.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.cutouts import CUTOUT_STATS_SAMPLES, ChannelBand
from drafts_ops.detect.preprocess import (
    decimate_block,
)
from drafts_ops.detect.preprocess_kernels import (
    MAX_EXACT_SUM,
    averages_to_sums_into,
    band_rows_into,
    decimate_spectra_into,
    window_rows_into,
)
from drafts_ops.io.reader import advise_mapping
from drafts_ops.io.transpose import transpose_into
from drafts_ops.search.plan import DECIMATION_CHUNK_BYTES, BlockRange, SearchPlan


class DecimatedReader:
    """Reads a decimating pass's blocks and keeps their searched samples.

    Each block's averages go into its normalisation buffer. The samples a block shares
    with the one before it (boxcar padding plus the largest delay: about half of what a
    FAST raw block reads) come from the samples the previous block kept, not from the
    file again, bit for bit (:meth:`SearchedSamples.save` keeps them exactly). The new
    samples are kept, for the next block and for the cutouts, in files named by their
    first sample (``work/searched_<sample>.npy``).
    """

    def __init__(self, reader, plan: SearchPlan, work_dir: Path) -> None:
        self.reader, self.plan, self.work_dir = reader, plan, work_dir
        self.factor = plan.config.decimation_factor
        #: ``(first sample, stop, path)`` of the files this pass kept, in order.
        self.files: list[tuple[int, int, Path]] = []

    @property
    def kept_until(self) -> int | None:
        """Samples before this are kept (``None`` before the first block)."""
        return self.files[-1][1] if self.files else None

    def read(self, block: BlockRange, out: np.ndarray, *, keep_stop: int) -> np.ndarray:
        """Samples ``[block.read_start, block.read_stop)`` (float32, a view of ``out``;
        shorter at the end of the file); keeps those from the kept samples' end (the
        block's start for the first block) to ``keep_stop``."""

        start, stop = block.read_start, block.read_stop
        head = start if self.kept_until is None else min(max(self.kept_until, start), stop)
        if head > start:
            parts = [(a, path) for a, b, path in self.files if b > start and a < head]
            SearchedSamples(parts, self.factor).read_averages_into(start, head, out)
        rest = read_searched(self.reader, self.plan, head, stop, out=out[:, head - start :])
        data = out[:, : head - start + rest.shape[1]]
        first = block.start if self.kept_until is None else self.kept_until
        end = min(keep_stop, start + data.shape[1])
        if end > first:
            part = data[:, first - start : end - start]
            path = self.work_dir / f"searched_{first:012d}.npy"
            self.files.append((first, end, SearchedSamples.save(path, part, self.factor)))
        return data


def read_searched(
    reader,
    plan: SearchPlan,
    start: int,
    stop: int,
    *,
    file_layout: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Searched samples ``[start, stop)`` of an open reader, ``[nchan, n]``.

    Without decimation: the raw samples in their own dtype (uint8 for 8-bit data); with
    ``file_layout``, where the format allows, a transposed view of the file's own
    time-major spectra instead of a channel-major copy (for callers that read only part
    of each channel, such as the cutouts); ``out`` (``[nchan, >= stop - start]``, the
    file's dtype): where the format gives its spectra as they lie, transposed into it
    (returns a view), else a new array. With
    time / frequency decimation: float32 averages, read and decimated in chunks of about
    :data:`DECIMATION_CHUNK_BYTES`, so no full-resolution float copy of the block exists;
    ``out`` (float32 ``[nchan, >= stop - start]``): write them there (returns a view).
    """
    cfg = plan.config
    tf, ff = cfg.time_decimation, cfg.freq_decimation
    if not cfg.decimates:
        wanted = file_layout or out is not None
        spectra = reader.read_spectra(start, stop - start) if wanted else None
        if spectra is not None and file_layout:
            return spectra.T
        if spectra is not None and _fits(out, spectra.T):
            into = out[:, : spectra.shape[0]]
            transpose_into(into, spectra)
            _check_finite(reader, into, start, spectra.shape[0])
            return into
        return reader.read_block(start, stop - start, raw=True)
    raw = plan.raw_header
    shape = (raw.nchans // ff, stop - start)
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.dtype != np.float32 or out.shape[0] != shape[0] or out.shape[1] < shape[1]:
        raise ParameterError(f"read_searched: out {out.shape} {out.dtype} cannot hold {shape}")
    return _averages_into(reader, raw, tf, ff, start, out[:, : shape[1]])


def _averages_into(reader, raw, tf: int, ff: int, start: int, out: np.ndarray) -> np.ndarray:  # noqa: PLR0917
    """Float32 averages of ``tf`` samples x ``ff`` channels of the file (header ``raw``)
    into ``out [nchan // ff, n]`` for averaged samples ``[start, start + n)``, a chunk of
    about :data:`DECIMATION_CHUNK_BYTES` at a time, each chunk's pages dropped after it;
    a view of ``out`` as far as the file goes."""
    stop = start + out.shape[1]
    step = _chunk_samples(raw, tf)
    for a in range(start, stop, step):
        b = min(a + step, stop)
        reader.prefetch(b * tf, min(step, stop - b) * tf)  # the disk reads the next chunk meanwhile
        spectra = reader.read_spectra(a * tf, (b - a) * tf)
        if spectra is not None:  # straight from the file's layout: no transposed copy
            n = spectra.shape[0] // tf
            decimate_spectra_into(spectra, tf, ff, out[:, a - start : a - start + n])
            _check_finite(reader, out[:, a - start : a - start + n], a * tf, n * tf)
        else:
            chunk = reader.read_block(a * tf, (b - a) * tf, raw=True)
            n = chunk.shape[1] // tf
            if n:
                out[:, a - start : a - start + n] = decimate_block(chunk[:, : n * tf], tf, ff)
        reader.release(b * tf)  # the chunk's file pages are not needed again here
        if n < b - a:
            return out[:, : a - start + n]
    return out


def _chunk_samples(raw, tf: int) -> int:
    """Averages of ``tf`` file samples (header ``raw``) read per chunk of about
    :data:`DECIMATION_CHUNK_BYTES`."""
    return max(1, DECIMATION_CHUNK_BYTES // (raw.nchans * max(raw.nbits, 8) // 8 * tf))


def _check_finite(reader, samples: np.ndarray, first: int, count: int) -> None:
    """Float samples read as the file lays them out (``read_spectra``, unchecked), or
    their averages, ``samples``: where they hold NaN or inf, file samples ``[first, first
    + count)`` are read again the checked way, whose :class:`ObservationError` names
    them."""
    if reader.float_samples and not np.isfinite(samples.sum(dtype=np.float64)):
        reader.read_block(first, count)


def _fits(out: np.ndarray, block: np.ndarray) -> bool:
    """Whether ``block [nchan, n]`` can be written into the leading columns of ``out``."""
    return (out.dtype == block.dtype and out.shape[0] == block.shape[0]
            and out.shape[1] >= block.shape[1])  # fmt: skip


def check_disk_space(plan: SearchPlan, work: Path) -> None:
    """Refuse a decimating search whose kept samples (for the cutouts) would not fit
    where ``work`` is: ``OSError`` (ENOSPC, naming ``work``) before any block is searched,
    not after minutes of work (a 600 s FAST raw file at x8 t x2 f keeps about 6 GB)."""

    need = SearchedSamples.disk_bytes(plan)
    if not need:
        return
    free = shutil.disk_usage(work if work.exists() else work.parent).free
    if need > free:
        raise OSError(errno.ENOSPC, f"the {need / 2**20:,.0f} MiB of searched samples "
                      f"this decimating search keeps for its cutouts do not fit "
                      f"({free / 2**20:,.0f} MiB free)", str(work))  # fmt: skip


#: Channels copied at a time when a window spans several kept files.
READ_CHANNEL_CHUNK = 64
#: Name pattern of the searched-resolution copies a decimating search keeps for cutouts.
SEARCHED_PATTERN = "searched_*.npy"


class SearchedSamples:
    """The searched (decimated) samples a decimating search kept, for its cutouts.

    A decimating pass keeps each sample its blocks read once, from its first block's
    start on, in files named by their first sample (``work/searched_<sample>.npy``,
    ``[nchan, n]``: uint16 sums of 8-bit data, else float32 averages;
    :class:`~drafts_ops.search.DecimatedReader`); this reads any span back as ``[nchan,
    n]``, across files. A 4096-channel 8-bit file searched at x8 x2 keeps 1/8 of its
    volume (1/16 of the samples at 2 bytes each).
    """

    def __init__(self, files: list[tuple[int, Path]], factor: int = 1) -> None:
        self.parts = sorted((start, np.load(path, mmap_mode="r")) for start, path in files)
        #: Raw samples averaged per searched sample (the uint16 parts hold their sums).
        self.factor = int(factor)

    @classmethod
    def find(cls, work_dir: Path, plan: SearchPlan) -> SearchedSamples | None:
        """The samples a decimating search of ``plan`` kept in ``work_dir`` (or ``None``)."""
        files = [(int(path.stem.split("_")[1]), path)  # named by their first sample
                 for path in Path(work_dir).glob(SEARCHED_PATTERN)]  # fmt: skip
        return cls(files, plan.config.decimation_factor) if files else None

    @staticmethod
    def disk_bytes(plan: SearchPlan) -> int:
        """Bytes a search of ``plan`` keeps (0 without decimation): each searched sample
        once, as uint16 sums of 8-bit data, else float32 (what :meth:`save` writes)."""
        cfg = plan.config
        if not cfg.decimates or not plan.blocks:
            return 0
        sums = plan.raw_header.nbits <= 8 and 255 * cfg.decimation_factor <= 65535
        samples = plan.blocks[-1].stop - plan.blocks[0].start
        return plan.header.nchans * samples * (2 if sums else 4)

    @staticmethod
    def save(path: Path, samples: np.ndarray, factor: int = 1) -> Path:
        """Write searched samples ``[nchan, n]`` (float32 averages of ``factor`` raw
        samples) to ``path`` (a ``.npy`` file of their own): written, not mapped, so that
        the process's memory does not grow with the file (a mapped file of the whole search
        kept every block's pages resident: +57 MiB per FAST raw block at x8 t x2 f).

        Averages of integer samples (8-bit data) are kept as their uint16 sums, which give
        them back exactly: half the bytes to write (FAST raw x8 t x2 f keeps 1/8 of the
        file's volume instead of 1/4). Other data keep their float32 averages.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        samples = np.asarray(samples, dtype=np.float32)
        if factor > 1 and samples.size:
            sums = np.empty(samples.shape, np.uint16)
            if averages_to_sums_into(samples, factor, sums):
                np.save(path, sums)
                return path
        np.save(path, np.ascontiguousarray(samples))
        return path

    def release(self) -> None:
        """Drop the kept files' mapped pages from this process (madvise): the pages of every
        window read stay resident until then, so a search's memory would grow with its
        candidates (FAST raw x8 t x2 f, 120 s, 23 candidates: 1206 -> 1960 MiB)."""
        for _, array in self.parts:
            advise_mapping(array, "MADV_DONTNEED")

    def read_averages_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """The averages of samples ``[start, stop)``, exactly as they were kept, into
        ``out[:, : stop - start]`` (float32); the pages read are released."""
        part = self.read(start, stop)
        if part.shape[1] != stop - start:
            raise ParameterError(f"kept samples hold {part.shape[1]} of [{start}, {stop})")
        np.multiply(part, self._to_averages(part), out=out[:, : stop - start])
        self.release()

    def _to_averages(self, part: np.ndarray) -> np.float32:
        """What ``part``'s samples are multiplied by to give the float32 averages, bit for
        bit: ``1 / factor`` for the uint16 sums, 1 for float32 averages."""
        return np.float32(1.0 / self.factor if part.dtype == np.uint16 else 1.0)

    def read(self, start: int, stop: int, *, row_stops: np.ndarray | None = None) -> np.ndarray:
        """Samples ``[start, stop)`` ``[nchan, n]`` as kept (uint16 sums or float32
        averages, :meth:`save`: the cutouts normalise each channel, so the scale does not
        matter), clipped to what exists: a read-only view of the mapped file where one part
        holds them all, else a copy (float32 where the parts' dtypes differ). With
        ``row_stops`` (a sample per channel, :func:`channel_read_stops`) a copy holds each
        channel only up to its stop, a chunk of channels at a time, and zeros beyond (pages
        never written, never resident): at DM 3000 about half the window."""
        for first, array in self.parts:
            if first <= start and stop <= first + array.shape[1]:
                return array[:, start - first : stop - first]
        nchan = self.parts[0][1].shape[0]
        dtypes = {array.dtype for _, array in self.parts}
        mixed = len(dtypes) > 1  # some blocks' averages were not sums: all as averages
        out = np.zeros((nchan, max(stop - start, 0)), np.float32 if mixed else dtypes.pop())
        stops = np.full(nchan, stop) if row_stops is None else np.minimum(row_stops, stop)
        for c0 in range(0, nchan, READ_CHANNEL_CHUNK):
            c1 = min(c0 + READ_CHANNEL_CHUNK, nchan)
            chunk_stop = int(stops[c0:c1].max())
            for first, array in self.parts:
                a, b = max(start, first), min(chunk_stop, first + array.shape[1])
                if b > a:
                    part = array[c0:c1, a - first : b - first]
                    if mixed:
                        part = part * self._to_averages(part)
                    out[c0:c1, a - start : b - start] = part
        ends = [min(stop, first + array.shape[1]) for first, array in self.parts
                if first < stop and first + array.shape[1] > start]  # fmt: skip
        return out[:, : max(ends, default=start) - start]


def read_averaged(
    reader, plan: SearchPlan, start: int, stop: int, factor: int, *,
    out: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """Float32 averages of ``factor`` searched samples, ``[nchan, n]`` for coarse samples
    ``[start, stop)`` (a DM range's resolution), read and averaged a chunk of about
    :data:`DECIMATION_CHUNK_BYTES` at a time, each chunk's file pages dropped after it;
    into the leading columns of ``out`` (float32 ``[nchan, >= stop - start]``) when given."""
    raw, cfg = plan.raw_header, plan.config
    shape = (raw.nchans // cfg.freq_decimation, max(stop - start, 0))
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.dtype != np.float32 or out.shape[0] != shape[0] or out.shape[1] < shape[1]:
        raise ParameterError(f"read_averaged: out {out.shape} {out.dtype} does not hold "
                             f"float32 {shape}")  # fmt: skip
    else:
        out = out[:, : shape[1]]
    return _averages_into(reader, raw, cfg.time_decimation * factor, cfg.freq_decimation,
                          start, out)  # fmt: skip


def read_band(reader, plan: SearchPlan, start: int, stop: int, *, base: np.ndarray,
              length: int) -> ChannelBand | None:  # fmt: skip
    """The :class:`~drafts_ops.detect.cutouts.ChannelBand` of the window of file samples
    ``[start, stop)``: channel ``c``'s window samples ``base[c] .. + length`` and the
    window's head, in the file's dtype, read a chunk of about
    :data:`DECIMATION_CHUNK_BYTES` at a time, each chunk's pages dropped after it (a
    window read through one view of the file would stay mapped whole: its pages are
    mapped 64 KiB or more at a time). ``None`` where the file's spectra are not views
    (packed bits, HDF5, calibrated PSRFITS; a span across joined files) or the search
    decimates."""
    if plan.config.decimates:
        return None
    raw, base = plan.raw_header, np.asarray(base, np.int64)
    nsamples = stop - start
    head_length = min(CUTOUT_STATS_SAMPLES, nsamples)
    end = start + max(int(base.max()) + int(length), head_length)
    step = _chunk_samples(raw, 1)
    rows = head = None
    for a in range(start, end, step):
        spectra = reader.read_spectra(a, min(a + step, end) - a)
        if spectra is None:
            return None
        if rows is None:
            rows = np.empty((raw.nchans, int(length)), spectra.dtype)
            head = np.empty((raw.nchans, head_length), spectra.dtype)
        band_rows_into(spectra, a - start, base, rows)
        if a - start < head_length:
            held = min(head_length - (a - start), spectra.shape[0])
            transpose_into(head[:, a - start : a - start + held], spectra[:held])
        reader.release(a + spectra.shape[0])
    return ChannelBand(rows, base, nsamples, head)


def read_window(reader, plan: SearchPlan, start: int, stop: int, factor: int, *,
                row_stops: np.ndarray) -> np.ndarray | None:  # fmt: skip
    """A dispersed window's triangle at ``factor`` searched samples: coarse samples
    ``[start, stop)``, ``[nchan, n]``, channel ``c`` only up to coarse sample
    ``row_stops[c]`` (zeros after it), read a chunk of about
    :data:`DECIMATION_CHUNK_BYTES` at a time, each chunk's pages dropped after it. Sums
    of an 8-bit file's samples (uint16; up to :data:`MAX_EXACT_SUM` of them), averages of
    wider samples (float32, checked for NaN/inf). ``None`` where the file's spectra are not
    views (packed bits, HDF5, calibrated PSRFITS) or the search averages channels (then
    :func:`read_averaged`)."""
    raw = plan.raw_header
    tf = plan.config.time_decimation * factor
    if raw.nbits < 8 or plan.config.freq_decimation != 1:
        return None
    sums = raw.nbits == 8 and tf <= MAX_EXACT_SUM
    out = np.zeros((raw.nchans, max(stop - start, 0)), np.uint16 if sums else np.float32)
    scale = np.uint16(1) if sums else np.float32(1.0 / tf)
    stops = np.clip(np.asarray(row_stops, np.int64) - start, 0, out.shape[1])
    step = _chunk_samples(raw, tf)
    for a in range(start, stop, step):
        b = min(a + step, stop)
        spectra = reader.read_spectra(a * tf, (b - a) * tf)
        if spectra is None or (sums and spectra.dtype != np.uint8):  # signed 8-bit
            return None
        n = spectra.shape[0] // tf
        window_rows_into(spectra, tf, out, a - start, stops, scale)
        if not sums:
            _check_finite(reader, out[:, a - start : a - start + n], a * tf, n * tf)
        reader.release(b * tf)
        if n < b - a:
            return out[:, : a - start + n]
    return out
