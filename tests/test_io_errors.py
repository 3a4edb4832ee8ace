"""Bad input: every case is one clear ObservationError naming the file; fuzzing lets nothing
but DraftsError escape."""

from __future__ import annotations

import functools
import struct
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from astropy.io import fits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafts_ops.core.errors import DraftsError, ObservationError
from drafts_ops.io import open_observation
from drafts_ops.io.fbh5 import write_fbh5
from drafts_ops.io.psrfits_writer import write_psrfits
from drafts_ops.io.sigproc import write_sigproc
from tests._io_util import (
    make_header,
    random_samples,
    sigproc_bytes,
    valid_fields,
    write_bytes,
)

SPECTRUM = bytes(range(8))  # one 8-channel, 8-bit spectrum of valid_fields()


def _fails(path, *words: str) -> ObservationError:
    """Open and read ``path``; assert one ObservationError naming it and ``words``."""
    with pytest.raises(ObservationError) as err, open_observation(path) as reader:
        reader.read_all()
    message = str(err.value)
    assert str(path) in message
    for word in words:
        assert word in message, message
    return err.value


def test_valid_handmade_file_reads(tmp_path):
    path = write_bytes(tmp_path / "ok.fil", sigproc_bytes(valid_fields(), SPECTRUM * 3))
    with open_observation(path) as reader:
        assert reader.header.nsamples == 3
        np.testing.assert_array_equal(reader.read_all()[:, 1], np.arange(8))


def test_truncated_data(tmp_path):
    path = write_bytes(tmp_path / "cut.fil", sigproc_bytes(valid_fields(), SPECTRUM * 3 + b"\1\2"))
    _fails(path, "truncated", "2 bytes left over")


def test_header_without_data(tmp_path):
    _fails(write_bytes(tmp_path / "hdr.fil", sigproc_bytes(valid_fields())), "no data")


@pytest.mark.parametrize("missing", ["nbits", "nchans", "tsamp", "fch1", "foff"])
def test_missing_keyword(tmp_path, missing):
    path = write_bytes(
        tmp_path / "miss.fil", sigproc_bytes(valid_fields(**{missing: None}), SPECTRUM)
    )
    _fails(path, "lacks", missing)


def test_unknown_keyword(tmp_path):
    fields = [*valid_fields(), ("garbage_key", "i", 3)]
    _fails(write_bytes(tmp_path / "unk.fil", sigproc_bytes(fields, SPECTRUM)), "garbage_key")


def test_garbage_keyword_length(tmp_path):
    good = sigproc_bytes(valid_fields(), SPECTRUM)
    at = good.index(b"nbits") - 4
    bad = good[:at] + struct.pack("<i", 123456) + good[at + 4 :]
    _fails(write_bytes(tmp_path / "len.fil", bad), "corrupt SIGPROC header")


def test_header_without_end(tmp_path):
    good = sigproc_bytes(valid_fields())
    _fails(write_bytes(tmp_path / "noend.fil", good[: good.index(b"HEADER_END") - 4]), "ends")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"nbits": 3}, ["nbits = 3", "not supported"]),
        ({"nbits": 64}, ["nbits = 64"]),
        ({"nchans": 0}, ["nchans = 0"]),
        ({"nchans": -4}, ["nchans = -4"]),
        ({"tsamp": 0.0}, ["tsamp = 0.0"]),
        ({"tsamp": -0.001}, ["tsamp", "positive"]),
        ({"tsamp": float("nan")}, ["tsamp", "finite"]),
        ({"foff": 0.0}, ["foff = 0"]),
        ({"fch1": -10.0}, ["fch1"]),
        ({"tstart": float("inf")}, ["tstart"]),
    ],
)
def test_bad_header_values(tmp_path, change, words):
    path = write_bytes(tmp_path / "bad.fil", sigproc_bytes(valid_fields(**change), SPECTRUM))
    _fails(path, *words)


def test_missing_file(tmp_path):
    _fails(tmp_path / "absent.fil", "no such file")


def test_empty_file(tmp_path):
    _fails(write_bytes(tmp_path / "empty.fil", b""), "empty file")


def test_directory(tmp_path):
    folder = tmp_path / "obs.fil"
    folder.mkdir()
    _fails(folder, "directory")


def test_unknown_content(tmp_path):
    _fails(write_bytes(tmp_path / "text.fil", b"hello world, not data"), "suffix says sigproc")


def test_fits_without_subint(tmp_path):
    path = tmp_path / "image.fits"
    fits.PrimaryHDU(np.zeros((4, 4))).writeto(path)
    _fails(path, "no SUBINT table")


def test_truncated_psrfits(tmp_path, rng):
    path = write_psrfits(
        tmp_path / "t.fits", make_header(16, 8), random_samples(rng, (16, 64), 8), nsblk=16
    )
    path.write_bytes(path.read_bytes()[:-3000])
    _fails(path, "truncated")


def test_psrfits_unsupported_nbits(tmp_path, rng):
    path = write_psrfits(
        tmp_path / "n.fits", make_header(16, 8), random_samples(rng, (16, 16), 8), nsblk=16
    )
    with fits.open(path, mode="update") as hdul:
        hdul["SUBINT"].header["NBITS"] = 16
    _fails(path, "NBITS = 16")


def test_mismatched_psrfits_files(tmp_path, rng):
    header = make_header(16, 8)
    data = random_samples(rng, (16, 32), 8)
    a = write_psrfits(tmp_path / "a.fits", header, data)
    b = write_psrfits(tmp_path / "b.fits", header.replace(tstart=header.tstart + 1.0), data)
    err = _fails_many([a, b])
    assert err.path == str(b)
    assert "not contiguous" in str(err)


def _fails_many(paths) -> ObservationError:
    with pytest.raises(ObservationError) as err:
        open_observation(paths)
    return err.value


def test_consecutive_sigproc_files_read_as_one(tmp_path, rng):
    header = make_header(16, 8)
    data = random_samples(rng, (16, 90), 8)
    a = write_sigproc(tmp_path / "a.fil", header.replace(nsamples=50), data[:, :50])
    later = header.tstart + 50 * header.tsamp / 86400.0
    b = write_sigproc(tmp_path / "b.fil", header.replace(tstart=later), data[:, 50:])
    with open_observation([a, b]) as reader:
        assert reader.header.nsamples == 90
        np.testing.assert_array_equal(reader.read_block(40, 20, raw=True), data[:, 40:60])
        assert reader.read_spectra(45, 10) is None  # across the boundary: no view
        np.testing.assert_array_equal(reader.read_spectra(52, 10).T, data[:, 52:62])
    assert "does not continue a.fil" in str(_fails_many([a, a]))  # b overlaps a
    shifted = write_sigproc(tmp_path / "c.fil", header.replace(tstart=later + 1.0), data[:, 50:])
    err = _fails_many([a, shifted])
    assert err.path == str(shifted) and "gap" in str(err)


@pytest.mark.parametrize("writer", [write_sigproc, write_fbh5], ids=["sigproc", "fbh5"])
def test_nan_in_float_data(tmp_path, rng, writer):
    data = random_samples(rng, (16, 40), 32)
    data[3, 21] = np.nan
    data[9, 25] = np.inf
    path = writer(tmp_path / f"nan.{writer.__name__}", make_header(16, 32), data)
    with open_observation(path) as reader:
        np.testing.assert_array_equal(reader.read_block(0, 20), data[:, :20])  # clean part
        with pytest.raises(ObservationError, match=r"samples 21\.\.25") as err:
            reader.read_all()
    assert err.value.path == str(path)


def test_float_spectra_are_views_and_the_search_checks_them(tmp_path, rng):
    """32-bit SIGPROC samples come as views of the file (the searches read them without a
    copy, whatever the header's length), and the search's reads of them still refuse NaN
    and inf, naming the samples, averaged or transposed."""
    from drafts_ops.search import SearchConfig, plan_search
    from drafts_ops.search.samples import read_averaged, read_searched

    data = random_samples(rng, (16, 4000), 32)
    data[5, 3001] = np.nan
    path = write_sigproc(tmp_path / "f32.fil", make_header(16, 32, source_name="odd"), data)
    with open_observation(path) as reader:  # samples from a byte that floats do not align on
        assert reader.data_offset % 4 == 1
    plan = plan_search(path, SearchConfig(dm_max=50.0))
    with open_observation(path) as reader:
        view = reader.read_spectra(100, 50)
        assert view.dtype == np.float32 and not view.flags.owndata
        np.testing.assert_array_equal(view.T, data[:, 100:150])
        pairs = data[:, :2000].reshape(16, 1000, 2).mean(axis=2)
        np.testing.assert_allclose(read_averaged(reader, plan, 0, 1000, 2), pairs, rtol=1e-6)
        out = np.empty((16, 1000), np.float32)
        for read in (lambda: read_averaged(reader, plan, 1000, 2000, 2),
                     lambda: read_searched(reader, plan, 2500, 3500, out=out)):  # fmt: skip
            with pytest.raises(ObservationError, match=r"samples 3001\.\.3001"):
                read()


def test_fetch_candidate_file_is_not_an_observation(real_data):
    _fails(real_data / "test.h5", "no 'data' dataset", "FETCH")


def test_fbh5_shape_attribute_mismatch(tmp_path):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as h5:
        ds = h5.create_dataset("data", data=np.zeros((10, 1, 8), dtype=np.uint8))
        ds.attrs.update({"fch1": 1400.0, "foff": -1.0, "tsamp": 0.001, "nchans": 16})
    _fails(path, "nchans = 16", "hold 8")


# -- property-based: nothing but DraftsError escapes --------------------------------------
_VALID = sigproc_bytes(valid_fields(), SPECTRUM * 4)


def _read_everything(path) -> None:
    try:
        with open_observation(path) as reader:
            reader.read_all()
            for _ in reader.iter_blocks(3, 1):
                pass
    except DraftsError:
        pass


mutation = st.tuples(
    st.sampled_from(["flip", "delete", "insert", "truncate", "overwrite"]),
    st.integers(0, len(_VALID) - 1),
    st.integers(0, 255),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_sigproc_header_only_raises_drafts_errors(tmp_path_factory, mutations):
    content = bytearray(_VALID)
    for kind, position, value in mutations:
        if not content:
            break
        where = position % len(content)
        if kind == "flip":
            content[where] ^= 1 << (value % 8)
        elif kind == "delete":
            del content[where]
        elif kind == "insert":
            content.insert(where, value)
        elif kind == "truncate":
            del content[where:]
        else:
            content[where : where + 8] = struct.pack("<d", (value - 128) * 1e3)[: len(content)]
    path = tmp_path_factory.mktemp("fuzz") / "m.fil"
    path.write_bytes(bytes(content))
    _read_everything(path)


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.sampled_from(
        [b"", b"\x0c\x00\x00\x00HEADER_START", b"SIMPLE  =", b"\x89HDF\r\n\x1a\n"]
    ),
    body=st.binary(max_size=400),
)
def test_random_bytes_only_raise_drafts_errors(tmp_path_factory, prefix, body):
    path = tmp_path_factory.mktemp("rand") / "r.dat"
    path.write_bytes(prefix + body)
    _read_everything(path)


@functools.cache
def _valid_fits_bytes() -> bytes:
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "v.fits"
        write_psrfits(path, make_header(8, 4), random_samples(rng, (8, 32), 4), nsblk=8)
        return path.read_bytes()


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_mutated_psrfits_only_raises_drafts_errors(tmp_path_factory, data):
    content = bytearray(_valid_fits_bytes())
    header_end = 2880 * 4  # primary and SUBINT headers
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(0, header_end - 1))
        content[where] = data.draw(st.sampled_from(b"0123456789 -+.ETF'=XAZ\x00\xff"))
    if data.draw(st.booleans()):
        del content[data.draw(st.integers(0, len(content) - 1)) :]
    path = tmp_path_factory.mktemp("fz") / "m.fits"
    path.write_bytes(bytes(content))
    _read_everything(path)
