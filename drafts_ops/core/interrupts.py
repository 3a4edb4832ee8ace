"""Ctrl-C and SIGTERM: one line, the children stopped, exit 130 or 143 within seconds.

A command's work may run in threads (a flow's task runner) and child processes (a PNG
helper, a Dask cluster, Prefect's temporary API server) that would keep the interpreter
alive after an interrupt. :func:`install` makes the first SIGINT or SIGTERM print one line,
raise :class:`KeyboardInterrupt` in the main thread (so that the code there can mark its
run as crashed) and, :data:`GRACE_S` seconds later at the latest, stop the process's
children and exit with ``128 + signal``; a second signal exits at once. Nothing written
is marked complete on this path (outputs are written atomically, their completion marker
last), so a rerun starts the unfinished work again, as after ``kill -9``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

#: Seconds the main thread gets to wind up after an interrupt before the process exits.
GRACE_S = 3.0
#: Seconds the children get after SIGTERM before SIGKILL.
CHILD_GRACE_S = 1.0

_received: list[int] = []
_lock = threading.Lock()
_notes: list[Callable[[], str]] = []


def set_note(note: str | Callable[[], str]) -> None:
    """What the interrupt line adds, e.g. which output is left unfinished (a callable is
    asked when the signal comes)."""
    _notes[:] = [note if callable(note) else (lambda: note)]


def received() -> int | None:
    """The first interrupting signal's number, ``None`` before any."""
    return _received[0] if _received else None


def exit_status(signum: int | None = None) -> int:
    """``128 + signal`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum or received() or signal.SIGINT)


def install(command: str) -> None:
    """Handle SIGINT, SIGTERM and SIGHUP (a closed terminal) for ``drafts command``
    (main thread only)."""

    def handler(signum: int, frame) -> None:
        with _lock:
            first = not _received
            _received.append(signum)
        if not first:  # a second signal: no more waiting
            finish(signum)
        extra = _notes[0]() if _notes else ""
        name = signal.Signals(signum).name
        print(f"drafts {command}: interrupted ({name}){'; ' + extra if extra else ''}",
              file=sys.stderr, flush=True)  # fmt: skip
        threading.Thread(target=_finish_later, args=(signum,), daemon=True).start()
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _finish_later(signum: int) -> None:
    time.sleep(GRACE_S)
    finish(signum)


def finish(signum: int | None = None) -> None:
    """Stop the children and leave now with :func:`exit_status` (no thread is waited for)."""
    stop_children()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(exit_status(signum))


def children(pid: int | None = None) -> list[int]:
    """Process ids of ``pid``'s descendants in its own session (Linux ``/proc``; a server
    started in a session of its own, meant to outlive the command, is not one)."""
    pid = os.getpid() if pid is None else pid
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    session = os.getsid(pid)
    out, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            if os.getsid(child) != session:
                continue
        except OSError:
            continue
        out.append(child)
        todo.extend(parents.get(child, []))
    return out


def stop_children() -> list[int]:
    """SIGTERM to every descendant (:func:`children`), SIGKILL to those still there after
    :data:`CHILD_GRACE_S`; the ids signalled."""
    pids = children() if Path("/proc").is_dir() else []
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + CHILD_GRACE_S
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":  # exited; reap it if it is ours
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True
