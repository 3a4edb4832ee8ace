"""The one candidate record of drafts-ops."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.cluster import Clusters
from drafts_ops.detect.single_pulse import Giants


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A single-pulse candidate.

    Attributes
    ----------
    tcand_s : float
        Arrival time at the highest frequency of the band, s from the first file sample.
    dm : float
        Dispersion measure, pc cm^-3.
    snr : float
        Boxcar S/N (Heimdall / PRESTO convention).
    width_samples : int
        Boxcar width, samples.
    width_s : float
        Boxcar width, s.
    dm_index : int
        Index of the DM trial in the search's DM plan.
    sample : int
        Arrival at the top of the band, samples from the first file sample (centre of the
        boxcar).
    members : int
        Giants merged into this candidate by clustering.
    first_sample, last_sample : int
        Sample range spanned by the members (``sample`` when not given).
    detector_score : float or None
        Score of the neural detector, when it ran.
    classifier_prob : float or None
        Burst probability from the neural classifier, when it ran.
    is_burst : bool or None
        ``classifier_prob >= classifier_threshold`` of the search, when classified.
    subband : int or None
        With sub-bands (``search_subbands`` or ``detector_subbands``): 0 when the full
        band gave the candidate's S/N, ``k >= 1`` when sub-band ``k`` did (channels in
        file order; ``snr`` is then that sub-band's own S/N).
    beam : int
        Beam number.
    file : str
        Observation file the candidate comes from.
    """

    tcand_s: float
    dm: float
    snr: float
    width_samples: int
    width_s: float
    dm_index: int
    sample: int
    members: int = 1
    first_sample: int = -1
    last_sample: int = -1
    detector_score: float | None = None
    classifier_prob: float | None = None
    is_burst: bool | None = None
    subband: int | None = None
    beam: int = 0
    file: str = ""

    def __post_init__(self) -> None:
        if self.first_sample < 0:
            object.__setattr__(self, "first_sample", int(self.sample))
        if self.last_sample < 0:
            object.__setattr__(self, "last_sample", int(self.sample))
        problems = []
        if not (math.isfinite(self.dm) and self.dm >= 0):
            problems.append(f"dm = {self.dm} pc cm^-3")
        if self.width_samples < 1:
            problems.append(f"width = {self.width_samples} samples")
        if not math.isfinite(self.tcand_s):
            problems.append(f"tcand = {self.tcand_s} s")
        if problems:
            raise ParameterError("impossible candidate: " + ", ".join(problems))

    @property
    def filter_index(self) -> int:
        """Heimdall's ``filter``: log2 of the boxcar width (rounded down)."""
        return int(math.log2(self.width_samples))

    def replace(self, **changes: Any) -> Candidate:
        """A copy with ``changes`` (e.g. ``classifier_prob=0.9``); unknown names are an error."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"Candidate has no field(s) {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Candidate fields in the order of ``candidates.csv`` (optional score columns last).
CSV_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Candidate))


def candidates_from_clusters(
    clusters: Clusters,
    dms: np.ndarray,
    tsamp: float,
    *,
    file: str = "",
    beam: int = 0,
    subbands: bool = False,
) -> list[Candidate]:
    """One :class:`Candidate` per cluster head; ``dms`` are the plan's trials (pc cm^-3).

    ``subbands``: the search ran sub-band searches, so each candidate says which band
    gave its S/N (``Candidate.subband``)."""
    heads = clusters.heads
    out = []
    for i in range(len(clusters)):
        score = float(clusters.score[i])
        out.append(
            Candidate(
                **_position(heads, i, dms, tsamp),
                members=int(clusters.members[i]),
                first_sample=int(clusters.first_sample[i]),
                last_sample=int(clusters.last_sample[i]),
                detector_score=score if math.isfinite(score) else None,
                subband=int(heads.band[i]) if subbands else None,
                beam=beam,
                file=file,
            )
        )
    return out


def reported_at_peaks(
    candidates: Sequence[Candidate], clusters: Clusters, dms: np.ndarray, tsamp: float
) -> list[Candidate]:
    """``candidates`` of ``clusters``' heads (:func:`candidates_from_clusters`, some since
    folded into others) each moved to its cluster's peak (``clusters.peaks``: the centre
    of a flat peak, else the head): DM, arrival, width and S/N are that giant's; members,
    sample span and scores stay; brightest first again. ``dms`` are the plan's trials (pc
    cm^-3), ``tsamp`` s."""
    heads, peaks = clusters.heads, clusters.peaks
    where = {(int(heads.sample[k]), int(heads.dm_index[k]), int(heads.width[k]),
              int(heads.band[k])): k for k in range(len(clusters))}  # fmt: skip
    out = []
    for cand in candidates:
        k = where.get((cand.sample, cand.dm_index, cand.width_samples, cand.subband or 0))
        out.append(cand if k is None else cand.replace(**_position(peaks, k, dms, tsamp)))
    return sorted(out, key=lambda cand: -cand.snr)


def _position(giants: Giants, i: int, dms: np.ndarray, tsamp: float) -> dict[str, Any]:
    """Candidate fields of giant ``i``: arrival (s and sample), DM (pc cm^-3, from the
    trials ``dms``) and its index, S/N, boxcar width (samples and s; ``tsamp`` s)."""
    width, sample, trial = int(giants.width[i]), int(giants.sample[i]), int(giants.dm_index[i])
    return {"tcand_s": sample * tsamp, "dm": float(dms[trial]), "snr": float(giants.snr[i]),
            "width_samples": width, "width_s": width * tsamp, "dm_index": trial,
            "sample": sample}  # fmt: skip
