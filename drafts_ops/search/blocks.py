"""A block of a search: the samples it owns and reads, in its DM range's samples."""

from __future__ import annotations

from dataclasses import dataclass

from drafts_ops.io.blocks import BlockSpan


@dataclass(frozen=True)
class BlockRange:
    """One block, in searched samples (of its DM range, ``range_index``, in a plan with
    ranges): it owns output samples ``[start, stop)`` and reads ``[read_start, read_stop)``
    (padding for boxcars plus the maximum delay, clipped to the data; the operator sees
    ``read_len`` samples, zero-padded beyond the data)."""

    index: int
    start: int
    stop: int
    read_start: int
    read_stop: int
    read_len: int
    range_index: int = 0

    @classmethod
    def of(
        cls, span: BlockSpan, max_delay: int, nsamples: int, *, range_index: int = 0
    ) -> BlockRange:
        """The block of ``span`` (read with the boxcar padding), extended by the largest
        dispersion delay: read to the end of the data, zero-padded beyond it."""
        want = span.read_stop + max_delay
        return cls(span.index, span.start, span.stop, span.read_start, min(want, nsamples),
                   want - span.read_start, range_index)  # fmt: skip
