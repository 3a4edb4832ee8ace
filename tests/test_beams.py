"""Multi-beam surveys: layouts, beam groups, coincidence across beams, RFI flags."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.detect.candidates import Candidate
from drafts_ops.search.config import SearchOptions
from drafts_ops.simulate import BurstSpec, RFISpec, SimulationConfig, write_multibeam
from drafts_ops.survey.beams import (
    LAYOUTS,
    BeamLayout,
    beam_groups,
    coincidence,
    group_key,
    load_layout,
)
from drafts_ops.survey.ledger import Ledger
from drafts_ops.survey.options import SurveyOptions
from flows.survey import survey_flow

BAND = (1200.0, 1500.0)


def _cand(t: float, dm: float, snr: float, width_s: float = 2e-3) -> Candidate:
    return Candidate(tcand_s=t, dm=dm, snr=snr, width_samples=2, width_s=width_s, dm_index=0,
                     sample=int(t * 1000))  # fmt: skip


def test_layouts_know_their_neighbours():
    fast = LAYOUTS["fast19"]
    assert fast.beams == list(range(1, 20)) and fast.neighbours(1) == set(range(2, 8))
    assert all(2 <= len(fast.neighbours(b)) <= 6 for b in fast.beams)
    assert fast.connected([1, 2, 3]) and not fast.connected([8, 14])
    parkes = LAYOUTS["parkes13"]
    assert parkes.beams == list(range(1, 14)) and parkes.neighbours(1) == set(range(2, 8))
    assert fast.response(1, 0.5, 0.0) == pytest.approx(0.5)  # FWHM = 1 spacing


def test_custom_layout_file(tmp_path):
    path = tmp_path / "seven.yaml"
    path.write_text("name: seven\nmax_beams: 3\npositions:\n"
                    + "".join(f"  {b}: [{x}, {y}]\n" for b, (x, y) in
                              LAYOUTS["fast19"].positions.items() if b <= 7))  # fmt: skip
    layout = load_layout(str(path))
    assert (layout.name, layout.max_beams, layout.beams) == ("seven", 3, list(range(1, 8)))
    with pytest.raises(ParameterError, match="unknown beam layout"):
        load_layout("meerkat64")


def test_beam_groups_from_file_names():
    names = [f"obs_M{b:02d}_0001.fits" for b in (1, 2, 19)] + ["obs_M01_0002.fits", "x.fil"]
    groups = beam_groups(names)
    assert group_key("obs_M07_0001.fits") == "obs_M*_0001.fits"
    assert sorted(groups) == ["obs_M*_0001.fits", "obs_M*_0002.fits"]
    assert sorted(groups["obs_M*_0001.fits"]) == [1, 2, 19]


def test_coincidence_keeps_sky_bursts_and_flags_rfi():
    fast = LAYOUTS["fast19"]
    per_beam: dict[int, list[Candidate]] = {b: [] for b in fast.beams}
    per_beam[5].append(_cand(1.0, 500.0, 12.0))  # one beam
    for beam, snr in ((1, 20.0), (2, 25.0), (3, 18.0)):  # three neighbours
        per_beam[beam].append(_cand(3.0 + 0.001 * beam, 300.0 + beam, snr))
    for beam in fast.beams:  # zero-DM RFI everywhere
        per_beam[beam].append(_cand(5.0, 0.0, 40.0 + beam))
    per_beam[8].append(_cand(7.0, 800.0, 9.0))  # two beams far apart
    per_beam[14].append(_cand(7.0005, 805.0, 10.0))
    result = coincidence(per_beam, fast, BAND)
    by_time = {round(c.candidate.tcand_s): [] for c in result.candidates}
    for c in result.candidates:
        by_time[round(c.candidate.tcand_s)].append(c)
    (single,) = by_time[1]
    assert (single.nbeams, single.primary_beam, single.rfi) == (1, 5, False)
    assert single.beam_mask == 1 << 4
    trio = by_time[3]
    assert {c.nbeams for c in trio} == {3} and {c.primary_beam for c in trio} == {2}
    assert {c.event for c in trio} == {trio[0].event} and not any(c.rfi for c in trio)
    assert {c.max_snr for c in trio} == {25.0} and trio[0].beam_mask == 0b111
    everywhere = by_time[5]
    assert len(everywhere) == 19 and all(c.rfi for c in everywhere)
    assert everywhere[0].rfi_reason == "seen in 19 of 19 beams"
    apart = by_time[7]
    assert all(c.rfi and "not neighbours" in c.rfi_reason for c in apart)
    summary = result.summary()
    assert (summary["candidates_before"], summary["events"]) == (1 + 3 + 19 + 2, 4)
    assert (summary["rfi_flagged"], summary["events_after"]) == (21, 2)


# -- a simulated 7-beam pointing through the survey --------------------------------------

SEVEN = BeamLayout("seven", {b: p for b, p in LAYOUTS["fast19"].positions.items() if b <= 7})
# impulse clipping off: the zero-DM impulse in every beam is what coincidence must flag
SEARCH = SearchOptions(dm_max=600.0, snr_threshold=8.0, classify=False, write_h5=False,
                       write_plots=False, clip_impulses=0.0)  # fmt: skip


@pytest.fixture(scope="module")
def pointing(tmp_path_factory):
    """7 beams, 64 channels, 1 ms, 6 s: a burst in beam 5 alone, one between beams 1-3
    (nearest 2), a zero-DM impulse in every beam."""
    root = tmp_path_factory.mktemp("beams")
    layout_file = root / "seven.yaml"
    layout_file.write_text("name: seven\npositions:\n" + "".join(
        f"  {b}: [{x}, {y}]\n" for b, (x, y) in SEVEN.positions.items()))  # fmt: skip
    incoming = root / "incoming"
    base = SimulationConfig(nchans=64, fch1=1500.0, foff=-300.0 / 64, tsamp=1e-3,
                            duration_s=6.0, seed=40,
                            rfi=(RFISpec(kind="impulsive", count=1, strength=6.0),))  # fmt: skip
    x1, x2, x3 = (np.array(SEVEN.positions[b]) for b in (1, 2, 3))
    between = (x1 + x2 + x3) / 3 + 0.1 * (x2 - (x1 + x2 + x3) / 3)
    sources = [(BurstSpec(t_s=1.5, dm=250.0, snr=30.0, width_s=2e-3), *SEVEN.positions[5]),
               (BurstSpec(t_s=3.0, dm=400.0, snr=45.0, width_s=2e-3), *between)]  # fmt: skip
    write_multibeam(incoming, base, SEVEN, sources, stem="pt")
    return incoming, layout_file


def _group_rows(out: Path) -> list[dict[str, str]]:
    with (out / "beam_candidates.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_survey_coincides_the_beams_of_a_pointing(prefect_harness, pointing, tmp_path):
    incoming, layout = pointing
    options = SurveyOptions(max_files=2, settle_s=0, beams=str(layout))
    summary = survey_flow(str(incoming), str(tmp_path), options, SEARCH)
    (group,) = summary["groups"]
    assert group["group"] == "pt_M*_0001.fil" and group["beams"] == list(range(1, 8))
    assert group["rfi_flagged"] >= 7 and group["candidates_after"] < group["candidates_before"]
    rows = _group_rows(tmp_path)
    alone = [r for r in rows if abs(float(r["tcand_s"]) - 1.5) < 0.02 and r["rfi"] == "False"]
    assert alone and {r["nbeams"] for r in alone} == {"1"} and {r["beam"] for r in alone} == {"5"}
    trio = [r for r in rows if abs(float(r["tcand_s"]) - 3.0) < 0.02 and r["rfi"] == "False"]
    assert {r["beam"] for r in trio} == {"1", "2", "3"}
    assert {r["nbeams"] for r in trio} == {"3"} and {r["primary_beam"] for r in trio} == {"2"}
    impulses = [r for r in rows if float(r["dm"]) < 30 and float(r["snr"]) > 20]
    assert impulses and all(r["rfi"] == "True" for r in impulses)
    assert {r["beam"] for r in impulses} == {str(b) for b in range(1, 8)}
    assert Ledger.load(tmp_path).groups["pt_M*_0001.fil"]["events_after"] == group["events_after"]


class _Crash(BaseException):
    """Stands for the process dying mid-group."""


def test_crash_mid_group_then_rerun_equals_an_uninterrupted_run(
    prefect_harness, pointing, tmp_path, monkeypatch
):
    incoming, layout = pointing
    options = SurveyOptions(max_files=1, settle_s=0, beams=str(layout))
    finish, calls = Ledger.finish, []

    def dying_finish(self, key, status, **fields):
        calls.append(key)
        if len(calls) == 4:
            raise _Crash(key)
        return finish(self, key, status, **fields)

    monkeypatch.setattr(Ledger, "finish", dying_finish)
    with pytest.raises(_Crash):
        survey_flow(str(incoming), str(tmp_path / "crashed"), options, SEARCH)
    monkeypatch.undo()
    survey_flow(str(incoming), str(tmp_path / "crashed"), options, SEARCH)
    survey_flow(str(incoming), str(tmp_path / "clean"), options, SEARCH)

    def key(r):
        return (r["beam"], r["tcand_s"], r["dm"], r["nbeams"], r["rfi"], r["primary_beam"])

    crashed, clean = _group_rows(tmp_path / "crashed"), _group_rows(tmp_path / "clean")
    assert sorted(map(key, crashed)) == sorted(map(key, clean)) and clean
    assert math.isfinite(float(clean[0]["max_snr"]))


def test_simulate_command_writes_one_file_per_beam(tmp_path):
    import json

    from drafts_ops.cli import main
    from drafts_ops.io import open_observation

    status = main(["simulate", str(tmp_path / "pt.fil"), "--beams", "parkes13", "--nchans", "32",
                   "--duration", "1", "--dm", "100", "--snr", "20", "--beam-position", "0.5",
                   "0", "--quiet"])  # fmt: skip
    assert status == 0
    files = sorted(tmp_path.glob("pt_M*_0001.fil"))
    assert len(files) == 13
    with open_observation(files[1]) as reader:
        assert (reader.header.ibeam, reader.header.nbeams) == (2, 13)
    (source,) = json.loads((tmp_path / "pt.beams.json").read_text())
    assert source["snr_by_beam"]["1"] == pytest.approx(10.0) == source["snr_by_beam"]["2"]


def test_beam_groups_from_headers_where_names_are_silent():
    from types import SimpleNamespace

    headers = {f"b{b}.fil": SimpleNamespace(nbeams=13, ibeam=b, source_name="J0000", tstart=60000.1)
               for b in (1, 2, 3)}  # fmt: skip
    headers["single.fil"] = SimpleNamespace(nbeams=1, ibeam=0, source_name="x", tstart=1.0)
    groups = beam_groups(sorted(headers), headers=headers.get)
    assert groups == {"J0000@MJD60000.10000": {b: Path(f"b{b}.fil") for b in (1, 2, 3)}}
