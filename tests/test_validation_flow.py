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


def test_flow_writes_report_and_markdown_artifact(prefect_harness, sim_file, tmp_path) -> None:
    from prefect.client.orchestration import get_client

    out = tmp_path / "report"
    summary = validate_flow([str(sim_file)], str(out), dm_max=300.0, block_size=700)
    assert summary["passed"] is True
    assert {Path(p).name for p in summary["reports"].values()} == {
        "validation.html",
        "validation.md",
        "validation.json",
    }
    assert all(line.startswith("PASS") for line in summary["verdict"])
    assert json.loads((out / "validation.json").read_text())["passed"] is True
    with get_client(sync_client=True) as client:
        artifact = client.read_latest_artifacts()
    published = {a.key: a for a in artifact}
    assert artifact_key(out) in published
    markdown = published[artifact_key(out)].data
    assert markdown == (out / "validation.md").read_text()
    assert markdown.startswith("# drafts-ops validation: PASS")


def test_cli_exit_codes_follow_the_verdict(prefect_harness, sim_file, tmp_path, capsys) -> None:
    assert main(["validate", str(sim_file), "--out", str(tmp_path / "ok"), *SMALL]) == 0
    broken = ["--inject-fault", "10,33,1", "--algorithms", "brute"]
    assert main(["validate", str(sim_file), "--out", str(tmp_path / "bad"), *SMALL, *broken]) == 1
    printed = capsys.readouterr().out
    assert "FAIL  production/brute: differences located: DM" in printed
    assert "channel 33" in printed and "delay off by +1" in printed
    missing = tmp_path / "missing.fil"
    assert main(["validate", str(missing), "--out", str(tmp_path / "err"), *SMALL]) == 2
    assert "missing.fil" in capsys.readouterr().err


def test_flow_parameters_build_the_config() -> None:
    config = make_config(dm_min=1.0, dm_max=50.0, dm_step=None, algorithms=["brute"],
                         block_size=512, delay_fault="3,4,-1")  # fmt: skip
    assert (config.dm_min, config.dm_max, config.block_size) == (1.0, 50.0, 512)
    assert config.algorithms == ("brute",) and config.delay_fault.shift == -1
    assert artifact_key("/x/My Report_1") == "validation-my-report-1"
