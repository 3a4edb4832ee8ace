"""PSRFITS search mode: polarisations, calibration columns, multi-file observations."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.core.errors import ObservationError
from drafts_ops.io import open_observation
from drafts_ops.io.psrfits import PsrfitsReader
from drafts_ops.io.psrfits_writer import write_psrfits
from tests._io_util import make_header, random_samples

NCHAN = 16


@pytest.mark.parametrize(
    ("npol", "pol_type", "used"),
    [(1, "AA+BB", 1), (2, "AABB", 2), (4, "AABBCRCI", 2), (4, "IQUV", 1)],
)
def test_polarisations_to_total_intensity(tmp_path, rng, npol, pol_type, used):
    data = random_samples(rng, (npol, NCHAN, 64), 8)
    path = write_psrfits(
        tmp_path / "pol.fits", make_header(NCHAN, 8), data, npol=npol, pol_type=pol_type
    )
    with PsrfitsReader([path]) as reader:
        assert reader.header.nifs == npol
        np.testing.assert_array_equal(reader.read_all(), data[:used].sum(axis=0))


@pytest.mark.parametrize("nbits", [2, 8])
def test_scales_offsets_weights_and_zero_off(tmp_path, rng, nbits):
    npol, nsblk, nrows = 2, 16, 4
    data = random_samples(rng, (npol, NCHAN, nsblk * nrows), nbits)
    scales = rng.uniform(0.5, 2.0, (nrows, npol, NCHAN)).astype(np.float32)
    offsets = rng.uniform(-5, 5, (nrows, npol, NCHAN)).astype(np.float32)
    weights = rng.uniform(0, 1, (nrows, NCHAN)).astype(np.float32)
    weights[:, 3] = 0.0  # a flagged channel
    zero_off = 1.5
    path = write_psrfits(
        tmp_path / "cal.fits",
        make_header(NCHAN, nbits),
        data,
        nsblk=nsblk,
        npol=npol,
        scales=scales,
        offsets=offsets,
        weights=weights,
        zero_off=zero_off,
    )
    # expected, in float64: ((raw - ZERO_OFF) * scl + offs) summed over AA, BB, times weight
    row_of = np.arange(nsblk * nrows) // nsblk
    scl = scales[row_of].transpose(1, 2, 0)  # [npol, nchan, nsamp]
    off = offsets[row_of].transpose(1, 2, 0)
    expected = (((data - zero_off) * scl + off).sum(axis=0)) * weights[row_of].T
    with open_observation(path) as reader:
        got = reader.read_all()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        assert not got[3].any()
        # a block across row edges equals the same slice of the whole
        np.testing.assert_array_equal(reader.read_block(10, 37), got[:, 10:47])
        assert reader.read_all(raw=True).dtype == np.float32  # calibration had to be applied


def test_identity_calibration_gives_native_raw_samples(tmp_path, rng):
    data = random_samples(rng, (NCHAN, 32), 8)
    path = write_psrfits(tmp_path / "id.fits", make_header(NCHAN, 8), data, nsblk=8)
    with open_observation(path) as reader:
        raw = reader.read_all(raw=True)
        assert raw.dtype == np.uint8
        np.testing.assert_array_equal(raw, data)


def _split(tmp_path, header, data, nfiles, nsblk, *, fast_style=False):
    """Write ``data`` as ``nfiles`` consecutive files; return their paths in time order."""
    per = data.shape[-1] // nfiles
    paths = []
    for k in range(nfiles):
        h = header.replace(tstart=header.tstart + k * per * header.tsamp / 86400.0)
        nsuboffs = k * per // nsblk if fast_style else 0
        paths.append(
            write_psrfits(
                tmp_path / f"part{k}.fits",
                h,
                data[..., k * per : (k + 1) * per],
                nsblk=nsblk,
                nsuboffs=nsuboffs,
            )
        )
    return paths


@pytest.mark.parametrize("fast_style", [False, True], ids=["start-times", "nsuboffs"])
def test_consecutive_files_equal_one_file(tmp_path, rng, fast_style):
    header = make_header(NCHAN, 4)
    data = random_samples(rng, (NCHAN, 3 * 40), 4)
    single = write_psrfits(tmp_path / "single.fits", header, data, nsblk=20)
    parts = _split(tmp_path, header, data, 3, 20, fast_style=fast_style)
    with open_observation(single) as one, open_observation(parts[::-1]) as many:
        assert [p.name for p in many.paths] == ["part0.fits", "part1.fits", "part2.fits"]
        assert many.header.nsamples == one.header.nsamples == 120
        assert abs(many.header.tstart - one.header.tstart) < 1e-9
        np.testing.assert_array_equal(many.read_all(), data)
        # blocks that straddle file edges
        for (s1, b1), (s2, b2) in zip(
            one.iter_blocks(33, 11), many.iter_blocks(33, 11), strict=True
        ):
            assert s1 == s2
            np.testing.assert_array_equal(b1, b2)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"nchans": 8}, "NCHAN"),
        ({"tsamp": 0.0005}, "TBIN"),
        ({"fch1": 1400.0}, "DAT_FREQ"),
        ({"nbits": 8}, "NBITS"),
        ({"tstart_shift": 5}, "gap"),
        ({"tstart_shift": -3}, "overlap"),
    ],
)
def test_mismatched_consecutive_files_name_the_file(tmp_path, rng, change, words):
    header = make_header(NCHAN, 4)
    data = random_samples(rng, (NCHAN, 40), 4)
    first = write_psrfits(tmp_path / "a.fits", header, data, nsblk=20)
    h2 = header.replace(tstart=header.tstart + 40 * header.tsamp / 86400.0)
    shift = change.pop("tstart_shift", 0)
    h2 = h2.replace(tstart=h2.tstart + shift * header.tsamp / 86400.0, **change)
    second = write_psrfits(tmp_path / "b.fits", h2, data[: h2.nchans], nsblk=20)
    with pytest.raises(ObservationError, match=words) as err:
        open_observation([first, second])
    assert err.value.path == str(second)


def test_non_finite_scales_name_the_samples(tmp_path, rng):
    data = random_samples(rng, (NCHAN, 40), 8)
    scales = np.ones((4, 1, NCHAN), dtype=np.float32)
    scales[2, 0, 5] = np.nan
    path = write_psrfits(tmp_path / "nan.fits", make_header(NCHAN, 8), data, nsblk=10,
                         scales=scales)  # fmt: skip
    with open_observation(path) as reader:
        reader.read_block(0, 20)  # rows 0-1 are fine
        with pytest.raises(ObservationError, match=r"row 2 \(samples 20\.\.29\)") as err:
            reader.read_all()
    assert err.value.path == str(path)


def test_spectra_are_views_within_a_row_and_gathered_across_rows(tmp_path, rng, monkeypatch):
    """8-bit samples stored as searched (FAST's PSRFITS) are read as the file lays them
    out, as the search's fast paths need: a view of the memory map within a SUBINT row,
    gathered across rows; not where the samples must be calibrated or unpacked first."""
    from drafts_ops.io import psrfits

    data = random_samples(rng, (NCHAN, 64), 8)
    path = write_psrfits(tmp_path / "id.fits", make_header(NCHAN, 8), data, nsblk=8)
    with open_observation(path) as reader:
        within = reader.read_spectra(9, 6)
        assert np.shares_memory(within, reader.files[0].rows)
        np.testing.assert_array_equal(within, data[:, 9:15].T)
        np.testing.assert_array_equal(reader.read_spectra(3, 50), data[:, 3:53].T)
        np.testing.assert_array_equal(reader.read_spectra(60, 10), data[:, 60:].T)  # clipped
        monkeypatch.setattr(psrfits, "SPECTRA_BUFFER_BYTES", 20 * NCHAN)
        assert reader.read_spectra(0, 21) is None  # longer than the buffer: read as blocks
    scaled = write_psrfits(tmp_path / "cal.fits", make_header(NCHAN, 8), data, nsblk=8,
                           scales=2.0)  # fmt: skip
    packed = write_psrfits(tmp_path / "4bit.fits", make_header(NCHAN, 4),
                           random_samples(rng, (NCHAN, 64), 4), nsblk=8)  # fmt: skip
    for other in (scaled, packed):
        with open_observation(other) as reader:
            assert reader.read_spectra(0, 8) is None


def test_release_drops_the_rows_before_a_sample(tmp_path, rng, monkeypatch):
    """A stream's read pages are dropped row by row (the pass of a FAST PSRFITS file
    otherwise held the whole file: 2.5 GB for 10 s against 1.3 GB as SIGPROC)."""
    from drafts_ops.io import psrfits

    data = random_samples(rng, (NCHAN, 64), 8)
    path = write_psrfits(tmp_path / "id.fits", make_header(NCHAN, 8), data, nsblk=8)
    dropped = []
    monkeypatch.setattr(psrfits, "advise_mapping", lambda a, advice, offset, length:
                        dropped.append((advice, offset, length)))  # fmt: skip
    with open_observation(path) as reader:
        rows = reader.files[0].rows
        reader.release(3 * 8 + 5)  # three whole rows before the sample
        lead = rows.offset % psrfits.mmap.ALLOCATIONGRANULARITY
        end = lead + 3 * rows.shape[1]
        assert dropped == [("MADV_DONTNEED", 0, end - end % psrfits.mmap.PAGESIZE)]
        np.testing.assert_array_equal(reader.read_block(0, 64, raw=True), data)


def test_a_psrfits_search_finds_what_the_same_samples_give_as_sigproc(tmp_path):
    """The search reads PSRFITS rows through the paths it reads SIGPROC spectra by: the
    same samples give the same candidates, in DM ranges at the file's resolution and
    averaged ones."""
    from drafts_ops.search import SearchConfig
    from drafts_ops.search.run import run_search
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

    bursts = (BurstSpec(t_s=2.0, dm=150.0, snr=25.0, width_s=2e-3),
              BurstSpec(t_s=5.0, dm=900.0, snr=25.0, width_s=4e-3))  # fmt: skip
    config = SimulationConfig(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, duration_s=8.192,
                              seed=2, bursts=bursts)  # fmt: skip
    fil = write_simulation(tmp_path / "burst.fil", config)
    with open_observation(fil) as reader:
        header, data = reader.header, reader.read_all(raw=True)
    fits = write_psrfits(tmp_path / "burst.fits", header, data, nsblk=256)
    search = SearchConfig(dm_max=1200.0, classify=False, write_h5=False, write_plots=False)
    found = {}
    for path in (fil, fits):
        result = run_search(path, tmp_path / path.suffix[1:], config=search)
        assert len(result.plan.ranges) >= 2
        found[path.suffix] = [(c.sample, c.dm, c.snr, c.width_samples) for c in result.candidates]
    assert found[".fits"] == found[".fil"]
    for burst in bursts:  # both found
        assert any(
            abs(dm - burst.dm) < 0.1 * burst.dm and snr > 10 for _, dm, snr, _ in found[".fil"]
        )
