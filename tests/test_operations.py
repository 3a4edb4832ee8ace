"""Fault injection: what an operator meets when a survey is left running.

Locks, uploads in progress, vanishing files, unusable data, transient and storage errors,
kill -9, bad option values, finished-or-not outputs. Every case ends in one clear error or
a correct result, with nothing lost and nothing duplicated.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from flowdata import HEADER, SEARCH, write_observation

import drafts_ops.survey.sequence as survey_module
from drafts_ops.cli import main
from drafts_ops.io.sigproc import write_sigproc
from drafts_ops.search import DONE_FILE, SearchConfig, is_complete, run_search
from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.files import SurveyLockedError, survey_lock
from drafts_ops.survey.ledger import Ledger
from drafts_ops.survey.options import SurveyOptions
from flows.survey import survey_flow

FAST = {**SEARCH, "classify": False, "write_h5": False}
OPTIONS = {"options": SurveyOptions(max_files=1, settle_s=0), "search": SearchOptions(**FAST)}


def _incoming(root: Path, names=("a.fil", "b.fil")) -> Path:
    rng = np.random.default_rng(5)
    incoming = root / "incoming"
    incoming.mkdir()
    for i, name in enumerate(names):
        write_observation(incoming / name, rng, dm=100.0 + 50 * i, t_s=2.0)
    return incoming


# -- the survey lock ----------------------------------------------------------------------


def test_second_survey_is_refused_and_says_who_holds_the_lock(tmp_path):
    with (
        survey_lock(tmp_path),
        pytest.raises(SurveyLockedError, match=rf"pid {os.getpid()} on .* since .*--wait"),
        survey_lock(tmp_path),
    ):
        pass
    with survey_lock(tmp_path):  # released with its holder
        pass


def test_concurrent_survey_flow_does_no_work(prefect_harness, tmp_path):
    incoming, out = _incoming(tmp_path), tmp_path / "out"
    with survey_lock(out), pytest.raises(SurveyLockedError):
        survey_flow(str(incoming), str(out), **OPTIONS)
    assert not (out / "ledger.json").exists()  # nothing searched, nothing recorded


def test_lock_of_a_killed_survey_is_taken_over(tmp_path):
    code = (
        "import sys, time; from drafts_ops.survey.files import survey_lock\n"
        "with survey_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"held"
    with pytest.raises(SurveyLockedError, match=f"pid {holder.pid}"), survey_lock(tmp_path):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with survey_lock(tmp_path):  # the lock file stays, the lock went with the process
        assert json.loads((tmp_path / ".survey.lock").read_text())["pid"] == os.getpid()


# -- incoming files -----------------------------------------------------------------------


def test_file_still_being_written_is_left_for_later(prefect_harness, tmp_path):
    incoming, out = _incoming(tmp_path, ("a.fil",)), tmp_path / "out"
    growing = incoming / "b.fil"
    growing.write_bytes((incoming / "a.fil").read_bytes()[:5000])  # truncated, just written
    options = {**OPTIONS, "options": SurveyOptions(max_files=1, settle_s=60)}
    old = time.time() - 120
    os.utime(incoming / "a.fil", (old, old))
    first = survey_flow(str(incoming), str(out), **options)
    assert first["unsettled"] == ["b.fil"] and not first["quarantined"]
    assert growing.exists() and first["done"] == 1
    growing.write_bytes((incoming / "a.fil").read_bytes())  # the upload completes
    os.utime(growing, (old, old))
    second = survey_flow(str(incoming), str(out), **options)
    assert (second["searched"], second["done"], second["unsettled"]) == (1, 1, [])


def test_file_vanishing_mid_run_is_skipped(prefect_harness, tmp_path, monkeypatch):
    incoming, out = _incoming(tmp_path), tmp_path / "out"
    ghost = incoming / "ghost.fil"
    real_scan = survey_module.scan
    monkeypatch.setattr(survey_module, "scan", lambda *a: [*real_scan(*a), ghost])
    monkeypatch.setattr(survey_module, "settled", lambda *a: True)  # gone after this check
    summary = survey_flow(str(incoming), str(out), **OPTIONS)
    assert summary["vanished"] == ["ghost.fil"] and summary["done"] == 2
    assert not summary["failed"] and "ghost.fil" not in Ledger.load(out).entries


def test_nan_mid_file_is_unusable_and_does_not_fail_reruns(prefect_harness, tmp_path):
    incoming, out = _incoming(tmp_path, ("a.fil",)), tmp_path / "out"
    data = np.random.default_rng(1).normal(100, 10, (HEADER.nchans, 6144)).astype(np.float32)
    data[:, 3000:3010] = np.nan  # the ends are fine: only the search reaches it
    write_sigproc(incoming / "nan.fil", HEADER.replace(nbits=32, nsamples=6144), data)
    first = survey_flow(str(incoming), str(out), **OPTIONS)
    assert [u["file"] for u in first["unusable"]] == ["nan.fil"] and not first["failed"]
    assert "non-finite" in first["unusable"][0]["error"]
    assert (incoming / "nan.fil").exists()  # not a format problem: not quarantined
    second = survey_flow(str(incoming), str(out), **OPTIONS)
    assert second["searched"] == 0 and not second["failed"]
    assert Ledger.load(out).entries["nan.fil"].status == "unusable"


def test_transient_read_error_is_retried_not_quarantined(prefect_harness, tmp_path, monkeypatch):
    incoming, out = _incoming(tmp_path, ("a.fil",)), tmp_path / "out"

    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(survey_module, "validate_observation", denied)
    options = {**OPTIONS, "options": SurveyOptions(max_files=1, settle_s=0, max_attempts=2)}
    for attempt in (1, 2):
        state = survey_flow(str(incoming), str(out), **options, return_state=True)
        summary = state.result(raise_on_failure=False)
        assert state.is_failed() and attempt
        assert summary["failed"][0]["error"].startswith("cannot read")
        assert (incoming / "a.fil").exists() and not summary["quarantined"]
    third = survey_flow(str(incoming), str(out), **options)  # given up after 2 attempts
    assert third["searched"] == 0
    monkeypatch.undo()
    os.utime(incoming / "a.fil")  # the operator fixes the file: it changes, and is searched
    fourth = survey_flow(str(incoming), str(out), **options)
    assert fourth["done"] == 1


# -- storage ------------------------------------------------------------------------------


def test_full_disk_marks_the_file_failed_and_the_survey_ends_cleanly(
    prefect_harness, tmp_path, monkeypatch
):
    incoming, out = _incoming(tmp_path), tmp_path / "out"
    real = survey_module.run_search

    def full(path, *args, **kwargs):
        if Path(path).name == "b.fil":
            raise OSError(errno.ENOSPC, "No space left on device", str(out / "x.h5"))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(survey_module, "run_search", full)
    state = survey_flow(str(incoming), str(out), **OPTIONS, return_state=True)
    assert state.is_failed()
    summary = state.result(raise_on_failure=False)
    assert summary["done"] == 1
    assert summary["failed"] == [
        {"file": "b.fil", "error": f"cannot write {out / 'x.h5'}: No space left on device"}
    ]
    assert json.loads((out / "survey_summary.json").read_text())["done"] == 1
    assert Ledger.load(out).entries["b.fil"].status == "failed"


@pytest.fixture
def tiny_disk(tmp_path):
    """A 512 KiB tmpfs, where the test may mount one (root, no container restriction)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_search_into_a_full_disk_is_one_clear_error(tiny_disk, capsys):
    (tiny_disk / "filler").write_bytes(b"\0" * (480 * 1024))
    status = main(["search", "--demo", "--out", str(tiny_disk / "out"), "--no-progress",
                   "--max-outputs", "2", "--dm-max", "300"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert "No space left on device" in err[-1] and "Traceback" not in "\n".join(err)
    assert not is_complete(tiny_disk / "out")


# -- options and outputs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--block-size", "0"], "--block-size: must be greater than 0"),
        (["--dm-min", "-5"], "--dm-min: must be greater than or equal to 0"),
        (
            ["--dm-min", "500", "--dm-max", "100"],
            "DM range 500.0..100.0 pc cm^-3 (dm_max < dm_min)",
        ),
        (["--max-workers", "0"], "--max-workers: must be greater than or equal to 1"),
        (["--time-decimation", "0"], "--time-decimation: must be greater than or equal to 1"),
        (["--snr-threshold", "0"], "--snr-threshold: must be greater than 0"),
        (["--memory-budget-mib", "10"], "--memory-budget-mib: must be greater than or equal"),
    ],
)
def test_bad_option_values_are_one_line(tmp_path, capsys, args, message):
    status = main(["search", "--demo", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and message in err[0], err
    assert err[0].startswith("drafts search: error: ")


def test_survey_option_bounds(tmp_path, capsys):
    assert main(["survey", str(tmp_path), "--out", str(tmp_path / "o"), "--max-files", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "drafts survey: error: --max-files: must be greater than or equal to 1 (got 0)"
    )


def test_unwritable_output_directory_is_refused_before_searching(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    from drafts_ops.core.errors import ParameterError

    with pytest.raises(ParameterError, match="cannot write the output directory"):
        run_search(tmp_path / "missing.fil", blocker / "out", SearchConfig(**FAST))


def test_rerun_replaces_products_and_marks_completion(tmp_path):
    src = tmp_path / "a.fil"
    write_observation(src, np.random.default_rng(2), dm=120.0, t_s=2.0)
    out = tmp_path / "out"
    (out / "h5").mkdir(parents=True)
    (out / "h5" / "old-run.h5").write_bytes(b"stale")  # a previous run's product
    (out / ".candidates.csv.x1y2.tmp").write_bytes(b"")  # left by a killed writer
    (out / "notes.txt").write_text("mine")  # not ours: kept
    cfg = SearchConfig(**{**SEARCH, "classify": False, "max_outputs": 2})
    result = run_search(src, out, cfg)
    assert not (out / "h5" / "old-run.h5").exists() and not list(out.glob(".*.tmp"))
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "work").exists()  # intermediates removed after success
    done = json.loads((out / DONE_FILE).read_text())
    assert set(done["files"]) >= {"candidates.csv", "perf.json", "a.cand"}
    assert len([f for f in done["files"] if f.startswith("h5/")]) == len(
        [k for k in result.outputs if k.startswith("h5:")]
    )
    assert is_complete(out)
    (out / "candidates.csv").write_text("truncated")
    assert not is_complete(out)  # a reader can tell
    run_search(src, out, cfg, keep_intermediates=True)
    assert (out / "work").is_dir() and is_complete(out)


# -- kill -9 ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("after_done", [0, 1, 2])
def test_kill_9_mid_survey_then_rerun_equals_an_uninterrupted_run(
    prefect_harness, tmp_path, after_done
):
    """A real SIGKILL of `drafts survey` (its whole process group) at several points: while
    the first file is searched, after one and after two files are done; the rerun then
    gives exactly the candidates of an uninterrupted survey."""
    from prefect.settings import PREFECT_API_URL

    incoming = _incoming(tmp_path, ("a.fil", "b.fil", "c.fil"))
    out, reference = tmp_path / "killed", tmp_path / "reference"
    flags = ["--settle-s=0", "--max-files=1", "--no-progress", "--no-classify", "--no-write-h5",
             "--no-write-plots", *(f"--{k.replace('_', '-')}={SEARCH[k]}" for k in
                                   ("dm_max", "block_size", "snr_threshold"))]  # fmt: skip
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "drafts_ops", "survey", str(incoming), "--out", str(out), *flags],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                states = Ledger.load(out).counts()
            except Exception:
                states = {}
            if sum(states.values()) and states.get("done", 0) >= after_done:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_states = Ledger.load(out).counts()
    assert killed_states.get("done", 0) < 3, "the survey finished before it could be killed"
    rerun = survey_flow(str(incoming), str(out), **OPTIONS)
    assert rerun["done"] == 3 - killed_states.get("done", 0)
    survey_flow(str(incoming), str(reference), **OPTIONS)

    def rows(d):
        keep = ("key", "tcand_s", "dm", "snr", "width_samples")
        text = (d / "survey_candidates.csv").read_text().splitlines()
        head = text[0].split(",")
        return sorted(tuple(r.split(",")[head.index(k)] for k in keep) for r in text[1:])

    assert rows(out) == rows(reference) and rows(out)  # nothing lost, nothing duplicated
    assert Ledger.load(out).counts() == {"done": 3}


def _children(pid: int) -> dict[int, str]:
    """Processes whose parent is ``pid``: {pid: command line} (from /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out[int(entry.name)] = cmd
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_embedded_server_ends_with_a_killed_search(prefect_harness, tmp_path):
    import sqlite3

    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

    source = PREFECT_API_DATABASE_CONNECTION_URL.value().split(":///", 1)[1]
    db = tmp_path / "api.db"  # a migrated copy: the server starts in seconds
    with sqlite3.connect(source) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "home"),
               PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{db}")  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "drafts_ops", "search", "--demo", "--out", str(tmp_path / "o")],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = {}
    deadline = time.time() + 120
    while time.time() < deadline and not server and proc.poll() is None:
        server = {p: c for p, c in _children(proc.pid).items() if "uvicorn" in c}
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no atexit, no signal handler
    proc.wait()
    assert server, "the search never started its embedded server"
    (pid,) = server
    deadline = time.time() + 30
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        try:
            if (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break  # exited; a zombie until init reaps it
        except OSError:
            break
        time.sleep(0.1)
    alive = Path(f"/proc/{pid}").exists()
    if alive:
        state = (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0]
        alive = state != "Z"
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the embedded server outlived the killed search"


@pytest.mark.slow
def test_bad_file_is_one_line_before_any_flow_runs(prefect_harness, tmp_path):
    """A truncated file is found before the flow starts: one error line on the console, no
    traceback, no orchestrator log; ``-v`` shows where it was raised."""
    from prefect.settings import PREFECT_API_URL

    src = Path(__file__).resolve().parent.parent / "data" / "demo.fil"
    broken = tmp_path / "broken.fil"
    broken.write_bytes(src.read_bytes()[:-7])  # truncated spectra
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    cmd = [sys.executable, "-m", "drafts_ops", "search", str(broken), "--out", str(tmp_path / "o")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"drafts search: error: {broken}: truncated")
    assert not (tmp_path / "o").exists()


def test_user_errors_logged_by_an_orchestrator_lose_their_traceback_on_the_console():
    """A flow's task logs a user error with its stack (Prefect does); the console shows
    the message only, while other errors keep their traceback."""
    import logging

    from drafts_ops.cli import UserErrorTracebacks
    from drafts_ops.core.errors import ObservationError

    def record(err: Exception) -> logging.LogRecord:
        try:
            raise err
        except Exception:
            return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1,
                                     "Task run failed", None, sys.exc_info())  # fmt: skip

    user = record(ObservationError("x.fil", "truncated data"))
    assert UserErrorTracebacks().filter(user) and user.exc_info is None
    bug = record(ZeroDivisionError("a bug"))
    assert UserErrorTracebacks().filter(bug) and bug.exc_info is not None
