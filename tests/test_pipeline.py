"""Search pipeline stages: plan, blocks, merge, classify, outputs; end to end on 28.fil."""

from __future__ import annotations

import dataclasses
import itertools
import time

import h5py
import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import delay_table
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc
from drafts_ops.ml.inference import pool_dm_rows
from drafts_ops.search import (
    SearchConfig,
    classify_candidates,
    make_cutouts,
    merge_block_results,
    plan_search,
    samples,
    search_segment,
)
from drafts_ops.search.neural import keeps_detection
from drafts_ops.search.run import run_search

FAST = {"dm_min": 0.0, "dm_max": 300.0, "write_h5": False, "write_plots": False}
BURSTS = ((150.0, 1000), (60.0, 2500))  # (DM, arrival sample at the top of the band)


@pytest.fixture(scope="module")
def synthetic_fil(tmp_path_factory):
    """64 channels 1500..1248 MHz, 1 ms, 4000 samples, two bursts, one bad channel."""
    rng = np.random.default_rng(7)
    header = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=32, nsamples=4000)
    data = rng.normal(20.0, 2.0, size=(64, 4000)).astype(np.float32)
    for dm, at in BURSTS:
        for c, d in enumerate(delay_table(np.array([dm]), header.chan_freqs, 1e-3)[0]):
            data[c, at + d : at + d + 4] += 2.0
    data[9] += 40.0 * rng.standard_t(2, size=4000)  # impulsive RFI in one channel
    return write_sigproc(tmp_path_factory.mktemp("fil") / "two_bursts.fil", header, data)


def test_config_validation():
    with pytest.raises(ParameterError, match="detector"):
        SearchConfig(detector="neural")
    with pytest.raises(ParameterError, match="ml_min_snr"):
        SearchConfig(ml_min_snr=-1.0)
    with pytest.raises(ParameterError, match="DM range"):
        SearchConfig(dm_min=10.0, dm_max=5.0)
    with pytest.raises(ParameterError, match="unknown"):
        SearchConfig.from_dict({"dm_max": 100.0, "colour": "red"})
    cfg = SearchConfig(mask_channels=[3, 4])
    assert cfg.mask_channels == (3, 4)
    assert SearchConfig.from_dict(cfg.to_dict()) == cfg


def test_blocks_tile_the_whole_observation(synthetic_fil):
    plan = plan_search(synthetic_fil, SearchConfig(block_size=700, **FAST))
    assert [b.start for b in plan.blocks] == list(range(0, 4000, 700))
    assert plan.blocks[-1].stop == 4000  # to the end of the data, not nsamples - max_delay
    assert all(a.stop == b.start for a, b in itertools.pairwise(plan.blocks))
    assert all(b.read_len - (b.stop - b.read_start) >= plan.max_delay for b in plan.blocks)
    assert all(b.read_stop <= 4000 for b in plan.blocks)
    assert plan.summary()["searched_samples"] == 4000


def test_block_size_follows_the_memory_budget(synthetic_fil):
    """One DM range at the searched resolution (the DM ranges' blocks: test_dm_ranges)."""
    one = {"auto_decimation": False, **FAST}
    small = plan_search(synthetic_fil, SearchConfig(memory_budget_mib=400, **one))
    large = plan_search(synthetic_fil, SearchConfig(memory_budget_mib=4000, **one))
    assert small.block_size < large.block_size
    assert small.block_size % 1024 == 0 and small.block_size >= 4096


def test_detector_both_searches_the_same_blocks_as_the_classical_search(synthetic_fil):
    """The same blocks (so the same noise estimates and giants): --detector both can only
    add to the candidates of the classical search at one resolution (the neural detector
    sees one DM-time array: no DM ranges)."""
    for budget in (400, 4000):
        sizes = {plan_search(synthetic_fil, SearchConfig(memory_budget_mib=budget, detector=d,
                                                         auto_decimation=False,
                                                         **FAST)).block_size
                 for d in ("classical", "both", "ml")}  # fmt: skip
        assert len(sizes) == 1, sizes


@pytest.mark.parametrize("block_size", [100_000, 1000, 333])
def test_one_candidate_per_burst_whatever_the_blocks(synthetic_fil, tmp_path, block_size):
    """Burst 1 arrives exactly on the edge of the 1000-sample blocks."""
    cfg = SearchConfig(block_size=block_size, **FAST)
    result = run_search(synthetic_fil, tmp_path, cfg)
    cands = sorted(result.candidates, key=lambda c: c.sample)
    assert len(result.plan.blocks) == -(-4000 // block_size)
    assert len(cands) == 2, cands
    for cand, (dm, at) in zip(cands, BURSTS, strict=True):
        assert abs(cand.dm - dm) <= 4 and abs(cand.sample - (at + 2)) <= 2
        assert cand.snr > 12 and cand.width_samples in (3, 4, 6)  # a 4-sample top hat
        assert cand.tcand_s == pytest.approx(cand.sample * 1e-3)


def test_stages_compose(synthetic_fil, tmp_path):
    plan = plan_search(synthetic_fil, SearchConfig(block_size=1500, **FAST))
    assert plan.segments(2) == [(0, 1), (2,)]
    paths = [search_segment(part, synthetic_fil, plan, tmp_path) for part in plan.segments(2)]
    assert [p.name for p in paths] == ["giants_00000-00001.npz", "giants_00002-00002.npz"]
    cands = merge_block_results(paths, plan)
    assert len(cands) == 2 and cands[0].snr >= cands[1].snr


def test_classifier_seam_and_ml_errors(synthetic_fil, tmp_path):
    plan = plan_search(synthetic_fil, SearchConfig(**FAST))
    cands = merge_block_results([search_segment([0], synthetic_fil, plan, tmp_path)], plan)

    class Fake:
        def __init__(self):
            self.shapes = []

        def predict(self, freq_time, dm_time):
            self.shapes.append((freq_time.shape, dm_time.shape))
            return float(freq_time.mean(axis=1).max() > 0.5)

    fake = Fake()
    unscored = dataclasses.replace(plan, config=plan.config.replace(classify=False))
    assert make_cutouts(cands, synthetic_fil, unscored, tmp_path) is None  # nothing to write
    assert classify_candidates(cands, unscored, None, classifier=fake) == cands
    assert fake.shapes == []
    cutouts = make_cutouts(cands, synthetic_fil, plan, tmp_path)
    scored = classify_candidates(cands, plan, cutouts, classifier=fake)  # classical too
    assert [c.classifier_prob for c in scored] == [1.0, 1.0]
    assert fake.shapes == [((256, 256), (256, 256))] * 2


@dataclasses.dataclass
class _Peak:
    dm_index: float
    sample: float
    score: float


class _FakeDetector:
    """Reports the injected bursts (and one noise blip) in block coordinates, after
    ``noise_peaks`` higher-scoring peaks where there is nothing; like the real one it
    returns at most ``max_peaks`` of them (50 unless told otherwise), best first."""

    def __init__(self, plan, block, noise_peaks=0):
        dms = np.asarray(plan.dms)
        self.ndm = len(dms)
        self.peaks = [_Peak(3.0 + k % 5, 3300.0 + 10 * k - block.read_start, 0.95)
                      for k in range(noise_peaks)]  # fmt: skip
        self.peaks += [
            _Peak(float(np.argmin(abs(dms - dm))), at + 2.3 - block.read_start, 0.9)
            for dm, at in BURSTS
        ] + [_Peak(5.0, 1700.0 - block.read_start, 0.6)]
        self.rows = []  # what the search gave it, block by block

    def detect_pooled(self, rows, ndm, threshold=0.5, max_peaks=50):
        assert ndm == self.ndm
        self.rows.append(np.array(rows))
        found = [p for p in self.peaks if p.score >= threshold]
        return found if max_peaks is None else found[:max_peaks]

    @staticmethod
    def position_uncertainty(ndm):
        return 1, 2  # the fake places its peaks to a trial and two samples


@pytest.mark.parametrize("detector", ["ml", "both"])
def test_neural_detector_seam(synthetic_fil, tmp_path, monkeypatch, detector):
    every_peak = {"ml_min_snr": 0.0, "detector_faint_threshold": 0.0}
    plan = plan_search(synthetic_fil, SearchConfig(detector=detector, **every_peak, **FAST))
    fake = _FakeDetector(plan, plan.blocks[0])
    monkeypatch.setattr("drafts_ops.search.streaming.shipped_detector", lambda: fake)
    dedispersed = []  # the block's DM-time samples, before the boxcar search's S/N
    keep = plan.blocks[0].stop - plan.blocks[0].read_start

    def capture(_, dm_time):
        dedispersed.append(dm_time.copy())

    giants = search_segment([0], synthetic_fil, plan, tmp_path, on_dm_time=capture)
    # the network sees the dedispersed samples pooled to its 64 rows, not the S/N
    np.testing.assert_array_equal(fake.rows[0][:, :keep], pool_dm_rows(dedispersed[0]))
    cands = merge_block_results([giants], plan)
    bursts = sorted((c for c in cands if c.snr > 12), key=lambda c: c.sample)
    assert [c.detector_score for c in bursts] == pytest.approx([0.9, 0.9])
    assert all(abs(c.sample - (at + 2)) <= 2 for c, (_, at) in zip(bursts, BURSTS, strict=True))
    blip = [c for c in cands if c.detector_score == pytest.approx(0.6)]
    assert len(blip) == 1 and blip[0].snr < 6.5  # kept with its (low) boxcar S/N
    if detector == "ml":
        assert len(cands) == 3 and all(c.detector_score is not None for c in cands)
    # with a boxcar S/N floor (ml_min_snr) a detector peak without S/N behind it is dropped
    # ... and below the boxcar threshold a peak needs detector_faint_threshold (0.65)
    default = SearchConfig().detector_faint_threshold
    changes = (({"ml_min_snr": 5.0}, False), ({"detector_faint_threshold": default}, False),
               ({"detector_faint_threshold": 0.5}, True))  # fmt: skip
    for change, blip_kept in changes:
        config = plan.config.replace(**change)
        varied = dataclasses.replace(plan, config=config)
        cands = merge_block_results([search_segment([0], synthetic_fil, varied, tmp_path)], varied)
        assert any(c.detector_score == pytest.approx(0.6) for c in cands) == blip_kept, change
        assert sum(c.detector_score == pytest.approx(0.9) for c in cands) == 2


def test_every_detector_peak_reaches_the_snr_gate(synthetic_fil, tmp_path, monkeypatch):
    """A FAST-like block has 100-250 heatmap peaks of score >= 0.3, mostly noise: bursts
    that score below 60 noise peaks are still found (their boxcar S/N decides)."""
    plan = plan_search(synthetic_fil, SearchConfig(detector="ml", **FAST))
    fake = _FakeDetector(plan, plan.blocks[0], noise_peaks=60)
    monkeypatch.setattr("drafts_ops.search.streaming.shipped_detector", lambda: fake)
    cands = merge_block_results([search_segment([0], synthetic_fil, plan, tmp_path)], plan)
    bursts = [c for c in cands if c.detector_score == pytest.approx(0.9)]
    assert len(bursts) == 2 and all(c.snr > 12 for c in bursts)
    assert all(c.snr >= plan.config.ml_min_snr for c in cands)  # the noise peaks' gate


def test_faint_detections_need_a_higher_score():
    config = SearchConfig(detector="both")  # boxcar threshold 6.5, floor 6, faint score 0.65
    snr = np.array([5.9, 6.2, 6.2, 6.6, 6.6, 12.0], np.float32)
    score = np.array([0.9, 0.6, 0.75, 0.35, 0.9, 0.3], np.float32)
    assert keeps_detection(snr, score, config).tolist() == [False, False, True, True, True, True]
    with pytest.raises(ParameterError, match="detector_faint_threshold"):
        SearchConfig(detector_faint_threshold=1.5)


def test_too_short_observation_says_how_far_it_searched(synthetic_fil):
    plan = plan_search(synthetic_fil, SearchConfig(dm_max=20000.0))
    assert plan.dms[-1] < 20000.0 and len(plan.notes) == 1
    assert "too short for DM 20000" in plan.notes[0] and f"{plan.dms[-1]:.1f}" in plan.notes[0]
    assert plan.max_delay <= 4000 - 256
    with pytest.raises(ParameterError, match="shorter than the dispersion sweep"):
        plan_search(synthetic_fil, SearchConfig(dm_min=19000.0, dm_max=20000.0))


def test_real_pulse_in_28fil(real_data, tmp_path):
    """The GBT pulse: DM 475 +- 5, t = 2.029 +- 0.01 s, S/N >= 12, classified a burst."""
    t0 = time.perf_counter()
    result = run_search(real_data / "28.fil", tmp_path, SearchConfig(dm_max=1000.0, max_outputs=1))
    elapsed = time.perf_counter() - t0
    best = result.candidates[0]
    assert abs(best.dm - 475.0) <= 5.0
    assert abs(best.tcand_s - 2.029) <= 0.01
    assert best.snr >= 12.0
    assert best.width_samples in (1, 2, 4)
    assert best.classifier_prob is not None and best.classifier_prob >= 0.5  # a burst
    assert len(result.candidates) <= 3  # one real pulse; no flood of RFI candidates
    out = result.outputs
    assert out["csv"].exists() and out["cand"].exists() and out["png:0"].exists()
    with h5py.File(out["h5:0"]) as f:
        assert f["data_freq_time"].shape == (256, 256) and f.attrs["dm"] == best.dm
    print(f"28.fil: {best} in {elapsed:.2f} s, stages {result.timings}")


def test_classifier_threshold_decides_is_burst_and_plots(synthetic_fil, tmp_path):
    from drafts_ops.detect.writers import read_csv
    from drafts_ops.search import write_outputs

    class Constant:
        def predict(self, freq_time, dm_time):
            return 0.7

    for threshold, expected in ((0.6, True), (0.8, False)):
        cfg = SearchConfig(**{**FAST, "write_plots": True, "classifier_threshold": threshold})
        plan = plan_search(synthetic_fil, cfg)
        cands = merge_block_results([search_segment([0], synthetic_fil, plan, tmp_path)], plan)
        cutouts = make_cutouts(cands, synthetic_fil, plan, tmp_path)
        scored = classify_candidates(cands, plan, cutouts, classifier=Constant())
        assert [c.is_burst for c in scored] == [expected] * len(cands)
        out = write_outputs(scored, synthetic_fil, plan, tmp_path / str(threshold), cutouts)
        assert any(k.startswith("png:") for k in out) == expected  # PNGs for bursts only
        assert [c.is_burst for c in read_csv(out["csv"])] == [expected] * len(cands)


def test_end_of_the_data_is_searched_at_every_dm_that_fits(tmp_path):
    """A burst at DM 40 arriving 0.35 s before the end: inside the last max_delay samples of
    a DM 0-1000 search (whose largest sweep is ~1.3 s), but its own sweep (~50 ms) fits."""
    rng = np.random.default_rng(9)
    header = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=32, nsamples=4000)
    data = rng.normal(20.0, 2.0, size=(64, 4000)).astype(np.float32)
    at = 3650
    for c, d in enumerate(delay_table(np.array([40.0]), header.chan_freqs, 1e-3)[0]):
        data[c, at + d : at + d + 3] += 3.0
    path = write_sigproc(tmp_path / "late.fil", header, data)
    result = run_search(path, tmp_path / "out", SearchConfig(dm_max=1000.0, **{
        k: v for k, v in FAST.items() if k != "dm_max"}, classify=False))  # fmt: skip
    assert result.plan.max_delay > 4000 - at  # the old end, nsamples - max_delay, excluded it
    late = [c for c in result.candidates if abs(c.sample - (at + 1)) <= 3]
    assert late and abs(late[0].dm - 40.0) < 8 and late[0].snr > 10


def test_defaults_reach_dm_3000_in_production():
    cfg = SearchConfig()
    assert (cfg.dm_max, cfg.dedisp_mode, cfg.algorithm) == (3000.0, "production", "subband")


def test_burst_across_a_file_boundary_is_found_once(tmp_path):
    """Two consecutive PSRFITS files of one observation, searched as one stream: a burst
    whose sweep crosses the boundary gives one candidate at the right time and DM."""
    from drafts_ops.io.psrfits_writer import write_psrfits

    rng = np.random.default_rng(21)
    header = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=8000)
    data = rng.normal(100.0, 10.0, size=(64, 8000))
    at = 3900  # arrival at the top of the band; the low channels arrive after 4000
    for c, d in enumerate(delay_table(np.array([120.0]), header.chan_freqs, 1e-3)[0]):
        data[c, at + d : at + d + 3] += 25.0
    data = np.clip(np.rint(data), 0, 255).astype(np.uint8)
    files = []
    for k in range(2):
        part = header.replace(tstart=header.tstart + k * 4000 * 1e-3 / 86400.0, nsamples=4000)
        files.append(write_psrfits(tmp_path / f"obs_{k}.fits", part,
                                   data[:, k * 4000 : (k + 1) * 4000], nsblk=500))  # fmt: skip
    cfg = SearchConfig(dm_max=300.0, block_size=2048, classify=False, write_h5=False,
                       write_plots=False)  # fmt: skip
    result = run_search(files, tmp_path / "out", cfg)
    assert result.plan.header.nsamples == 8000 and result.plan.files == tuple(map(str, files))
    near = [c for c in result.candidates if abs(c.sample - (at + 1)) <= 30]
    assert len(near) == 1 and abs(near[0].dm - 120.0) < 10 and near[0].snr > 15


def test_search_reads_each_next_block_ahead(tmp_path, monkeypatch):
    """While a block is searched the file is asked for the next block's raw samples (a file
    read cold from disk is then read meanwhile), after this block's samples are read."""
    from drafts_ops import search
    from drafts_ops.io.sigproc import SigprocReader

    header = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=8000)
    data = np.random.default_rng(6).integers(0, 256, (64, 8000)).astype(np.uint8)
    path = write_sigproc(tmp_path / "raw.fil", header, data)
    config = SearchConfig(dm_max=100.0, block_size=2048, classify=False, write_h5=False,
                          auto_decimation=False,
                          write_plots=False)  # fmt: skip
    plan = search.plan_search(path, config)
    assert len(plan.blocks) >= 3
    events = []
    ahead, read = SigprocReader.prefetch, search.read_searched
    monkeypatch.setattr(SigprocReader, "prefetch",
                        lambda self, s, n: (events.append(("ahead", s, n)),
                                            ahead(self, s, n)))  # fmt: skip
    monkeypatch.setattr(samples, "read_searched",
                        lambda r, p, a, b, **kw: (events.append(("read", a, b)),
                                                  read(r, p, a, b, **kw))[1])  # fmt: skip
    search.run_search(path, tmp_path / "out", config)
    blocks = plan.blocks
    expected = [("read", blocks[0].read_start, blocks[0].read_stop)]
    for block in blocks[1:]:
        expected += [("ahead", block.read_start, block.read_len),
                     ("read", block.read_start, block.read_stop)]  # fmt: skip
    assert [e for e in events if e[0] in ("ahead", "read")][: len(expected)] == expected


def test_decimating_reader_reads_the_next_chunk_ahead(tmp_path, monkeypatch):
    """The decimating reader asks the file for each next chunk while it averages the
    current one (so the disk works meanwhile), and the averages do not depend on it."""
    from drafts_ops import search
    from drafts_ops.io import open_observation

    header = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=4000)
    data = np.random.default_rng(5).integers(0, 256, (64, 4000)).astype(np.uint8)
    path = write_sigproc(tmp_path / "raw.fil", header, data)
    config = SearchConfig(dm_max=100.0, time_decimation=4, freq_decimation=2)
    plan = search.plan_search(path, config)
    monkeypatch.setattr(samples, "DECIMATION_CHUNK_BYTES", 64 * 4 * 100)  # 100 per chunk
    calls = []
    with open_observation(path) as reader:
        ahead = reader.prefetch
        monkeypatch.setattr(reader, "prefetch", lambda s, n: (calls.append((s, n)), ahead(s, n)))
        out = search.read_searched(reader, plan, 0, 1000)
    expected = data.astype(np.float64).reshape(32, 2, 1000, 4).mean(axis=(1, 3))
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert calls[:2] == [(400, 400), (800, 400)]  # raw samples of the next chunk, in turn
    assert calls[-1] == (4000, 0) and len(calls) == 10
