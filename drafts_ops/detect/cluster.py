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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.kernels import friends_of_friends
from drafts_ops.detect.single_pulse import Giants

if TYPE_CHECKING:
    from drafts_ops.detect.candidates import Candidate


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


def band_edges(
    freqs_mhz: np.ndarray, bands: Sequence[tuple[float, float]], band: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest frequency (MHz) of each giant's ``band`` (0: the full band of
    ``freqs_mhz``; ``k``: ``bands[k - 1]``, a sub-band search's ``(fmin, fmax)``)."""
    freqs = np.asarray(freqs_mhz, np.float64)
    table = np.array([(freqs.min(), freqs.max()), *bands], np.float64)
    index = np.asarray(band, np.int64)
    return table[index, 0], table[index, 1]


@dataclass(frozen=True)
class Response:
    """What a burst looks like at other DM trials: the trials (pc cm^-3), the band (MHz),
    the sampling time (s), the widest boxcar (samples) and the sub-bands searched on their
    own (``(fmin, fmax)`` MHz each, for giants with ``band > 0``); see
    :func:`sidelobe_snr`."""

    dms: np.ndarray
    freqs_mhz: np.ndarray
    tsamp: float
    max_width: int = 64
    bands: tuple[tuple[float, float], ...] = ()

    def smear(self, dm_index: np.ndarray, dm0_index: int, band=0) -> np.ndarray:
        """Samples over which a pulse at trial ``dm0_index`` is smeared at ``dm_index`` (in
        the giants' ``band``: the full band, or a sub-band's narrower sweep)."""
        dms = np.asarray(self.dms, np.float64)
        delta = np.abs(dms[np.asarray(dm_index)] - dms[dm0_index])
        lo, hi = band_edges(self.freqs_mhz, self.bands, np.broadcast_to(band, delta.shape))
        return dispersion_delay_s(delta, lo, hi) / self.tsamp

    def explains(self, head: int, giants: Giants, members: np.ndarray) -> np.ndarray:
        """Which ``members`` the burst at giant ``head`` can have produced: no brighter than
        its response at their DM (in their band) and at least as wide as its smeared pulse
        (see :func:`plausible_sidelobe`)."""
        band = giants.band[members]
        smear = self.smear(giants.dm_index[members], int(giants.dm_index[head]), band)
        lo, hi = band_edges(self.freqs_mhz, self.bands, band)
        return plausible_sidelobe(giants.snr[head], giants.width[head], smear,
                                  giants.snr[members], giants.width[members], self.max_width,
                                  sweep_density_between(lo, hi))  # fmt: skip


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


#: Default slack (samples) of :func:`merge_sidelobes` beyond half the sum of the widths.
SIDELOBE_SLACK = 8
#: A weaker cluster is a sidelobe only if its S/N is at most this factor times the S/N the
#: brighter burst itself produces at that DM (:func:`sidelobe_snr`) plus
#: :data:`SIDELOBE_SNR_MARGIN`, and its boxcar is at least
#: :data:`SIDELOBE_WIDTH_FRACTION` of the smeared width (capped at the widest boxcar).
#: Measured on 27 simulated bright bursts (S/N 30-250, widths 0.5-8 ms, DM 100-1000, 256
#: channels at 512 us, 1200-1500 MHz): the 26 sidelobe clusters in their cones had S/N
#: 6.5-8.9 against predicted 4-30, every one within 1.0x the prediction + 3 (noise lifts
#: far-arm sidelobes over the threshold: hence the additive margin); and on 36 simulated
#: zero-DM impulses (S/N 60-180): their 8995 arm giants within 1.53x + 3 (99 % within
#: 1.11x). Boxcars of sidelobes: 23-64 samples, at least a quarter of the smeared width.
SIDELOBE_SNR_FACTOR = 1.6
SIDELOBE_SNR_MARGIN = 3.0
SIDELOBE_WIDTH_FRACTION = 0.25
#: Margin over the response at a head's own boxcar (:func:`response_at_width`): the
#: brightest of a cluster's many giants rides about 3 sigma of noise above the response.
OWN_WIDTH_MARGIN = 4.0


def sidelobe_snr(
    snr: float | np.ndarray,
    width: float | np.ndarray,
    smear: float | np.ndarray,
    max_width: float,
    density: float = 1.0,
) -> np.ndarray:
    """S/N a burst of ``snr`` and boxcar ``width`` (samples) shows at a wrong DM.

    Dedispersed at a DM off by ``dDM``, the pulse is smeared over ``smear`` samples (the
    delay of ``dDM`` across the band). The sweep is slowest at the top of the band, where
    the channels crowd ``density`` times more than on average (:func:`sweep_density`), so
    the bulk of the flux lies within ``smear / density``: the effective width is ``W =
    sqrt(width^2 + (smear / density)^2)``. The best boxcar (at most ``max_width`` samples)
    then collects ``S/N * sqrt(width / W)`` while ``W`` fits it, and ``S/N * sqrt(width *
    max_width) / W`` beyond. A top-hat model; cf. Cordes & McLaughlin 2003 for Gaussian
    pulses and a fixed boxcar.
    """
    width = np.maximum(np.asarray(width, np.float64), 1.0)
    smeared = np.sqrt(width**2 + (np.asarray(smear, np.float64) / np.maximum(density, 1.0)) ** 2)
    fits = np.asarray(snr) * np.sqrt(width / smeared)
    wider = np.asarray(snr) * np.sqrt(width * max_width) / smeared
    return np.where(smeared <= max_width, fits, wider)


def plausible_sidelobe(  # noqa: PLR0917
    snr0: float, width0: float, smear: np.ndarray, snr: np.ndarray, width: np.ndarray,
    max_width: int, density: float,
) -> np.ndarray:  # fmt: skip
    """Whether detections of ``snr`` and boxcar ``width`` (samples), ``smear`` samples of DM
    sweep away from a burst of ``snr0`` and ``width0``, can be that burst's own response:
    S/N within the predicted response (:func:`sidelobe_snr`, and
    :func:`response_at_width` at the head's own boxcar) plus
    :data:`SIDELOBE_SNR_MARGIN` (:data:`OWN_WIDTH_MARGIN`) for noise on the response, or at most
    :data:`SIDELOBE_SNR_FACTOR` times it plus the margin with a boxcar at least
    :data:`SIDELOBE_WIDTH_FRACTION` of the smeared width (capped at the widest boxcar): a
    real burst in the cone of a bright one or of an impulse is brighter, or brighter and
    narrower, than that response."""
    expected = sidelobe_snr(snr0, width0, smear, max_width, density)
    smeared = np.minimum(np.sqrt(float(width0) ** 2 + (np.asarray(smear) / density) ** 2),
                         max_width)  # fmt: skip
    snr = np.asarray(snr)
    at_own_width = response_at_width(snr0, width0, smear, width, density)
    within = snr <= np.minimum(expected + SIDELOBE_SNR_MARGIN, at_own_width + OWN_WIDTH_MARGIN)
    wide = np.asarray(width) >= SIDELOBE_WIDTH_FRACTION * smeared
    return within | (wide & (snr <= SIDELOBE_SNR_FACTOR * expected + SIDELOBE_SNR_MARGIN))


def response_at_width(
    snr0: float, width0: float, smear: np.ndarray, width: np.ndarray, density: float = 1.0
) -> np.ndarray:
    """S/N of a burst (``snr0``, boxcar ``width0`` samples) smeared by ``smear`` samples, seen
    through a boxcar of ``width`` samples: its flux spreads over ``W = sqrt(width0^2 +
    (smear / density)^2)``, so a narrower boxcar collects ``snr0 sqrt(width0 width) / W``
    and a wider one ``snr0 sqrt(width0 / width)``. A head far above this at its own width
    is not the smeared response (e.g. a narrow burst on the long plateau a zero-DM impulse
    leaves at high DM)."""
    w0 = max(float(width0), 1.0)
    w = np.maximum(np.asarray(width, np.float64), 1.0)
    smeared = np.sqrt(w0**2 + (np.asarray(smear, np.float64) / np.maximum(density, 1.0)) ** 2)
    return np.where(w < smeared, snr0 * np.sqrt(w0 * w) / smeared, snr0 * np.sqrt(w0 / w))


def sweep_density(freqs_mhz: np.ndarray) -> float:
    """Peak-to-mean density in time of a dispersed pulse's channels over the band.

    With channels uniform in frequency and delays ``∝ f^-2``, the sweep is slowest at the
    top of the band: ``f_max^3 (f_min^-2 - f_max^-2) / (2 (f_max - f_min))`` (1.4 for
    1200-1500 MHz, 1.9 for 1000-1500 MHz).
    """
    return float(sweep_density_between(np.min(freqs_mhz), np.max(freqs_mhz)))


def sweep_density_between(fmin, fmax) -> np.ndarray:
    """:func:`sweep_density` of bands ``[fmin, fmax]`` (MHz, arrays broadcast; 1 for a
    single frequency)."""
    lo, hi = np.broadcast_arrays(np.asarray(fmin, np.float64), np.asarray(fmax, np.float64))
    span = np.where(hi > lo, hi - lo, 1.0)
    density = hi**3 * (lo**-2 - hi**-2) / (2.0 * span)
    return np.where(hi > lo, density, 1.0)


def merge_sidelobes(clusters: Clusters, *args: Any, **options: Any) -> Clusters:
    """Fold bow-tie sidelobe clusters into the brighter cluster whose burst made them
    (:func:`sidelobe_owners`, arguments as there, then :func:`fold_clusters`): a
    sidelobe's members, sample span and detector score join the brighter cluster; heads
    stay brightest first."""
    return fold_clusters(clusters, sidelobe_owners(clusters, *args, **options))[0]


def sidelobe_owners(
    clusters: Clusters,
    dms: np.ndarray,
    freqs_mhz: np.ndarray,
    tsamp: float,
    *,
    slack: float = SIDELOBE_SLACK,
    max_width: int = 64,
    bands: Sequence[tuple[float, float]] = (),
) -> np.ndarray:
    """Which brighter cluster each of ``clusters`` is a bow-tie sidelobe of: its index, or
    the cluster's own when none (:func:`merge_sidelobes` folds them in).

    A burst arriving at the top of the band at ``t0`` with DM ``d0``, dedispersed at trial
    ``d``, is smeared over ``[t0 - D, t0]`` where ``D = delay(d - d0)`` across the band
    (``dispersion_delay_s(d - d0, f_min, f_max)``; negative for ``d < d0``): too high a DM
    makes it appear early, too low a DM late. A weaker head at ``(t, d)`` is a sidelobe of a
    brighter head at ``(t0, d0)`` when ``t - t0`` lies between ``0`` and ``-D`` within
    ``(w + w0) / 2 + slack`` samples, *and* its S/N is no more than the brighter burst
    itself produces there (:func:`plausible_sidelobe`)
    *and* its boxcar is as wide as a smeared pulse's (:data:`SIDELOBE_WIDTH_FRACTION`):
    a distinct burst inside the cone of a brighter one (or of a zero-DM impulse) is
    brighter than that response and stays a candidate of its own. A cluster of boxcar
    giants is never a sidelobe of one the neural detector found alone.

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
    max_width : int
        Widest boxcar of the search, samples.
    bands : sequence of (float, float)
        ``(fmin, fmax)`` MHz of the sub-bands searched on their own: a weaker head found
        in sub-band ``k`` is judged by the sweep of that sub-band, which lies between the
        delays of its edges below the top of the full band.
    """
    n = len(clusters)
    owners = np.arange(n)
    if n < 2:
        return owners
    if slack < 0 or tsamp <= 0:
        raise ParameterError(f"merge_sidelobes: need slack >= 0, tsamp > 0; got {slack}, {tsamp}")
    freqs = np.asarray(freqs_mhz, np.float64)
    heads = clusters.heads
    band_lo, band_hi = band_edges(freqs, bands, heads.band)
    density = sweep_density_between(band_lo, band_hi)
    dm = np.asarray(dms, np.float64)[heads.dm_index]
    t = heads.sample.astype(np.float64)
    w = heads.width.astype(np.float64)
    alive = np.ones(n, bool)
    for i in range(n):
        if not alive[i]:
            continue
        rest = np.flatnonzero(alive[i + 1 :]) + i + 1
        if rest.size == 0:
            break
        top = dispersion_delay_s(dm[rest] - dm[i], band_hi[rest], freqs.max()) / tsamp
        bottom = dispersion_delay_s(dm[rest] - dm[i], band_lo[rest], freqs.max()) / tsamp
        lo, hi = np.minimum(-top, -bottom), np.maximum(-top, -bottom)
        tol = 0.5 * (w[rest] + w[i]) + slack
        offset = t[rest] - t[i]
        plausible = plausible_sidelobe(heads.snr[i], w[i], np.abs(bottom - top), heads.snr[rest],
                                       w[rest], max_width, density[rest])  # fmt: skip
        plausible &= heads.snr[rest] <= heads.snr[i]
        plausible &= clusters.boxcar[i] | ~clusters.boxcar[rest]  # the detector only adds
        side = rest[(offset >= lo - tol) & (offset <= hi + tol) & plausible]
        if side.size == 0:
            continue
        alive[side] = False
        owners[side] = i
    return owners


def fold_clusters(clusters: Clusters, owners: np.ndarray) -> tuple[Clusters, np.ndarray]:
    """``clusters`` with each one folded into ``owners[k]`` (its own index: kept; an owner
    is its own owner): members and sample spans added, the best detector score kept, order
    kept. Also returns where each cluster went (its owner's index in the result)."""
    owners = np.asarray(owners, np.int64)
    alive = owners == np.arange(len(clusters))
    position = np.cumsum(alive) - 1
    into = position[owners]
    n = int(alive.sum())
    members = np.bincount(into, clusters.members, n).astype(np.int64)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, into, clusters.first_sample)
    np.maximum.at(last, into, clusters.last_sample)
    score = np.full(n, np.nan, np.float32)
    np.fmax.at(score, into, clusters.score.astype(np.float32))
    folded = Clusters(clusters.heads.select(alive), members, first, last, score,
                      clusters.boxcar[alive], clusters.peaks.select(alive))  # fmt: skip
    return folded, into


#: A burst whose emission covers less than this fraction of the band is band-limited for
#: :func:`fold_measured_sidelobes` (a wider one is left to :func:`merge_sidelobes`).
BAND_LIMITED_FRACTION = 0.6
#: Narrowest emitting band (fraction of the band) assumed before the spectrum is measured.
NARROWEST_EMISSION = 0.1
#: Widest pulse (multiple of the widest boxcar) assumed for a candidate at the widest
#: boxcar before its pulse is measured.
WIDEST_PULSE = 16
#: A candidate at the widest boxcar whose measured pulse is at least this many times wider
#: has its arms judged on the measured pulse (:func:`fold_measured_sidelobes`).
WIDER_THAN_BOXCAR = 1.5
#: Faintest burst whose spectrum is measured (its spectrum must stand out of the noise).
#: 8 -> 7 on three tuning sets (seeds 777, 778 and 779's band-limited bursts): false
#: positives after the classifier 0.61 -> 0.61, 1.33 -> 1.00, 1.71 -> 0.69 per minute
#: (the arms of faint band-limited bursts), no burst lost or gained; at 6.5 a burst of S/N
#: 7.3 was lost to its own zero-DM arm, measured as the brighter of the two.
SPECTRUM_MIN_SNR = 7.0
#: An arm of a band-limited burst emits only where the burst does: a weaker candidate
#: (S/N >= :data:`SPECTRUM_MIN_SNR`) whose pulse reaches this S/N in the channels outside
#: the burst's band (widened by the band's own width on either side) is a burst of its own
#: (e.g. a broadband burst on the bow-tie arm of narrow-band RFI).
ARM_OUTSIDE_SNR = 5.0
#: Arms of one burst whose emission outside its band is measured, brightest first (each
#: test reads its window: ~6 ms at 1024 channels; narrow-band RFI can have hundreds of arms).
ARM_TESTS = 12


@dataclass(frozen=True)
class PulseShape:
    """A candidate's pulse as its dedispersed waterfall shows it: the band where it emits
    (MHz), its width (samples, may exceed the search's widest boxcar) and its S/N at that
    width."""

    f_lo_mhz: float
    f_hi_mhz: float
    width_samples: float
    snr: float


def _crossing_window(d_dm: np.ndarray, f_lo: float, f_hi: float, f_top: float, tsamp: float):
    """Offsets (samples, ``[lo, hi]``) at which a burst emitting over ``f_lo..f_hi`` MHz
    appears when dedispersed ``d_dm`` too high (early) or too low (late)."""
    a = -dispersion_delay_s(d_dm, f_lo, f_top) / tsamp
    b = -dispersion_delay_s(d_dm, f_hi, f_top) / tsamp
    return np.minimum(a, b), np.maximum(a, b)


def _arms(  # noqa: PLR0917
    bright: Candidate, shape: PulseShape, others: list[Candidate], f_top: float, tsamp: float,
    max_width: int,
) -> np.ndarray:  # fmt: skip
    """Which ``others`` the burst ``bright``, with pulse ``shape``, produces at their DMs:
    inside its crossing window and no brighter than its response (:func:`plausible_sidelobe`
    with the smear across the emitting band)."""
    f_lo, f_hi = shape.f_lo_mhz, shape.f_hi_mhz
    d_dm = np.array([c.dm - bright.dm for c in others])
    offset = np.array([c.sample - bright.sample for c in others], np.float64)
    width = np.array([c.width_samples for c in others], np.float64)
    snr = np.array([c.snr for c in others])
    lo, hi = _crossing_window(d_dm, f_lo, f_hi, f_top, tsamp)
    tol = 0.5 * (width + shape.width_samples) + SIDELOBE_SLACK
    inside = (offset >= lo - tol) & (offset <= hi + tol)
    smear = np.abs(dispersion_delay_s(d_dm, f_lo, f_hi)) / tsamp
    density = float(sweep_density_between(f_lo, f_hi))
    plausible = plausible_sidelobe(shape.snr, shape.width_samples, smear, snr, width,
                                   max_width, density)  # fmt: skip
    return inside & plausible & (snr <= bright.snr)


def _widened(shape: PulseShape) -> tuple[float, float]:
    """``shape``'s emitting band (MHz) widened by its own width on either side: an envelope
    measured at half power keeps little of its flux beyond."""
    width = shape.f_hi_mhz - shape.f_lo_mhz
    return shape.f_lo_mhz - width, shape.f_hi_mhz + width


def _may_have_arms(
    bright: Candidate, others: list[Candidate], freqs: np.ndarray, tsamp: float, max_width: int
) -> bool:
    """Whether some of ``others`` could be arms of ``bright`` if it emitted over only
    :data:`NARROWEST_EMISSION` of the band, or (at the widest boxcar) if its pulse were up
    to :data:`WIDEST_PULSE` times wider: worth measuring its pulse."""
    f_min, f_top = float(freqs.min()), float(freqs.max())
    half = NARROWEST_EMISSION * (f_top - f_min) / 2
    shapes = [PulseShape(max(c - half, f_min), min(c + half, f_top), bright.width_samples,
                         bright.snr) for c in np.linspace(f_min, f_top, 11)]  # fmt: skip
    if bright.width_samples >= max_width:
        shapes.append(PulseShape(f_min, f_top, WIDEST_PULSE * bright.width_samples,
                                 bright.snr * np.sqrt(WIDEST_PULSE)))  # fmt: skip
    return any(_arms(bright, s, others, f_top, tsamp, max_width).any() for s in shapes)


def fold_measured_sidelobes(
    candidates: Sequence[Candidate],
    pulse_shape: Callable[[Candidate], PulseShape],
    freqs_mhz: np.ndarray,
    tsamp: float,
    *,
    max_width: int = 64,
    boxcar: Sequence[bool] | None = None,
    snr_outside: Callable[[Candidate, float, float], float] | None = None,
) -> list[Candidate]:
    """Fold the sidelobes of band-limited and of very wide bursts into them, judged on
    their own measured pulse.

    :func:`merge_sidelobes` predicts a burst's response at a wrong DM from the smear across
    the whole band and the burst's boxcar. A burst emitting over a tenth of the band is
    smeared ten times less, so its bow-tie arms stay bright; a scattered burst wider than
    the widest boxcar is brighter and smeared less (relative to its width) than its boxcar
    says; either way its arms survive as candidates of their own. Here each candidate
    (brightest first, S/N >= :data:`SPECTRUM_MIN_SNR`) that could have such arms
    (:func:`_may_have_arms`) has its pulse measured (``pulse_shape(candidate)``, from the
    data: emitting band, width and S/N at that width); if it is band-limited (<
    :data:`BAND_LIMITED_FRACTION` of the band) or at the widest boxcar and
    :data:`WIDER_THAN_BOXCAR` times wider, the weaker candidates its measured pulse explains
    (crossing window, S/N and width: :func:`plausible_sidelobe` with the smear across the
    emitting band) join it, except, for a band-limited one, those (S/N >=
    :data:`SPECTRUM_MIN_SNR`; the :data:`ARM_TESTS` brightest) whose pulse shows S/N
    :data:`ARM_OUTSIDE_SNR` outside its band (``snr_outside(candidate, f_lo, f_hi)``,
    MHz; the band widened by its width on either side): a broadband burst on the arm of
    narrow-band RFI. A burst that fills the band at its boxcar's width keeps every other
    candidate; so does a candidate brighter than the response. Members and sample spans
    are added; order is kept. ``boxcar`` (one flag per candidate, default all True, as
    :attr:`Clusters.boxcar`): a candidate of the boxcar search is never folded into one
    the neural detector found alone.
    """
    cands = list(candidates)
    if len(cands) < 2:
        return cands
    boxcar = [True] * len(cands) if boxcar is None else [bool(b) for b in boxcar]
    freqs = np.asarray(freqs_mhz, np.float64)
    f_top, span = float(freqs.max()), float(np.ptp(freqs))
    alive = [True] * len(cands)
    for i, bright in enumerate(cands):
        if not alive[i] or bright.snr < SPECTRUM_MIN_SNR:
            continue
        rest = [j for j in range(i + 1, len(cands)) if alive[j]]
        if not rest:
            break
        others = [cands[j] for j in rest]
        if not _may_have_arms(bright, others, freqs, tsamp, max_width):
            continue
        shape = pulse_shape(bright)
        limited = shape.f_hi_mhz - shape.f_lo_mhz < BAND_LIMITED_FRACTION * span
        wide = (bright.width_samples >= max_width
                and shape.width_samples >= WIDER_THAN_BOXCAR * bright.width_samples)  # fmt: skip
        if not (limited or wide):
            continue
        if not wide:  # the boxcar's width and S/N stand
            shape = replace(shape, width_samples=bright.width_samples, snr=bright.snr)
        side = _arms(bright, shape, others, f_top, tsamp, max_width)
        side &= np.array([boxcar[i] or not boxcar[j] for j in rest])
        if limited and snr_outside is not None:  # an arm emits only in the burst's band
            f_lo, f_hi = _widened(shape)
            bright_arms = [k for k, j in enumerate(rest)
                           if side[k] and cands[j].snr >= SPECTRUM_MIN_SNR][:ARM_TESTS]  # fmt: skip
            for k in bright_arms:
                side[k] = snr_outside(cands[rest[k]], f_lo, f_hi) < ARM_OUTSIDE_SNR
        folded = [cands[j] for j, s in zip(rest, side, strict=True) if s]
        if not folded:
            continue
        for j, s in zip(rest, side, strict=True):
            alive[j] = alive[j] and not s
        cands[i] = bright.replace(
            members=bright.members + sum(c.members for c in folded),
            first_sample=min([bright.first_sample, *(c.first_sample for c in folded)]),
            last_sample=max([bright.last_sample, *(c.last_sample for c in folded)]),
        )
    return [c for c, a in zip(cands, alive, strict=True) if a]


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
    from drafts_ops.detect.candidates import candidates_from_clusters, reported_at_peaks

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
