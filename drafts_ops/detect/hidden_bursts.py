"""Bursts given back from a band-limited signal's cluster (:func:`release_hidden_bursts`):
narrow-band RFI that drifts like a dispersed pulse can explain a broadband burst inside
its full-band sweep as one of its arms; those members are clustered again, and each that
shines outside the band becomes a candidate of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.candidates import Candidate, candidates_from_clusters, reported_at_peaks
from drafts_ops.detect.cluster import ClusterLinks, Clusters, labelled_clusters
from drafts_ops.detect.pulse import PulseShape
from drafts_ops.detect.response import SIDELOBE_SLACK, SIDELOBE_SNR_MARGIN, Response
from drafts_ops.detect.sidelobes import (
    ARM_OUTSIDE_SNR,
    ARM_TESTS,
    BAND_LIMITED_FRACTION,
    SPECTRUM_MIN_SNR,
    _crossing_window,
    _widened,
    fold_clusters,
    sidelobe_owners,
)
from drafts_ops.detect.single_pulse import Giants


def release_hidden_bursts(
    candidates: Sequence[Candidate],
    giants: Giants,
    label: np.ndarray,
    response: Response,
    links: ClusterLinks,
    *,
    pulse_shape: Callable[[Candidate], PulseShape],
    snr_outside: Callable[[Candidate, float, float], float],
    snr_within: Callable[[Candidate, float, float], float],
    boxcar: Sequence[bool] | None = None,
) -> tuple[list[Candidate], list[bool]]:
    """Give back the bursts that a band-limited signal's cluster swallowed.

    Clustering (:meth:`Response.explains`) and :func:`merge_sidelobes` judge a cluster's
    members by the response of a pulse that fills the band, over the whole of its sweep: a
    broadband burst of S/N 20 beside narrow-band RFI of S/N 86 that drifts like a
    dispersed pulse lies within that response and joins the RFI's cluster. A band-limited
    signal's response lies only where its own emitting band crosses each DM trial. Here
    each candidate of S/N >= :data:`SPECTRUM_MIN_SNR` whose cluster has members of that S/N
    away from its arrival (:func:`_may_hide`) has its pulse measured (``pulse_shape``); the
    members of the band-limited ones (< :data:`BAND_LIMITED_FRACTION` of the band) that lie
    outside the crossing windows of their emitting band are clustered again, all together
    (:func:`labelled_clusters`, :func:`merge_sidelobes`: one burst's pieces from several
    such clusters join), and each new cluster of S/N >= :data:`SPECTRUM_MIN_SNR` (at most
    :data:`ARM_TESTS` per band-limited cluster, brightest first) whose pulse shows S/N
    :data:`ARM_OUTSIDE_SNR` outside the band of the cluster its brightest giant came from
    (``snr_outside``, as :func:`fold_measured_sidelobes` tests an arm) becomes a candidate
    of its own, reported at its peak; its members leave the clusters they came from. Unless
    it is an arm after all (:func:`_arm_owner`, ``snr_within``): of the cluster it came
    from (a steep-spectrum burst measures as band-limited at half power, yet shines weakly
    across the band), or of a brighter candidate, which then takes its members.

    ``giants`` and ``label``: the clustered giants and each one's candidate (an index into
    ``candidates``; :func:`labelled_clusters`, then :func:`fold_clusters`). ``boxcar``: one
    flag per candidate (default all True, as :attr:`Clusters.boxcar`). Returns the
    candidates, brightest first, and their flags.
    """
    cands = list(candidates)
    flags = [True] * len(cands) if boxcar is None else [bool(b) for b in boxcar]
    shapes, away = _band_limited_clusters(cands, giants, np.asarray(label), response,
                                          pulse_shape)  # fmt: skip
    if away.size:
        away = away[np.argsort(giants.sample[away], kind="stable")]  # as clustering sorts
        hidden, label_of = _reclustered(giants.select(away), response, links)
        like = cands[0]  # file, beam and kind
        found = candidates_from_clusters(
            hidden, response.dms, response.tsamp, file=like.file, beam=like.beam,
            subbands=like.subband is not None,
        )  # fmt: skip
        parent = np.asarray(label)[away]
        tests = dict.fromkeys(shapes, 0)
        for k, cand in enumerate(found):
            if cand.snr < SPECTRUM_MIN_SNR:
                break
            mine = np.flatnonzero(label_of == k)
            source = int(parent[mine[np.argmax(giants.snr[away[mine]])]])
            if tests[source] >= ARM_TESTS:
                continue
            tests[source] += 1
            if snr_outside(cand, *_widened(shapes[source])) < ARM_OUTSIDE_SNR:
                continue
            owner = _arm_owner(cands, flags, source, cand, bool(hidden.boxcar[k]), response,
                               snr_within)  # fmt: skip
            if owner == source:  # the source emits where such an arm comes from: its own
                continue
            for i, n in zip(*np.unique(parent[mine], return_counts=True), strict=True):
                cands[i] = cands[i].replace(members=max(cands[i].members - int(n), 1))
            if owner is not None:  # another burst's arm: its members join that burst
                cands[owner] = cands[owner].replace(members=cands[owner].members + cand.members)
                continue
            cands.extend(reported_at_peaks([cand], hidden, response.dms, response.tsamp))
            flags.append(bool(hidden.boxcar[k]))
    order = sorted(range(len(cands)), key=lambda k: -cands[k].snr)
    return [cands[k] for k in order], [flags[k] for k in order]


def _arm_owner(  # noqa: PLR0917
    cands: list[Candidate], flags: list[bool], source: int, cand: Candidate, boxcar: bool,
    response: Response, snr_within: Callable[[Candidate, float, float], float],
) -> int | None:  # fmt: skip
    """The candidate ``cand`` (found by the boxcar search: ``boxcar``) is an arm of: the
    first of ``source`` and then the brighter ``cands`` (brightest first, at most
    :data:`ARM_TESTS`) that emits, at the frequencies whose sweep at ``cand``'s DM passes
    where it lies (:func:`_arm_frequencies`), at least ``cand``'s S/N less
    :data:`SIDELOBE_SNR_MARGIN` (``snr_within``; an arm collects no more than the emission
    it comes from). ``None``: an arm of none of them."""
    brighter = sorted((k for k, c in enumerate(cands) if k != source and c.snr >= cand.snr
                       and (flags[k] or not boxcar)), key=lambda k: -cands[k].snr)  # fmt: skip
    tested = 0
    for k in [source, *brighter]:
        arm = _arm_frequencies(cands[k], cand, response)
        if arm is None:
            continue
        if cand.snr <= snr_within(cands[k], *arm) + SIDELOBE_SNR_MARGIN:
            return k
        tested += 1
        if tested >= ARM_TESTS:
            break
    return None


def _arm_frequencies(
    source: Candidate, cand: Candidate, response: Response
) -> tuple[float, float] | None:
    """The frequencies (MHz, within the band) whose emission by ``source``, dedispersed at
    ``cand``'s DM, arrives where ``cand`` lies (within half their widths plus
    :data:`SIDELOBE_SLACK` samples); ``None`` when no frequency of the band does."""
    freqs = np.asarray(response.freqs_mhz, np.float64)
    f_min, f_top = float(freqs.min()), float(freqs.max())
    tol = 0.5 * (cand.width_samples + source.width_samples) + SIDELOBE_SLACK
    offsets = np.array([-tol, tol]) + (cand.sample - source.sample)
    d_dm = cand.dm - source.dm
    if d_dm == 0:
        return (f_min, f_top) if offsets[0] <= 0 <= offsets[1] else None
    # an arm at d_dm arrives -delay(d_dm, f, f_top) after the source: solve for f^-2
    per_unit = dispersion_delay_s(d_dm, 1.0, np.inf)  # s per unit of f^-2 (MHz^-2)
    inverse_square = np.sort(f_top**-2 - offsets * response.tsamp / per_unit)
    lo_inv2, hi_inv2 = max(inverse_square[0], f_top**-2), min(inverse_square[1], f_min**-2)
    if lo_inv2 > hi_inv2:
        return None
    return float(hi_inv2**-0.5), float(lo_inv2**-0.5)


def _band_limited_clusters(
    cands: list[Candidate], giants: Giants, label: np.ndarray, response: Response,
    pulse_shape: Callable[[Candidate], PulseShape],
) -> tuple[dict[int, PulseShape], np.ndarray]:  # fmt: skip
    """The measured pulse of each band-limited candidate that may hide a burst, and the
    giants of theirs (indices) outside the crossing windows of its emitting band."""
    span = float(np.ptp(response.freqs_mhz))
    shapes, away = {}, []
    for i, cand in enumerate(cands):
        if cand.snr < SPECTRUM_MIN_SNR:
            continue
        mine = np.flatnonzero(label == i)
        members = giants.select(mine)
        if not _may_hide(cand, members):
            continue
        shape = pulse_shape(cand)
        if shape.f_hi_mhz - shape.f_lo_mhz >= BAND_LIMITED_FRACTION * span:
            continue
        shapes[i] = shape
        away.append(mine[~_within_emission(cand, shape, members, response)])
    return shapes, np.concatenate(away) if away else np.empty(0, np.int64)


def _reclustered(
    giants: Giants, response: Response, links: ClusterLinks
) -> tuple[Clusters, np.ndarray]:
    """``giants`` (sorted by sample) clustered and their sidelobes merged, with each one's
    cluster."""
    clusters, _, label = labelled_clusters(giants, links, response)
    owners = sidelobe_owners(clusters, response.dms, response.freqs_mhz, response.tsamp,
                             max_width=response.max_width, bands=response.bands)  # fmt: skip
    clusters, into = fold_clusters(clusters, owners)
    return clusters, into[label]


def _may_hide(cand: Candidate, members: Giants) -> bool:
    """Whether a cluster (its head ``cand``, its giants ``members``) has giants of S/N >=
    :data:`SPECTRUM_MIN_SNR` beyond its head's own pulse in time: where another burst can
    hide."""
    bright = members.snr >= SPECTRUM_MIN_SNR
    tol = 0.5 * (members.width + cand.width_samples) + SIDELOBE_SLACK
    return bool(np.any(bright & (np.abs(members.sample - cand.sample) > tol)))


def _within_emission(
    cand: Candidate, shape: PulseShape, members: Giants, response: Response
) -> np.ndarray:
    """Which ``members`` lie where ``cand``, emitting only over ``shape``'s band, appears at
    their DM trial: inside its crossing window (:func:`_crossing_window`), within half the
    two widths plus :data:`SIDELOBE_SLACK` samples."""
    d_dm = np.asarray(response.dms, np.float64)[members.dm_index] - cand.dm
    lo, hi = _crossing_window(d_dm, shape.f_lo_mhz, shape.f_hi_mhz,
                              float(np.max(response.freqs_mhz)), response.tsamp)  # fmt: skip
    tol = 0.5 * (members.width + shape.width_samples) + SIDELOBE_SLACK
    offset = (members.sample - cand.sample).astype(np.float64)
    return (offset >= lo - tol) & (offset <= hi + tol)
