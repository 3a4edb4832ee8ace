"""The truth table written beside a simulated observation (``OUT.truth.csv``).

One row per injected signal. ``kind`` is ``burst`` for astrophysical bursts and
``rfi_persistent``, ``rfi_impulsive`` or ``rfi_drifting`` for interference; a search is
scored against the ``burst`` rows. Cells that do not apply to a kind are empty.

Columns (units): ``kind``; ``tcand_s`` (s, arrival at the top of the band, from the centre
of the first sample; RFI: start or peak time); ``dm`` (pc cm^-3); ``width_s`` (s, intrinsic
FWHM; drifting RFI: duration); ``snr`` (target matched-filter S/N, see
:mod:`drafts_ops.simulate.burst`); ``scattering_s`` (s, at the top of the band);
``spectral_index``; ``band_centre_mhz``, ``band_fwhm_mhz`` (MHz, band-limited bursts);
``boxcar_width_s`` (s, width of the best boxcar); ``peak_sigma`` (largest value of the
signal, noise rms units); ``freq_lo_mhz``, ``freq_hi_mhz`` (MHz, band covered by RFI);
``duration_s`` (s, RFI); ``strength_sigma`` (RFI peak strength, noise rms units).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import ObservationError

TRUTH_COLUMNS: tuple[str, ...] = (
    "kind",
    "tcand_s",
    "dm",
    "width_s",
    "snr",
    "scattering_s",
    "spectral_index",
    "band_centre_mhz",
    "band_fwhm_mhz",
    "boxcar_width_s",
    "peak_sigma",
    "freq_lo_mhz",
    "freq_hi_mhz",
    "duration_s",
    "strength_sigma",
)


def truth_path(observation: str | Path) -> Path:
    """``dir/name.fil`` → ``dir/name.truth.csv``."""
    path = Path(observation)
    return path.with_name(path.stem + ".truth.csv")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.12g}"
    return str(value)


def format_truth(rows: list[dict[str, object]]) -> str:
    """CSV text with the header :data:`TRUTH_COLUMNS`; unknown keys are an error."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRUTH_COLUMNS)
    for row in rows:
        unknown = set(row) - set(TRUTH_COLUMNS)
        if unknown:
            raise KeyError(f"truth row has unknown columns {sorted(unknown)}")
        writer.writerow([_cell(row.get(name)) for name in TRUTH_COLUMNS])
    return out.getvalue()


def write_truth(path: str | Path, rows: list[dict[str, object]]) -> Path:
    """Write the truth table atomically."""
    return write_text_atomic(path, format_truth(rows))


def read_truth(path: str | Path) -> list[dict[str, object]]:
    """Rows of a truth table: ``kind`` as str, other cells as float (None when empty)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ObservationError(path, f"cannot read truth table: {err.strerror}") from None
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "kind" not in reader.fieldnames:
        raise ObservationError(path, "not a truth table (no 'kind' column)")
    rows = []
    for row in reader:
        try:
            rows.append(
                {k: (v if k == "kind" else (float(v) if v else None)) for k, v in row.items()}
            )
        except ValueError as err:
            raise ObservationError(path, f"bad truth value: {err}") from None
    return rows
