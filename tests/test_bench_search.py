"""``drafts bench search``: its configurations, its table, its recall and the peers."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest

from drafts_ops.bench.peers import PeerFigures, format_peers, run_transientx, transientx_available
from drafts_ops.bench.search import CONFIGS, RunFigures, format_table, recall
from drafts_ops.simulate.bands import survey_band


def test_fast_raw_is_benchmarked_at_native_resolution_with_default_options():
    """``fast-raw`` passes no decimation flag (the search plans its DM ranges);
    ``fast-raw-x8t2f`` searches as the evaluation does and ``fast-raw-x8f`` coarser, all
    three on the same simulated observation, DM 0-3000."""
    band = survey_band("fast-raw")
    native, evaluated, coarse = (CONFIGS[n] for n in ("fast-raw", "fast-raw-x8t2f", "fast-raw-x8f"))
    assert native.options() == {"dm_max": 3000.0}
    assert (native.nchans, native.tsamp) == (4096, pytest.approx(49.152e-6))
    assert evaluated.options() == {"dm_max": 3000.0, "time_decimation": band.time_decimation,
                                   "freq_decimation": band.freq_decimation}  # fmt: skip
    assert coarse.options()["freq_decimation"] == 8
    assert native.file_name() == evaluated.file_name() == coarse.file_name()
    floats = CONFIGS["fast-raw-f32"]  # the same band, default options, 32-bit samples
    assert floats.options() == native.options() and floats.simulation().nbits == 32
    assert floats.simulation().header().nchans == 4096 and "32bit" in floats.file_name()


def _run(path: str, wall: float, process: float) -> RunFigures:
    return RunFigures("fast-raw", path, "production", wall, 2 * wall, 30.0 / wall, None, 1000.0,
                      17, {"dedisperse_detect": wall / 2}, process, kernel_realtime_factor=60.0,
                      snr_loss=0.043, found=19, injected=20, duration_s=30.0)  # fmt: skip


def test_table_shows_process_and_search_walls_the_kernel_ratio_recall_and_loss():
    table = format_table([_run("direct", 6.0, 7.5), _run("flow", 6.6, 10.0)])
    direct = table.splitlines()[1].split()
    assert direct[:2] == ["fast-raw", "direct"]
    # wall, proc, cpu, RTF, pRTF, kRTF, p/k, RSS, cands, recall, loss %
    assert direct[-11:] == ["6.00", "7.5", "12.0", "5.00", "4.00", "60.00", "12.00", "1000",
                            "17", "19/20", "4.3"]  # fmt: skip
    assert "fast-raw production: flow / direct wall = 1.10" in table


def _truth(tmp_path: Path) -> Path:
    path = tmp_path / "obs.truth.csv"
    path.write_text("kind,tcand_s,dm,snr\nburst,1.0,100,20\nburst,5.0,1000,9\n"
                    "burst,8.0,500,6\nrfi_impulsive,3.0,0,\n")  # fmt: skip
    return path


def test_recall_counts_bursts_of_snr_8_matched_in_time_and_dm(tmp_path):
    from types import SimpleNamespace as C

    truth = _truth(tmp_path)
    cands = [C(tcand_s=1.04, dm=108.0), C(tcand_s=5.2, dm=1000.0), C(tcand_s=8.0, dm=500.0)]
    assert recall(truth, cands) == (1, 2)  # 5.2 s is 200 ms late; the S/N-6 burst not counted
    assert recall(truth, [C(tcand_s=5.0, dm=1150.0)]) == (0, 2)  # 15 % off in DM
    assert recall(truth, []) == (0, 2)


def test_transientx_is_run_through_the_peers_script_and_scored(tmp_path):
    """A stand-in ``run-transientx.sh`` (the real one needs the peers' build): its arguments
    and thread count arrive, its CSV is read back in the search's terms."""
    peers = tmp_path / "peers"
    peers.mkdir()
    script = peers / "run-transientx.sh"
    script.write_text('#!/usr/bin/env bash\nmkdir -p "$3"\n'
                      'printf "time_s,dm,snr,width_s\\n1.01,99,12,0.001\\n" > "$3/candidates.csv"\n'
                      'echo "$1 $2 $NTHREADS" > "$3/args.txt"\n')  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "out"
    out.mkdir()
    wall, cpu, rss, cands = run_transientx(tmp_path / "obs.fil", 3000.0, peers, out, threads=2)
    assert (out / "args.txt").read_text().split()[1:] == ["3000", "2"]
    assert [(c.tcand_s, c.dm) for c in cands] == [(1.01, 99.0)]
    assert wall > 0 and cpu >= 0 and rss > 0
    assert recall(_truth(tmp_path), cands) == (1, 2)


def test_peers_are_optional_and_say_why_they_did_not_run(tmp_path):
    assert "no run-transientx.sh" in transientx_available(tmp_path)
    (tmp_path / "run-transientx.sh").write_text("")
    if not Path("/opt/peers/transientx/bin/transientx_fil").exists():
        assert "not built" in transientx_available(tmp_path)
    peer = PeerFigures("fast", "TransientX", 2, 20.0, 38.0, 2000.0, 40, 18, 20, 60.0)
    text = format_peers([peer], [replace(_run("flow", 6.0, 10.0), config="fast")])
    assert "TransientX (2 thr)" in text and "18/20" in text and "19/20" in text
    assert "fast: TransientX / drafts-ops production process wall = 2.00" in text


def test_the_psrfits_configuration_searches_the_observation_as_fast_writes_it(tmp_path):
    """``fast-raw-psrfits``: FAST raw as PSRFITS (8-bit, 1024 spectra a row) with default
    options; its file holds the SIGPROC observation's whole rows, and its truth table the
    bursts that arrive in them."""
    import numpy as np

    from drafts_ops.bench.search import PSRFITS_NSBLK, observation_file
    from drafts_ops.io import open_observation
    from drafts_ops.simulate.truth import read_truth, truth_path

    psrfits = CONFIGS["fast-raw-psrfits"]
    assert psrfits.options() == CONFIGS["fast-raw"].options()
    assert psrfits.file_name().endswith(".fits") and psrfits.simulation().nbits == 8
    twin_config = replace(psrfits, file_format="fil")
    assert truth_path(psrfits.file_name()) != truth_path(twin_config.file_name())
    small = replace(psrfits, nchans=64, foff=-8.0, tsamp=1e-3, duration_s=3.3, n_bursts=6)
    path = observation_file(small, tmp_path)
    twin = tmp_path / replace(small, file_format="fil").file_name()
    with open_observation(path) as fits, open_observation(twin) as fil:
        assert fits.header.nsamples == fil.header.nsamples // PSRFITS_NSBLK * PSRFITS_NSBLK
        whole_rows = fil.read_block(0, fits.header.nsamples, raw=True)
        np.testing.assert_array_equal(fits.read_all(raw=True), whole_rows)
        end = fits.header.nsamples * fits.header.tsamp
    bursts = read_truth(truth_path(path))
    assert bursts and all(row["tcand_s"] < end for row in bursts)
    assert len(bursts) == sum(row["tcand_s"] < end for row in read_truth(truth_path(twin)))
