"""Survey ledger and survey helpers: states, fingerprints, quarantine, candidate merge."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drafts_ops.core.errors import DraftsError, ObservationError
from drafts_ops.survey.files import (
    file_key,
    merge_candidate_files,
    quarantine,
    scan,
    validate_observation,
)
from drafts_ops.survey.ledger import Ledger


def test_ledger_states_survive_reload_and_follow_file_changes(tmp_path: Path) -> None:
    obs = tmp_path / "a.fil"
    obs.write_bytes(b"x" * 10)
    ledger = Ledger.load(tmp_path / "out")
    assert ledger.needs_search("a.fil", obs)
    ledger.start("a.fil", obs)
    assert Ledger.load(tmp_path / "out").entries["a.fil"].status == "running"
    ledger.finish("a.fil", "done", candidates=4, candidates_file="files/a.fil/candidates.csv")
    again = Ledger.load(tmp_path / "out")
    assert not again.needs_search("a.fil", obs)
    assert again.entries["a.fil"].candidates == 4
    obs.write_bytes(b"y" * 11)  # a new version of the file is searched again
    assert again.needs_search("a.fil", obs)
    again.start("a.fil", obs)
    assert again.entries["a.fil"].attempts == 2
    with pytest.raises(DraftsError):
        again.finish("never-started", "done")


def test_ledger_rejects_a_corrupt_file(tmp_path: Path) -> None:
    (tmp_path / "ledger.json").write_text("{not json")
    with pytest.raises(DraftsError, match="unreadable survey ledger"):
        Ledger.load(tmp_path)


def test_scan_skips_hidden_files_and_keys_are_relative(tmp_path: Path) -> None:
    for name in ("b.fil", "a.fil", ".partial.fil", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    found = scan(tmp_path, "*.fil")
    assert [p.name for p in found] == ["a.fil", "b.fil"]
    assert file_key(found[0], tmp_path) == "a.fil"
    with pytest.raises(DraftsError):
        scan(tmp_path / "missing")


def test_quarantine_moves_the_file_and_writes_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "in" / "bad.fil"
    bad.parent.mkdir()
    bad.write_bytes(b"garbage bytes")
    with pytest.raises(ObservationError) as err:
        validate_observation(bad)
    reason = quarantine(bad, tmp_path / "out", err.value.problem)
    assert not bad.exists() and (tmp_path / "out" / "quarantine" / "bad.fil").exists()
    assert "not a SIGPROC" in reason.read_text()


def test_merge_candidate_files_adds_the_key_and_unions_columns(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("tcand_s,dm\n1.0,10\n2.0,20\n")
    (tmp_path / "b.csv").write_text("tcand_s,dm,classifier_prob\n3.0,30,0.9\n")
    path, count = merge_candidate_files([("b", tmp_path / "b.csv"), ("a", tmp_path / "a.csv")],
                                        tmp_path)  # fmt: skip
    assert count == 3
    lines = path.read_text().splitlines()
    assert lines[0] == "key,tcand_s,dm,classifier_prob"
    assert lines[1:] == ["a,1.0,10,", "a,2.0,20,", "b,3.0,30,0.9"]
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
    assert os.access(path, os.R_OK)
