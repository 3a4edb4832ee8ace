"""Friends-of-friends clustering: one candidate per burst, also across block edges."""

from __future__ import annotations

import numpy as np

from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.detect.candidates import candidates_from_clusters, reported_at_peaks
from drafts_ops.detect.cluster import (
    ClusterLinks,
    cluster_giants,
    labelled_clusters,
    merge_blocks,
)
from drafts_ops.detect.single_pulse import Giants, find_giants


def _giants(rows):
    dm, sample, width, snr = (np.array(col) for col in zip(*rows, strict=True))
    return Giants(dm.astype(np.int32), sample.astype(np.int64), width.astype(np.int32),
                  snr.astype(np.float32))  # fmt: skip


def test_two_groups_give_two_heads():
    g = _giants([
        (10, 1000, 2, 8.0), (11, 1001, 2, 12.0), (12, 1003, 4, 9.0), (13, 1005, 4, 7.0),
        (80, 1002, 1, 6.6),  # same time, far in DM: another cluster
        (11, 3000, 2, 7.5),
    ])  # fmt: skip
    c = cluster_giants(g, ClusterLinks(time_link=4, dm_link=5, width_link=2))
    assert len(c) == 3
    assert c.heads.snr.tolist() == [12.0, 7.5, 6.599999904632568]  # brightest first
    assert c.heads.sample.tolist() == [1001, 3000, 1002]
    assert c.members.tolist() == [4, 1, 1]
    assert (c.first_sample[0], c.last_sample[0]) == (1000, 1005)
    # with each giant's cluster: the giants sorted by sample, labels indexing the clusters
    same, giants, label = labelled_clusters(g, ClusterLinks(time_link=4, dm_link=5, width_link=2))
    assert same.heads.snr.tolist() == c.heads.snr.tolist()
    assert np.all(np.diff(giants.sample) >= 0)
    assert np.bincount(label).tolist() == [4, 1, 1]
    assert sorted(giants.dm_index[label == 2].tolist()) == [80]


def test_a_flat_topped_cluster_is_reported_at_the_centre_of_its_peak():
    # a wide burst's S/N over DM trials 10..20 is flat within the noise, the brightest
    # giant at the edge (trial 20): it reports the peak's centre, not that edge
    flat = [(d, 1000 + 2 * (15 - d), 45, 15.0 + 0.05 * (d % 3)) for d in range(10, 20)]
    g = _giants([*flat, (20, 990, 64, 15.52), (24, 982, 64, 12.0)])
    c = cluster_giants(g, ClusterLinks(time_link=8, dm_link=5, width_link=3))
    assert len(c) == 1
    assert (c.heads.dm_index[0], c.heads.snr[0]) == (20, np.float32(15.52))  # the brightest
    peak = c.peaks
    assert 14 <= peak.dm_index[0] <= 16
    assert peak.width[0] == 45 and peak.snr[0] >= 15.52 - 1.0
    assert peak.sample[0] == 1000 + 2 * (15 - peak.dm_index[0])  # that trial's own giant
    heads = candidates_from_clusters(c, np.arange(30.0), 1e-3)  # the sidelobe model's
    assert heads[0].dm_index == 20
    cand = reported_at_peaks(heads, c, np.arange(30.0), 1e-3)[0]
    assert (cand.dm_index, cand.sample, cand.width_samples) == (
        peak.dm_index[0],
        peak.sample[0],
        45,
    )
    assert cand.dm == float(peak.dm_index[0]) and cand.members == heads[0].members
    # a bright burst's S/N falls off within a trial: it reports its brightest giant
    sharp = _giants([(9, 1002, 2, 20.0), (10, 1000, 2, 30.0), (11, 998, 2, 19.0),
                     (12, 996, 4, 12.0)])  # fmt: skip
    peak = cluster_giants(sharp, ClusterLinks(time_link=8, dm_link=5, width_link=3)).peaks
    assert (peak.dm_index[0], peak.snr[0]) == (10, 30.0)


def test_width_link_separates_very_different_widths():
    g = _giants([(5, 100, 1, 9.0), (5, 104, 64, 8.0)])
    assert len(cluster_giants(g, ClusterLinks(time_link=8, dm_link=2, width_link=3))) == 2
    assert len(cluster_giants(g, ClusterLinks(time_link=8, dm_link=2, width_link=6))) == 1


def test_empty():
    c = cluster_giants(Giants.empty())
    assert len(c) == 0


def test_dispersed_bursts_give_one_candidate_each(rng):
    freqs = 1500.0 - 4.0 * np.arange(64.0)  # 256 MHz band
    plan = DMPlan.build(np.arange(0.0, 300.0, 2.0), freqs, 1e-3)
    data = rng.normal(size=(64, 3000)).astype(np.float32)
    truth = [(150.0, 700), (40.0, 1800)]
    for dm, at in truth:
        delays = plan.delays[plan.nearest_trial(dm)]
        for c, d in enumerate(delays):
            data[c, at + d : at + d + 3] += 1.5
    dmt = dedisperse_reference(data, plan.delays)
    clusters = cluster_giants(find_giants(dmt, threshold=6.5, max_width=16))
    assert len(clusters) == 2
    order = np.argsort(clusters.heads.sample)
    for (dm, at), i in zip(truth, order, strict=True):
        assert abs(int(clusters.heads.sample[i]) - (at + 1)) <= 1  # boxcar centre of 3 samples
        assert abs(plan.dms[clusters.heads.dm_index[i]] - dm) <= 4


def test_burst_across_block_edge_merges_to_one(rng):
    """Giants of one bow-tie split between two blocks still make one candidate."""
    freqs = 1500.0 - 4.0 * np.arange(64.0)  # 256 MHz band
    plan = DMPlan.build(np.arange(0.0, 300.0, 2.0), freqs, 1e-3)
    data = rng.normal(size=(64, 3000)).astype(np.float32)
    delays = plan.delays[plan.nearest_trial(150.0)]
    for c, d in enumerate(delays):
        data[c, 1500 + d : 1500 + d + 3] += 2.0
    dmt = dedisperse_reference(data, plan.delays)
    whole = cluster_giants(find_giants(dmt, max_width=16))
    left = find_giants(dmt, max_width=16, keep=(0, 1501))
    right = find_giants(dmt, max_width=16, keep=(1501, dmt.shape[1]))
    assert len(left) > 0 and len(right) > 0  # the edge cuts through the bow-tie
    merged = merge_blocks([left, right])
    assert len(whole) == len(merged) == 1
    assert merged.heads.sample[0] == whole.heads.sample[0]
    assert merged.members[0] == whole.members[0]


def _with_scores(giants: Giants, scores) -> Giants:
    return Giants(giants.dm_index, giants.sample, giants.width, giants.snr,
                  score=np.asarray(scores, np.float32))  # fmt: skip


def test_detector_giants_add_scores_and_candidates_but_never_regroup_boxcar_ones():
    """--detector both: the boxcar search's clusters are those it finds alone (heads,
    sizes, spans); a detector giant linked to one gives it its score, one far from every
    boxcar giant is a candidate of its own, and one lying between two boxcar clusters
    does not chain them into one."""
    links = ClusterLinks(time_link=10, dm_link=10, width_link=2)
    boxcar = _giants([(10, 1000, 2, 8.0), (11, 1001, 2, 12.0), (30, 1020, 2, 9.0),
                      (31, 1021, 2, 9.5)])  # fmt: skip
    neural = _with_scores(
        _giants([(11, 1002, 2, 12.0), (20, 1010, 2, 7.0), (60, 5000, 4, 6.5)]), [0.9, 0.8, 0.7]
    )  # the middle one sits between the two bursts, 9-10 trials from each
    alone = cluster_giants(boxcar, links)
    both = cluster_giants(Giants.concatenate([boxcar, neural]), links)
    chained = cluster_giants(
        Giants.concatenate([boxcar, Giants(neural.dm_index, neural.sample, neural.width,
                                           neural.snr)]), links)  # fmt: skip
    assert len(alone) == 2
    assert chained.members[0] == 6  # without scores, the giant at trial 20 chains the bursts
    assert len(both) == 3
    assert both.heads.snr[:2].tolist() == alone.heads.snr.tolist()
    assert both.heads.dm_index[:2].tolist() == alone.heads.dm_index.tolist()
    assert both.members[:2].tolist() == alone.members.tolist()
    assert both.first_sample[:2].tolist() == alone.first_sample.tolist()
    assert both.boxcar.tolist() == [True, True, False]
    assert both.score[0] == np.float32(0.9)  # the detector giant on the S/N 12 burst
    assert both.heads.sample[2] == 5000 and both.score[2] == np.float32(0.7)
