"""PSRFITS search-mode writing (for tests, benchmarks and conversions): one file of
``SUBINT`` rows, atomically. Reading is :mod:`drafts_ops.io.psrfits`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import ParameterError
from drafts_ops.io import bits
from drafts_ops.io.header import TELESCOPE_NAMES, Header, mjd_to_iso, string_from_packed
from drafts_ops.io.psrfits import DEFAULT_POL_TYPES, PSRFITS_NBITS


def _default_nsblk(nsamp: int, limit: int = 4096) -> int:
    """The largest divisor of ``nsamp`` that is at most ``limit``."""
    for nsblk in range(min(nsamp, limit), 0, -1):
        if nsamp % nsblk == 0:
            return nsblk
    return 1


def _per_row(values: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        return np.broadcast_to(np.asarray(values, dtype=np.float32), shape)
    except ValueError:
        raise ParameterError(f"{name} of shape {np.shape(values)} does not fit {shape}") from None


def write_psrfits(
    path: str | Path,
    header: Header,
    data: np.ndarray,
    *,
    nsblk: int | None = None,
    npol: int | None = None,
    pol_type: str | None = None,
    scales: Any = 1.0,
    offsets: Any = 0.0,
    weights: Any = 1.0,
    zero_off: float = 0.0,
    nsuboffs: int = 0,
) -> Path:
    """Write a PSRFITS search-mode file atomically (for tests and conversions).

    Parameters
    ----------
    path
        Output file.
    header
        Observation header; ``nbits`` must be 1, 2, 4 or 8; ``tstart`` (MJD) is the time of
        the first sample in this file.
    data
        Raw integer samples, ``[nchans, nsamp]`` (one polarisation) or
        ``[npol, nchans, nsamp]``; rounded and clipped to ``nbits``. ``nsamp`` must be a
        multiple of ``nsblk``.
    nsblk
        Spectra per SUBINT row (default: the largest divisor of ``nsamp`` up to 4096).
    npol, pol_type
        Polarisations (1, 2 or 4; default ``header.nifs``) and their ``POL_TYPE``.
    scales, offsets
        ``DAT_SCL`` and ``DAT_OFFS``, broadcast to ``[nrows, npol, nchans]``.
    weights
        ``DAT_WTS``, broadcast to ``[nrows, nchans]``.
    zero_off
        ``ZERO_OFF``, subtracted from raw samples before scaling.
    nsuboffs
        ``NSUBOFFS``: rows written before this file; the start time stored in the primary
        header is ``tstart`` minus ``nsuboffs * nsblk * tsamp``, as in FAST's files.
    """
    path = Path(path)
    npol = header.nifs if npol is None else npol
    data = np.asarray(data)
    if data.ndim == 2:
        data = data[None]
    if header.nbits not in PSRFITS_NBITS or npol not in (1, 2, 4):
        raise ParameterError(f"{path}: PSRFITS needs nbits in {PSRFITS_NBITS}, npol 1, 2 or 4")
    if data.shape[:2] != (npol, header.nchans):
        raise ParameterError(f"{path}: data {data.shape} is not [npol={npol}, nchans, nsamp]")
    nsamp = data.shape[2]
    nsblk = _default_nsblk(nsamp) if nsblk is None else nsblk
    if nsamp == 0 or nsblk <= 0 or nsamp % nsblk or (npol * header.nchans * header.nbits) % 8:
        raise ParameterError(
            f"{path}: {nsamp} samples do not fill whole rows of {nsblk}, "
            "or a spectrum is not whole bytes"
        )
    nrows = nsamp // nsblk
    spectra = bits.quantise(data.transpose(2, 0, 1), header.nbits)  # [nsamp, npol, nchan]
    packed = bits.pack(spectra.reshape(-1), header.nbits, "big").reshape(nrows, -1)
    table = _subint_hdu(
        header,
        packed,
        nsblk=nsblk,
        npol=npol,
        pol_type=pol_type or DEFAULT_POL_TYPES[npol],
        scales=_per_row(scales, (nrows, npol, header.nchans), "scales").reshape(nrows, -1),
        offsets=_per_row(offsets, (nrows, npol, header.nchans), "offsets").reshape(nrows, -1),
        weights=_per_row(weights, (nrows, header.nchans), "weights"),
        zero_off=zero_off,
        nsuboffs=nsuboffs,
    )
    from astropy.io import fits

    primary = fits.PrimaryHDU(header=_primary_header(header, nsuboffs * nsblk * header.tsamp))
    with atomic_path(path) as tmp:
        fits.HDUList([primary, table]).writeto(tmp, overwrite=True)
    return path


def _primary_header(header: Header, earlier_s: float) -> Any:
    from astropy.io import fits

    imjd = math.floor(header.tstart)
    seconds = (header.tstart - imjd) * 86400.0 - earlier_s
    while seconds < 0:
        imjd, seconds = imjd - 1, seconds + 86400.0
    smjd = math.floor(seconds)
    cards = fits.Header()
    cards["HDRVER"] = "6.1"
    cards["FITSTYPE"] = "PSRFITS"
    cards["DATE-OBS"] = mjd_to_iso(imjd + seconds / 86400.0)[:19]
    cards["TELESCOP"] = TELESCOPE_NAMES.get(header.telescope_id, "")
    cards["OBS_MODE"] = "SEARCH"
    cards["OBSFREQ"] = (header.fcenter, "[MHz] centre frequency")
    cards["OBSBW"] = (header.foff * header.nchans, "[MHz] bandwidth")
    cards["OBSNCHAN"] = header.nchans
    cards["SRC_NAME"] = header.source_name
    cards["RA"] = string_from_packed(header.src_raj)
    cards["DEC"] = string_from_packed(header.src_dej)
    cards["STT_IMJD"] = imjd
    cards["STT_SMJD"] = smjd
    cards["STT_OFFS"] = seconds - smjd
    return cards


def _subint_hdu(header: Header, packed: np.ndarray, **kw: Any) -> Any:
    from astropy.io import fits

    nrows, nchan = packed.shape[0], header.nchans
    row_s = kw["nsblk"] * header.tsamp
    freqs = np.tile(header.chan_freqs, (nrows, 1))
    data_dim = f"({nchan},{kw['npol']},{kw['nsblk']})" if header.nbits == 8 else None
    columns = [
        fits.Column("TSUBINT", "1D", unit="s", array=np.full(nrows, row_s)),
        fits.Column("OFFS_SUB", "1D", unit="s", array=(np.arange(nrows) + 0.5) * row_s),
        fits.Column("TEL_AZ", "1E", unit="deg", array=np.full(nrows, header.az_start)),
        fits.Column("TEL_ZEN", "1E", unit="deg", array=np.full(nrows, header.za_start)),
        fits.Column("DAT_FREQ", f"{nchan}D", unit="MHz", array=freqs),
        fits.Column("DAT_WTS", f"{nchan}E", array=kw["weights"]),
        fits.Column("DAT_OFFS", f"{kw['scales'].shape[1]}E", array=kw["offsets"]),
        fits.Column("DAT_SCL", f"{kw['scales'].shape[1]}E", array=kw["scales"]),
        fits.Column("DATA", f"{packed.shape[1]}B", dim=data_dim, array=packed),
    ]
    table = fits.BinTableHDU.from_columns(columns, name="SUBINT")
    for key, value in (
        ("INT_TYPE", "TIME"),
        ("NPOL", kw["npol"]),
        ("POL_TYPE", kw["pol_type"]),
        ("TBIN", header.tsamp),
        ("NBIN", 1),
        ("NBITS", header.nbits),
        ("ZERO_OFF", kw["zero_off"]),
        ("NSUBOFFS", kw["nsuboffs"]),
        ("NCHAN", nchan),
        ("CHAN_BW", header.foff),
        ("NCHNOFFS", 0),
        ("NSBLK", kw["nsblk"]),
    ):
        table.header[key] = value
    return table
