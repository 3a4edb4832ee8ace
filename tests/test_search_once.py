"""The streaming search builds its plans once, shares no scratch between threads and makes
each candidate's cutouts once."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from drafts_ops import search
from drafts_ops.dedisp import subband
from drafts_ops.dedisp.operator import dedisperse
from drafts_ops.dedisp.plan import DMPlan, delay_table
from drafts_ops.dedisp.workspace import WorkspacePool, default_pool
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc
from drafts_ops.search import plan as search_plan
from drafts_ops.search import ranges as search_ranges
from drafts_ops.search import run as search_run
from drafts_ops.search import samples, streaming
from drafts_ops.search.windows import CutoutMaker

HEADER = Header(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, nbits=8, nsamples=12000)


@pytest.fixture(scope="module")
def observation(tmp_path_factory):
    rng = np.random.default_rng(4)
    data = rng.normal(100.0, 10.0, size=(64, 12000))
    for dm, at in ((150.0, 3000), (90.0, 8000)):
        for c, d in enumerate(delay_table(np.array([dm]), HEADER.chan_freqs, 1e-3)[0]):
            data[c, at + d : at + d + 3] += 30.0
    path = tmp_path_factory.mktemp("once") / "obs.fil"
    return write_sigproc(path, HEADER, np.clip(np.rint(data), 0, 255))


def _counting(monkeypatch, owner, name):
    calls = []
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_plans_are_built_once_per_search(observation, tmp_path, monkeypatch):
    subband._PLAN_CACHE.clear()
    search_plan._dm_plan_cached.cache_clear()
    search_ranges._range_dm_plan.cache_clear()
    search_ranges._chunk_plan.cache_clear()
    subband_plans = _counting(monkeypatch, subband, "auto_subband_plan")
    cfg = search.SearchConfig(dm_max=300.0, block_size=1024, classify=False,
                                write_h5=False, write_plots=False)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    assert len(plan.blocks) == 12
    dm_plans = _counting(monkeypatch, DMPlan, "build")
    search.search_segment(range(12), observation, plan, tmp_path)
    search.search_segment(range(12), observation, plan, tmp_path / "again")
    assert (len(subband_plans), len(dm_plans)) == (1, 1)  # 24 blocks, 2 passes: one each


def test_scratch_does_not_grow_with_the_number_of_blocks(observation, tmp_path):
    cfg = search.SearchConfig(dm_max=300.0, block_size=1024, classify=False,
                                write_h5=False, write_plots=False)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    counts = []
    for n in (4, 11):  # first, n-2 middle blocks of one shape, and block n - 1
        before = default_pool.allocations
        search.search_segment([*range(n - 1), 11], observation, plan, tmp_path / str(n))
        counts.append(default_pool.allocations - before)
    assert counts[0] == counts[1]  # reused by every middle block


def test_concurrent_calls_get_distinct_scratch():
    pool = WorkspacePool()
    got = {}
    together = threading.Barrier(2)

    def take(name):
        got[name] = pool.get("scratch", (8, 8), np.float32, token="plan")
        together.wait(timeout=10)  # both calls in flight at once

    threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is not got[1]
    assert pool.get("scratch", (8, 8), np.float32, token="plan") is not got[0]  # main thread


def test_concurrent_subband_calls_agree_with_serial(rng):
    freqs = 1500.0 - 4.0 * np.arange(64)
    plan = DMPlan.build(np.arange(0.0, 300.0, 2.0), freqs, 1e-3)
    blocks = [rng.normal(size=(64, 6000 + plan.max_delay)).astype(np.float32) for _ in range(4)]
    serial = [dedisperse(b, plan, algorithm="subband") for b in blocks]
    results: dict[int, np.ndarray] = {}

    def run(i):
        for _ in range(3):
            results[i] = dedisperse(blocks[i], plan, algorithm="subband")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_array_equal(results[i], serial[i])


def test_cutouts_are_made_once_per_candidate(observation, tmp_path, monkeypatch):
    made = _counting(monkeypatch, CutoutMaker, "cutouts")
    cfg = search.SearchConfig(dm_max=300.0, max_outputs=5)  # classify, .h5 and PNGs
    result = search.run_search(observation, tmp_path, cfg)
    assert result.candidates and len(made) == len(result.candidates)
    bursts = [i for i, c in enumerate(result.candidates[:5]) if c.is_burst]
    assert sorted(int(k[3:]) for k in result.outputs if k.startswith("h5:")) == bursts
    assert sorted(int(k[4:]) for k in result.outputs if k.startswith("png:")) == bursts


def test_h5_files_for_bursts_by_default_and_every_candidate_on_request(observation, tmp_path):
    written = {}
    for which in ("bursts", "all"):  # a threshold no candidate reaches: none is a burst
        cfg = search.SearchConfig(dm_max=300.0, max_outputs=5, h5_for=which,
                                  classifier_threshold=1.0, write_plots=False)  # fmt: skip
        result = search.run_search(observation, tmp_path / which, cfg)
        assert not any(c.is_burst for c in result.candidates)
        written[which] = sum(k.startswith("h5:") for k in result.outputs)
    assert written == {"bursts": 0, "all": min(5, len(result.candidates))}


def test_plan_notes_channel_smearing_of_frequency_decimation(tmp_path):
    header = Header(nchans=256, fch1=1500.0, foff=-300 / 256, tsamp=64e-6, nbits=8,
                    nsamples=200_000)  # fmt: skip
    data = np.full((256, 200_000), 128, np.uint8)
    path = write_sigproc(tmp_path / "raw.fil", header, data)
    coarse = search.plan_search(path, search.SearchConfig(dm_max=1000.0, freq_decimation=8))
    (note,) = coarse.notes
    assert "x8 frequency decimation smears a burst at DM" in note and "45.1 ms at 1205 MHz" in note
    native = search.plan_search(path, search.SearchConfig(dm_max=1000.0))
    assert native.notes == ()


def test_a_decimating_search_keeps_each_sample_once_in_a_file_per_block(observation,
                                                                       tmp_path):  # fmt: skip
    """The searched samples kept for the cutouts go to one written file per block, not a
    mapped file of the whole search whose pages stay resident (memory grew with the file);
    together they hold each sample once, from the first block's start on (the overlap a
    block shares with the next is kept by the first); read back across a file boundary
    they are the decimated data's exact uint16 sums (8-bit data: half the bytes of
    float32)."""
    from drafts_ops.io import open_observation
    from drafts_ops.search.samples import SearchedSamples

    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    assert len(plan.blocks) > 3
    search.search_segment(range(len(plan.blocks)), observation, plan, tmp_path)
    files = sorted(tmp_path.glob("searched_*.npy"))
    firsts = [int(p.stem.split("_")[1]) for p in files]
    lengths = [np.load(p, mmap_mode="r").shape[1] for p in files]
    assert 1 < len(files) <= len(plan.blocks)
    assert firsts[0] == plan.blocks[0].start
    assert [a + n for a, n in zip(firsts, lengths, strict=True)][:-1] == firsts[1:]  # once
    assert firsts[-1] + lengths[-1] == plan.blocks[-1].stop
    assert firsts[1] == plan.blocks[0].read_stop  # the first block kept its overlap too
    boundary = firsts[1]
    with open_observation(observation) as reader:
        expected = search.read_searched(reader, plan, boundary - 50, boundary + 50)
    got = SearchedSamples.find(tmp_path, plan).read(boundary - 50, boundary + 50)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got * np.float32(1 / 4), expected)


def test_a_decimating_search_reads_each_raw_sample_once(observation, tmp_path, monkeypatch):
    """Each block takes the samples it shares with the previous block from what that
    block kept, not from the file again: the file is read (and decimated) once."""
    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    spans = []
    real = search.read_searched

    def recording(reader, plan, start, stop, **kwargs):
        spans.append((start, stop))
        return real(reader, plan, start, stop, **kwargs)

    monkeypatch.setattr(samples, "read_searched", recording)
    search.search_segment(range(len(plan.blocks)), observation, plan, tmp_path)
    assert len(spans) == len(plan.blocks)
    read = sum(b - a for a, b in spans)
    assert read == plan.blocks[-1].read_stop - plan.blocks[0].read_start
    assert sum(b.read_stop - b.read_start for b in plan.blocks) > read  # the overlaps


def test_decimating_segments_keep_each_sample_once_and_give_the_same_cutouts(observation,
                                                                           tmp_path):  # fmt: skip
    """Blocks searched in two passes (as Dask workers search them) keep the samples
    contiguously between them, and the candidates and their cutouts equal one pass's."""
    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024, classify=False)  # fmt: skip
    one = search.run_search(observation, tmp_path / "one", cfg, keep_intermediates=True)
    two = search.run_search(observation, tmp_path / "two", cfg, segments=2,
                              keep_intermediates=True)  # fmt: skip
    files = sorted((tmp_path / "two" / "work").glob("searched_*.npy"))
    spans = [(int(p.stem.split("_")[1]), np.load(p, mmap_mode="r").shape[1]) for p in files]
    assert [a + n for a, n in spans][:-1] == [a for a, _ in spans][1:]
    assert spans[0][0] == two.plan.blocks[0].start
    assert one.candidates and one.candidates == two.candidates
    ft_one, dt_one = search.load_cutouts(tmp_path / "one" / "work" / "cutouts.npz")
    ft_two, dt_two = search.load_cutouts(tmp_path / "two" / "work" / "cutouts.npz")
    np.testing.assert_array_equal(ft_one, ft_two)
    np.testing.assert_array_equal(dt_one, dt_two)


def test_a_window_across_kept_files_copies_each_channel_only_as_far_as_its_cutouts_read(
    tmp_path,
):
    """A candidate's window across two kept files is copied a chunk of channels at a time,
    each only up to where its cutouts read (the high channels' delays are short); the
    cutouts equal those of the whole window."""
    from drafts_ops.detect.cutouts import channel_read_stops, cutout_pair
    from drafts_ops.search.samples import READ_CHANNEL_CHUNK, SearchedSamples

    rng = np.random.default_rng(2)
    header = HEADER.replace(nchans=4 * READ_CHANNEL_CHUNK, foff=-2.0)
    sums = rng.integers(300, 500, (header.nchans, 6000)).astype(np.float32)
    first = SearchedSamples.save(tmp_path / "a.npy", sums[:, :3000] / 4, factor=4)
    second = SearchedSamples.save(tmp_path / "b.npy", sums[:, 3000:] / 4, factor=4)
    kept = SearchedSamples([(0, first), (3000, second)], factor=4)
    freqs, dm, sample, width = header.chan_freqs, 300.0, 2800, 4
    stops = channel_read_stops(freqs, header.tsamp, dm, sample, width)
    lo, hi = 2800 - 256, int(stops.max())
    ragged = kept.read(lo, hi, row_stops=stops)
    whole = kept.read(lo, hi)
    assert ragged.shape == whole.shape and hi > 3000
    assert not ragged[0, -1] and whole[0, -1]  # the top channel stops early: not copied
    np.testing.assert_array_equal(ragged[-1], whole[-1])  # the bottom one reads it all
    for got, expected in zip(cutout_pair(ragged, freqs, header.tsamp, dm, sample - lo, width),
                             cutout_pair(whole, freqs, header.tsamp, dm, sample - lo, width),
                             strict=True):  # fmt: skip
        np.testing.assert_array_equal(got, expected)


def test_a_decimating_search_that_would_fill_the_disk_stops_before_searching(
    observation, tmp_path, monkeypatch
):
    """The samples a decimating search keeps must fit on the output's disk: if not, it
    stops with a storage error (ENOSPC, naming the work directory and the figures, as the
    CLI and a survey print it) before searching any block, not minutes later."""
    import errno
    import shutil

    from drafts_ops.cli import storage_problem
    from drafts_ops.search.samples import SearchedSamples
    from drafts_ops.survey.files import storage_error

    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    need = SearchedSamples.disk_bytes(plan)
    assert need == plan.header.nchans * (plan.blocks[-1].stop - plan.blocks[0].start) * 2
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=need - 1))
    searched = _counting(monkeypatch, search_run, "search_segment")
    with pytest.raises(OSError) as raised:
        search.run_search(observation, tmp_path / "full", cfg)
    err = raised.value
    assert err.errno == errno.ENOSPC and err.filename == str(tmp_path / "full" / "work")
    assert not searched
    figures = f"the {need / 2**20:,.0f} MiB of searched samples this decimating search"
    assert figures in storage_problem(err) and figures in storage_error(err)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=need))
    assert search.run_search(observation, tmp_path / "room", cfg).candidates


def test_kept_averages_that_are_not_sums_of_integers_stay_float32(tmp_path):
    """Averages of calibrated (float) data are kept as float32; a span across blocks kept
    both ways reads back as the averages."""
    from drafts_ops.search.samples import SearchedSamples

    rng = np.random.default_rng(1)
    sums = rng.integers(0, 255 * 4, (8, 100)).astype(np.float32)
    integral = SearchedSamples.save(tmp_path / "a.npy", sums / 4, factor=4)
    calibrated = SearchedSamples.save(tmp_path / "b.npy", sums / 4 + np.float32(0.01), factor=4)
    assert np.load(integral).dtype == np.uint16
    assert np.load(calibrated).dtype == np.float32
    kept = SearchedSamples([(0, integral), (100, calibrated)], factor=4)
    got = kept.read(50, 150)
    np.testing.assert_array_equal(got[:, :50], sums[:, 50:] / 4)
    np.testing.assert_allclose(got[:, 50:], sums[:, :50] / 4 + 0.01, rtol=1e-6)


@pytest.fixture(scope="module")
def float_observation(observation, tmp_path_factory):
    """``observation`` as 32-bit float samples that are not integers (calibrated data)."""
    from drafts_ops.io import open_observation

    with open_observation(observation) as reader:
        data = reader.read_all() * np.float32(0.37) + np.float32(0.011)
    path = tmp_path_factory.mktemp("float") / "obs32.fil"
    return write_sigproc(path, HEADER.replace(nbits=32), data)


@pytest.mark.parametrize("source", ["observation", "float_observation"])
def test_decimated_blocks_are_normalised_where_they_were_read(source, request, tmp_path,
                                                             monkeypatch):  # fmt: skip
    """A decimating search reads each block's float32 averages into its normalisation
    buffer and normalises them there (one float32 copy of the block, not two: longer
    blocks in the same memory budget), the samples a block shares with the previous one
    taken from what that block kept (uint16 sums of 8-bit data, float32 averages of float
    data); its giants equal those of a separate read of every block."""
    from drafts_ops.detect.single_pulse import Giants
    from drafts_ops.io import open_observation

    observation = request.getfixturevalue(source)

    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    dm_plan = plan.dm_plan()
    in_place = []
    real = streaming.search_block

    def recording(data, plan, block, dm_plan, buffers=None, **options):
        in_place.append(np.shares_memory(data, buffers.prepared))
        return real(data, plan, block, dm_plan, buffers, **options)

    monkeypatch.setattr(streaming, "search_block", recording)
    got = Giants.load(search.search_segment(range(len(plan.blocks)), observation, plan,
                                              tmp_path))  # fmt: skip
    assert in_place and all(in_place)
    kept = {np.load(p, mmap_mode="r").dtype for p in tmp_path.glob("searched_*.npy")}
    assert kept == {np.dtype(np.uint16 if source == "observation" else np.float32)}
    with open_observation(observation) as reader:
        parts = [real(search.read_searched(reader, plan, b.read_start, b.read_stop), plan, b,
                      dm_plan) for b in plan.blocks]  # fmt: skip
    expected = Giants.concatenate(parts)
    assert len(got) == len(expected) > 0
    for name in ("dm_index", "sample", "width", "snr"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))


def _mapped_rss_kib(path) -> int:
    """Resident KiB of this process's mappings of ``path`` (Linux ``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(),
                    reason="needs Linux /proc/self/smaps to see resident pages")  # fmt: skip
def test_kept_samples_pages_are_dropped_after_a_window(tmp_path):
    """Windows read from the kept samples leave no resident pages once released, so the
    cutouts stage does not grow with the number of candidates."""
    from drafts_ops.search.samples import SearchedSamples

    path = SearchedSamples.save(tmp_path / "kept.npy", np.ones((64, 100_000), np.float32))
    kept = SearchedSamples([(0, path)])
    assert float(kept.read(0, 100_000).sum()) == 64 * 100_000  # touches every page
    assert _mapped_rss_kib(path) > 20_000
    kept.release()
    assert _mapped_rss_kib(path) < 1_000


def test_a_decimating_search_holds_one_block_buffer_at_a_time(observation, tmp_path,
                                                              monkeypatch):  # fmt: skip
    """When a block of another length needs a new buffer (the first block lacks its left
    padding), the previous block's buffer is already gone: no block holds two."""
    import weakref

    cfg = search.SearchConfig(dm_max=300.0, time_decimation=2, freq_decimation=2,
                                block_size=1024)  # fmt: skip
    plan = search.plan_search(observation, cfg)
    assert len({b.read_len for b in plan.blocks}) > 1
    earlier, alive_at_read = [], []
    real = search.read_searched

    def watching(reader, plan, start, stop, *, out=None, **kw):
        alive_at_read.append([r() is not None for r in earlier if r() is not out])
        earlier.append(weakref.ref(out))
        return real(reader, plan, start, stop, out=out, **kw)

    monkeypatch.setattr(samples, "read_searched", watching)
    search.search_segment(range(len(plan.blocks)), observation, plan, tmp_path)
    assert len(alive_at_read) == len(plan.blocks)
    assert not any(any(alive) for alive in alive_at_read)


@pytest.mark.parametrize(("options", "kernel_dtype"), [
    ({}, np.uint8),  # the default: production sub-band, pixels clipped at 6 sigma
    ({"clip_pixels": 0.0}, np.float32),  # unclipped samples have no 8-bit range
    ({"algorithm": "brute"}, np.float32),
])  # fmt: skip
def test_the_sub_band_search_hands_its_kernel_8_bit_samples(observation, tmp_path, monkeypatch,
                                                            options, kernel_dtype):  # fmt: skip
    """The default search quantises each normalised block to uint8 for the sub-band
    kernel (16-bit stage 1) and finds the same bursts as the float32 search, at the same
    S/N to 2 % (the rounding moves each sample by < 0.025 sigma; the S/N's measured noise,
    a MAD of 1024 boxcar sums, moves by up to ~1 %)."""
    from drafts_ops import dedisp

    seen = []
    real = dedisp.dedisperse

    def spy(data, *args, **kwargs):
        seen.append(np.asarray(data).dtype)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(dedisp, "dedisperse", spy)
    base = {"dm_max": 300.0, "block_size": 4096, "classify": False, "write_h5": False,
            "write_plots": False}  # fmt: skip
    found = search.run_search(observation, tmp_path / "q",
                                search.SearchConfig(**base, **options))  # fmt: skip
    assert set(seen) == {np.dtype(kernel_dtype)}
    monkeypatch.setattr(search.SearchConfig, "quantises", property(lambda self: False))
    seen.clear()
    plain = search.run_search(observation, tmp_path / "f",
                                search.SearchConfig(**base, **options))  # fmt: skip
    assert set(seen) == {np.dtype(np.float32)}
    bursts = [(round(c.tcand_s, 2), round(c.dm)) for c in plain.candidates if c.snr > 10]
    assert len(bursts) == 2
    for c in plain.candidates:
        if c.snr > 10:
            match = [q for q in found.candidates
                     if abs(q.tcand_s - c.tcand_s) < 0.01 and abs(q.dm - c.dm) < 5]  # fmt: skip
            assert match and abs(match[0].snr - c.snr) < 0.02 * c.snr


def test_8_bit_blocks_are_quantised_over_the_samples_read(observation, tmp_path, monkeypatch):
    """Without decimation the search reads every block, the last and shorter one too, into
    one 8-bit buffer and writes the kernel's 8-bit levels over the samples there (no
    second block buffer, and a peak memory that does not depend on where the file ends),
    with the same giants as a search that reads each block into a new array."""
    from drafts_ops import dedisp
    from drafts_ops.detect.single_pulse import Giants

    cfg = search.SearchConfig(dm_max=300.0, block_size=4096, auto_decimation=False)
    plan = search.plan_search(observation, cfg)
    last = plan.blocks[-1]
    assert cfg.quantises and len(plan.blocks) >= 3
    assert last.read_stop - last.read_start < last.read_len  # the last block is short
    given, read = [], []
    real_dedisperse, real_read = dedisp.dedisperse, search.read_searched

    def dedispersing(data, *args, **kwargs):
        given.append(data)
        return real_dedisperse(data, *args, **kwargs)

    def reading(*args, **kwargs):
        read.append(real_read(*args, **kwargs))
        return read[-1]

    monkeypatch.setattr(dedisp, "dedisperse", dedispersing)
    monkeypatch.setattr(samples, "read_searched", reading)
    spent = Giants.load(search.search_segment(range(len(plan.blocks)), observation, plan,
                                                tmp_path / "spent"))  # fmt: skip
    assert len(given) == len(read) == len(plan.blocks)
    assert all(np.shares_memory(g, r) for g, r in zip(given, read, strict=True))

    def new_arrays(reader, plan, start, stop, **kwargs):
        read.append(real_read(reader, plan, start, stop))
        return read[-1]

    monkeypatch.setattr(samples, "read_searched", new_arrays)
    given.clear()
    read.clear()
    kept = Giants.load(search.search_segment(range(len(plan.blocks)), observation, plan,
                                               tmp_path / "kept"))  # fmt: skip
    assert not any(np.shares_memory(g, r) for g, r in zip(given, read, strict=True))
    assert len(spent) == len(kept) > 0
    for name in ("dm_index", "sample", "width", "snr"):
        np.testing.assert_array_equal(getattr(spent, name), getattr(kept, name))


def test_a_float_files_ranges_read_every_piece_into_one_buffer(float_observation, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    """Ranges of a 32-bit file read their pieces as float32 averages into one buffer of the
    pass (made anew per piece, a 4096-channel piece was 256 MiB of fresh memory each time),
    and find what they found before: the bursts of the observation."""
    from drafts_ops.detect.single_pulse import Giants
    from drafts_ops.search import range_pass
    from drafts_ops.search.buffers import BlockBuffers

    cfg = search.SearchConfig(dm_max=300.0)
    plan = search.plan_search(float_observation, cfg)
    assert plan.ranges  # the streaming pass of DM ranges (here the file's resolution only)
    monkeypatch.setattr(range_pass, "NORM_CHUNK", 1024)  # several pieces per block
    made = []
    real = BlockBuffers.get

    def recording(self, name, shape, dtype):
        buf = real(self, name, shape, dtype)
        if name == "floats":
            made.append(buf)
        return buf

    monkeypatch.setattr(BlockBuffers, "get", recording)
    outs = []
    real_read = range_pass.read_averaged
    monkeypatch.setattr(range_pass, "read_averaged", lambda *args, out=None: outs.append(out)
                        or real_read(*args, out=out))  # fmt: skip
    giants = Giants.load(search.search_segment(range(len(plan.blocks)), float_observation,
                                               plan, tmp_path))  # fmt: skip
    assert len(outs) > len(plan.blocks) and all(np.shares_memory(o, made[0]) for o in outs)
    assert {int(s) // 1000 for s in giants.sample[giants.snr > 10]} >= {3, 8}
