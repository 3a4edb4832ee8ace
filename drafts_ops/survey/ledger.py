"""The survey ledger: which observation files were searched, failed or quarantined.

One JSON document ``OUT/ledger.json`` (science side, no Prefect), rewritten atomically on
every change, so a crash leaves either the previous or the next state, never a torn file.
Files are keyed by their path relative to the scanned directory and fingerprinted by size
and modification time: a file that changes is searched again.

States: ``running`` (started, not finished: a crash leaves this and the next run retries
it), ``done``, ``failed`` (an error during the search, e.g. a transient I/O or storage
problem: retried by the next runs up to a limit of attempts), ``quarantined`` (the file
failed validation: its format or header is bad; moved to ``OUT/quarantine`` with a reason)
and ``unusable`` (readable, but its data cannot be searched: NaNs, too short; recorded
and not retried). A file that changes (size or mtime) is searched again in any state.

Document layout::

    {"schema": "drafts-ops/ledger", "schema_version": 1,
     "files": {KEY: {"status": str, "size": int, "mtime_ns": int, "attempts": int,
                     "candidates": int, "candidates_file": str | null,
                     "error": str | null, "wall_s": float | null,
                     "lookahead": str | null, "updated_utc": str}}}
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import DraftsError

Status = Literal["running", "done", "failed", "quarantined", "unusable"]
LEDGER_FILENAME = "ledger.json"
SCHEMA = "drafts-ops/ledger"
SCHEMA_VERSION = 1
#: States a rerun does not touch again while the file is unchanged.
FINAL_STATES: frozenset[str] = frozenset({"done", "quarantined", "unusable"})


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Entry:
    """The ledger's record of one observation file (sizes in bytes, times in s)."""

    status: Status
    size: int
    mtime_ns: int
    attempts: int = 0
    candidates: int = 0
    candidates_file: str | None = None
    error: str | None = None
    wall_s: float | None = None
    #: Key of the next file of the beam whose first samples completed this file's search
    #: to its end (``None``: searched without it; that file's search covers the end).
    lookahead: str | None = None
    updated_utc: str = field(default_factory=_now)


def fingerprint(path: Path) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a file."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@dataclass
class Ledger:
    """The ledger of one survey output directory; thread-safe, written on every change."""

    path: Path
    entries: dict[str, Entry] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, out_dir: str | os.PathLike[str]) -> Ledger:
        """Open ``out_dir/ledger.json`` (an empty ledger when it does not exist yet)."""
        path = Path(out_dir) / LEDGER_FILENAME
        if not path.exists():
            return cls(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema {doc.get('schema')!r} v{doc.get('schema_version')!r}")
            entries = {key: Entry(**value) for key, value in doc["files"].items()}
            groups = dict(doc.get("groups") or {})
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise DraftsError(f"{path}: unreadable survey ledger ({err})") from None
        return cls(path, entries, groups)

    def needs_search(self, key: str, path: Path, max_attempts: int | None = None) -> bool:
        """True unless ``key`` is in a final state (or failed ``max_attempts`` times) with
        the file unchanged."""
        entry = self.entries.get(key)
        if entry is None:
            return True
        given_up = entry.status == "failed" and max_attempts and entry.attempts >= max_attempts
        if entry.status not in FINAL_STATES and not given_up:
            return True
        try:
            return fingerprint(path) != (entry.size, entry.mtime_ns)
        except FileNotFoundError:  # quarantined (moved away) or deleted
            return False

    def start(self, key: str, path: Path) -> Entry:
        """Record that the search of ``path`` begins (status ``running``, one more attempt)."""
        size, mtime_ns = fingerprint(path)
        with self._lock:
            old = self.entries.get(key)
            attempts = (old.attempts if old else 0) + 1
            entry = Entry("running", size, mtime_ns, attempts)
            self.entries[key] = entry
            self._save()
        return entry

    def finish(self, key: str, status: Status, **fields: Any) -> Entry:
        """Record the outcome of ``key`` (``done``, ``failed`` or ``quarantined``)."""
        with self._lock:
            if key not in self.entries:
                raise DraftsError(f"{self.path}: {key} was never started")
            entry = replace(self.entries[key], status=status, updated_utc=_now(), **fields)
            self.entries[key] = entry
            self._save()
        return entry

    def record_group(self, group: str, summary: dict[str, Any]) -> None:
        """Record the coincidence outcome of a beam group (recomputed on every run from
        the group's finished files, so a crash can neither lose nor duplicate it)."""
        with self._lock:
            self.groups[group] = {**summary, "updated_utc": _now()}
            self._save()

    def forget(self, key: str) -> None:
        """Drop ``key`` (its file disappeared before it could be searched)."""
        with self._lock:
            if self.entries.pop(key, None) is not None:
                self._save()

    def counts(self) -> dict[str, int]:
        """Number of files in each state."""
        return dict(Counter(e.status for e in self.entries.values()))

    def _save(self) -> None:
        doc = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "files": {key: asdict(e) for key, e in sorted(self.entries.items())},
            "groups": dict(sorted(self.groups.items())),
        }
        write_json_atomic(self.path, doc)
