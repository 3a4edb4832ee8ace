"""The one block iterator: how a stream of samples is cut into overlapping blocks.

A block *owns* samples ``[start, stop)`` (the blocks' owned spans tile the stream once)
and *reads* ``[read_start, read_stop)``: ``before`` samples ahead of its start (context,
e.g. a boxcar's padding) and ``after`` samples past its stop (e.g. the largest
dispersion delay, so that every owned sample is dedispersed within the block), clipped to
the stream. Every overlapping-block loop of drafts-ops goes through :func:`block_spans`:
the readers' :meth:`~drafts_ops.io.reader.ObservationReader.iter_blocks` (dedispersion
streams, validation, injection) and the search's plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from drafts_ops.core.errors import ParameterError


@dataclass(frozen=True)
class BlockSpan:
    """One block: owns ``[start, stop)``, reads ``[read_start, read_stop)`` (samples)."""

    index: int
    start: int
    stop: int
    read_start: int
    read_stop: int

    @property
    def owned(self) -> int:
        """Samples the block owns."""
        return self.stop - self.start


def block_spans(
    first: int, last: int, size: int, *, before: int = 0, after: int = 0, total: int | None = None
) -> list[BlockSpan]:
    """Blocks owning ``[first, last)`` in steps of ``size`` samples, each reading
    ``before`` samples before its start and ``after`` past its stop, clipped to ``[0,
    total)`` (``total`` defaults to ``last``)."""
    if size <= 0:
        raise ParameterError(f"block size must be positive, got {size}")
    if before < 0 or after < 0:
        raise ParameterError(f"block overlaps must be >= 0, got {before} and {after}")
    total = last if total is None else int(total)
    spans = []
    for index, start in enumerate(range(int(first), int(last), int(size))):
        stop = min(start + size, last)
        spans.append(BlockSpan(index, start, stop, max(start - before, 0),
                               min(stop + after, total)))  # fmt: skip
    return spans
