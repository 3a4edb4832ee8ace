"""Multi-beam surveys: beam layouts, beam groups and the coincidence of candidates.

A burst from the sky lights one beam of a multi-beam receiver, or a few neighbouring ones;
terrestrial RFI lights many or all. Files of one pointing and time span (one per beam) form
a *beam group*; after each beam is searched, :func:`coincidence` matches candidates across
the group's beams in time and DM (Heimdall's coincidencer) and gives every candidate
``nbeams``, ``beam_mask``, ``primary_beam``, ``max_snr`` and, where the pattern cannot come
from the sky (more beams than a source can light, or beams that are not neighbours), an RFI
flag with the reason. Nothing is deleted: flags are columns.

Layouts: ``fast19`` (FAST's 19-beam receiver: beam 1 in the centre, 2-7 the inner ring,
8-19 the outer ring, counter-clockwise) and ``parkes13`` (1 centre, 2-7 inner ring, 8-13
outer ring), as beam positions on a hexagonal grid in units of the beam spacing; others as
a small YAML/JSON file ``{name, positions: {beam: [x, y]}, max_beams}``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.candidates import CSV_FIELDS, Candidate

#: Beams a real source can light at once, by default (of 19 or 13).
DEFAULT_MAX_BEAMS = 4
#: Default file-name pattern of the beam number (FAST: ``..._M01_0001.fits``).
DEFAULT_BEAM_PATTERN = r"M(\d{2})"


def _hex_rings(outer: str) -> dict[int, tuple[float, float]]:
    """Positions of a centre beam, an inner ring of 6 and an outer ring (``"12"`` beams at
    distances 2 and sqrt(3) alternately, FAST; ``"6"`` at sqrt(3), Parkes)."""
    pos = {1: (0.0, 0.0)}
    for k in range(6):
        a = math.radians(60 * k)
        pos[2 + k] = (math.cos(a), math.sin(a))
    if outer == "12":
        for j in range(12):
            r = 2.0 if j % 2 == 0 else math.sqrt(3.0)
            a = math.radians(30 * j)
            pos[8 + j] = (r * math.cos(a), r * math.sin(a))
    else:
        for k in range(6):
            a = math.radians(30 + 60 * k)
            pos[8 + k] = (math.sqrt(3.0) * math.cos(a), math.sqrt(3.0) * math.sin(a))
    return pos


@dataclass(frozen=True)
class BeamLayout:
    """Beam positions (units of the beam spacing) and what a source can light.

    Two beams are neighbours when their centres are at most 1.05 spacings apart.
    ``max_beams``: a candidate in more beams than this is flagged as RFI.
    """

    name: str
    positions: Mapping[int, tuple[float, float]]
    max_beams: int = DEFAULT_MAX_BEAMS

    @property
    def beams(self) -> list[int]:
        return sorted(self.positions)

    def distance(self, a: int, b: int) -> float:
        (xa, ya), (xb, yb) = self.positions[a], self.positions[b]
        return math.hypot(xa - xb, ya - yb)

    def neighbours(self, beam: int) -> set[int]:
        return {b for b in self.positions if b != beam and self.distance(beam, b) <= 1.05}

    def connected(self, beams: Sequence[int]) -> bool:
        """Whether ``beams`` form one patch of neighbouring beams."""
        todo = set(beams)
        if len(todo) <= 1:
            return True
        stack = [todo.pop()]
        while stack:
            here = stack.pop()
            near = self.neighbours(here) & todo
            todo -= near
            stack.extend(near)
        return not todo

    def response(self, beam: int, x: float, y: float, fwhm: float = 1.0) -> float:
        """Gaussian beam response of ``beam`` to a source at ``(x, y)`` (spacing units)
        for a beam FWHM of ``fwhm`` spacings (1: a source halfway between two beams is at
        half power in both)."""
        bx, by = self.positions[beam]
        return math.exp(-4 * math.log(2) * ((x - bx) ** 2 + (y - by) ** 2) / fwhm**2)


LAYOUTS: dict[str, BeamLayout] = {
    "fast19": BeamLayout("fast19", _hex_rings("12")),
    "parkes13": BeamLayout("parkes13", _hex_rings("6")),
}


def load_layout(name_or_path: str) -> BeamLayout:
    """A built-in layout by name, or one from a YAML/JSON file."""
    if name_or_path in LAYOUTS:
        return LAYOUTS[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise ParameterError(
            f"unknown beam layout {name_or_path!r}: use {', '.join(LAYOUTS)} or a YAML/JSON file"
        )
    try:
        import yaml

        doc = yaml.safe_load(path.read_text())
        positions = {int(b): (float(x), float(y)) for b, (x, y) in doc["positions"].items()}
        return BeamLayout(str(doc.get("name", path.stem)), positions,
                          int(doc.get("max_beams", DEFAULT_MAX_BEAMS)))  # fmt: skip
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        raise ParameterError(f"{path}: not a beam layout ({err})") from None


# -- beam groups ------------------------------------------------------------------------


def beam_of(path: str | Path, pattern: str = DEFAULT_BEAM_PATTERN, header=None) -> int | None:
    """The beam number of a file: from its header (``ibeam`` when ``nbeams > 1``), else from
    the first group of ``pattern`` in its name; ``None`` when neither says."""
    if header is not None and getattr(header, "nbeams", 1) > 1:
        return int(header.ibeam)
    match = re.search(pattern, Path(path).name)
    return int(match.group(1)) if match else None


def group_key(path: str | Path, pattern: str = DEFAULT_BEAM_PATTERN) -> str:
    """The group of a file: its name with the beam number replaced by ``*`` (the files of
    one pointing and time span differ only there: ``obs_M01_0001.fil`` -> ``obs_M*_0001.fil``)."""
    name = Path(path).name
    match = re.search(pattern, name)
    if not match:
        return name
    a, b = match.span(1)
    return name[:a] + "*" + name[b:]


def header_group(header) -> tuple[str, int] | None:
    """``(group, beam)`` from a header that says it is one of several beams: the source
    and the start time (MJD to ~1 s) name the pointing, ``ibeam`` the beam."""
    if getattr(header, "nbeams", 1) <= 1:
        return None
    return f"{header.source_name or 'source'}@MJD{header.tstart:.5f}", int(header.ibeam)


def beam_groups(
    paths: Sequence[str | Path], pattern: str = DEFAULT_BEAM_PATTERN, headers=None
) -> dict[str, dict[int, Path]]:
    """``{group: {beam: path}}``: files whose names carry a beam number (``pattern``), and
    where names are silent, files whose header has ``nbeams > 1`` (``headers(path)``
    gives a file's header; see :func:`header_group`)."""
    groups: dict[str, dict[int, Path]] = {}
    for p in paths:
        beam = beam_of(p, pattern)
        if beam is not None:
            groups.setdefault(group_key(p, pattern), {})[beam] = Path(p)
        elif headers is not None and (found := header_group(headers(p))) is not None:
            groups.setdefault(found[0], {})[found[1]] = Path(p)
    return groups


# -- coincidence ------------------------------------------------------------------------


@dataclass(frozen=True)
class CoincidenceRules:
    """How candidates of different beams are matched.

    Two candidates coincide when their arrival times differ by at most ``time_slack_s``
    plus the larger of their widths plus the sweep of their DM difference across the band,
    their DMs by at most ``max(dm_abs, dm_frac * DM)`` pc cm^-3 and their widths by at
    most a factor ``width_ratio`` (one source seen in two beams has one width; a narrow
    burst beside the wide smeared ridge of drifting RFI does not coincide with it).
    """

    time_slack_s: float = 0.01
    dm_abs: float = 10.0
    dm_frac: float = 0.05
    width_ratio: float = 4.0


@dataclass
class BeamCandidate:
    """A candidate of one beam with its coincidence columns."""

    beam: int
    candidate: Candidate
    event: int = -1
    nbeams: int = 1
    beam_mask: int = 0
    primary_beam: int = 0
    max_snr: float = 0.0
    rfi: bool = False
    rfi_reason: str = ""

    def row(self) -> dict[str, Any]:
        return {**self.candidate.to_dict(), "beam": self.beam, "event": self.event,
                "nbeams": self.nbeams, "beam_mask": self.beam_mask,
                "primary_beam": self.primary_beam, "max_snr": self.max_snr,
                "rfi": self.rfi, "rfi_reason": self.rfi_reason}  # fmt: skip


@dataclass
class GroupResult:
    """The coincidence of one beam group."""

    group: str
    beams: list[int]
    missing: list[int]
    candidates: list[BeamCandidate] = field(default_factory=list)

    @property
    def events(self) -> int:
        return len({c.event for c in self.candidates})

    @property
    def kept(self) -> list[BeamCandidate]:
        """Candidates not flagged as RFI."""
        return [c for c in self.candidates if not c.rfi]

    def summary(self) -> dict[str, Any]:
        return {"group": self.group, "beams": self.beams, "missing_beams": self.missing,
                "candidates_before": len(self.candidates), "events": self.events,
                "rfi_flagged": len(self.candidates) - len(self.kept),
                "candidates_after": len(self.kept),
                "events_after": len({c.event for c in self.kept})}  # fmt: skip


def coincidence(
    per_beam: Mapping[int, Sequence[Candidate]],
    layout: BeamLayout,
    freqs_mhz: np.ndarray | tuple[float, float],
    rules: CoincidenceRules | None = None,
    *,
    group: str = "",
) -> GroupResult:
    """Match candidates across beams; fill each one's coincidence columns and RFI flag.

    ``freqs_mhz``: the band (channel frequencies, or ``(fmin, fmax)``) for the sweep of a
    DM difference. As Heimdall's coincidencer, each candidate counts the beams of the
    candidates that coincide *with it* (its own included): ``nbeams``, ``beam_mask``,
    ``primary_beam`` and ``max_snr`` come from those, and so does the RFI flag; chains of
    coincidences do not spread a flag from a crowd of RFI to a burst next to it. ``event``
    numbers the friends-of-friends groups of coinciding candidates (for reference).
    """
    rules = rules or CoincidenceRules()
    fmin, fmax = float(np.min(freqs_mhz)), float(np.max(freqs_mhz))
    items = [BeamCandidate(b, c) for b, cands in sorted(per_beam.items()) for c in cands]
    items.sort(key=lambda x: x.candidate.tcand_s)
    matches, events = _coinciding(items, rules, fmin, fmax)
    for i, x in enumerate(items):
        beams = sorted({items[k].beam for k in matches[i]})
        best = max(matches[i], key=lambda k: items[k].candidate.snr)
        reason = ""
        if len(beams) > layout.max_beams:
            reason = f"seen in {len(beams)} of {len(layout.beams)} beams"
        elif not layout.connected(beams):
            reason = f"seen in beams {', '.join(map(str, beams))}, which are not neighbours"
        x.event, x.nbeams = events[i], len(beams)
        x.beam_mask = sum(1 << (b - 1) for b in beams)
        x.primary_beam, x.max_snr = items[best].beam, items[best].candidate.snr
        x.rfi, x.rfi_reason = bool(reason), reason
    present = sorted(per_beam)
    missing = [b for b in layout.beams if b not in per_beam]
    return GroupResult(group, present, missing, items)


def _coinciding(
    items: list[BeamCandidate], rules: CoincidenceRules, fmin: float, fmax: float
) -> tuple[list[list[int]], list[int]]:
    """For candidates sorted by time: the indices of those coinciding with each (itself
    included: another beam, DM and width alike, times within the widths plus the sweep of
    the DM difference), and each one's event (friends-of-friends group) number."""
    n = len(items)
    parent = list(range(n))
    matches: list[list[int]] = [[i] for i in range(n)]

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    t = np.array([x.candidate.tcand_s for x in items])
    widest = max((x.candidate.width_s for x in items), default=0.0)
    top_dm = max((x.candidate.dm for x in items), default=0.0)
    reach = rules.time_slack_s + widest + float(
        dispersion_delay_s(max(rules.dm_abs, rules.dm_frac * top_dm), fmin, fmax))  # fmt: skip
    for i in range(n):
        a = items[i].candidate
        j = i + 1
        while j < n and t[j] - t[i] <= reach:
            b = items[j].candidate
            ddm = abs(a.dm - b.dm)
            dm_ok = ddm <= max(rules.dm_abs, rules.dm_frac * max(a.dm, b.dm))
            narrow, wide = sorted((a.width_s, b.width_s))
            width_ok = wide <= rules.width_ratio * narrow
            if items[j].beam != items[i].beam and dm_ok and width_ok:
                sweep = float(dispersion_delay_s(ddm, fmin, fmax))
                slack = rules.time_slack_s + max(a.width_s, b.width_s) + sweep
                if abs(b.tcand_s - a.tcand_s) <= slack:
                    parent[root(j)] = root(i)
                    matches[i].append(j)
                    matches[j].append(i)
            j += 1
    events: dict[int, int] = {}
    for i in range(n):
        events.setdefault(root(i), len(events))
    return matches, [events[root(i)] for i in range(n)]


def write_group(result: GroupResult, path: str | Path) -> Path:
    """Write a group's candidates with their coincidence columns as CSV (atomically)."""

    columns = [*CSV_FIELDS, "event", "nbeams", "beam_mask", "primary_beam", "max_snr", "rfi",
               "rfi_reason"]  # fmt: skip
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for item in result.candidates:
        writer.writerow(item.row())
    return write_text_atomic(path, buffer.getvalue())
