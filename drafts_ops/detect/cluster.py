"""Friends-of-friends clustering of giants in (time, DM, width): one candidate per burst.

A burst lights up a bow-tie of DM trials and boxcar widths around its true DM and
arrival; linking giants that are close in all three and keeping the brightest member
turns the bow-tie into a single candidate (Heimdall's ``label_candidate_clusters``); where
the S/N is flat over DM within the noise, the member at the centre of that peak.
Blocks are merged by clustering the giants of all blocks together, so a burst on a block
edge gives one candidate exactly as it would inside a block. Bright or wide bursts also
light up the far arms of the bow-tie, which gaps can split off the main cluster;
:func:`merge_sidelobes` folds those back into the burst they belong to, and
:func:`fold_measured_sidelobes` those of band-limited and very wide bursts, from their
measured pulse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.cluster_kernels import friends_of_friends
from drafts_ops.detect.response import Response
from drafts_ops.detect.single_pulse import Giants

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class ClusterLinks:
    """Linking lengths of the friends-of-friends clustering.

    Attributes
    ----------
    time_link : int
        Samples allowed between two giants beyond half the sum of their widths.
    dm_link : int
        DM-trial indices allowed between two giants.
    width_link : int
        Allowed difference of log2(width).
    """

    time_link: int = 8
    dm_link: int = 20
    width_link: int = 3

    def __post_init__(self) -> None:
        if min(self.time_link, self.dm_link, self.width_link) < 0:
            raise ParameterError(f"cluster linking lengths must be >= 0: {self}")


@dataclass(frozen=True, eq=False)
class Clusters:
    """Cluster heads (the brightest member of each cluster), brightest first.

    ``heads`` are giants; ``peaks`` the giants each cluster is reported at (its head, or
    the centre of a flat peak: :func:`_peak_centres`; default: the heads);
    ``members``, ``first_sample`` and ``last_sample`` (``[n]``) give
    each cluster's size and the sample range its members span; ``score`` is the highest
    neural-detector score among the members (NaN when none has one); ``boxcar`` says
    whether the cluster holds boxcar giants (False: found by the neural detector alone;
    default: all True).
    """

    heads: Giants
    members: np.ndarray = field(repr=False)
    first_sample: np.ndarray = field(repr=False)
    last_sample: np.ndarray = field(repr=False)
    score: np.ndarray = field(repr=False)
    boxcar: np.ndarray | None = field(default=None, repr=False)
    peaks: Giants | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.boxcar is None:
            object.__setattr__(self, "boxcar", np.ones(len(self.heads), bool))
        if self.peaks is None:
            object.__setattr__(self, "peaks", self.heads)

    def __len__(self) -> int:
        return len(self.heads)


def cluster_giants(
    giants: Giants, links: ClusterLinks | None = None, response: Response | None = None
) -> Clusters:
    """Group giants into bursts; each cluster is represented by its highest-S/N member
    (its head), and reported at it, or, where members within :data:`PEAK_SNR_TOLERANCE`
    of it span several DM trials, at the one at their centre (``peaks``,
    :func:`_peak_centres`).

    With a ``response``, a cluster keeps only the members its brightest member can have
    produced (:meth:`Response.explains`); the others (a distinct burst that friends-of-
    friends chained to a bright burst's bow-tie arm, or to a zero-DM impulse's) are
    clustered again among themselves, until every member is explained.

    Boxcar giants (``score`` NaN) beside neural-detector giants (``--detector both``) are
    clustered on their own, exactly as without the detector; each detector giant that
    friends-of-friends links to them gives its score to the cluster of the nearest boxcar
    giant in time, and the others form clusters of their own (``boxcar`` False). The
    detector can so add candidates and scores, never move or split the boxcar search's.
    """
    return labelled_clusters(giants, links, response)[0]


def labelled_clusters(
    giants: Giants, links: ClusterLinks | None = None, response: Response | None = None
) -> tuple[Clusters, Giants, np.ndarray]:
    """:func:`cluster_giants`, with the giants it clustered (sorted by sample) and each
    one's cluster (an index into the returned :class:`Clusters`)."""
    links = links or ClusterLinks()
    if len(giants) == 0:
        empty = np.empty(0, np.int64)
        none = Clusters(Giants.empty(), empty, empty.copy(), empty.copy(), np.empty(0, np.float32))
        return none, Giants.empty(), empty.copy()
    giants = giants.select(np.argsort(giants.sample, kind="stable"))
    boxcar = np.isnan(giants.score)
    if boxcar.all() or not boxcar.any():
        return _clusters(giants, _cluster_labels(giants, links, response), boxcar)
    labels = np.empty(len(giants), np.int64)
    labels[boxcar] = _cluster_labels(giants.select(boxcar), links, response)
    neural = np.flatnonzero(~boxcar)
    attached = _attach_to_boxcar(giants, boxcar, labels, links)
    labels[neural[attached >= 0]] = attached[attached >= 0]
    alone = neural[attached < 0]
    if alone.size:
        own = _cluster_labels(giants.select(alone), links, response)
        labels[alone] = own + int(labels[boxcar].max()) + 1
    return _clusters(giants, labels, boxcar)


def _cluster_labels(giants: Giants, links: ClusterLinks, response: Response | None) -> np.ndarray:
    """Friends-of-friends labels of ``giants`` (in their order), split by ``response``."""
    order = np.argsort(giants.sample, kind="stable")
    ordered = Giants(giants.dm_index[order].astype(np.int64),
                     giants.sample[order].astype(np.int64),
                     giants.width[order].astype(np.int64), giants.snr[order],
                     band=giants.band[order])  # fmt: skip
    labels = _link(ordered.sample, ordered.dm_index, ordered.width, links)
    if response is not None:
        labels = _split_unexplained(ordered, labels, links, response)
    out = np.empty(len(giants), np.int64)
    out[order] = labels
    return out


def _attach_to_boxcar(
    giants: Giants, boxcar: np.ndarray, labels: np.ndarray, links: ClusterLinks
) -> np.ndarray:
    """For each non-boxcar giant, the label of the boxcar cluster it joins (-1: none): that
    of the nearest boxcar giant (in time) among those friends-of-friends links it to."""
    joint = _cluster_labels(giants, links, None)
    neural = np.flatnonzero(~boxcar)
    box = np.flatnonzero(boxcar)
    out = np.full(neural.size, -1, np.int64)
    for k, j in enumerate(neural):
        mates = box[joint[box] == joint[j]]
        if mates.size:
            nearest = mates[np.argmin(np.abs(giants.sample[mates] - giants.sample[j]))]
            out[k] = labels[nearest]
    return out


def _clusters(
    giants: Giants, labels: np.ndarray, boxcar: np.ndarray
) -> tuple[Clusters, Giants, np.ndarray]:
    """Clusters of labelled giants, brightest first, with ``giants`` and each one's cluster.
    A cluster's head, size and sample span come from its boxcar giants when it has any
    (other giants add their score)."""
    _, inverse = np.unique(labels, return_inverse=True)
    ncl = int(inverse.max()) + 1
    has_boxcar = np.zeros(ncl, bool)
    has_boxcar[inverse[boxcar]] = True
    counted = boxcar == has_boxcar[inverse]
    sample = giants.sample.astype(np.int64)
    snr = giants.snr
    # head per cluster: sort by (cluster, counted first, -snr), take the first of each
    by_snr = np.lexsort((-snr, ~counted, inverse))
    first_of = np.r_[0, np.flatnonzero(np.diff(inverse[by_snr])) + 1]
    head = by_snr[first_of]
    peak = _peak_centres(giants, inverse, counted, head)
    members = np.bincount(inverse[counted], minlength=ncl).astype(np.int64)
    first = np.full(ncl, np.iinfo(np.int64).max)
    last = np.full(ncl, np.iinfo(np.int64).min)
    np.minimum.at(first, inverse[counted], sample[counted])
    np.maximum.at(last, inverse[counted], sample[counted])
    best_score = np.full(ncl, np.nan, np.float32)
    np.fmax.at(best_score, inverse, giants.score)
    rank = np.argsort(-snr[head], kind="stable")
    head, peak = head[rank], peak[rank]
    members, first, last = members[rank], first[rank], last[rank]
    position = np.empty(ncl, np.int64)
    position[rank] = np.arange(ncl)
    clusters = Clusters(_giants_at(giants, head), members, first, last, best_score[rank],
                        has_boxcar[rank], _giants_at(giants, peak))  # fmt: skip
    return clusters, giants, position[inverse]


def _giants_at(giants: Giants, index: np.ndarray) -> Giants:
    """Giants ``index`` of ``giants`` (without scores), as cluster heads are kept."""
    return Giants(giants.dm_index[index].astype(np.int32), giants.sample[index].astype(np.int64),
                  giants.width[index].astype(np.int32), giants.snr[index],
                  band=giants.band[index])  # fmt: skip


#: S/N (noise units) below a cluster's brightest member within which members are as good
#: a peak as it: S/N differences under ~1 are the noise's (:func:`_peak_centres`).
PEAK_SNR_TOLERANCE = 1.0


def _peak_centres(
    giants: Giants, inverse: np.ndarray, counted: np.ndarray, brightest: np.ndarray
) -> np.ndarray:
    """Where each cluster is reported: its best giant at the DM trial nearest the centre of
    its peak (giant indices).

    The peak is the DM trials whose best S/N comes within :data:`PEAK_SNR_TOLERANCE` of the
    cluster's brightest giant (``brightest[k]``, a giant index; counted members of its
    band), each weighted once by how far it rises above that floor. A wide or
    band-limited burst's S/N is nearly flat over a range of DM trials (a wider boxcar
    takes up the smearing), so its brightest giant sits wherever the noise put it, up to
    the edge of that range; the centre of the range is the better DM estimate. A bright
    burst's S/N falls by more than the tolerance within a trial or two, and it is reported
    at its brightest giant.
    """
    top = brightest[inverse]
    floor = giants.snr[top] - PEAK_SNR_TOLERANCE
    near = np.flatnonzero(counted & (giants.band == giants.band[top]) & (giants.snr >= floor))
    label, trial = inverse[near], giants.dm_index[near].astype(np.int64)
    order = np.lexsort((-giants.snr[near], trial, label))  # each trial's best first
    best = order[np.r_[True, (np.diff(label[order]) != 0) | (np.diff(trial[order]) != 0)]]
    weight = (giants.snr[near[best]] - floor[near[best]]).astype(np.float64) + 1e-6
    ncl = brightest.size
    centre = (np.bincount(label[best], weight * trial[best], ncl)
              / np.bincount(label[best], weight, ncl))  # fmt: skip
    distance = np.abs(trial[best] - centre[label[best]])
    pick = np.lexsort((-giants.snr[near[best]], distance, label[best]))
    first_of = np.r_[0, np.flatnonzero(np.diff(label[best][pick])) + 1]
    return near[best[pick[first_of]]]


def _link(sample: np.ndarray, dm_index: np.ndarray, width: np.ndarray, links: ClusterLinks):
    """Friends-of-friends labels of giants sorted by sample."""
    return friends_of_friends(
        sample, dm_index, np.log2(np.maximum(width, 1)).astype(np.float64), width,
        int(links.time_link), int(links.dm_link), float(links.width_link),
    )  # fmt: skip


def _split_unexplained(
    giants: Giants, labels: np.ndarray, links: ClusterLinks, response: Response
) -> np.ndarray:
    """Labels after moving members that their cluster's head cannot explain into clusters
    of their own (friends-of-friends among the moved ones, repeated until none move)."""
    labels = labels.astype(np.int64).copy()
    next_label = int(labels.max()) + 1
    pending = np.unique(labels)
    for _ in range(64):  # each round peels at least one burst off a cluster
        moved = np.zeros(labels.size, bool)
        for label in pending:
            members = np.flatnonzero(labels == label)
            if members.size < 2:
                continue
            head = members[np.argmax(giants.snr[members])]
            moved[members[~response.explains(head, giants, members)]] = True
        if not moved.any():
            break
        idx = np.flatnonzero(moved)  # still sorted by sample
        sub = _link(giants.sample[idx], giants.dm_index[idx], giants.width[idx], links)
        labels[idx] = sub + next_label
        next_label = int(labels.max()) + 1
        pending = np.unique(labels[idx])
    return labels


def merge_blocks(
    parts: Sequence[Giants], links: ClusterLinks | None = None, response: Response | None = None
) -> Clusters:
    """Cluster the giants of consecutive blocks together (one candidate per burst).

    Blocks must report giants in file samples (``sample_offset``) and each giant once (the
    pipeline keeps only the samples a block owns); a burst across a block edge then joins
    into one cluster.
    """
    return cluster_giants(Giants.concatenate(list(parts)), links, response)
