"""``python -m flows.api_server --dir DIR --port PORT --idle S``: the local Prefect API
(:mod:`flows.api`): Prefect's ASGI app under uvicorn on 127.0.0.1, its SQLite database in
DIR, stopping once no command has used it for S seconds (or on SIGTERM)."""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

#: Seconds between the idle checks.
CHECK_S = 5.0


def configure(directory: Path) -> None:
    """Prefect settings of the local API (before Prefect is imported)."""
    os.environ["PREFECT_HOME"] = str(directory / "home")
    os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = (
        f"sqlite+aiosqlite:///{directory / 'prefect.db'}"
    )
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_UI_ENABLED"] = "false"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ.pop("PREFECT_API_URL", None)


def watch_idle(server, directory: Path, idle_s: float, started: float) -> None:
    """Ask ``server`` to exit once no live command uses it and none has for ``idle_s``."""
    from flows.api import last_use, live_clients

    while not server.should_exit:
        time.sleep(CHECK_S)
        if live_clients(directory):
            continue
        if time.time() - max(last_use(directory), started) > idle_s:
            server.should_exit = True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.api_server")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=float, required=True, help="seconds unused before exit")
    args = parser.parse_args(argv)
    configure(args.dir)
    import uvicorn

    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True,
                            host="127.0.0.1", port=args.port, log_level="warning",
                            lifespan="on")  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=watch_idle, args=(server, args.dir, args.idle, time.time()),
                     daemon=True).start()  # fmt: skip
    server.run()


if __name__ == "__main__":  # pragma: no cover
    main()
