"""drafts inject: completeness of the search on a real observation (28.fil)."""

from __future__ import annotations

import hashlib
import json

import pytest

from drafts_ops.cli import main
from drafts_ops.core.errors import ParameterError
from drafts_ops.evaluation.injection import InjectionPlan, completeness, write_report
from drafts_ops.search import SearchConfig
from drafts_ops.simulate.truth import read_truth

FAST = {"write_h5": False, "write_plots": False, "classify": False}


def test_bright_injections_are_recovered_and_the_original_is_untouched(real_data, tmp_path):
    src = real_data / "28.fil"
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    plan = InjectionPlan(n_bursts=6, snr=(15.0, 25.0), dm=(100.0, 900.0), seed=3)
    report = completeness(src, tmp_path, plan, SearchConfig(dm_max=1200.0, **FAST))
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before
    assert report.recall >= 5 / 6, report.missed()
    truth = read_truth(tmp_path / "28.injected.truth.csv")
    assert len(truth) == 6 and {row["kind"] for row in truth} == {"burst"}
    for burst in report.bursts:
        if burst["found"]:
            assert abs(burst["found_dm"] - burst["dm"]) < 0.1 * burst["dm"] + 20
    paths = write_report(report, tmp_path)
    doc = json.loads(paths["json"].read_text())
    assert sum(r["n"] for r in doc["by_snr"]) == 6 and paths["png"].stat().st_size > 1000
    assert "| injected S/N | bursts | found | recall |" in paths["md"].read_text()


def test_missed_bursts_say_why(real_data, tmp_path):
    plan = InjectionPlan(n_bursts=3, snr=(20.0, 25.0), dm=(700.0, 900.0), seed=1)
    report = completeness(real_data / "28.fil", tmp_path, plan,
                          SearchConfig(dm_max=400.0, **FAST))  # fmt: skip
    assert report.recall == 0.0
    assert all(b["reason"].startswith("outside the searched DM range") for b in report.missed())


def test_impossible_injections_are_clear_errors(real_data, tmp_path, capsys):
    with pytest.raises(ParameterError, match="snr range"):
        InjectionPlan(snr=(10.0, 5.0))
    status = main(["inject", str(real_data / "28.fil"), "--out", str(tmp_path), "--dm", "100",
                   "20000"])  # fmt: skip
    assert status == 2 and "cannot hold a burst at DM 20000" in capsys.readouterr().err
