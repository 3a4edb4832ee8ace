"""A local Prefect API that outlives one command, so that start-up is paid once.

Prefect's flows need an API. Without one, Prefect starts a temporary server for every
command (about 10 s) and stops it at exit. ``drafts search | survey | validate`` instead
use a local API server that the first of them starts in the background (its own SQLite
database under :func:`api_dir`, announced on stderr), that later commands reuse, and
that stops after :data:`IDLE_S` seconds without a command using it, or on
``drafts server stop``. An API the user names is always used instead: ``PREFECT_API_URL``
in the environment or in the active Prefect profile. ``DRAFTS_API=temporary`` restores
Prefect's per-command server.

The server is ``python -m flows.api_server`` (Prefect's own ASGI app under uvicorn, in a
session of its own so that a Ctrl-C to a command's process group does not reach it).
Commands using it leave a file named by their process id in ``clients/``; the server
counts a command as using it while that process lives.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import tomllib

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import DraftsError

#: Seconds without a command using it after which the local API stops (DRAFTS_API_IDLE_S).
IDLE_S = 1800.0
#: Seconds the first start may take (it creates the SQLite database: ~120 migrations).
START_TIMEOUT_S = 120.0
STATE_FILE = "server.json"


class APIError(DraftsError):
    """The local API could not be started or reached."""


def data_home() -> Path:
    """The user's drafts-ops data directory: ``DRAFTS_HOME``, else
    ``$XDG_DATA_HOME/drafts-ops`` (``~/.local/share/drafts-ops``)."""
    if os.environ.get("DRAFTS_HOME"):
        return Path(os.environ["DRAFTS_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "drafts-ops"


def api_dir() -> Path:
    """Where the local API keeps its database, log, state file and client files."""
    return data_home() / "prefect-api"


def idle_seconds() -> float:
    return float(os.environ.get("DRAFTS_API_IDLE_S", IDLE_S))


@dataclass(frozen=True)
class ServerState:
    """A running local API: its URL (``.../api``), process id and start time (Unix s)."""

    url: str
    pid: int
    started: float

    @classmethod
    def read(cls, directory: Path) -> ServerState | None:
        """The state file's server if its process lives, else ``None``."""
        try:
            doc = json.loads((directory / STATE_FILE).read_text())
            state = cls(str(doc["url"]), int(doc["pid"]), float(doc["started"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return state if pid_alive(state.pid) else None

    def write(self, directory: Path) -> None:
        write_text_atomic(directory / STATE_FILE, json.dumps(self.__dict__))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie (exited, not yet reaped) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return True


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the API at ``url`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as reply:
            return reply.status == 200
    except OSError:
        return False


def user_api_url() -> str | None:
    """The API the user named: ``PREFECT_API_URL`` in the environment, in Prefect's
    current settings (a test harness), or in the active profile of ``profiles.toml``."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    if "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        if PREFECT_API_URL.value():
            return str(PREFECT_API_URL.value())
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or doc.get("active", "ephemeral")
    return doc.get("profiles", {}).get(active, {}).get("PREFECT_API_URL") or None


def use_local_api(announce=None) -> str | None:
    """Point this process at the local API (started if none runs) and register it as a
    client; ``None`` (nothing changed) where the user named an API or asked for
    Prefect's temporary server. ``announce(line)`` gets the one line of a first start."""
    if user_api_url() or os.environ.get("DRAFTS_API", "local") == "temporary":
        return None
    state = ensure_server(announce or (lambda line: print(line, file=sys.stderr)))
    register_client(api_dir())
    os.environ["PREFECT_API_URL"] = state.url
    return state.url


def ensure_server(announce) -> ServerState:
    """The running local API, started (and announced) if none runs."""
    directory = api_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with _start_lock(directory):
        state = ServerState.read(directory)
        if state is not None and healthy(state.url):
            return state
        port = free_port()
        url = f"http://127.0.0.1:{port}/api"
        announce(f"drafts: starting a local Prefect API at {url} (database in {directory}; "
                 f"it stops after {idle_seconds() / 60:g} min unused, or on "
                 "`drafts server stop`)")  # fmt: skip
        process = _spawn(directory, port)
        state = ServerState(url, process.pid, time.time())
        _wait_healthy(state, process, directory)
        state.write(directory)
        return state


def _spawn(directory: Path, port: int) -> subprocess.Popen:
    log = (directory / "server.log").open("ab")
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "flows.api_server", "--dir", str(directory), "--port",
           str(port), "--idle", str(idle_seconds())]  # fmt: skip
    root = Path(__file__).resolve().parent.parent  # flows/ importable from a checkout too
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                            start_new_session=True, close_fds=True)  # fmt: skip


def _wait_healthy(state: ServerState, process: subprocess.Popen, directory: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = directory / "server.log"
            tail = log.read_text(errors="replace").strip().splitlines()
            raise APIError(f"the local Prefect API did not start (exit {process.returncode}): "
                           f"{tail[-1] if tail else 'no output'}; see {log}")  # fmt: skip
        if healthy(state.url, timeout_s=1.0):
            return
        time.sleep(0.2)
    process.terminate()
    raise APIError(f"the local Prefect API did not answer within {START_TIMEOUT_S:g} s; "
                   f"see {directory / 'server.log'}")  # fmt: skip


@contextlib.contextmanager
def _start_lock(directory: Path):
    """One command at a time checks for and starts the server."""
    import fcntl

    with (directory / "start.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def register_client(directory: Path) -> None:
    """Mark this process as using the API (the file goes at exit; a dead process's file
    counts as gone)."""
    import atexit

    clients = directory / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    mine = clients / str(os.getpid())
    mine.write_text(str(time.time()))

    def done() -> None:
        (directory / "last-use").touch()
        mine.unlink(missing_ok=True)

    atexit.register(done)


def live_clients(directory: Path) -> list[int]:
    """Process ids of the commands using the API now (stale files removed)."""
    out = []
    for path in (directory / "clients").glob("*"):
        if path.name.isdigit() and pid_alive(int(path.name)):
            out.append(int(path.name))
        else:
            path.unlink(missing_ok=True)
    return out


def last_use(directory: Path) -> float:
    """When a command last started or ended using the API (Unix s)."""
    stamps = [p.stat().st_mtime for p in (directory / "clients").glob("*")]
    marker = directory / "last-use"
    if marker.exists():
        stamps.append(marker.stat().st_mtime)
    return max(stamps, default=0.0)


def stop_server(directory: Path | None = None, timeout_s: float = 10.0) -> ServerState | None:
    """Stop the local API (SIGTERM, then SIGKILL); the state it had, ``None`` if none ran."""
    import signal

    directory = directory or api_dir()
    state = ServerState.read(directory)
    if state is None:
        (directory / STATE_FILE).unlink(missing_ok=True)
        return None
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(state.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(state.pid):
        os.kill(state.pid, signal.SIGKILL)
    (directory / STATE_FILE).unlink(missing_ok=True)
    return state
