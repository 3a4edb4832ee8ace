"""The observation header: one frozen record for every file format.

Field names follow SIGPROC, the lingua franca of single-pulse searching; the PSRFITS and
HDF5 readers translate into it. :data:`HEADER_KEYWORDS` is the one table of keyword names,
types and units, shared by the readers, the writers and ``drafts info``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Literal

import numpy as np

from drafts_ops.core.errors import ObservationError

#: Sample sizes the readers can unpack (bits per sample).
SUPPORTED_NBITS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)

#: SIGPROC telescope identifiers (sigproc ``aliases.c``, extended as in sigpyproc / your).
TELESCOPE_NAMES: dict[int, str] = {
    0: "Fake",
    1: "Arecibo",
    2: "Ooty",
    3: "Nancay",
    4: "Parkes",
    5: "Jodrell",
    6: "GBT",
    7: "GMRT",
    8: "Effelsberg",
    9: "ATA",
    10: "SRT",
    11: "LOFAR",
    12: "VLA",
    20: "CHIME",
    21: "FAST",
    64: "MeerKAT",
    65: "KAT-7",
}


@dataclass(frozen=True)
class Keyword:
    """One header keyword: its SIGPROC name, Python type, unit and meaning."""

    name: str
    kind: Literal["int", "double", "string"]
    unit: str
    description: str


#: Every header field that a file format can carry, in SIGPROC keyword order.
HEADER_KEYWORDS: tuple[Keyword, ...] = (
    Keyword("source_name", "string", "", "source name"),
    Keyword("rawdatafile", "string", "", "name of the original raw data file"),
    Keyword("telescope_id", "int", "", "SIGPROC telescope identifier"),
    Keyword("machine_id", "int", "", "SIGPROC backend identifier"),
    Keyword("data_type", "int", "", "1 = filterbank, 2 = time series"),
    Keyword("barycentric", "int", "", "1 if barycentred"),
    Keyword("pulsarcentric", "int", "", "1 if pulsar-centred"),
    Keyword("az_start", "double", "deg", "telescope azimuth at start"),
    Keyword("za_start", "double", "deg", "telescope zenith angle at start"),
    Keyword("src_raj", "double", "hhmmss.s", "right ascension (J2000), SIGPROC packed form"),
    Keyword("src_dej", "double", "ddmmss.s", "declination (J2000), SIGPROC packed form"),
    Keyword("tstart", "double", "MJD", "time of the first sample (topocentric MJD)"),
    Keyword("tsamp", "double", "s", "sampling interval"),
    Keyword("nbits", "int", "bit", "bits per sample"),
    Keyword("fch1", "double", "MHz", "centre frequency of the first channel in the file"),
    Keyword("foff", "double", "MHz", "channel spacing; negative when frequency descends"),
    Keyword("nchans", "int", "", "number of frequency channels"),
    Keyword("nifs", "int", "", "number of polarisations / IFs stored"),
    Keyword("ibeam", "int", "", "beam number"),
    Keyword("nbeams", "int", "", "number of beams"),
    Keyword("refdm", "double", "pc cm^-3", "reference DM of a dedispersed series"),
    Keyword("period", "double", "s", "folding period"),
)

KEYWORDS_BY_NAME: dict[str, Keyword] = {kw.name: kw for kw in HEADER_KEYWORDS}


@dataclass(frozen=True, kw_only=True)
class Header:
    """Metadata of one observation (total-intensity filterbank).

    Attributes
    ----------
    nchans : int
        Number of frequency channels.
    fch1 : float
        Centre frequency of the first channel in the data, MHz.
    foff : float
        Channel spacing, MHz; negative when channels run from high to low frequency.
    tsamp : float
        Sampling interval, seconds.
    nbits : int
        Bits per sample in the file (1, 2, 4, 8, 16 or 32; 32 means float32).
    nsamples : int
        Number of time samples (spectra) in the observation.
    nifs : int
        Polarisations / IFs stored in the file; readers deliver total intensity.
    tstart : float
        Time of the first sample, MJD (topocentric).
    source_name, rawdatafile : str
        Free text.
    src_raj, src_dej : float
        Pointing in SIGPROC packed form (hhmmss.s, ddmmss.s), J2000.
    telescope_id, machine_id : int
        SIGPROC identifiers; ``telescope`` gives the name.
    az_start, za_start : float
        Azimuth and zenith angle at the start, degrees.
    data_type, barycentric, pulsarcentric, ibeam, nbeams : int
        SIGPROC flags and beam numbering.
    refdm : float
        Reference DM (pc cm^-3), for dedispersed series only.
    period : float
        Folding period (s), for folded data only.
    """

    nchans: int
    fch1: float
    foff: float
    tsamp: float
    nbits: int
    nsamples: int
    nifs: int = 1
    tstart: float = 0.0
    source_name: str = ""
    rawdatafile: str = ""
    src_raj: float = 0.0
    src_dej: float = 0.0
    telescope_id: int = 0
    machine_id: int = 0
    az_start: float = 0.0
    za_start: float = 0.0
    data_type: int = 1
    barycentric: int = 0
    pulsarcentric: int = 0
    ibeam: int = 0
    nbeams: int = 1
    refdm: float = 0.0
    period: float = 0.0

    def __post_init__(self) -> None:
        _coerce_types(self)
        problems = _header_problems(self)
        if problems:
            raise ObservationError(None, "bad header: " + "; ".join(problems))

    # -- construction -------------------------------------------------------------------
    def replace(self, **changes: Any) -> Header:
        """Return a copy with ``changes`` applied; unknown field names are an error."""
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise TypeError(f"Header has no field(s) {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Header:
        """Build from a mapping, ignoring keys that are not header fields (e.g. HDF5 extras)."""
        names = set(cls.field_names())
        return cls(**{k: v for k, v in values.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # -- derived values -----------------------------------------------------------------
    @cached_property
    def chan_freqs(self) -> np.ndarray:
        """Centre frequency of each channel in file order, MHz (float64)."""
        return self.fch1 + self.foff * np.arange(self.nchans, dtype=np.float64)

    @property
    def descending(self) -> bool:
        """True when channel 0 is the highest frequency (SIGPROC's usual order)."""
        return self.foff < 0

    @property
    def fmax(self) -> float:
        """Highest channel centre frequency, MHz (the dedispersion reference)."""
        return float(max(self.fch1, self.fch1 + self.foff * (self.nchans - 1)))

    @property
    def fmin(self) -> float:
        """Lowest channel centre frequency, MHz."""
        return float(min(self.fch1, self.fch1 + self.foff * (self.nchans - 1)))

    @property
    def fcenter(self) -> float:
        """Centre of the band, MHz."""
        return 0.5 * (self.fmax + self.fmin)

    @property
    def bandwidth(self) -> float:
        """Total bandwidth, MHz (positive)."""
        return abs(self.foff) * self.nchans

    @property
    def tobs(self) -> float:
        """Observation length, seconds."""
        return self.nsamples * self.tsamp

    @property
    def telescope(self) -> str:
        """Telescope name from ``telescope_id``."""
        return TELESCOPE_NAMES.get(self.telescope_id, f"unknown ({self.telescope_id})")

    @property
    def ra_deg(self) -> float:
        """Right ascension, degrees, from the packed ``src_raj``."""
        return 15.0 * _unpack_sexagesimal(self.src_raj)

    @property
    def dec_deg(self) -> float:
        """Declination, degrees, from the packed ``src_dej``."""
        return _unpack_sexagesimal(self.src_dej)

    @property
    def bytes_per_spectrum(self) -> int:
        """Bytes occupied by one time sample of all channels and IFs in a packed file."""
        return self.nchans * self.nifs * self.nbits // 8

    def summary(self) -> dict[str, Any]:
        """Header fields plus derived values, for display (``drafts info``)."""
        out = self.to_dict()
        out.update(
            telescope=self.telescope,
            tobs_s=self.tobs,
            fmax_mhz=self.fmax,
            fmin_mhz=self.fmin,
            bandwidth_mhz=self.bandwidth,
            ra_deg=self.ra_deg,
            dec_deg=self.dec_deg,
            tstart_utc=mjd_to_iso(self.tstart),
        )
        return out


def mjd_to_iso(mjd: float) -> str:
    """MJD → ISO 8601 UTC string (microsecond resolution, leap seconds ignored)."""
    try:
        when = _MJD_EPOCH + timedelta(days=float(mjd))
    except (OverflowError, ValueError):
        return "out of range"
    return when.isoformat(timespec="microseconds")


_MJD_EPOCH = datetime(1858, 11, 17)
_FIELD_KINDS: dict[str, type] = {}


def _coerce_types(h: Header) -> None:
    """Turn numpy scalars and bytes (from FITS/HDF5) into plain int/float/str in place.

    Values that cannot be converted are left alone for :func:`_header_problems` to name.
    """
    if not _FIELD_KINDS:
        _FIELD_KINDS.update({f.name: f.type for f in dataclasses.fields(Header)})
    for name, kind in _FIELD_KINDS.items():
        value = getattr(h, name)
        new = value
        if kind in ("int", int) and isinstance(value, (np.integer, np.bool_)):
            new = int(value)
        elif kind in ("int", int) and isinstance(value, (float, np.floating)):
            new = int(value) if math.isfinite(value) and float(value).is_integer() else value
        elif kind in ("float", float) and isinstance(value, (int, np.integer, np.floating)):
            new = float(value)
        elif kind in ("str", str) and isinstance(value, (bytes, np.bytes_)):
            new = bytes(value).decode("latin-1").rstrip("\x00 ")
        elif kind in ("str", str) and isinstance(value, np.str_):
            new = str(value)
        if new is not value:
            object.__setattr__(h, name, new)


def _type_problems(h: Header) -> list[str]:
    """Fields whose value is not of the field's type (after :func:`_coerce_types`)."""
    problems = []
    for name, kind in _FIELD_KINDS.items():
        value = getattr(h, name)
        if kind in ("int", int) and (not isinstance(value, int) or isinstance(value, bool)):
            problems.append(f"{name} = {value!r} is not an integer")
        elif kind in ("float", float) and not isinstance(value, float):
            problems.append(f"{name} = {value!r} is not a number")
        elif kind in ("str", str) and not isinstance(value, str):
            problems.append(f"{name} = {value!r} is not text")
    return problems


def _header_problems(h: Header) -> list[str]:
    """Every inconsistency in a header, as readable phrases."""
    problems: list[str] = []

    def finite(name: str) -> bool:
        value = getattr(h, name)
        ok = isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
        if not ok:
            problems.append(f"{name} = {value!r} is not a finite number")
        return ok

    problems.extend(_type_problems(h))
    if problems:
        return problems
    if h.nchans <= 0:
        problems.append(f"nchans = {h.nchans} must be positive")
    if h.nbits not in SUPPORTED_NBITS:
        problems.append(f"nbits = {h.nbits} is not supported (use one of {SUPPORTED_NBITS})")
    if h.nsamples < 0:
        problems.append(f"nsamples = {h.nsamples} is negative")
    if h.nifs <= 0:
        problems.append(f"nifs = {h.nifs} must be positive")
    if finite("tsamp") and h.tsamp <= 0:
        problems.append(f"tsamp = {h.tsamp} s must be positive")
    if finite("foff") and h.foff == 0:
        problems.append("foff = 0 MHz: channels must have a width")
    if finite("fch1") and h.fch1 <= 0:
        problems.append(f"fch1 = {h.fch1} MHz must be positive")
    if not problems and h.fmin <= 0:
        problems.append(f"the band reaches {h.fmin:.3f} MHz: frequencies must stay positive")
    finite("tstart")
    return problems


def _unpack_sexagesimal(value: float) -> float:
    """SIGPROC packed ``[-]ddmmss.s`` → decimal (hours or degrees)."""
    sign = -1.0 if value < 0 else 1.0
    value = abs(value)
    dd = int(value // 10000)
    mm = int((value - dd * 10000) // 100)
    ss = value - dd * 10000 - mm * 100
    return sign * (dd + mm / 60.0 + ss / 3600.0)


def packed_from_string(text: str) -> float:
    """``"[-]dd:mm:ss.s"`` (hours or degrees, as in FITS headers) → SIGPROC packed form.

    Raises ``ValueError`` for text that is not one to three colon-separated numbers.
    """
    text = text.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    parts = [float(p) for p in text.lstrip("+-").split(":")]
    if not 1 <= len(parts) <= 3 or any(not math.isfinite(p) or p < 0 for p in parts):
        raise ValueError(f"not a sexagesimal angle: {text!r}")
    parts += [0.0] * (3 - len(parts))
    return sign * (parts[0] * 10000 + parts[1] * 100 + parts[2])


def string_from_packed(value: float) -> str:
    """SIGPROC packed ``[-]ddmmss.s`` → ``"[-]dd:mm:ss.ssssss"`` (inverse of the above)."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    dd = int(value // 10000)
    mm = int((value - dd * 10000) // 100)
    ss = value - dd * 10000 - mm * 100
    return f"{sign}{dd:02d}:{mm:02d}:{ss:09.6f}"


def telescope_id_from_name(name: str) -> int:
    """SIGPROC telescope identifier for a telescope name (0, "Fake", when unknown)."""
    key = name.strip().upper().replace(" ", "").replace("-", "")
    if key in _TELESCOPE_ALIASES:
        return _TELESCOPE_ALIASES[key]
    for ident, known in TELESCOPE_NAMES.items():
        if known.upper().replace("-", "") == key:
            return ident
    return 0


_TELESCOPE_ALIASES: dict[str, int] = {
    "AO": 1,
    "PKS": 4,
    "PARKES": 4,
    "MURRIYANG": 4,
    "JB": 5,
    "JODRELLBANK": 5,
    "LOVELL": 5,
    "GB": 6,
    "GREENBANK": 6,
    "GBT": 6,
    "EFF": 8,
    "EF": 8,
    "MEERKAT": 64,
    "MK": 64,
}
