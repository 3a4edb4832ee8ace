"""The DM plan in ranges (issue 50): which ranges a header gets, their blocks against
their overlap and the memory budget, the S/N they cost, and `drafts plan`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drafts_ops.cli import main
from drafts_ops.dedisp.ddplan import LOSS_TARGET, dedispersed_snr_loss, plan_ranges
from drafts_ops.dedisp.plan import DMPlan, smearing_s, tolerance_dm_trials
from drafts_ops.detect.preprocess import NORM_CHUNK
from drafts_ops.io.header import Header
from drafts_ops.search import SearchConfig, plan_search, run_search
from drafts_ops.search.ranges import MIN_OVERLAP_RATIO, RANGE_RESERVE_MIB, range_block_size
from tests._io_util import sigproc_bytes, valid_fields, write_bytes

#: The survey bands' headers: FAST raw, FAST-like, GBT-like.
BANDS = {
    "fast-raw": {"nchans": 4096, "tsamp": 49.152e-6, "fch1": 1500.0, "foff": -500 / 4096},
    "fast": {"nchans": 1024, "tsamp": 196.608e-6, "fch1": 1500.0, "foff": -500 / 1024},
    "gbt": {"nchans": 336, "tsamp": 1.26646875e-3, "fch1": 1465.0, "foff": -1.0},
}
#: The plans of DM 0-3000, checked by hand: (factor, lowest DM, highest DM) per range.
#: FAST raw and FAST-like average 2 samples from DM ~513: there the top channel smears an
#: unresolved burst over 8.3e-6 * 513 * 0.122 MHz / 1.5^3 = 154 us = 3.1 FAST raw samples
#: (FAST-like: 618 us = 3.1 of its samples: the same plan in samples), wide enough that
#: pairs of samples cost it under 3.5 %; GBT-like's few wide channels keep it at its own
#: resolution to DM ~2650.
EXPECTED = {
    "fast-raw": [(1, 0.0, 512.8), (2, 513.1, 1163.0), (4, 1163.9, 2583.9), (8, 2585.8, 3000.1)],
    "fast": [(1, 0.0, 514.8), (2, 516.3, 1197.4), (4, 1200.9, 3003.2)],
    "gbt": [(1, 0.0, 2650.0), (2, 2673.5, 3005.0)],
}


@pytest.mark.parametrize("band", list(BANDS))
def test_each_band_gets_its_hand_checked_ranges(band):
    b = BANDS[band]
    ranges = plan_ranges(0.0, 3000.0, **b)
    got = [(r.factor, r.dm_lo, r.dm_hi) for r in ranges]
    assert [g[0] for g in got] == [e[0] for e in EXPECTED[band]]
    for (_, lo, hi), (_, elo, ehi) in zip(got, EXPECTED[band], strict=True):
        assert lo == pytest.approx(elo, abs=0.02 * max(elo, 50))
        assert hi == pytest.approx(ehi, rel=0.02)
    smear = float(smearing_s(ranges[1].dm_lo, b["foff"], b["fch1"])) / b["tsamp"]
    if band != "gbt":
        assert smear == pytest.approx(3.1, abs=0.1)
    for r in ranges:  # each range's trials: the tolerance rule at its own sample time
        again = tolerance_dm_trials(r.dm_lo, r.dm_hi, tsamp=b["tsamp"] * r.factor,
                                    fch1=b["fch1"], foff=b["foff"], nchans=b["nchans"])  # fmt: skip
        np.testing.assert_allclose(again[: r.ntrials], r.dms)
    assert ranges[-1].dm_hi >= 3000.0 and ranges[0].dm_lo == 0.0


@pytest.mark.parametrize("band", ["fast", "gbt"])
def test_every_range_keeps_its_loss_under_five_percent(band):
    """The model's worst loss at a sample of each range's trials, for an unresolved burst
    and one of two coarse samples, stays under 5 %; and well below a range's lower edge its
    factor would cost more than the target (the loss moves by ~1 % from DM to DM with the
    rounding of delays, so "just below" is not a sharp test)."""
    b = BANDS[band]
    freqs = b["fch1"] + b["foff"] * np.arange(b["nchans"])
    ranges = plan_ranges(0.0, 3000.0, **b)
    for r in ranges[1:]:
        for dm in r.dms[:: max(1, r.ntrials // 8)]:
            for width in (0.0, 2.0 * r.factor):
                assert dedispersed_snr_loss(dm, r.factor, freqs, b["tsamp"],
                                            width_samples=width) <= 0.05  # fmt: skip
        below = 0.7 * r.dm_lo
        assert max(dedispersed_snr_loss(below, r.factor, freqs, b["tsamp"], width_samples=w)
                   for w in (0.0, 2.0 * r.factor)) > LOSS_TARGET  # fmt: skip


def test_the_loss_model_matches_dedispersion_of_a_burst():
    """The model against the operator: a noise-free unresolved burst, dedispersed at its
    DM at the native resolution and from samples averaged 4 at a time."""
    from drafts_ops.dedisp import dedisperse
    from drafts_ops.simulate import BurstSpec, burst_signal

    nchan, tsamp, fch1, foff, dm = 128, 5.12e-4, 1500.0, -300 / 128, 1800.0
    header = Header(nchans=nchan, fch1=fch1, foff=foff, tsamp=tsamp, nbits=32, nsamples=16384)
    burst = BurstSpec(t_s=1.0, dm=dm, snr=100.0, width_s=1e-6)
    data = burst_signal(header.chan_freqs, tsamp, burst, 0, header.nsamples).astype(np.float32)
    measured = []
    for factor in (1, 4):
        n = data.shape[1] // factor
        coarse = data[:, : n * factor].reshape(nchan, n, factor).mean(axis=2)
        plan = DMPlan.build(np.array([dm]), header.chan_freqs, tsamp * factor)
        series = dedisperse(coarse, plan, mode="production", algorithm="brute")[0]
        cum = np.r_[0.0, np.cumsum(series)]
        best = max(float(np.max(cum[w:] - cum[:-w])) / np.sqrt(w / factor) for w in range(1, 64))
        measured.append(best)
    loss = 1 - measured[1] / measured[0]
    model = dedispersed_snr_loss(dm, 4, header.chan_freqs, tsamp)
    assert 0 < loss <= model + 0.02  # one arrival phase measured, the worst modelled


def test_blocks_are_several_times_their_overlap_and_fit_the_budget():
    """A FAST raw range at its own resolution, 4096 channels, DM to 513: within 1 GiB its
    block is at least twice its overlap, and what it holds fits the budget; with 768 MiB
    the block stays as long and the trials go in smaller chunks."""
    raw = Header(nchans=4096, fch1=1500.0, foff=-500 / 4096, tsamp=49.152e-6, nbits=8,
                 nsamples=10**6)  # fmt: skip
    plan = DMPlan.build(plan_ranges(0.0, 3000.0, **BANDS["fast-raw"])[0].dms, raw.chan_freqs,
                        raw.tsamp)  # fmt: skip
    chunks = []
    for budget in (1024.0, 768.0):
        size, chunk = range_block_size(raw, raw, 1, ntrials=plan.ndm, max_delay=plan.max_delay,
                                       budget_mib=budget, pad=72)  # fmt: skip
        assert size >= MIN_OVERLAP_RATIO * plan.max_delay
        held = raw.nchans * (size + plan.max_delay + 144) + 5 * chunk * (size + plan.max_delay)
        assert held <= (budget - RANGE_RESERVE_MIB) * 2**20
        assert 1 <= chunk <= plan.ndm
        chunks.append(chunk)
    assert chunks[1] < chunks[0]  # less memory: the same blocks, fewer trials at a time


@pytest.mark.parametrize("nbits", [8, 16, 32])
def test_blocks_of_wider_samples_are_as_long_less_their_piece(nbits):
    """Files of 16- or 32-bit samples reach the 8-bit levels through one piece of
    NORM_CHUNK samples (uint16 sums, else float32), so their full-resolution blocks are
    twice their overlap too, the piece counted in the budget (a 32-bit FAST raw block was
    planned at 0.2 times its overlap, as if read whole: each sample dedispersed 6.9 times,
    x0.04 real time)."""
    raw = Header(nchans=4096, fch1=1500.0, foff=-500 / 4096, tsamp=49.152e-6, nbits=nbits,
                 nsamples=10**6)  # fmt: skip
    plan = DMPlan.build(plan_ranges(0.0, 3000.0, **BANDS["fast-raw"])[0].dms, raw.chan_freqs,
                        raw.tsamp)  # fmt: skip
    size, chunk = range_block_size(raw, raw, 1, ntrials=plan.ndm, max_delay=plan.max_delay,
                                   budget_mib=1024.0, pad=72)  # fmt: skip
    assert size >= MIN_OVERLAP_RATIO * plan.max_delay
    piece = raw.nchans * NORM_CHUNK * {8: 0, 16: 4, 32: 4}[nbits]
    held = raw.nchans * (size + plan.max_delay + 144) + 5 * chunk * (size + plan.max_delay)
    assert held + piece <= (1024.0 - RANGE_RESERVE_MIB) * 2**20


def _sparse_fast_file(tmp_path):
    """60 s of FAST-like 8-bit data as a sparse file (planning reads only the header)."""
    band = BANDS["fast"]
    fields = valid_fields(nchans=band["nchans"], fch1=band["fch1"], foff=band["foff"],
                          tsamp=band["tsamp"])  # fmt: skip
    path = write_bytes(tmp_path / "fast.fil", sigproc_bytes(fields))
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size + band["nchans"] * 305_176)
    return path


def test_the_plan_table_counts_a_blocks_kernel_input_in_its_bytes(tmp_path):
    """``drafts plan``'s input MiB: one byte a sample of 8-bit levels, four of float32
    levels where the search does not quantise (--clip-pixels 0)."""
    band = BANDS["fast"]
    path = _sparse_fast_file(tmp_path)
    for clip, level in ((6.0, 1), (0.0, 4)):
        for row in plan_search(path, SearchConfig(clip_pixels=clip)).range_rows():
            samples = (row["block"] + row["overlap"]) / row["factor"]
            assert row["input_mib"] == pytest.approx(band["nchans"] * samples * level / 2**20)


def test_block_shares_weigh_blocks_by_trials_and_samples(tmp_path):
    """Progress advances by each block's work: its range's trials times the samples it
    reads at the range's resolution; a full-resolution block outweighs a coarse one."""
    path = _sparse_fast_file(tmp_path)
    plan = plan_search(path, SearchConfig())
    shares = plan.block_shares()
    assert len(plan.ranges) > 1 and len(shares) == len(plan.blocks)
    assert sum(shares) == pytest.approx(1.0)
    work = [plan.ranges[b.range_index].ntrials * b.read_len for b in plan.blocks]
    assert shares == pytest.approx([w / sum(work) for w in work])
    by_range = [[s for s, b in zip(shares, plan.blocks, strict=True) if b.range_index == r]
                for r in (0, len(plan.ranges) - 1)]  # fmt: skip
    assert min(by_range[0]) > max(by_range[1])


def test_decimated_ranges_find_bursts_at_their_edges(tmp_path):
    """Bursts just inside each decimated range (where its averaging costs most), as wide as
    the range's sample: found by the search with ranges at the S/N of the search without
    them, within the 5 % bound plus the noise of the estimate."""
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

    band = {"nchans": 256, "fch1": 1499.4140625, "foff": -1.171875, "tsamp": 512e-6}
    ranges = plan_ranges(0.0, 2000.0, **band)
    edges = [(r.factor, float(r.dms[1])) for r in ranges[1:]]
    bursts = tuple(BurstSpec(t_s=2.0 + 3.0 * k, dm=dm, snr=40.0, width_s=factor * 512e-6)
                   for k, (factor, dm) in enumerate(edges))  # fmt: skip
    config = SimulationConfig(**band, duration_s=3.0 * len(bursts) + 5.0, seed=11, bursts=bursts)
    path = write_simulation(tmp_path / "edges.fil", config)
    found = {}
    for auto in (True, False):
        cfg = SearchConfig(dm_max=2000.0, auto_decimation=auto, classify=False,
                           write_h5=False, write_plots=False)  # fmt: skip
        found[auto] = run_search(path, tmp_path / str(auto), cfg).candidates
    for burst in bursts:
        snr = {}
        for auto, cands in found.items():
            near = [c for c in cands if abs(c.tcand_s - burst.t_s) < 0.05
                    and abs(c.dm - burst.dm) < 0.05 * burst.dm]  # fmt: skip
            assert near, (auto, burst)
            snr[auto] = max(c.snr for c in near)
        assert snr[True] >= 0.93 * snr[False], (burst, snr)


def test_plan_command_prints_the_ranges(capsys):
    from drafts_ops.core.resources import resource_path

    demo = str(resource_path("data", "demo.fil"))
    assert main(["plan", demo, "--dm-max", "2000"]) == 0
    out = capsys.readouterr().out
    assert "DM range" in out and "S/N loss" in out and out.count("\n") >= 4
    assert main(["plan", demo, "--dm-max", "2000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    factors = [r["factor"] for r in doc["ranges"]]
    assert factors[0] == 1 and factors == sorted(factors) and len(factors) >= 2
    assert sum(r["work_share"] for r in doc["ranges"]) == pytest.approx(1.0)
    plan = plan_search(demo, SearchConfig(dm_max=2000.0))
    assert [r["trials"] for r in doc["ranges"]] == [r.ntrials for r in plan.ranges]
    one = plan_search(demo, SearchConfig(dm_max=2000.0, time_decimation=2))
    assert not one.ranges  # a decimation flag: one range at that resolution
