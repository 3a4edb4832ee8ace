"""What a person meets on the command line, with real processes: errors in one line before
any server starts, the local Prefect API started once and reused, Ctrl-C and SIGTERM that
stop a search or a survey within seconds and leave nothing marked complete."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

pytestmark = pytest.mark.slow

BAND = {"nchans": 256, "fch1": 1499.4140625, "foff": -1.171875, "tsamp": 256e-6}


def _env(home: Path, tag: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(DRAFTS_HOME=str(home), DRAFTS_API="local", DRAFTS_TEST_TAG=tag,
               PREFECT_HOME=str(home / "prefect-home"))  # fmt: skip
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    return env


def _drafts(*args: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "drafts_ops", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)  # fmt: skip


def _tagged(tag: str) -> list[int]:
    """Processes still alive whose environment carries ``tag``."""
    alive = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"DRAFTS_TEST_TAG={tag}".encode() in environ.read_bytes():
                state = (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    alive.append(int(environ.parent.name))
        except OSError:
            continue
    return alive


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """A local API started by ``drafts server start`` in a home of its own; stopped after."""
    home = tmp_path_factory.mktemp("home")
    env = _env(home)
    started = _drafts("server", "start", env=env)
    _out, err = started.communicate(timeout=180)
    assert started.returncode == 0, err
    state = json.loads((home / "prefect-api" / "server.json").read_text())
    yield home, state
    stop = _drafts("server", "stop", env=env)
    stop.communicate(timeout=60)
    assert not Path(f"/proc/{state['pid']}").exists() or _zombie(state["pid"])


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def long_file(tmp_path_factory) -> Path:
    """A 120 s observation that takes tens of seconds to search with both detectors."""
    tmp = tmp_path_factory.mktemp("long")
    config = SimulationConfig(**BAND, duration_s=120.0, seed=3,
                              bursts=(BurstSpec(t_s=30.0, dm=400.0, snr=20.0),))  # fmt: skip
    return write_simulation(tmp / "long.fil", config)


def test_errors_come_in_one_line_before_any_server_starts(tmp_path):
    home = tmp_path / "home"
    for args, problem in (
        (["search", str(tmp_path / "missing.fil"), "--out", str(tmp_path / "o")],
         f"{tmp_path / 'missing.fil'}: no such file"),
        (["search", "--demo", "--out", str(tmp_path / "o"), "--dm-max", "-5"], "--dm-max"),
        (["survey", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s")], "no such directory"),
    ):  # fmt: skip
        done = _drafts(*args, env=_env(home))
        _out, err = done.communicate(timeout=60)
        lines = err.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and problem in lines[0], err
        assert lines[0].startswith(f"drafts {args[0]}: error: ")
    assert not (home / "prefect-api" / "server.json").exists()  # no server was started


def test_a_second_command_reuses_the_running_api(api, tmp_path):
    home, state = api
    done = _drafts("search", "--demo", "--out", str(tmp_path / "demo"), "--no-progress",
                   env=_env(home))  # fmt: skip
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert "starting a local Prefect API" not in err  # it was running: not started again
    assert state["url"].removesuffix("/api") + "/runs/flow-run/" in err  # on that API
    again = json.loads((home / "prefect-api" / "server.json").read_text())
    assert again["pid"] == state["pid"]
    assert "5 candidates, 4 kept by the classifier, 4 plots" in out
    assert f"report {tmp_path / 'demo' / 'report.html'}" in out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_search_stops_within_seconds_and_is_not_marked_complete(
    api, long_file, tmp_path, sig
):
    home, _ = api
    tag = uuid.uuid4().hex
    out_dir = tmp_path / "out"
    proc = _drafts("search", str(long_file), "--out", str(out_dir), "--no-progress",
                   "--detector", "both", env=_env(home, tag), start_new_session=True)  # fmt: skip
    lines = _lines(proc.stderr)
    _wait_for(lambda: any("DM trials" in line for line in lines), proc, 120)  # planned
    time.sleep(1.0)  # streaming now
    sent = time.monotonic()
    os.killpg(proc.pid, sig)  # as a terminal's Ctrl-C: the whole process group
    proc.wait(timeout=30)
    took = time.monotonic() - sent
    time.sleep(0.2)
    err = "".join(lines)
    assert proc.returncode == 128 + sig, err
    assert took < 10.0
    assert "Traceback" not in err and "ConnectError" not in err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert len(said) == 1 and signal.Signals(sig).name in said[0] and "unfinished" in said[0]
    assert not (out_dir / "DONE.json").exists()
    time.sleep(0.5)
    assert _tagged(tag) == []  # no child left behind


def _lines(stream) -> list[str]:
    """The lines of ``stream`` as they come (read by a thread)."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(condition, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("timed out")
        time.sleep(0.1)


def _candidates(out: Path) -> list[tuple]:
    with (out / "survey_candidates.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    return sorted((r["key"], r["tcand_s"], r["dm"], r["snr"]) for r in rows)


def test_an_interrupted_survey_resumes_exactly(api, tmp_path):
    home, _ = api
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for k in range(3):
        burst = BurstSpec(t_s=10.0 + 5 * k, dm=300.0, snr=15.0)
        config = SimulationConfig(**BAND, duration_s=40.0, seed=10 + k, bursts=(burst,))
        write_simulation(incoming / f"obs{k}.fil", config)
    args = ["--settle-s", "0", "--max-files", "1", "--no-progress", "--dm-max", "1000"]
    whole = _drafts("survey", str(incoming), "--out", str(tmp_path / "whole"), *args,
                    env=_env(home))  # fmt: skip
    assert whole.wait(timeout=600) == 0, whole.communicate()
    out = tmp_path / "cut"
    proc = _drafts("survey", str(incoming), "--out", str(out), *args, env=_env(home),
                   start_new_session=True)  # fmt: skip
    ledger = out / "ledger.json"
    _wait_for(lambda: ledger.exists() and '"done"' in ledger.read_text(), proc, 300)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    cut = json.loads(ledger.read_text())["files"]
    assert sum(v["status"] == "done" for v in cut.values()) < 3  # stopped mid-survey
    again = _drafts("survey", str(incoming), "--out", str(out), *args, env=_env(home))
    assert again.wait(timeout=600) == 0, again.communicate()
    assert _candidates(out) == _candidates(tmp_path / "whole")
    states = json.loads(ledger.read_text())["files"]
    assert {v["status"] for v in states.values()} == {"done"} and len(states) == 3


def test_the_console_freezes_the_heap_before_the_interpreter_exits(monkeypatch):
    """``drafts`` leaves without the interpreter's last garbage collections walking every
    object of Prefect, numba and matplotlib (~1 s per command): the console freezes the
    heap after the command and still exits with its status; it collects garbage less
    often than Python's default while Prefect and numba are imported."""
    import gc

    from drafts_ops import cli

    seen = {}

    def command(**_):
        seen["thresholds"] = gc.get_threshold()
        return 3

    monkeypatch.setattr(cli, "main", command)
    thresholds = gc.get_threshold()
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as leaving:
            cli.console()
        assert leaving.value.code == 3
        assert gc.get_freeze_count() > 0
        assert seen["thresholds"][0] > 700
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
