"""The validation flow and ``drafts validate``: report files, artifact, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drafts_ops.cli import main
from flows.validate import artifact_key, make_config, validate_flow
from tests.validation_data import write_small_simulation

SMALL = ["--dm-max", "300", "--block-size", "700"]


@pytest.fixture(scope="module")
def sim_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_simulation(tmp_path_factory.mktemp("sim") / "sim.fil")


def test_validate_command_report_artifact_and_exit_codes(
    prefect_harness, sim_file, tmp_path, capsys
) -> None:
    from prefect.client.orchestration import get_client

    out = tmp_path / "ok"
    assert main(["validate", str(sim_file), "--out", str(out), *SMALL]) == 0
    assert "validation PASS" in capsys.readouterr().out
    doc = json.loads((out / "validation.json").read_text())
    assert doc["passed"] is True and len(doc["files"][0]["paths"]) >= 2
    assert (out / "validation.html").read_text().startswith("<!DOCTYPE html>")
    with get_client(sync_client=True) as client:
        published = {a.key: a for a in client.read_latest_artifacts()}
    markdown = published[artifact_key(out)].data
    assert markdown == (out / "validation.md").read_text()
    assert markdown.startswith("# drafts-ops validation: PASS")

    broken = ["--inject-fault", "10,33,1", "--algorithms", "brute"]
    assert main(["validate", str(sim_file), "--out", str(tmp_path / "bad"), *SMALL, *broken]) == 1
    printed = capsys.readouterr().out
    assert "FAIL  production/brute: differences located: DM" in printed
    assert "channel 33" in printed and "delay off by +1" in printed

    missing = tmp_path / "missing.fil"
    assert main(["validate", str(missing), "--out", str(tmp_path / "err"), *SMALL]) == 2
    assert "missing.fil" in capsys.readouterr().err


def test_flow_returns_summary(prefect_harness, sim_file, tmp_path) -> None:
    state = validate_flow([str(sim_file)], str(tmp_path), dm_max=300.0, block_size=700,
                          algorithms=["brute"], delay_fault="4,9,-1",
                          return_state=True)  # fmt: skip
    assert state.is_failed()  # a failing check fails the run (alerts on run state fire)
    summary = state.result(raise_on_failure=False)
    assert summary["passed"] is False
    assert {Path(p).name for p in summary["reports"].values()} == {
        "validation.html",
        "validation.md",
        "validation.json",
    }
    assert any("channel 9" in line and "off by -1" in line for line in summary["verdict"])


def test_flow_parameters_build_the_config() -> None:
    config = make_config(dm_min=1.0, dm_max=50.0, dm_step=None, algorithms=["brute"],
                         block_size=512, delay_fault="3,4,-1")  # fmt: skip
    assert (config.dm_min, config.dm_max, config.block_size) == (1.0, 50.0, 512)
    assert config.algorithms == ("brute",) and config.delay_fault.shift == -1
    assert artifact_key("/x/My Report_1") == "validation-my-report-1"
