"""Friends-of-friends clustering of giants in (time, DM, width): one candidate per burst.

A burst lights up a bow-tie of DM trials and boxcar widths around its true DM and
arrival; linking giants that are close in all three and keeping the brightest member
turns the bow-tie into a single candidate (Heimdall's ``label_candidate_clusters``).
Blocks are merged by clustering the giants of all blocks together, so a burst on a block
edge gives one candidate exactly as it would inside a block. Bright or wide bursts also
light up the far arms of the bow-tie, which gaps can split off the main cluster;
:func:`merge_sidelobes` folds those back into the burst they belong to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.kernels import friends_of_friends
from drafts_ops.detect.single_pulse import Giants
from drafts_ops.errors import ParameterError


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

    ``heads`` are giants; ``members``, ``first_sample`` and ``last_sample`` (``[n]``) give
    each cluster's size and the sample range its members span; ``score`` is the highest
    neural-detector score among the members (NaN when none has one).
    """

    heads: Giants
    members: np.ndarray = field(repr=False)
    first_sample: np.ndarray = field(repr=False)
    last_sample: np.ndarray = field(repr=False)
    score: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.heads)


def cluster_giants(giants: Giants, links: ClusterLinks | None = None) -> Clusters:
    """Group giants into bursts; each cluster is represented by its highest-S/N member."""
    links = links or ClusterLinks()
    n = len(giants)
    if n == 0:
        empty = np.empty(0, np.int64)
        return Clusters(Giants.empty(), empty, empty.copy(), empty.copy(), np.empty(0, np.float32))
    order = np.argsort(giants.sample, kind="stable")
    sample = giants.sample[order].astype(np.int64)
    dm_index = giants.dm_index[order].astype(np.int64)
    width = giants.width[order].astype(np.int64)
    snr = giants.snr[order]
    score = giants.score[order]
    labels = friends_of_friends(
        sample,
        dm_index,
        np.log2(np.maximum(width, 1)).astype(np.float64),
        width,
        int(links.time_link),
        int(links.dm_link),
        float(links.width_link),
    )
    _, inverse, members = np.unique(labels, return_inverse=True, return_counts=True)
    ncl = members.size
    # brightest member per cluster: sort by (cluster, -snr), take the first of each cluster
    by_snr = np.lexsort((-snr, inverse))
    first_of = np.r_[0, np.flatnonzero(np.diff(inverse[by_snr])) + 1]
    head = by_snr[first_of]
    first = np.full(ncl, np.iinfo(np.int64).max)
    last = np.full(ncl, np.iinfo(np.int64).min)
    np.minimum.at(first, inverse, sample)
    np.maximum.at(last, inverse, sample)
    best_score = np.full(ncl, np.nan, np.float32)
    np.fmax.at(best_score, inverse, score)
    rank = np.argsort(-snr[head], kind="stable")
    head, members, first, last = head[rank], members[rank], first[rank], last[rank]
    heads = Giants(
        dm_index[head].astype(np.int32), sample[head], width[head].astype(np.int32), snr[head]
    )
    return Clusters(heads, members.astype(np.int64), first, last, best_score[rank])


def merge_blocks(parts: Sequence[Giants], links: ClusterLinks | None = None) -> Clusters:
    """Cluster the giants of consecutive blocks together (one candidate per burst).

    Blocks must report giants in file samples (``sample_offset``) and each giant once (the
    pipeline keeps only the samples a block owns); a burst across a block edge then joins
    into one cluster.
    """
    return cluster_giants(Giants.concatenate(list(parts)), links)


#: Default slack (samples) of :func:`merge_sidelobes` beyond half the sum of the widths.
SIDELOBE_SLACK = 8


def merge_sidelobes(
    clusters: Clusters,
    dms: np.ndarray,
    freqs_mhz: np.ndarray,
    tsamp: float,
    *,
    slack: float = SIDELOBE_SLACK,
) -> Clusters:
    """Fold bow-tie sidelobe clusters into the brighter cluster whose burst made them.

    A burst arriving at the top of the band at ``t0`` with DM ``d0``, dedispersed at trial
    ``d``, is smeared over ``[t0 - D, t0]`` where ``D = delay(d - d0)`` across the band
    (``dispersion_delay_s(d - d0, f_min, f_max)``; negative for ``d < d0``): too high a DM
    makes it appear early, too low a DM late. A weaker head at ``(t, d)`` is a sidelobe of a
    brighter head at ``(t0, d0)`` when ``t - t0`` lies between ``0`` and ``-D`` within
    ``(w + w0) / 2 + slack`` samples. Its members, sample span and detector score join the
    brighter cluster; heads stay brightest first.

    Parameters
    ----------
    clusters : Clusters
        Output of :func:`cluster_giants` (brightest first).
    dms : np.ndarray
        DM trials of the plan, pc cm^-3 (indexed by ``heads.dm_index``).
    freqs_mhz : np.ndarray
        Channel centre frequencies, MHz.
    tsamp : float
        Sample time of ``heads.sample``, s.
    slack : float
        Extra tolerance on the time offset, samples.
    """
    n = len(clusters)
    if n < 2:
        return clusters
    if slack < 0 or tsamp <= 0:
        raise ParameterError(f"merge_sidelobes: need slack >= 0, tsamp > 0; got {slack}, {tsamp}")
    freqs = np.asarray(freqs_mhz, np.float64)
    heads = clusters.heads
    dm = np.asarray(dms, np.float64)[heads.dm_index]
    t = heads.sample.astype(np.float64)
    w = heads.width.astype(np.float64)
    members = clusters.members.copy()
    first, last = clusters.first_sample.copy(), clusters.last_sample.copy()
    score = clusters.score.copy()
    alive = np.ones(n, bool)
    for i in range(n):
        if not alive[i]:
            continue
        rest = np.flatnonzero(alive[i + 1 :]) + i + 1
        if rest.size == 0:
            break
        early = dispersion_delay_s(dm[rest] - dm[i], freqs.min(), freqs.max()) / tsamp
        lo, hi = np.minimum(0.0, -early), np.maximum(0.0, -early)
        tol = 0.5 * (w[rest] + w[i]) + slack
        offset = t[rest] - t[i]
        side = rest[(offset >= lo - tol) & (offset <= hi + tol) & (heads.snr[rest] <= heads.snr[i])]
        if side.size == 0:
            continue
        alive[side] = False
        members[i] += members[side].sum()
        first[i] = min(first[i], first[side].min())
        last[i] = max(last[i], last[side].max())
        score[i] = np.fmax(score[i], np.fmax.reduce(score[side]))
    return Clusters(heads.select(alive), members[alive], first[alive], last[alive], score[alive])
