"""Candidate files: ``candidates.csv``, Heimdall ``.cand``, FETCH ``.h5``. All writes atomic."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from drafts_ops.core.atomic import atomic_path, write_text_atomic
from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.detect.candidates import CSV_FIELDS, Candidate
from drafts_ops.io.header import Header

_OPTIONAL = ("detector_score", "classifier_prob", "subband")
_INT_FIELDS = (
    "width_samples", "dm_index", "sample", "members", "first_sample", "last_sample", "beam",
)  # fmt: skip
_FLOAT_FIELDS = ("tcand_s", "dm", "snr", "width_s")

#: Heimdall ``.cand`` columns, in order.
CAND_COLUMNS: tuple[str, ...] = (
    "snr", "sample", "time_s", "filter", "dm_index", "dm", "members", "first_sample", "last_sample",
)  # fmt: skip


def csv_columns(candidates: Sequence[Candidate]) -> list[str]:
    """Columns of ``candidates.csv``: every field, the score columns only when present."""
    present = {name for name in _OPTIONAL if any(getattr(c, name) is not None for c in candidates)}
    return [name for name in CSV_FIELDS if name not in _OPTIONAL or name in present]


def write_csv(candidates: Sequence[Candidate], path: str | Path) -> Path:
    """Write ``candidates.csv`` (one row per candidate, header row first)."""
    columns = csv_columns(candidates)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for cand in candidates:
        row = cand.to_dict()
        writer.writerow({k: "" if row[k] is None else _fmt(row[k]) for k in columns})
    return write_text_atomic(path, buf.getvalue())


def read_csv(path: str | Path) -> list[Candidate]:
    """Candidates from a ``candidates.csv`` written by :func:`write_csv`."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        out = []
        for row in rows:
            values: dict[str, object] = {k: int(row[k]) for k in _INT_FIELDS}
            values.update({k: float(row[k]) for k in _FLOAT_FIELDS})
            for k in _OPTIONAL:
                parse = int if k == "subband" else float
                values[k] = parse(row[k]) if row.get(k) else None
            flag = row.get("is_burst", "")
            values["is_burst"] = None if flag == "" else flag == "True"
            out.append(Candidate(file=row["file"], **values))
    except (OSError, KeyError, ValueError, TypeError) as err:
        raise ObservationError(path, f"not a drafts-ops candidates.csv: {err}") from None
    return out


def write_cand(candidates: Sequence[Candidate], path: str | Path) -> Path:
    """Write a Heimdall-style ``.cand`` file: tab-separated, no header, columns
    :data:`CAND_COLUMNS` (S/N, sample, time s, filter = log2 width, DM trial, DM, members,
    first and last sample)."""
    lines = [
        "\t".join(
            (
                f"{c.snr:.6g}",
                str(c.sample),
                f"{c.tcand_s:.9g}",
                str(c.filter_index),
                str(c.dm_index),
                f"{c.dm:.6g}",
                str(c.members),
                str(c.first_sample),
                str(c.last_sample),
            )
        )
        for c in candidates
    ]
    return write_text_atomic(path, "".join(line + "\n" for line in lines))


def fetch_name(candidate: Candidate, header: Header) -> str:
    """FETCH's candidate id: ``cand_tstart_<MJD>_tcand_<s>_dm_<DM>_snr_<S/N>``."""
    return (
        f"cand_tstart_{header.tstart:.12f}_tcand_{candidate.tcand_s:.7f}"
        f"_dm_{candidate.dm:.5f}_snr_{candidate.snr:.5f}"
    )


def products_by_arrival(folder: str | Path, suffix: str) -> dict[tuple[str, str], Path]:
    """A search's products named by :func:`fetch_name` (``.h5`` or ``.png`` in
    ``folder``), keyed by their arrival and DM as the names give them
    (:func:`arrival_key`)."""
    folder = Path(folder)
    found = {}
    for path in folder.glob(f"cand_*{suffix}") if folder.is_dir() else ():
        parts = path.name.removesuffix(suffix).split("_")
        try:
            found[(parts[parts.index("tcand") + 1], parts[parts.index("dm") + 1])] = path
        except (ValueError, IndexError):
            continue
    return found


def arrival_key(candidate: Candidate) -> tuple[str, str]:
    """A candidate's key among :func:`products_by_arrival`."""
    return f"{candidate.tcand_s:.7f}", f"{candidate.dm:.5f}"


def write_fetch_h5(
    candidate: Candidate,
    header: Header,
    freq_time: np.ndarray,
    dm_time: np.ndarray,
    path: str | Path,
) -> Path:
    """Write a FETCH candidate file with the layout of ``your``'s ``Candidate.save_h5``.

    ``freq_time`` is ``[time, frequency]`` and ``dm_time`` ``[dm, time]`` (see
    :mod:`drafts_ops.detect.cutouts`), stored as float32. Attributes: FETCH's candidate
    keys plus the header; ``width`` is the boxcar width in samples; flags that ``your``
    stores as strings (``barycentric``, ``pulsarcentric``, ``ibeam``, ``nbeams``) are
    strings here too.
    """
    ft = np.asarray(freq_time, dtype=np.float32)
    dt = np.asarray(dm_time, dtype=np.float32)
    if ft.ndim != 2 or dt.ndim != 2:
        raise ParameterError(f"FETCH images must be 2-D, got {ft.shape} and {dt.shape}")
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for key, value in _fetch_attrs(candidate, header).items():
            f.attrs[key] = value
        for name, data, labels in (
            ("data_freq_time", ft, ("time", "frequency")),
            ("data_dm_time", dt, ("dm", "time")),
        ):
            chunks = (min(32, data.shape[0]), min(64, data.shape[1]))
            dset = f.create_dataset(name, data=data, chunks=chunks, compression="lzf")
            for axis, label in enumerate(labels):
                dset.dims[axis].label = label
    return Path(path)


def _fetch_attrs(c: Candidate, h: Header) -> dict[str, object]:
    i64, f64 = np.int64, np.float64
    return {
        "az_start": f64(h.az_start),
        "barycentric": str(h.barycentric),
        "cand_id": fetch_name(c, h),
        "data_type": i64(h.data_type),
        "dm": f64(c.dm),
        "dm_opt": i64(-1),
        "fch1": f64(h.fch1),
        "foff": f64(h.foff),
        "ibeam": str(h.ibeam),
        "label": i64(-1),
        "machine_id": i64(h.machine_id),
        "nbeams": str(h.nbeams),
        "nbits": i64(h.nbits),
        "nchans": i64(h.nchans),
        "nifs": i64(h.nifs),
        "pulsarcentric": str(h.pulsarcentric),
        "rawdatafile": h.rawdatafile or Path(c.file).name,
        "snr": f64(c.snr),
        "snr_opt": i64(-1),
        "source_name": h.source_name,
        "src_dej": f64(h.src_dej),
        "src_raj": f64(h.src_raj),
        "tcand": f64(c.tcand_s),
        "telescope_id": i64(h.telescope_id),
        "tsamp": f64(h.tsamp),
        "tstart": f64(h.tstart),
        "width": i64(c.width_samples),
        "za_start": f64(h.za_start),
    }


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)
