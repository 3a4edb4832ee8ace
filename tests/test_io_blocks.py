"""The one block iterator: owned spans tile the stream once, reads are clipped to it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drafts_ops.core.errors import ParameterError
from drafts_ops.io.blocks import block_spans


@given(first=st.integers(0, 50), length=st.integers(1, 400), size=st.integers(1, 64),
       before=st.integers(0, 30), after=st.integers(0, 90))  # fmt: skip
def test_blocks_own_every_sample_once_and_read_around_it(first, length, size, before, after):
    last = first + length
    total = last + 17
    spans = block_spans(first, last, size, before=before, after=after, total=total)
    owned = [t for s in spans for t in range(s.start, s.stop)]
    assert owned == list(range(first, last))
    for s in spans:
        assert s.read_start == max(s.start - before, 0)
        assert s.read_stop == min(s.stop + after, total)
        assert 0 < s.owned <= size
    assert [s.index for s in spans] == list(range(len(spans)))


def test_bad_blocks_are_refused():
    with pytest.raises(ParameterError, match="block size must be positive"):
        block_spans(0, 10, 0)
    with pytest.raises(ParameterError, match="overlaps must be >= 0"):
        block_spans(0, 10, 4, after=-1)
