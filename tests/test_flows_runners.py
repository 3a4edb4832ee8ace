"""Task-runner selection from deploy/dask.yaml and the environment (nothing is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drafts_ops.core.errors import ParameterError
from flows.runners import load_dask_config, make_task_runner


def test_threads_runner_is_bounded() -> None:
    from prefect.task_runners import ThreadPoolTaskRunner

    runner = make_task_runner("threads", max_workers=3)
    assert isinstance(runner, ThreadPoolTaskRunner) and runner._max_workers == 3


def test_dask_address_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "dask.yaml"
    config.write_text("address: tcp://from-file:8786\nclient: {timeout: 5s}\n")
    monkeypatch.setenv("DRAFTS_DASK_CONFIG", str(config))
    monkeypatch.delenv("DRAFTS_DASK_ADDRESS", raising=False)
    assert make_task_runner("dask").address == "tcp://from-file:8786"
    assert make_task_runner("dask").client_kwargs["timeout"] == "5s"
    monkeypatch.setenv("DRAFTS_DASK_ADDRESS", "tcp://from-env:8786")
    assert make_task_runner("dask").address == "tcp://from-env:8786"
    assert make_task_runner("dask", dask_address="tcp://arg:1").address == "tcp://arg:1"


def test_shipped_dask_config_starts_a_small_local_cluster(monkeypatch) -> None:
    monkeypatch.delenv("DRAFTS_DASK_CONFIG", raising=False)
    monkeypatch.delenv("DRAFTS_DASK_ADDRESS", raising=False)
    config = load_dask_config()
    assert config["address"] is None
    runner = make_task_runner("dask")
    assert runner.address is None
    assert runner.cluster_kwargs == config["local_cluster"]
    assert runner.cluster_kwargs["processes"] is False


def test_bad_runner_and_config(tmp_path: Path) -> None:
    with pytest.raises(ParameterError):
        make_task_runner("spark")  # type: ignore[arg-type]
    (tmp_path / "bad.yaml").write_text("- a list\n")
    with pytest.raises(ParameterError, match="mapping"):
        load_dask_config(tmp_path / "bad.yaml")


def test_local_dask_cluster_listens_on_this_machine_only(tmp_path) -> None:
    from flows.runners import make_task_runner

    config = tmp_path / "dask.yaml"
    config.write_text("local_cluster: {n_workers: 1, processes: true}\n")
    runner = make_task_runner("dask", dask_config=config)
    assert runner.cluster_kwargs["host"] == "127.0.0.1"
    config.write_text("local_cluster: {processes: true, host: 0.0.0.0}\n")  # told otherwise
    assert make_task_runner("dask", dask_config=config).cluster_kwargs["host"] == "0.0.0.0"
    shipped = make_task_runner("dask")  # in-process workers: inproc://, no TCP at all
    assert shipped.cluster_kwargs["processes"] is False and "host" not in shipped.cluster_kwargs


def test_unreachable_dask_scheduler_is_one_clear_line(tmp_path, capsys) -> None:
    import socket

    from drafts_ops.cli import main

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status = main(["search", "--demo", "--out", str(tmp_path), "--task-runner", "dask",
                   "--dask-address", f"tcp://127.0.0.1:{port}"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in err[0]
