"""Deployments from deploy/prefect.yaml, command-line triggers, and the flow commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from flowdata import SEARCH, write_observation

from drafts_ops.cli import main
from drafts_ops.core.errors import DraftsError
from flows.deploy import load_specs, parse_params, register_deployments


def test_prefect_yaml_declares_the_three_deployments() -> None:
    specs = {s.name: s for s in load_specs()}
    assert set(specs) == {"search", "survey", "validate"}
    assert specs["survey"].schedules[0]["cron"] == "*/15 * * * *"
    assert specs["survey"].concurrency_limit == 1
    assert {s.work_pool["name"] for s in specs.values()} == {"drafts-process"}
    assert specs["validate"].module_entrypoint == ("flows.validate", "validate_flow")


def test_parse_params_nests_dotted_keys_and_decodes_json() -> None:
    params = parse_params(["path=/d/x.fil", "options.dm_max=500", "options.detector=ml", "n=3"])
    assert params == {"path": "/d/x.fil", "options": {"dm_max": 500, "detector": "ml"}, "n": 3}
    with pytest.raises(DraftsError):
        parse_params(["novalue"])


def test_bad_deployment_options_are_refused_before_registering() -> None:
    """A typo in a deployment's options (prefect.yaml or --set) is one line naming the
    deployment, the parameter and the option, checked against the options models."""
    from flows.deploy import apply_settings, check_parameters, load_flow

    specs = {s.name: s for s in load_specs()}
    bad = apply_settings([specs["survey"]], {"survey": {"search": {"dm_maxx": 3}}})[0]
    with pytest.raises(DraftsError, match=r"deployment survey: parameter search: bad search "
                       r"options: dm_maxx = 3: unknown option"):  # fmt: skip
        check_parameters(bad, load_flow(bad))
    worse = apply_settings([specs["survey"]], {"survey": {"options": {"max_files": 0}}})[0]
    with pytest.raises(DraftsError, match="parameter options: bad survey options: max_files"):
        check_parameters(worse, load_flow(worse))
    typo = apply_settings([specs["search"]], {"search": {"out_dri": "/x"}})[0]
    with pytest.raises(DraftsError, match="unknown parameter"):
        check_parameters(typo, load_flow(typo))
    good = apply_settings([specs["search"]], {"search": {"options": {"dm_max": 500}}})[0]
    check_parameters(good, load_flow(good))


@pytest.fixture(scope="module")
def registered(prefect_harness) -> dict[str, str]:
    settings = {"survey": {"incoming": "/data/incoming", "out_dir": "/data/survey"}}
    return register_deployments(settings=settings)


def test_survey_deployment_is_registered_with_its_cron_schedule(registered) -> None:
    from prefect.client.orchestration import get_client

    assert registered["validate"]  # registered, or skipped with a reason until it exists
    with get_client(sync_client=True) as client:
        survey = client.read_deployment_by_name("drafts-survey/survey")
        search = client.read_deployment_by_name("drafts-search/search")
        pool = client.read_work_pool("drafts-process")
    assert str(survey.id) in registered["survey"]
    assert [s.schedule.cron for s in survey.schedules] == ["*/15 * * * *"]
    assert survey.schedules[0].schedule.timezone == "UTC" and survey.schedules[0].active
    assert survey.global_concurrency_limit.limit == 1
    assert survey.entrypoint == "flows.survey.survey_flow"
    assert survey.work_pool_name == "drafts-process" and pool.type == "process"
    assert survey.parameters == {"incoming": "/data/incoming", "out_dir": "/data/survey"}
    assert search.schedules == []


def test_trigger_starts_a_run_and_prints_its_id(registered, capsys) -> None:
    from prefect.client.orchestration import get_client

    argv = ["trigger", "drafts-search/search", "--param", "path=/data/x.fil"]
    argv += ["--param", "out_dir=/data/out", "--param", "options.dm_max=500", "--json"]
    assert main(argv) == 0
    run_id = json.loads(capsys.readouterr().out)["flow_run_id"]
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        deployment = client.read_deployment_by_name("drafts-search/search")
    assert run.deployment_id == deployment.id
    assert run.parameters["path"] == "/data/x.fil"
    assert run.parameters["options"] == {"dm_max": 500}
    assert run.state.is_scheduled()  # no worker here: it waits for one


def test_search_and_survey_commands(prefect_harness, tmp_path: Path, capsys) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    obs = write_observation(incoming / "p.fil", np.random.default_rng(3), dm=120.0, t_s=2.5)
    flags = [f"--dm-max={SEARCH['dm_max']}", f"--block-size={SEARCH['block_size']}"]
    flags += ["--no-write-plots", "--no-write-h5", "--no-progress", "--max-workers=2"]
    assert main(["search", str(obs), "--out", str(tmp_path / "s"), *flags]) == 0
    assert "1 candidates" in capsys.readouterr().out
    perf = json.loads((tmp_path / "s" / "perf.json").read_text())
    assert perf["run"]["task_runner"] == "ThreadPoolTaskRunner(2)"
    assert (
        main(["survey", str(incoming), "--out", str(tmp_path / "v"), "--settle-s=0", *flags]) == 0
    )
    assert "1 searched, 0 skipped" in capsys.readouterr().out


def test_search_join_takes_consecutive_files_as_one_observation(prefect_harness, tmp_path, capsys):
    from test_file_boundaries import write_boundary_files

    files = write_boundary_files(tmp_path)
    flags = ["--dm-max=400", "--no-write-plots", "--no-write-h5", "--no-progress"]
    pair = [str(files["a"]), str(files["b"])]
    assert main(["search", *pair, "--join", "--out", str(tmp_path / "j"), *flags]) == 0
    assert "3 candidates" in capsys.readouterr().out  # the boundary burst among them
    assert main(["search", *pair, "--out", str(tmp_path / "s"), *flags]) == 0
    per_file = [(tmp_path / "s" / f / "candidates.csv").read_text().count("\n") - 1
                for f in ("a", "b")]  # fmt: skip
    assert per_file == [1, 1]  # file by file the burst across the boundary is lost


def test_trigger_paths_are_made_absolute(tmp_path) -> None:
    from flows.deploy import absolute_paths, parse_params

    params = parse_params(["path=obs/x.fil", "out_dir=rel-out/x", "options.dm_max=500"])
    fixed = absolute_paths(params, cwd=tmp_path)
    assert fixed["path"] == str(tmp_path / "obs" / "x.fil")
    assert fixed["out_dir"] == str(tmp_path / "rel-out" / "x")
    assert fixed["options"] == {"dm_max": 500}  # not a path: untouched
    assert absolute_paths({"files": ["a.fil", "/abs/b.fil"]}, cwd=tmp_path)["files"] == [
        str(tmp_path / "a.fil"),
        "/abs/b.fil",
    ]
    assert absolute_paths({"incoming": "/data/in"})["incoming"] == "/data/in"


def test_deployments_leave_the_task_runner_to_the_worker() -> None:
    """A worker started with DRAFTS_TASK_RUNNER=dask must not be overridden by the YAML."""
    for spec in load_specs():
        env = (spec.work_pool.get("job_variables") or {}).get("env") or {}
        assert not {k for k in env if k.startswith("DRAFTS_")}, spec.name


def test_trigger_mistakes_are_one_clear_line(registered, capsys) -> None:
    assert main(["trigger", "drafts-search/no-such-deployment"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such deployment" in err[0]
    argv = ["trigger", "drafts-search/search", "--param", "path=/d/x.fil", "--param"]
    assert main([*argv, "out_dir=/d/o", "--param", "colour=red"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown parameter(s) colour" in err[0]


def test_wait_follows_a_run_to_its_end(registered) -> None:
    from prefect.client.orchestration import get_client
    from prefect.states import Completed

    from flows.deploy import trigger, wait_for

    run_id = trigger("drafts-search/search", {"path": "/data/x.fil", "out_dir": "/data/o"})
    assert not wait_for(run_id, poll_s=0.05, timeout_s=0.2).is_final()  # no worker yet
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Completed(), force=True)
    assert wait_for(run_id, poll_s=0.05).is_completed()


def test_survey_schedule_is_paused_until_its_directories_are_set(prefect_harness, tmp_path):
    from prefect.client.orchestration import get_client

    result = register_deployments(names=["survey"])
    assert "schedule PAUSED until incoming, out_dir set" in result["survey"]
    with get_client(sync_client=True) as client:
        survey = client.read_deployment_by_name("drafts-survey/survey")
    assert not survey.schedules[0].active and survey.parameters == {}
    with pytest.raises(DraftsError, match="no deployment"):
        register_deployments(settings={"surveyy": {"incoming": "/x"}})
    settings = {"survey": {"incoming": "in", "out_dir": "/o"}}
    result = register_deployments(names=["survey"], settings=settings)
    with get_client(sync_client=True) as client:
        survey = client.read_deployment_by_name("drafts-survey/survey")
    assert survey.schedules[0].active and "PAUSED" not in result["survey"]
    assert Path(survey.parameters["incoming"]).is_absolute()  # made absolute at registration
    register_deployments(settings={"survey": {"incoming": "/data/incoming",
                                              "out_dir": "/data/survey"}})  # fmt: skip


def test_deploy_without_an_api_url_is_refused(capsys, monkeypatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: None}):
        assert main(["deploy"]) == 2
    assert "PREFECT_API_URL is not set" in capsys.readouterr().err


def test_embedded_api_has_telemetry_off_by_default(monkeypatch) -> None:
    from flows.commands import _prepare_api

    monkeypatch.delenv("PREFECT_SERVER_ANALYTICS_ENABLED", raising=False)
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    _prepare_api(local=False)
    import os

    assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert os.environ["DO_NOT_TRACK"] == "1"
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "true")  # a user's choice stays
    _prepare_api(local=False)
    assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "true"


def test_wait_prints_why_a_run_did_not_complete() -> None:
    from prefect.states import Completed, Failed

    from flows.commands import state_line

    failed = Failed(message="Flow run encountered an exception: ObservationError: /d/x.fil: "
                    "no such file\nTraceback ...")  # fmt: skip
    line = state_line("drafts-search/search", "abc", failed)
    assert line == ("drafts-search/search run abc: Failed: Flow run encountered an exception: "
                    "ObservationError: /d/x.fil: no such file")  # fmt: skip
    assert state_line("d/s", "abc", Completed(message="All states completed.")) == (
        "d/s run abc: Completed"
    )
    assert state_line("d/s", "abc", None) == "d/s run abc: unknown"
