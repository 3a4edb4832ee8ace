"""The local Prefect API's rules without starting it: whose API a command uses, which
commands count as using it, when it stops for idleness."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import flows.api_server
from flows import api


def test_an_api_the_user_names_is_used_and_none_is_started(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTS_API", "local")
    monkeypatch.setenv("DRAFTS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_API_URL", "http://example.org:4200/api")
    assert api.user_api_url() == "http://example.org:4200/api"
    assert api.use_local_api() is None
    assert not (tmp_path / "home").exists()
    monkeypatch.delenv("PREFECT_API_URL")
    profiles = tmp_path / "profiles.toml"
    profiles.write_text('active = "site"\n[profiles.site]\n'
                        'PREFECT_API_URL = "http://prefect.site:4200/api"\n')  # fmt: skip
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(profiles))
    monkeypatch.delitem(sys.modules, "prefect.settings", raising=False)
    assert api.user_api_url() == "http://prefect.site:4200/api"


def test_temporary_mode_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTS_API", "temporary")
    monkeypatch.setenv("DRAFTS_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(api, "user_api_url", lambda: None)
    assert api.use_local_api() is None and not (tmp_path / "prefect-api").exists()


def test_only_living_commands_count_as_clients(tmp_path):
    clients = tmp_path / "clients"
    clients.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (clients / dead.stdout.strip()).write_text("0")
    (clients / str(os.getpid())).write_text("0")
    assert api.live_clients(tmp_path) == [os.getpid()]
    assert not (clients / dead.stdout.strip()).exists()  # the stale file is gone


def test_the_server_stops_once_unused_for_its_idle_time(tmp_path, monkeypatch):
    monkeypatch.setattr(flows.api_server, "CHECK_S", 0.01)
    (tmp_path / "clients").mkdir()
    server = SimpleNamespace(should_exit=False)
    mine = tmp_path / "clients" / str(os.getpid())
    mine.write_text("0")  # a living command: kept up however long
    watcher = flows.api_server.threading.Thread(
        target=flows.api_server.watch_idle, args=(server, tmp_path, 0.05, time.time() - 10),
        daemon=True)  # fmt: skip
    watcher.start()
    time.sleep(0.2)
    assert not server.should_exit
    mine.unlink()
    (tmp_path / "last-use").touch()
    watcher.join(timeout=2)
    assert server.should_exit
