"""The real GBT observation (28.fil) and its PSRFITS piece (small.fits) read correctly."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.io import open_observation
from drafts_ops.io.psrfits import PsrfitsReader
from drafts_ops.io.sigproc import SigprocReader


def test_28fil_header_as_in_provenance(real_data):
    with open_observation(real_data / "28.fil") as reader:
        assert isinstance(reader, SigprocReader)
        h = reader.header
        assert h.nchans == 336
        assert h.nbits == 8
        assert h.nifs == 1
        assert h.fch1 == 1465.0
        assert h.foff == -1.0
        assert h.tsamp == 0.00126646875
        assert h.nsamples == 5120
        assert h.tstart == 58682.620316710374
        assert h.telescope_id == 7
        assert h.tobs == pytest.approx(6.48432)
        assert h.fmax == 1465.0
        assert h.fmin == 1130.0


def test_28fil_data_mean_streamed(real_data):
    with open_observation(real_data / "28.fil") as reader:
        total, count = 0.0, 0
        for _, block in reader.iter_blocks(1000):
            total += float(block.sum(dtype=np.float64))
            count += block.size
        assert count == 336 * 5120
        assert total / count == pytest.approx(127.42196, abs=1e-4)
        whole = reader.read_all(raw=True)
        assert whole.dtype == np.uint8
        assert whole.mean() == pytest.approx(total / count)


def test_small_fits_matches_provenance_and_28fil(real_data):
    with open_observation(real_data / "small.fits") as fits_reader:
        assert isinstance(fits_reader, PsrfitsReader)
        h = fits_reader.header
        assert (h.nchans, h.nbits, h.nifs, h.nsamples) == (336, 8, 1, 789)  # 1 row, NSBLK 789
        assert (h.fch1, h.foff, h.tsamp) == (1465.0, -1.0, 0.00126646875)
        assert h.source_name == "src1"
        assert h.src_raj == pytest.approx(122637.6361)
        assert h.src_dej == pytest.approx(135752.112)
        data = fits_reader.read_all()
    with open_observation(real_data / "28.fil") as fil:
        assert h.tstart == pytest.approx(fil.header.tstart, abs=1e-10)  # same start, < 10 us
        # small.fits holds the first 10 spectra of 28.fil; the rest of its row is zero
        np.testing.assert_array_equal(data[:, :10], fil.read_block(0, 10))
        assert not data[:, 10:].any()
