"""The survey flow: resumable, never duplicating, quarantining bad files, on Dask too."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from flowdata import SEARCH, write_observation

import drafts_ops.survey.sequence as survey_module
from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.files import QUARANTINE_DIR, SURVEY_CANDIDATES
from drafts_ops.survey.ledger import Ledger
from drafts_ops.survey.options import SurveyOptions
from flows.survey import survey_flow

#: (file name, DM, arrival time s) of the pulses in the incoming directory.
PULSES = (("a.fil", 80.0, 2.0), ("b.fil", 150.0, 3.0), ("c.fil", 220.0, 4.0))
OPTIONS = {
    "options": SurveyOptions(max_files=2, settle_s=0),
    "search": SearchOptions(**SEARCH),
}


def _incoming(root: Path, pulses=PULSES) -> Path:
    rng = np.random.default_rng(11)
    incoming = root / "incoming"
    incoming.mkdir()
    for name, dm, t_s in pulses:
        write_observation(incoming / name, rng, dm=dm, t_s=t_s)
    return incoming


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / SURVEY_CANDIDATES).open(newline="") as fh:
        return list(csv.DictReader(fh))


def _check_pulses(rows: list[dict[str, str]], pulses=PULSES) -> None:
    for name, dm, t_s in pulses:
        mine = [r for r in rows if r["key"] == name]
        best = max(mine, key=lambda r: float(r["snr"]))
        assert float(best["dm"]) == pytest.approx(dm, abs=5)
        assert float(best["tcand_s"]) == pytest.approx(t_s, abs=0.005)


def test_rerun_skips_done_files_and_keeps_candidates(prefect_harness, tmp_path: Path) -> None:
    incoming = _incoming(tmp_path)
    good = incoming / "a.fil"
    (incoming / "broken.fil").write_bytes(good.read_bytes()[:-7])  # truncated spectra
    out = tmp_path / "out"

    first = survey_flow(str(incoming), str(out), **OPTIONS)
    assert (first["attempted"], first["searched"], first["skipped"]) == (4, 3, 0)
    assert [q["file"] for q in first["quarantined"]] == ["broken.fil"]
    reason = (out / QUARANTINE_DIR / "broken.fil.reason.txt").read_text()
    assert "truncated" in reason
    assert (out / QUARANTINE_DIR / "broken.fil").exists() and not (incoming / "broken.fil").exists()
    rows = _rows(out)
    _check_pulses(rows)
    assert first["candidates_total"] == len(rows) == first["candidates_this_run"]

    second = survey_flow(str(incoming), str(out), **OPTIONS)
    assert (second["searched"], second["skipped"], second["candidates_this_run"]) == (0, 3, 0)
    assert _rows(out) == rows  # every candidate kept, none duplicated
    ledger = Ledger.load(out)
    assert ledger.counts() == {"done": 3, "quarantined": 1}
    assert {e.attempts for e in ledger.entries.values()} == {1}
    summary = json.loads((out / "survey_summary.json").read_text())
    assert summary["candidates_total"] == len(rows)


class _Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing may catch it)."""


def test_crash_mid_survey_then_rerun_completes(
    prefect_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    incoming = _incoming(tmp_path)
    out = tmp_path / "out"
    finish = Ledger.finish
    calls = []

    def dying_finish(self, key, status, **fields):
        calls.append(key)
        if len(calls) == 2:
            raise _Crash(key)
        return finish(self, key, status, **fields)

    monkeypatch.setattr(Ledger, "finish", dying_finish)
    with pytest.raises(_Crash):
        survey_flow(
            str(incoming),
            str(out),
            options=SurveyOptions(max_files=1, settle_s=0),
            search=OPTIONS["search"],
        )
    monkeypatch.setattr(Ledger, "finish", finish)
    states = Ledger.load(out).counts()
    assert states.get("done") == 1 and states.get("running", 0) >= 1

    rerun = survey_flow(str(incoming), str(out), **OPTIONS)
    assert rerun["searched"] == 2 and rerun["skipped"] == 1 and not rerun["failed"]
    assert Ledger.load(out).counts() == {"done": 3}
    rows = _rows(out)
    _check_pulses(rows)
    keys = [(r["key"], r["tcand_s"], r["dm"]) for r in rows]
    assert len(keys) == len(set(keys))


def test_failed_file_is_retried_by_the_next_run(
    prefect_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    incoming = _incoming(tmp_path, PULSES[:2])
    out = tmp_path / "out"
    real = survey_module.run_search

    def flaky(path, *args, **kwargs):
        if Path(path).name == "b.fil":
            raise RuntimeError("disk full")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(survey_module, "run_search", flaky)
    state = survey_flow(str(incoming), str(out), **OPTIONS, return_state=True)
    assert state.is_failed()  # a survey with a failed file ends Failed, keeping the rest
    first = state.result(raise_on_failure=False)
    assert first["failed"] == [{"file": "b.fil", "error": "RuntimeError: disk full"}]
    monkeypatch.setattr(survey_module, "run_search", real)
    second = survey_flow(str(incoming), str(out), **OPTIONS)
    assert (second["searched"], second["done"]) == (1, 1)
    assert Ledger.load(out).entries["b.fil"].attempts == 2
    _check_pulses(_rows(out), PULSES[:2])


def test_survey_on_a_dask_cluster(prefect_harness, tmp_path: Path) -> None:
    from flows.runners import make_task_runner

    incoming = _incoming(tmp_path, PULSES[:2])
    out = tmp_path / "out"
    runner = make_task_runner("dask")  # deploy/dask.yaml: one in-process worker, 2 threads
    result = survey_flow.with_options(task_runner=runner)(str(incoming), str(out), **OPTIONS)
    assert (result["searched"], result["done"]) == (2, 2)
    _check_pulses(_rows(out), PULSES[:2])


def _straddling(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows of the burst that arrives 0.1 s before a.fil ends and sweeps into b.fil."""
    return [r for r in rows if abs(float(r["dm"]) - 300.0) <= 15 and (
        (r["key"] == "a.fil" and abs(float(r["tcand_s"]) - 5.9) <= 0.004)
        or (r["key"] == "b.fil" and abs(float(r["tcand_s"]) + 0.1) <= 0.004))]  # fmt: skip


def test_consecutive_files_of_a_beam_find_a_boundary_burst_once(prefect_harness, tmp_path):
    from test_file_boundaries import write_boundary_files

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    files = write_boundary_files(incoming)
    files["joined"].unlink()
    options = {
        "options": SurveyOptions(settle_s=0),
        "search": SearchOptions(**{**SEARCH, "dm_max": 400.0}),
    }
    survey_flow(str(incoming), str(tmp_path / "out"), **options)
    assert [r["key"] for r in _straddling(_rows(tmp_path / "out"))] == ["a.fil"]
    assert Ledger.load(tmp_path / "out").entries["a.fil"].lookahead == "b.fil"

    alone = {**options, "options": SurveyOptions(settle_s=0, join_files=False)}
    survey_flow(str(incoming), str(tmp_path / "alone"), **alone)
    assert _straddling(_rows(tmp_path / "alone")) == []  # what joining the files buys


def test_a_file_arriving_later_searches_the_previous_files_end(prefect_harness, tmp_path):
    """Real time: a.fil is searched before b.fil exists; b.fil's search then covers the
    arrivals a.fil's search could not reach (reported before b.fil's start)."""
    from test_file_boundaries import write_boundary_files

    made = write_boundary_files(tmp_path)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    options = {
        "options": SurveyOptions(settle_s=0),
        "search": SearchOptions(**{**SEARCH, "dm_max": 400.0}),
    }
    made["a"].rename(incoming / "a.fil")
    survey_flow(str(incoming), str(tmp_path / "out"), **options)
    assert Ledger.load(tmp_path / "out").entries["a.fil"].lookahead is None
    made["b"].rename(incoming / "b.fil")
    later = survey_flow(str(incoming), str(tmp_path / "out"), **options)
    assert later["searched"] == 1
    assert [r["key"] for r in _straddling(_rows(tmp_path / "out"))] == ["b.fil"]
