"""People's labels of candidates: ``labels.csv`` beside the search's files, never in them.

Each label is one row (candidate id, the candidate's file, arrival, DM and S/N, label,
note, who, when); a candidate's latest row is its label, earlier rows its history. A write
takes the file's lock, reads the file as it is now, adds the row and replaces the file
atomically (a temporary file renamed over it): two reviewers on one directory never lose
each other's labels, and a crash mid-write leaves the previous file whole.
"""

from __future__ import annotations

import csv
import datetime as _dt
import fcntl
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import ParameterError

LABELS_FILE = "labels.csv"
#: The labels a reviewer can give.
LABELS: tuple[str, ...] = ("burst", "rfi", "noise", "unsure")
COLUMNS = ("id", "file", "tcand_s", "dm", "snr", "label", "note", "who", "when_utc")
#: Longest note kept, characters.
MAX_NOTE = 500


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class LabelStore:
    """The labels of one output directory (``DIR/labels.csv``)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / LABELS_FILE

    def rows(self) -> list[dict[str, str]]:
        """Every label row, oldest first."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return list(csv.DictReader(io.StringIO(text)))

    def latest(self) -> dict[str, dict[str, str]]:
        """Each labelled candidate's latest row, by id."""
        return {row["id"]: row for row in self.rows()}

    def add(self, item_id: str, label: str, *, note: str = "", who: str = "",
            candidate: dict[str, Any] | None = None) -> dict[str, str]:  # fmt: skip
        """Record ``label`` for candidate ``item_id``; returns the row written."""
        if label not in LABELS:
            raise ParameterError(f"label {label!r}: use one of {', '.join(LABELS)}")
        c = candidate or {}
        row = {"id": item_id, "file": str(c.get("file", "")), "tcand_s": str(c.get("t", "")),
               "dm": str(c.get("dm", "")), "snr": str(c.get("snr", "")), "label": label,
               "note": " ".join(str(note).split())[:MAX_NOTE], "who": str(who)[:100],
               "when_utc": _now()}  # fmt: skip
        with self._locked():
            rows = [*self.rows(), row]
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            write_text_atomic(self.path, buf.getvalue())
        return row

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(f".{self.path.name}.lock")
        with lock.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
